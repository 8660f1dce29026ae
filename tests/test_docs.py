"""Docs cannot drift: every command of the CLI has a README row and an example, and back."""

from __future__ import annotations

import re
from pathlib import Path

from compat.cli import app

README = Path(__file__).resolve().parents[1] / "README.md"


def _commands() -> dict[str, object]:
    out = {}
    for c in app.registered_commands:
        out[c.name or c.callback.__name__.replace("_", "-")] = c.callback
    for group in app.registered_groups:
        out[group.name] = group
    return out


def test_every_command_has_a_readme_row_and_every_row_a_command() -> None:
    rows = set(re.findall(r"^\| `compat ([a-z-]+)", README.read_text(), flags=re.M))
    commands = set(_commands())
    assert rows == commands, {"undocumented": sorted(commands - rows), "not a command": sorted(rows - commands)}


def test_every_command_docstring_has_an_example() -> None:
    for c in app.registered_commands:
        assert "Example: compat " in (c.callback.__doc__ or ""), c.callback.__name__
