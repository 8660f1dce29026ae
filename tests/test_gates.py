"""Curated runtime gates (data/gates.yaml, compat.vllm.gates)."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from compat.errors import UserError
from compat.sources.tree import VllmTree
from compat.vllm.gates import (
    check_gates,
    eval_expr,
    extract_aux_over_pp_classes,
    extract_lse_impls,
    load_rules,
    rule_applies,
)

MINI = Path(__file__).parent / "fixtures" / "minitrees"


def mini(name: str = "mini_current", root: Path | None = None) -> VllmTree:
    return VllmTree(root or MINI / name, "0.0.1", "src")


def copy_mini(tmp_path: Path, name: str = "mini_current") -> Path:
    root = tmp_path / name
    shutil.copytree(MINI / name, root)
    return root


def write_rules(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "gates.yaml"
    p.write_text("version: 1\nrules:\n" + textwrap.indent(textwrap.dedent(body), "  "))
    return p


MINI_RULES = """\
- id: ep-moe
  description: EP needs MoE.
  applies_when: {ep: true, target: {is_moe: false}}
  effect: config_error
  exception: ValueError
  message: "Number of experts in the model must be greater than 0 when expert parallelism is enabled."
  anchors:
    - {file: vllm/config/model.py, kind: string, anchor: "Number of experts in the model must be greater than 0 when expert parallelism is enabled."}
    - {file: vllm/config/model.py, anchor: "if parallel_config.enable_expert_parallel:"}
- id: v2-pp
  description: f-string message, anchored with a hole.
  applies_when: {model_runner: v2, spec_method: [eagle3, dflash], pp: ">1"}
  effect: startup_error
  exception: ValueError
  message: "{method} with pipeline parallel is not supported."
  anchors:
    - {file: vllm/v1/worker/gpu/model_runner.py, kind: string, anchor: "{} with pipeline parallel is not supported."}
- id: glob-and-absent
  description: a glob file pattern and a negative anchor.
  applies_when: {pp: ">1"}
  effect: warning
  exception: null
  message: "x"
  anchors:
    - {file: "vllm/config/*.py", anchor: "def _verify_with_expert_parallelism"}
    - {file: vllm/config/parallel.py, anchor: "def set_xfer_handshake_metadata_pp_aware", absent: true}
"""


# --------------------------------------------------------------------------- loading


def test_shipped_rules_load_and_are_well_formed() -> None:
    rules = load_rules()
    ids = [r.id for r in rules]
    assert len(ids) == len(set(ids)) >= 20
    for r in rules:
        assert r.anchors and r.message and r.description
        assert r.effect in ("config_error", "startup_error", "warning", "fallback")
        assert (r.exception is None) == (r.effect in ("warning", "fallback")), r.id
        for a in r.anchors:
            assert a.file.startswith("vllm/") and a.anchor.strip()
    required = {"draft-pp-gate", "v2-runner-eagle3-dflash-pp", "aux-hidden-states-over-pp",
                "ep-needs-moe", "external-dp-needs-moe", "dcp-needs-lse-attention",
                "dcp-tp-divisible", "nixl-pp-not-supported", "nixl-pull-pp-hma",
                "eagle3-interface-v1-runner", "suffix-needs-arctic-inference",
                "v2-runner-forced-unsupported", "v1-unsupported-pp-async-scheduling",
                "mm-encoder-tp-data-fallback", "draft-tp-one-or-target"}
    assert required <= set(ids)


ONE_RULE = """\
- id: r1
  description: d
  applies_when: APPLIES
  effect: EFFECT
  exception: ValueError
  message: m
  anchors: ANCHORS
"""


@pytest.mark.parametrize("subst,where", [
    ({"EFFECT": "explode"}, "rules[0].effect"),
    ({"APPLIES": "{pipeline: 2}"}, "rules[0].applies_when"),
    ({"APPLIES": "{pp: lots}"}, "rules[0].applies_when.pp"),
    ({"APPLIES": "{target: {is_moe: maybe}}"}, "rules[0].applies_when.target.is_moe"),
    ({"ANCHORS": "[]"}, "rules[0].anchors"),
    ({"ANCHORS": "[{file: /abs/path.py, anchor: xyz}]"}, "rules[0].anchors[0].file"),
])
def test_schema_violations_name_the_field(tmp_path: Path, subst: dict, where: str) -> None:
    body = ONE_RULE
    for k, v in {"APPLIES": "{pp: '>1'}", "EFFECT": "config_error",
                 "ANCHORS": "[{file: vllm/x.py, anchor: xyz}]", **subst}.items():
        body = body.replace(k, v)
    p = write_rules(tmp_path, body)
    with pytest.raises(UserError) as e:
        load_rules(p)
    assert e.value.where == f"{p}: {where}"


def test_bad_expr_and_duplicate_ids_are_user_errors(tmp_path: Path) -> None:
    p = write_rules(tmp_path, MINI_RULES.replace("{ep: true, target: {is_moe: false}}",
                                                 "{expr: \"__import__('os')\"}"))
    with pytest.raises(UserError) as e:
        load_rules(p)
    assert "applies_when.expr" in e.value.where
    p = write_rules(tmp_path, MINI_RULES.replace("id: v2-pp", "id: ep-moe"))
    with pytest.raises(UserError, match="duplicate rule id"):
        load_rules(p)
    with pytest.raises(UserError):
        load_rules(tmp_path / "missing.yaml")


# --------------------------------------------------------------------------- anchors on minitrees


def test_anchors_found_verified(tmp_path: Path) -> None:
    t = mini()
    st = {s.rule_id: s for s in check_gates(t, load_rules(write_rules(tmp_path, MINI_RULES)))}
    ep = st["ep-moe"]
    assert ep.status == "verified" and ep.reason is None
    # evidence: the first anchor; a message split over two source lines starts on the first
    lines = t.read("vllm/config/model.py").splitlines()
    assert ep.file == "vllm/config/model.py"
    assert lines[ep.line - 1].strip().startswith('"Number of experts')
    assert [a.ok for a in ep.anchors] == [True, True]
    assert st["v2-pp"].status == "verified"
    assert st["v2-pp"].file == "vllm/v1/worker/gpu/model_runner.py"
    g = st["glob-and-absent"]
    assert g.status == "verified" and g.anchors[0].file == "vllm/config/model.py"


def test_anchor_removed_unverified(tmp_path: Path) -> None:
    root = copy_mini(tmp_path)
    p = root / "vllm/config/model.py"
    p.write_text(p.read_text().replace('"when expert parallelism is enabled."',
                                       '"when expert parallel is enabled."'))
    p = root / "vllm/v1/worker/gpu/model_runner.py"
    p.write_text(p.read_text().replace("with pipeline parallel", "with PP"))
    p = root / "vllm/config/parallel.py"
    p.write_text(p.read_text() + "\n    def set_xfer_handshake_metadata_pp_aware(self):\n        pass\n")
    st = {s.rule_id: s for s in check_gates(mini(root=root),
                                            load_rules(write_rules(tmp_path, MINI_RULES)))}
    ep = st["ep-moe"]
    assert ep.status == "unverified" and ep.line is None
    assert [a.ok for a in ep.anchors] == [False, True]  # the code anchor alone is not enough
    assert "not found in vllm/config/model.py" in ep.reason
    assert st["v2-pp"].status == "unverified"
    g = st["glob-and-absent"]
    assert g.status == "unverified" and "must be absent" in g.reason


def test_missing_file_unverified(tmp_path: Path) -> None:
    root = copy_mini(tmp_path)
    (root / "vllm/v1/worker/gpu/model_runner.py").unlink()
    st = {s.rule_id: s for s in check_gates(mini(root=root),
                                            load_rules(write_rules(tmp_path, MINI_RULES)))}
    assert st["v2-pp"].status == "unverified" and "does not exist" in st["v2-pp"].reason


def test_shipped_rules_on_minitrees() -> None:
    rules = load_rules()
    cur = {s.rule_id: s for s in check_gates(mini(), rules)}
    for rid in ("draft-pp-gate", "v2-runner-eagle3-dflash-pp", "ep-needs-moe", "external-dp-needs-moe",
                "dcp-tp-divisible-nospace", "draft-tp-one-or-target", "v2-unsupported-eagle3-pp",
                "v2-unsupported-ngram", "v2-unsupported-spec-method-eagle-mtp-only",
                "v2-runner-forced-unsupported"):
        assert cur[rid].status == "verified", (rid, cur[rid].reason)
    assert cur["v2-runner-eagle3-pp"].status == "unverified"  # only the f-string form is here
    assert cur["nixl-pp-not-supported"].status == "unverified"
    legacy = check_gates(mini("mini_legacy"), rules)
    assert {s.status for s in legacy} == {"unverified"}  # nothing is carried over silently


# --------------------------------------------------------------------------- conditions


def rule(rules, rid):
    return next(r for r in rules if r.id == rid)


def test_rule_applies_three_valued() -> None:
    rules = load_rules()
    ep = rule(rules, "ep-needs-moe")
    assert rule_applies(ep, {"ep": True, "target": {"is_moe": False}}) is True
    assert rule_applies(ep, {"ep": True, "target": {"is_moe": True}}) is False
    assert rule_applies(ep, {"ep": False}) is False  # false wins over missing facts
    assert rule_applies(ep, {"ep": True}) is None  # is_moe unknown
    assert rule_applies(ep, {"ep": True, "target": {"is_moe": None}}) is None

    draft_pp = rule(rules, "draft-pp-gate")
    assert rule_applies(draft_pp, {"draft_pp": 2, "draft": {"supports_pp": False}}) is True
    assert rule_applies(draft_pp, {"draft_pp": 1, "draft": {"supports_pp": False}}) is False

    tp = rule(rules, "draft-tp-one-or-target")
    assert rule_applies(tp, {"draft_tp": None, "tp": 4}) is False
    assert rule_applies(tp, {"draft_tp": 1, "tp": 4}) is False
    assert rule_applies(tp, {"draft_tp": 4, "tp": 4}) is False
    assert rule_applies(tp, {"draft_tp": 2, "tp": 4}) is True
    assert rule_applies(tp, {"tp": 4}) is None

    dcp = rule(rules, "dcp-tp-divisible")
    assert rule_applies(dcp, {"dcp": 3, "tp": 4, "pcp": 1}) is True
    assert rule_applies(dcp, {"dcp": 2, "tp": 4, "pcp": 1}) is False

    asy = rule(rules, "async-scheduling-spec-method")
    assert rule_applies(asy, {"async_scheduling": True, "spec_method": None}) is False  # no spec
    assert rule_applies(asy, {"async_scheduling": True, "spec_method": "ngram"}) is True
    assert rule_applies(asy, {"async_scheduling": True, "spec_method": "mtp"}) is False


def test_group_hit_escalates_forced_v2() -> None:
    rules = load_rules()
    forced = rule(rules, "v2-runner-forced-unsupported")
    ctx = {"model_runner_forced": True, "model_runner": "v2", "spec_method": "eagle3", "pp": 2}
    assert rule_applies(forced, ctx, rules) is True
    assert rule_applies(forced, {**ctx, "pp": 1, "pcp": 1, "spec_method": "mtp",
                                 "distributed_executor_backend": "mp"}, rules) is False
    # only rules verified for the release count
    assert rule_applies(forced, ctx, rules, verified={"v2-runner-forced-unsupported"}) is False
    assert rule_applies(forced, {**ctx, "model_runner_forced": False}, rules) is False


def test_any_of_not_and_expr() -> None:
    cond = {"any_of": [{"pp": ">1"}, {"dcp": ">1"}], "not": {"spec_method": ["mtp"]}}
    assert rule_applies(cond, {"pp": 2, "dcp": 1, "spec_method": "eagle"}) is True
    assert rule_applies(cond, {"pp": 2, "dcp": 1, "spec_method": "mtp"}) is False
    assert rule_applies(cond, {"pp": 1, "dcp": 1, "spec_method": None}) is False
    assert rule_applies(cond, {"pp": 1, "spec_method": None}) is None
    assert eval_expr("tp % dcp != 0", {"tp": 4, "dcp": 0}) is None  # no division by zero
    assert eval_expr("dcp not in (1, pcp, tp * pcp)", {"dcp": 2, "pcp": 2, "tp": 2}) is False
    with pytest.raises(ValueError):
        eval_expr("open('x')", {})


# --------------------------------------------------------------------------- class facts


def test_lse_impls_on_minitree() -> None:
    scan = extract_lse_impls(mini())
    assert scan.status == "ok"
    assert scan.names() == {"FlashAttentionImpl", "FlashAttentionDiffKVImpl", "SubclassElsewhereImpl"}
    sub = next(c for c in scan.classes if c.class_name == "SubclassElsewhereImpl")
    assert (sub.via, sub.inherited_from, sub.file) == ("inherited", "FlashAttentionImpl",
                                                      "vllm/v1/attention/backends/other.py")
    fa = next(c for c in scan.classes if c.class_name == "FlashAttentionImpl")
    assert (fa.file, fa.line, fa.via) == ("vllm/v1/attention/backends/flash_attn.py", 5, "class_attr")
    assert scan.default is not None and scan.default.file == "vllm/v1/attention/backend.py"
    others = {(o.class_name, o.via) for o in scan.others}
    assert ("NoLseImpl", "class_attr") in others and ("TritonImpl", "instance_attr") in others


def test_aux_over_pp_classes_on_minitree() -> None:
    scan = extract_aux_over_pp_classes(mini())
    assert scan.names() == {"LlamaModel", "MistralModel"}  # MiMoModel overrides it to False
    assert extract_aux_over_pp_classes(mini("mini_legacy")).status == "unknown"
    legacy = extract_lse_impls(mini("mini_legacy"))
    assert legacy.status == "unknown" and "can_return_lse_for_decode" in legacy.reason


# --------------------------------------------------------------------------- slow (real sdists)

RELEASES = ("0.23.0", "0.24.0", "0.33.0")
# Rules that describe code gone by 0.23.0 (the V1 runner's EPLB assert, the chat endpoint's
# auto-tool-choice check before validate_parsed_serve_args had it) are verified here.
EARLIER = ("0.6.2", "0.11.0", "0.17.0")


@pytest.fixture(scope="module")
def statuses(vllm_tree):
    rules = load_rules()
    return {v: {s.rule_id: s for s in check_gates(vllm_tree(v), rules)} for v in RELEASES + EARLIER}


@pytest.mark.slow
def test_every_rule_verified_somewhere(statuses) -> None:
    # Most rules hold in 0.23.0 or 0.33.0; two describe 0.24.0 only (the eagle3/dflash
    # runner error and the V2 method list that added dflash), two only before 0.21.
    for rid in statuses["0.23.0"]:
        assert any(statuses[v][rid].status == "verified" for v in RELEASES + EARLIER), rid
    for v in RELEASES + EARLIER:
        for s in statuses[v].values():
            if s.status == "verified":
                assert s.file and s.line and s.reason is None
            else:
                assert s.reason


@pytest.mark.slow
def test_verified_matrix(statuses) -> None:
    def where(rid: str) -> tuple[str, ...]:
        return tuple(v for v in RELEASES if statuses[v][rid].status == "verified")

    # The V2 runner raised `f"{method} with pipeline parallel is not supported."` for
    # eagle3/dflash in 0.24.0 (0.23.0 had the EAGLE3-only literal). In 0.33.0 the raise
    # is gone from vllm/v1/worker/gpu/model_runner.py: PP with aux hidden states is
    # decided by supports_aux_hidden_states_over_pp instead (aux-hidden-states-over-pp).
    assert where("v2-runner-eagle3-dflash-pp") == ("0.24.0",)
    assert where("v2-runner-eagle3-pp") == ("0.23.0",)
    assert where("aux-hidden-states-over-pp") == ("0.33.0",)
    # the draft PP error and its verify call exist in every release; whether the draft
    # copies the target PP (0.23/0.24) or gets 1 (0.33) is read elsewhere
    assert where("draft-pp-gate") == RELEASES
    # NIXL: no PP-aware handshake before 0.33; 0.33 overrides it and adds narrower rules
    assert where("nixl-pp-not-supported") == ("0.23.0", "0.24.0")
    assert where("nixl-pull-pp-hma") == ("0.33.0",)
    assert where("nixl-pp-consumer") == ("0.33.0",)
    assert where("ep-needs-moe") == RELEASES
    # is_mixture_of_experts asserted in the V1 runner's eplb_step, 0.11-0.20; later the runner
    # unwraps a multimodal wrapper and keeps no assert (no error for a class without experts)
    def earlier(rid: str) -> tuple[str, ...]:
        return tuple(v for v in EARLIER if statuses[v][rid].status == "verified")

    assert earlier("eplb-needs-moe-class") == ("0.11.0", "0.17.0")
    # OpenAIServingChat's own TypeError, worded so only before validate_parsed_serve_args took it
    assert earlier("auto-tool-choice-needs-parser") == ("0.6.2",)
    assert where("auto-tool-choice-needs-parser") == ()
    assert where("eplb-needs-moe-class") == ()
    assert where("external-dp-needs-moe") == RELEASES
    assert where("dcp-needs-lse-attention") == RELEASES
    assert where("dcp-tp-divisible-nospace") == ("0.23.0", "0.24.0")
    assert where("dcp-tp-divisible") == ("0.33.0",)
    assert where("mm-encoder-tp-data-fallback") == RELEASES
    assert where("suffix-needs-arctic-inference") == RELEASES
    assert where("v2-unsupported-eagle3-pp") == ("0.23.0", "0.24.0")
    assert where("v1-unsupported-pp-async-scheduling") == ("0.33.0",)
    s = statuses["0.23.0"]["ep-needs-moe"]
    assert s.file == "vllm/config/model.py"


@pytest.mark.slow
def test_real_lse_impls(vllm_tree) -> None:
    # research §4.3: impls with can_return_lse_for_decode = True
    base = {"FlashAttentionImpl", "FlashInferImpl", "CutlassMLAImpl", "FlashAttnMLAImpl",
            "FlashMLAImpl", "TritonMLAImpl"}
    for v in ("0.23.0", "0.24.0"):
        scan = extract_lse_impls(vllm_tree(v))
        assert {c.class_name for c in scan.classes if c.via == "class_attr"} == base
        assert not scan.names() & {"FlashMLASparseImpl", "FlashInferMLASparseImpl"}
    scan = extract_lse_impls(vllm_tree("0.33.0"))
    assert {c.class_name for c in scan.classes if c.via == "class_attr"} == base | {
        "FlashInferMLAImpl", "FlashInferMLASparseImpl", "FlashMLASparseImpl", "AiterMLAImpl",
        "TokenspeedMLAImpl"}
    assert ("CompositeAttentionImpl", "instance_attr") in {(o.class_name, o.via) for o in scan.others}


@pytest.mark.slow
def test_real_aux_over_pp_classes(vllm_tree) -> None:
    assert extract_aux_over_pp_classes(vllm_tree("0.23.0")).status == "unknown"
    scan = extract_aux_over_pp_classes(vllm_tree("0.33.0"))
    direct = {(c.class_name, c.file) for c in scan.classes if c.via == "class_attr"}
    assert ("LlamaModel", "vllm/model_executor/models/llama.py") in direct
    assert ("Qwen2Model", "vllm/model_executor/models/qwen2.py") in direct
    assert len(direct) == 6  # llama, qwen2, sarvam, minimax_m3, deepseek_v4, kimi_k3 (research §3.7)
    assert "MiMoModel" not in scan.names()  # sets it back to False
    assert {"MistralModel", "Qwen3Model"} <= scan.names()  # inherited
