"""Whether a release installs a `vllm` command, read from its source (compat.vllm.facts.
serve_command), against the console scripts its wheel declares (tests/golden/console-scripts.json,
made by tools/golden/console_scripts.py from the wheels on the package index)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compat.vllm.facts import serve_command

GOLDEN = json.loads((Path(__file__).parent / "golden" / "console-scripts.json").read_text())
RELEASES = sorted(GOLDEN["releases"])


def test_the_golden_file_is_what_the_script_wrote() -> None:
    assert GOLDEN["made_by"] == "tools/golden/console_scripts.py"
    for v, entry in GOLDEN["releases"].items():
        assert entry["wheel"].startswith(f"vllm-{v}-") and len(entry["sha256"]) == 64
    # both kinds are covered: a release without the command, one with it
    assert {bool(e["console_scripts"].get("vllm")) for e in GOLDEN["releases"].values()} == {False, True}


@pytest.mark.slow
@pytest.mark.parametrize("version", RELEASES)
def test_serve_command_matches_the_wheel(vllm_tree, version: str) -> None:
    fact = json.loads(serve_command(vllm_tree(version))["value"])
    script = GOLDEN["releases"][version]["console_scripts"].get("vllm")
    if script is None:
        assert fact["module"] is None, fact
    else:  # "vllm.scripts:main" runs vllm/scripts.py
        assert fact["module"] == script.split(":")[0].replace(".", "/") + ".py", (fact, script)
