"""End to end on the real recipes snapshot and real releases: build, check, explain, overrides."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.cli_kit import run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def built(tmp_path_factory, snapshot, vllm_tree):
    vllm_tree("0.23.0"), vllm_tree("0.33.0")  # download once, shared cache
    db = tmp_path_factory.mktemp("build") / "compat.db"
    r = run("build", "--recipes", str(snapshot), "--vllm", "0.23.0", "--vllm", "0.33.0", "--db", str(db))
    assert r.returncode == 0, r.stderr
    assert "model configs:" in r.stdout  # coverage is reported
    return db


def rows(db: Path, sql: str) -> list[dict]:
    r = run("sql", sql, "--db", str(db), "--format", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_glm52_pp_mtp_blocked_on_023_clear_from_030(built):
    """Blocked by the draft's PP up to 0.29.x; from 0.30.0 (the first release on the index, not the
    next scanned one) that failure is gone. Whether the command then starts depends on the MTP
    layer count (the draft's n_predict must divide num_speculative_tokens=5 when below it), which
    offline facts do not hold: unknown there, never ok, and no release is known to start it."""
    got = rows(built, "SELECT v.vllm_version, v.status, v.message, v.evidence, f.works_from FROM v_verdict v "
                      "JOIN v_finding f USING (vllm_version, platform, hardware, recipe, variant, strategy, feature, mode) "
                      "WHERE v.recipe='models/zai-org/GLM-5.2.yaml' AND v.strategy='multi_node_tp_pp' "
                      "AND v.feature='spec_decoding' AND v.mode='mtp' AND v.platform='cuda'")
    at023 = [r for r in got if r["vllm_version"] == "0.23.0"]
    assert at023 and all(r["status"] == "blocked" for r in at023)
    assert all("Pipeline parallelism is not supported for this model" in r["message"] for r in at023)
    assert all("vllm/model_executor/models/deepseek_mtp.py" in r["evidence"] for r in at023)
    assert all(r["works_from"] == "" for r in at023)
    cause = rows(built, "SELECT works_from, clear_from FROM cause WHERE recipe='models/zai-org/GLM-5.2.yaml' "
                        "AND label='spec_decoding:mtp'")
    assert cause and all((c["works_from"], c["clear_from"]) == ("", "0.30.0") for c in cause), cause
    at033 = rows(built, "SELECT status, reason FROM v_verdict WHERE recipe='models/zai-org/GLM-5.2.yaml' AND "
                        "strategy='multi_node_tp_pp' AND feature='spec_decoding' AND mode='mtp' AND vllm_version='0.33.0'")
    assert at033 and all(r["status"] == "unknown" and "MTP layer count" in r["reason"] for r in at033), at033[:2]


def test_base_command_and_other_strategies_not_blocked_by_spec(built):
    """MTP without PP is not blocked at 0.23.0; it is unknown only on the MTP layer count."""
    got = rows(built, "SELECT DISTINCT status, reason FROM v_verdict WHERE recipe='models/zai-org/GLM-5.2.yaml' "
                      "AND strategy='multi_node_tp' AND feature='spec_decoding' AND mode='mtp' AND vllm_version='0.23.0'")
    assert got and {r["status"] for r in got} <= {"ok", "warning", "unknown"}
    assert all(r["status"] != "unknown" or "num_speculative_tokens" in r["reason"] for r in got), got


def test_check_exits_1_and_groups_by_recipe(built):
    r = run("check", "--db", str(built), "--format", "json")
    assert r.returncode == 1
    report = json.loads(r.stdout)
    assert "models/zai-org/GLM-5.2.yaml" in report["recipes"]
    assert "models/moonshotai/Kimi-K3.yaml" not in report["recipes"] or all(
        i["strategy"] != "multi_node_tp_pp" or i["feature"] != "spec_decoding"
        for i in report["recipes"]["models/moonshotai/Kimi-K3.yaml"])  # already gated


def test_explain_reads_like_a_bug_report(built):
    r = run("explain", "zai-org/GLM-5.2", "multi_node_tp_pp", "spec_decoding:mtp", "--vllm", "0.23.0",
            "--db", str(built))
    assert r.returncode == 0, r.stderr
    for needle in ("hf_config_override", "DeepSeekMTPModel", "create_draft_parallel_config",
                   "pipeline_parallel_size=2", "vLLM raises: Pipeline parallelism is not supported"):
        assert needle in r.stdout


def test_applied_fixes_leave_no_blocked_row_of_a_fixed_cause(built, snapshot, tmp_path):
    """Judged at 0.23.0 and 0.33.0 together, a fix may take nothing away that starts at either
    release: GLM-5.2's mtp on PP is not known to start at 0.33.0 (the MTP layer count decides), so
    its gate is kept, saying what unknown commands it also hides; what has a fix is gone after
    apply."""
    copy = tmp_path / "recipes"
    shutil.copytree(snapshot, copy)
    before = json.loads(run("check", "--db", str(built), "--format", "json").stdout)
    glm = [c for c in before["causes"] if c["recipe"] == "models/zai-org/GLM-5.2.yaml" and c["label"] == "spec_decoding:mtp"]
    assert glm and glm[0]["fix_kind"] == "gate" and "whose verdict is unknown" in glm[0]["fix_why"], glm
    assert glm[0]["clear_from"] == "0.30.0"
    r = run("overrides", "--db", str(built), "--apply", str(copy))
    assert r.returncode == 0, r.stderr
    db2 = tmp_path / "after.db"
    r = run("build", "--recipes", str(copy), "--vllm", "0.23.0", "--vllm", "0.33.0", "--db", str(db2))
    assert r.returncode == 0, r.stderr
    after = json.loads(run("check", "--db", str(db2), "--format", "json").stdout)
    assert after["blocked"] < before["blocked"]
    fixed = {(c["recipe"], c["label"]) for c in before["causes"] if c["fix_kind"] not in ("", "none")}
    assert fixed
    left = {(c["recipe"], c["label"]) for c in after["causes"]}
    assert not (fixed & left), sorted(fixed & left)[:5]


def test_diff_shows_the_release_change_that_fixed_pp_mtp(built):
    r = run("diff", "0.23.0", "0.33.0", "--db", str(built), "--format", "json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    mtp = [p for p in d["draft_parallel"] if p["method"] == "mtp"][0]
    assert mtp["from"]["pp"] == "target" and mtp["to"]["pp"] == "one"
    glm = [x for x in d["drafts"] if x["platform"] == "cuda" and x["target"] == "glm_moe_dsa"][0]
    assert glm["from"]["draft_supports_pp"] == 0 and glm["to"]["draft_supports_pp"] == 1
    fixed = d["verdicts"]["by_recipe"]["models/zai-org/GLM-5.2.yaml"]
    # blocked at 0.23.0; at 0.33.0 the MTP layer count (unknown offline) decides
    assert any(i["strategy"] == "multi_node_tp_pp" and i["mode"] == "mtp" and i["before"] == "blocked"
               and i["after"] == "unknown" for i in fixed)
    assert "dspark" in d["spec_methods"]["added"]
    text = run("diff", "0.23.0", "0.33.0", "--db", str(built)).stdout
    assert "no longer known to fail (now unknown)" in text and "draft parallel config for mtp" in text


def test_bisect_finds_first_working_release_and_the_change(snapshot):
    """No release is known to start GLM-5.2's PP MTP offline (the MTP layer count decides at
    0.30.0 and later): bisect names the first release where it is no longer known to fail, and the
    release change that removed the failure."""
    r = run("bisect", "zai-org/GLM-5.2", "multi_node_tp_pp", "spec_decoding:mtp", "--recipes", str(snapshot),
            "--from", "0.23.0", "--to", "0.33.0", "--format", "json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["first_ok"] is None
    first = res["first_clear"]
    assert first == "0.30.0"
    assert res["visited"][first] == "unknown" and res["visited"][res["last_blocked"]] == "blocked"
    assert len(res["visited"]) < len(res["searched"])  # only what the search needs
    # the explanation names the fact that changed at that release
    assert any("create_draft_parallel_config" in c or "supports_pp 0->1" in c for c in res["changes"])
    assert any("MTP layer count" in step for step in res["why_ok"])


def test_v_draft_lists_the_recipe_models_drafts(built):
    got = rows(built, "SELECT vllm_version, draft_arch, draft_supports_pp, draft_inherits_pp FROM v_draft "
                      "WHERE platform='cuda' AND target_arch='GlmMoeDsaForCausalLM' AND method='mtp' "
                      "ORDER BY vllm_version")
    assert {(r["vllm_version"], r["draft_arch"], r["draft_supports_pp"], r["draft_inherits_pp"]) for r in got} >= {
        ("0.23.0", "DeepSeekMTPModel", 0, 1), ("0.33.0", "DeepseekV32MTPModel", 1, 0)}


def test_ambiguous_model_decided_only_when_every_candidate_agrees(built):
    """gemma-4-E2B-it is listed by vLLM under two architectures; a verdict is given only when both agree."""
    got = rows(built, "SELECT status, chain FROM verdict WHERE recipe='models/Google/gemma-4-E2B-it.yaml' "
                      "AND model_id='google/gemma-4-E2B-it' AND vllm_version='0.33.0'")
    assert got
    for r in got:
        steps = json.loads(r["chain"])
        if r["status"] != "unknown":
            assert any("every candidate gives the same verdict" in s for s in steps), steps
        else:
            assert any("they disagree" in s or "unresolved" in s for s in steps), steps
    assert any(r["status"] != "unknown" for r in got)


def test_kimi_pp_eagle3_decided_without_the_target_config(built):
    """Kimi-K2.6 / K2.7-Code: the target's config is unknown offline, but at 0.23.0 no Eagle3
    draft class supports PP and the draft inherits it, so every target gives the same block."""
    got = rows(built, "SELECT model_id, vllm_version, status, message, chain FROM verdict "
                      "WHERE recipe IN ('models/moonshotai/Kimi-K2.6.yaml', 'models/moonshotai/Kimi-K2.7-Code.yaml') "
                      "AND strategy='multi_node_tp_pp' AND feature='spec_decoding' AND platform='cuda'")
    at023 = [r for r in got if r["vllm_version"] == "0.23.0"]
    assert {r["model_id"] for r in at023} >= {"moonshotai/Kimi-K2.6", "moonshotai/Kimi-K2.7-Code"}
    for r in at023:
        assert r["status"] == "blocked" and "Pipeline parallelism is not supported" in r["message"]
        assert "; not needed: the draft check below" in json.loads(r["chain"])[0]
    # 0.33.0 has an Eagle3 class with PP: the unknown draft checkpoint decides, so unknown stays
    assert {r["status"] for r in got if r["vllm_version"] == "0.33.0"} == {"unknown"}
