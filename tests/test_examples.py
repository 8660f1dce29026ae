"""The example workflows a recipes maintainer copies: valid, using only what exists.

Each is parsed; the action's `with:` keys must be inputs of action.yml and the outputs it reads
outputs of it; every `compat ...` line of a `run:` must name a real command and real options.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer
import yaml

from compat.cli import app

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((REPO / "examples" / "workflows").glob("*.yml"))
ACTION = yaml.safe_load((REPO / "action.yml").read_text())


def _options() -> dict[str, set[str]]:
    group = typer.main.get_command(app)
    out: dict[str, set[str]] = {}
    for name, cmd in group.commands.items():  # type: ignore[attr-defined]
        out[name] = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
    return out


def _compat_lines(run: str) -> list[list[str]]:
    text = re.sub(r"\$\{\{[^}]*\}\}", "X", run.replace("\\\n", " "))
    lines = []
    for line in text.splitlines():
        line = line.strip().split(" > ")[0]
        if line.startswith("compat "):
            lines.append(shlex.split(line))
    return lines


def test_there_are_the_three_workflows() -> None:
    assert [p.name for p in EXAMPLES] == ["vllm-compat-fixes.yml", "vllm-compat-pages.yml", "vllm-compat-pr.yml"]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_each_workflow_uses_the_action_and_real_commands(path: Path) -> None:
    doc = yaml.safe_load(path.read_text())
    assert doc.get(True) or doc.get("on")  # PyYAML reads `on:` as True
    options = _options()
    steps = [s for job in doc["jobs"].values() for s in job["steps"]]
    uses_action = [s for s in steps if s.get("uses", "").startswith("OWNER/vllm-compat@")]
    assert len(uses_action) == 1, path.name
    for step in uses_action:
        assert set(step.get("with", {})) <= set(ACTION["inputs"]), step["with"]
    text = path.read_text()
    for output in re.findall(r"steps\.compat\.outputs\.([a-z_-]+)", text):
        assert output in ACTION["outputs"], output
    commands = [c for s in steps for c in _compat_lines(s.get("run", ""))]
    assert commands, path.name
    for argv in commands:
        name = argv[1]
        assert name in options, argv
        for word in argv[2:]:
            if word.startswith("-"):
                assert word.split("=")[0] in options[name], (name, word)


def test_the_fixes_workflow_commits_and_opens_a_pr_with_the_markdown_body() -> None:
    text = (REPO / "examples" / "workflows" / "vllm-compat-fixes.yml").read_text()
    assert "--commit" in text and "--format markdown" in text and "gh pr create" in text
    assert "--body-file" in text and "schedule:" in text and "vllm-release" in text


def test_the_pages_workflow_uploads_the_site() -> None:
    doc = yaml.safe_load((REPO / "examples" / "workflows" / "vllm-compat-pages.yml").read_text())
    uses = [s.get("uses", "") for job in doc["jobs"].values() for s in job["steps"]]
    assert any(u.startswith("actions/upload-pages-artifact@") for u in uses)
    assert any(u.startswith("actions/deploy-pages@") for u in uses)
