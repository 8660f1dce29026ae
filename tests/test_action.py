"""The GitHub Action: action.yml's wiring, and the script it runs with GitHub's files in a temp dir.

No GitHub is reachable here, so everything the composite action runs is run: `compat.action`
with the environment action.yml sets (INPUT_*) and GITHUB_STEP_SUMMARY / GITHUB_OUTPUT pointed
at temporary files; the YAML is checked to hand over exactly those inputs and outputs.
"""

from __future__ import annotations

import contextlib
import io
import re
import shutil
from pathlib import Path

import pytest
import yaml

from compat import action

REPO = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
RECIPES = HERE / "fixtures" / "recipes" / "minimal"
MINI = HERE / "fixtures" / "minitrees" / "dispatch"
HF = HERE / "fixtures" / "hardening" / "hf"


def action_yml() -> dict:
    return yaml.safe_load((REPO / "action.yml").read_text())


def test_action_yml_is_a_composite_action_running_the_tested_script() -> None:
    doc = action_yml()
    steps = doc["runs"]["steps"]
    assert doc["runs"]["using"] == "composite"
    uses = [s.get("uses", "") for s in steps]
    assert any(u.startswith("actions/setup-python@") for u in uses)
    caches = [s for s in steps if s.get("uses", "").startswith("actions/cache@")]
    assert {c["with"]["path"] for c in caches} == {"${{ runner.temp }}/vllm-compat-cache", "~/.cache/huggingface"}
    assert all("key" in c["with"] and "restore-keys" in c["with"] for c in caches)
    check = next(s for s in steps if s.get("id") == "check")
    assert check["run"].strip() == "python -m compat.action" and check["shell"] == "bash"
    assert check["env"]["COMPAT_CACHE"] == caches[0]["with"]["path"]  # the cache holds what the build reads
    install = next(s for s in steps if "pip install" in s.get("run", ""))
    assert "$GITHUB_ACTION_PATH" in install["run"]
    # every input is handed over as the variable compat.action reads, and nothing else
    passed = {k for k in check["env"] if k.startswith("INPUT_")}
    assert passed == set(action.INPUTS)
    for name in doc["inputs"]:
        if name == "python-version":
            continue
        var = "INPUT_" + name.upper().replace("-", "_")
        assert check["env"][var] == f"${{{{ inputs.{name} }}}}", name
    # every output is one the script writes
    written = set(action.outputs({"blocked": 0, "causes": []}, Path("x")))
    assert {k: v["value"] for k, v in doc["outputs"].items()} == {
        k: f"${{{{ steps.check.outputs.{k} }}}}" for k in written}
    assert {"blocked", "causes", "fixable"} <= written


def run_action(env: dict[str, str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            action.main_with(env)
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def github_env(tmp_path: Path, **inputs: str) -> dict[str, str]:
    files = tmp_path / "github"
    files.mkdir(exist_ok=True)
    env = {"GITHUB_WORKSPACE": str(tmp_path / "ws"), "RUNNER_TEMP": str(tmp_path / "runner"),
           "GITHUB_STEP_SUMMARY": str(files / "summary.md"), "GITHUB_OUTPUT": str(files / "output")}
    (tmp_path / "runner").mkdir(exist_ok=True)
    env.update({"INPUT_" + k.upper(): v for k, v in inputs.items()})
    return env


def outputs_of(env: dict[str, str]) -> dict[str, str]:
    return dict(line.split("=", 1) for line in Path(env["GITHUB_OUTPUT"]).read_text().splitlines())


def test_the_script_writes_annotations_a_summary_and_outputs(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("COMPAT_CACHE", str(tmp_path / "cache"))
    shutil.copytree(RECIPES, tmp_path / "ws" / "recipes")
    shutil.copytree(HF, tmp_path / "ws" / "hf")
    env = github_env(tmp_path, recipes="recipes", vllm_src=f"{MINI}=0.0.1", hf_config_dir="hf")
    code, out, err = run_action(env)
    got = outputs_of(env)
    assert code == (1 if int(got["blocked"]) else 0), err
    assert int(got["blocked"]) > 0 and int(got["causes"]) > 0
    assert Path(got["db"]) == tmp_path / "runner" / "vllm-compat.db" and Path(got["db"]).is_file()
    annotations = [line for line in out.splitlines() if line.startswith("::")]
    assert annotations and all(re.match(r"::(error|warning) file=recipes/models/", a) for a in annotations)
    summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text()
    assert summary.startswith(f"## vllm-compat: {got['blocked']} blocked command(s)")
    assert "| recipe | cause | blocked | vLLM | fix | first working release |" in summary
    assert "Judged at vLLM 0.0.1." in summary
    # a second step appends to the same files, as GitHub's are appended to
    run_action(env)
    assert Path(env["GITHUB_STEP_SUMMARY"]).read_text().count("## vllm-compat:") == 2


def test_a_lock_in_the_repository_is_used_and_a_bad_input_is_one_line(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "recipes").mkdir(parents=True)
    (ws / "recipes" / action.LOCK_NAME).write_text("{}")
    env = github_env(tmp_path, recipes="recipes")
    assert action.read_inputs(env).facts_lock == ws / "recipes" / action.LOCK_NAME
    assert action.read_inputs(env).releases == []
    env2 = github_env(tmp_path, releases="0.23.0, 0.33.0", fail_on_unknown="yes")
    got = action.read_inputs(env2)
    assert got.releases == ["0.23.0", "0.33.0"] and got.fail_on_unknown and got.facts_lock is None
    code, out, err = run_action(github_env(tmp_path, fail_on_unknown="maybe"))
    assert code == 2 and err == "error: fail-on-unknown: expected true or false, got 'maybe'\n"
    code, _, err = run_action(github_env(tmp_path, facts_lock="nope.json"))
    assert code == 2 and err == "error: facts-lock nope.json: no such lock file\n"


@pytest.mark.slow
def test_the_action_on_a_copy_of_the_snapshot(tmp_path: Path, snapshot: Path) -> None:
    """The issue's bar: annotations, a job summary and outputs, on a pinned build of the snapshot."""
    shutil.copytree(snapshot, tmp_path / "ws" / "recipes", ignore=shutil.ignore_patterns("node_modules"))
    env = github_env(tmp_path, recipes="recipes")
    code, out, err = run_action(env)
    got = outputs_of(env)
    assert code == 1 and int(got["blocked"]) > 1000, (got, err[-2000:])
    assert int(got["fixable"]) >= int(got["causes"]) - 2
    summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text()
    print(f"\nsummary: {len(summary.encode())} bytes, {summary.count(chr(10))} lines; outputs {got}")
    print("\n".join(summary.splitlines()[:12]))
    assert len(summary.encode()) < 1024 * 1024  # GitHub's limit per step
    assert out.count("::error file=recipes/models/") == int(got["causes"])
    assert "| `recipes/models/zai-org/GLM-5.2.yaml:" in summary
    assert "### vLLM-side causes" in summary
