"""Resolution and capability edge cases on a synthetic vLLM tree (tests/fixtures/minitrees/dispatch)."""

from __future__ import annotations

import pytest

from compat.sources import tree_from_path
from compat.vllm.capabilities import analyze_release
from compat.vllm.registry import read_registry
from compat.vllm.sandbox import SandboxError
from compat.vllm.speculative import OverrideRunner, accepted_methods, draft_parallel_facts

from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"

MINI = FIXTURES / "minitrees" / "dispatch"


@pytest.fixture(scope="module")
def caps():
    tree = tree_from_path(str(MINI))
    entries = read_registry(tree)
    rows, rules = analyze_release(tree, entries, ("cuda", "rocm", "cpu"))
    return {(c.platform, c.arch): c for c in rows}, rules


def test_registry_spreads_and_comprehension():
    entries = {e.arch: e for e in read_registry(tree_from_path(str(MINI)))}
    assert entries["FancyForCausalLM"].module == "vllm.models.fancy"
    assert entries["PPModel"].module == "vllm.model_executor.models.base"
    # the comprehension copies PPModel into the embedding dict: both categories recorded
    assert entries["PPModel"].categories == ("_TEXT_GENERATION_MODELS", "_EMBEDDING_MODELS")


def test_pp_rule_detected_from_interfaces(caps):
    _, rules = caps
    assert rules.pp_rule == "protocol"


@pytest.mark.parametrize("arch,expected", [
    ("PPModel", True),          # inherits SupportsPP, forward takes intermediate_tensors
    ("KwargsModel", True),      # forward ends in **kwargs
    ("NoForwardPP", False),     # nn.Module.forward(*input) fails the forward check
    ("InstanceOnly", False),    # instance attribute only, no SupportsPP: protocol check fails
    ("DraftOverride", False),   # inherits PP but overrides forward without intermediate_tensors
    ("PooledPP", True),         # class made by a factory keeps its base's capabilities
])
def test_supports_pp(caps, arch, expected):
    rows, _ = caps
    assert rows[("cuda", arch)].flags["supports_pp"] is expected, rows[("cuda", arch)].evidence


def test_platform_dispatch_typechecking_or_not_rocm(caps):
    rows, _ = caps
    # `if TYPE_CHECKING or not is_rocm()`: cuda takes the nvidia branch, rocm the amd one
    assert rows[("cuda", "FancyForCausalLM")].file == "vllm/models/fancy/nvidia/model.py"
    assert rows[("rocm", "FancyForCausalLM")].file == "vllm/models/fancy/amd/model.py"
    assert rows[("cuda", "FancyForCausalLM")].flags["supports_pp"] is True
    assert rows[("rocm", "FancyForCausalLM")].flags["supports_pp"] is False


def test_as_alias_and_elif_chain_and_getattr(caps):
    rows, _ = caps
    assert rows[("cuda", "FancyAlias")].class_name == "FancyForCausalLM"  # __name__ != registry key
    assert rows[("cuda", "FancyMTP")].class_path.endswith("base.PPModel")
    assert rows[("rocm", "FancyMTP")].class_path.endswith("base.DraftOverride")
    assert rows[("cpu", "FancyMTP")].class_path.endswith("base.MoEDraft")
    assert rows[("rocm", "LazyThing")].file == "vllm/models/fancy/amd/model.py"  # PEP 562 __getattr__
    assert rows[("cpu", "FancyMTP")].flags["is_moe"] is True


def test_attr_flag_and_unknown_predicates(caps):
    rows, rules = caps
    assert rows[("cuda", "InstanceOnly")].flags["supports_multimodal"] is True
    # predicates the mini tree does not define are unknown, never False/True by default
    assert rows[("cuda", "PPModel")].flags["is_hybrid"] is None
    assert any("is_hybrid" in n for n in rules.notes)


def test_speculative_methods_and_draft_parallel():
    tree = tree_from_path(str(MINI))
    methods = {m.method: m.canonical for m in accepted_methods(tree)}
    assert methods == {"ngram": "ngram", "draft_model": "draft_model", "eagle": "eagle",
                       "fancy_mtp": "mtp", "mtp": "mtp"}
    dp = draft_parallel_facts(tree)
    assert dp.pp_from_create == "target"
    assert dp.pp_source("ngram") == "target_config"
    assert dp.pp_source("mtp") == "target"


def test_override_runs_release_code_in_isolation():
    runner = OverrideRunner(tree_from_path(str(MINI)))
    res = runner.run({"model_type": "fancy", "architectures": ["FancyForCausalLM"], "num_nextn_predict_layers": 1})
    assert res.status == "ok" and res.architectures == ("FancyMTP",) and res.model_type == "fancy_mtp"
    # an in-function import of something not stubbed is reported, not silently passed
    res = runner.run({"model_type": "needs_import", "architectures": ["X"]})
    assert res.status == "unknown" and "not_a_constant" in res.detail


def test_override_time_limit():
    runner = OverrideRunner(tree_from_path(str(MINI)))
    res = runner.run({"model_type": "spin", "architectures": ["X"]})
    assert res.status == "unknown" and "budget" in res.detail


def test_sandbox_has_no_open_or_network():
    import ast

    from compat.vllm.sandbox import run_isolated

    fn = ast.parse("def f(cfg):\n    return open('/etc/passwd').read()\n").body[0]
    with pytest.raises(SandboxError):
        run_isolated(tree_from_path(str(MINI)), fn, "x.py", {})
    fn = ast.parse("def f(cfg):\n    import socket\n    return socket\n").body[0]
    with pytest.raises(SandboxError):
        run_isolated(tree_from_path(str(MINI)), fn, "x.py", {})
