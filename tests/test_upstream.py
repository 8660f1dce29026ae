"""vLLM-side causes: `check --upstream` lists them and `explain --format issue` writes the report.

A hand-made database in the shape a pinned build gives GLM-5.2 (the report that started the
project): mtp on multi_node_tp_pp blocked at 0.23.0 and 0.25.0 by the draft's PP, starting at
0.30.0; a recipe-side cause beside it (a parser the pinned release lacks).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compat import store
from compat import tables as t
from compat.upstream import classify, rules
from tests.cli_kit import run

RECIPE = "models/zai-org/GLM-5.2.yaml"
ARGV = ["vllm", "serve", "zai-org/GLM-5.2-FP8", "--tensor-parallel-size", "8", "--pipeline-parallel-size", "2",
        "--nnodes", "2", "--node-rank", "0", "--master-addr", "$HEAD_IP", "--kv-cache-dtype", "fp8",
        "--tool-call-parser", "glm47", "--enable-auto-tool-choice",
        "--speculative-config", '{"method":"mtp","num_speculative_tokens":5}']
DRAFT_STEP = ("method mtp: SpeculativeConfig.hf_config_override (vllm/config/speculative.py:308) rewrites "
              "glm_moe_dsa/GlmMoeDsaForCausalLM -> DeepSeekMTPModel; draft class "
              "vllm.model_executor.models.deepseek_mtp.DeepSeekMTP lacks PP support, and "
              "create_draft_parallel_config copies pipeline_parallel_size=2 from the target "
              "(vllm/config/speculative.py:512); the draft's verify_with_parallel_config raises")
MESSAGE = ("Pipeline parallelism is not supported for this model. Supported models implement the "
           "`SupportsPP` interface.")
EVIDENCE = ("vllm/model_executor/models/deepseek_mtp.py:140; vllm/config/speculative.py:512; "
            "vllm/config/model.py:1301")


def glm_db(path: Path) -> Path:
    base = {"platform": "cuda", "hardware": "", "recipe": RECIPE, "model_id": "zai-org/GLM-5.2-FP8",
            "variant": "default", "strategy": "multi_node_tp_pp", "feature": "spec_decoding", "mode": "mtp",
            "command_id": 1, "profiles": "b200,h200"}
    blocked = dict(base, status="blocked", message=MESSAGE, evidence=EVIDENCE, works_from="0.30.0",
                   chain=json.dumps([f"[blocked] {DRAFT_STEP}"]), cause_id=1, cause_kind="feature",
                   cause="spec_decoding:mtp")
    with store.writing(path) as db:
        db.append(t.Command, [{"id": 1, "argv": json.dumps([["", ARGV]])}])
        db.append(t.Verdict, [
            dict(blocked, id=1, vllm_version="0.23.0", judged=1, pinned=1),
            dict(blocked, id=2, vllm_version="0.25.0", judged=0),
            dict(base, id=3, vllm_version="0.30.0", judged=0, status="ok", chain="[]"),
            dict(base, id=4, vllm_version="0.23.0", judged=1, pinned=1, feature="tool_calling", mode="",
                 strategy="single_node_tp", status="blocked", cause_id=2, chain="[]",
                 message="invalid tool call parser"),
        ])
        db.append(t.CauseRow, [
            {"id": 1, "recipe": RECIPE, "kind": "feature", "element": "features.spec_decoding", "mode": "mtp",
             "label": "spec_decoding:mtp", "finding": DRAFT_STEP, "line": 52, "works_from": "0.30.0",
             "fix_kind": "gate", "fix": "gate spec_decoding off multi_node_tp_pp", "finding_keys": '["draft_pp:mtp"]'},
            {"id": 2, "recipe": RECIPE, "kind": "pin", "label": "the pinned release", "line": 23,
             "finding": "--tool-call-parser glm47 is not registered", "works_from": "0.24.0",
             "fix_kind": "pin_bump", "fix": "bump", "finding_keys": '["parser:tool:glm47"]'},
        ])
        db.append(t.VerdictCause, [{"verdict_id": 1, "cause_id": 1}, {"verdict_id": 2, "cause_id": 1},
                                   {"verdict_id": 4, "cause_id": 2}])
    return path


@pytest.mark.parametrize("keys,works_from,want", [
    (["draft_pp:mtp"], "0.30.0", "draft-without-pp"),  # vLLM's even though a later release fixed it
    (["target_pp"], "", "target-never-pp"),
    (["target_pp"], "0.12.0", None),  # a later release starts it: the recipe's pin
    (["gate:v1-unsupported-dspark"], "", "method-without-proposer"),
    (["flag:--nnodes"], "", None),
    (["parser:tool:glm47"], "0.24.0", None),
])
def test_which_causes_are_vllms(keys, works_from, want) -> None:
    rule = classify(keys, works_from)
    assert (rule.id if rule else None) == want


def test_the_rules_name_only_gate_ids_that_exist() -> None:
    import yaml

    from compat.resources import data_dir

    ids = {g["id"] for g in yaml.safe_load((data_dir() / "gates.yaml").read_text())["rules"]}
    for rule in rules()[0]:
        for key in rule.keys:
            if key.startswith("gate:"):
                assert key.removeprefix("gate:") in ids, key


def test_check_upstream_lists_one_line_per_vllm_side_cause(tmp_path: Path) -> None:
    db = glm_db(tmp_path / "c.db")
    r = run("check", "--db", str(db), "--upstream")
    assert r.returncode == 1  # still a check: blocked, ungated commands
    lines = r.stdout.splitlines()
    assert lines[-1] == "1 vLLM-side cause(s)"
    assert lines[0].startswith(f"{RECIPE}:52: upstream (draft-without-pp): the mtp draft class lacks SupportsPP")
    assert "on multi_node_tp_pp at vLLM 0.23.0; first working release 0.30.0" in lines[0]
    assert lines[0].endswith(f"compat explain {RECIPE} multi_node_tp_pp spec_decoding:mtp --vllm 0.23.0 --format issue")
    report = json.loads(run("check", "--db", str(db), "--format", "json").stdout)
    assert [e["rule"] for e in report["upstream"]] == ["draft-without-pp"]


def test_explain_format_issue_reproduces_the_original_report(tmp_path: Path) -> None:
    db = glm_db(tmp_path / "c.db")
    r = run("explain", "zai-org/GLM-5.2", "multi_node_tp_pp", "spec_decoding:mtp", "--vllm", "0.23.0",
            "--db", str(db), "--format", "issue")
    assert r.returncode == 0, r.stderr
    text = r.stdout
    assert text.startswith("### [Bug]: zai-org/GLM-5.2-FP8: the mtp draft class lacks SupportsPP")
    for needed in ("DeepSeekMTP", "create_draft_parallel_config", "NotImplementedError: Pipeline parallelism",
                   "| 0.23.0 | blocked |", "| 0.25.0 | blocked |", "| 0.30.0 | ok |",
                   "First release on the package index where it starts: **0.30.0**",
                   "`vllm/config/speculative.py:512`", "gate spec_decoding off multi_node_tp_pp",
                   "--pipeline-parallel-size 2"):
        assert needed in text, needed
    repro = text.split("```python\n", 1)[1].split("```", 1)[0]
    assert "ModelConfig(model='zai-org/GLM-5.2-FP8', skip_tokenizer_init=True)" in repro
    assert "ParallelConfig(tensor_parallel_size=8, pipeline_parallel_size=2)" in repro
    assert "SpeculativeConfig(method='mtp', num_speculative_tokens=5, target_model_config=target" in repro
    compile(repro, "repro", "exec")  # valid Python


def test_explain_format_issue_refuses_a_recipe_side_cause(tmp_path: Path) -> None:
    db = glm_db(tmp_path / "c.db")
    r = run("explain", RECIPE, "single_node_tp", "tool_calling", "--db", str(db), "--format", "issue")
    assert r.returncode == 2 and r.stderr.startswith("error: compat explain: no vLLM-side cause here"), r
    assert "Traceback" not in r.stderr
