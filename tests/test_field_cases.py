"""The field regression set (tests/field/cases.yaml): real startup outcomes reported in vLLM's
and the recipes' trackers, each judged with compat lint at the reporter's release
(tools/field/run_cases.py).

* a failure is never judged `ok`, unless the case names the fact the engine does not model
  (`known_gap`); a case with a known gap that is now caught fails, so the note is removed;
* a working command is never judged `blocked`;
* every case is judged (a case out of scope says why: no `vllm serve` at its release, or the
  release is not on the package index)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools" / "field"))

import run_cases  # noqa: E402

CASES = run_cases.load_cases()


def test_the_cases_file_is_valid() -> None:
    assert len(CASES) >= 25
    assert {c["outcome"] for c in CASES} == {"fails", "works"}
    for c in CASES:
        if c.get("entrypoint") == "api_server":
            assert any(a == "--model" or a.startswith("--model=") for a in c["argv"]), c["id"]


def test_api_server_cases_are_judged_with_the_model_as_the_positional() -> None:
    case = {"argv": ["vllm", "serve", "--model", "org/m", "-tp", "2"], "entrypoint": "api_server"}
    assert run_cases.lint_argv(case) == ["vllm", "serve", "org/m", "-tp", "2"]
    case = {"argv": ["vllm", "serve", "/local/m", "--port", "1"], "model_id": "org/m"}
    assert run_cases.lint_argv(case) == ["vllm", "serve", "org/m", "--port", "1"]


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_field_case(case: dict) -> None:
    row = run_cases.judge(case)
    status = row["status"]
    assert status != "error", row["message"]
    if status == "n/a":
        assert row["finding"] in ("out of scope", "release unavailable"), row
        return
    if case["outcome"] == "fails":
        if case.get("known_gap"):
            assert status != "blocked", f"now caught ({row['message']}): remove known_gap"
        else:
            assert status != "ok", f"vLLM fails ({case['message']}), compat says ok"
    else:
        assert status != "blocked", f"vLLM starts, compat says blocked: {row['message']}"
