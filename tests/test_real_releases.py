"""Real sdists from the package index (cached by hash): static facts vs vLLM's own computation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compat.vllm.capabilities import FLAGS, analyze_release
from compat.vllm.registry import read_registry
from compat.vllm.scope import PLATFORMS
from compat.vllm.speculative import OverrideRunner, draft_parallel_facts

GOLDEN = Path(__file__).resolve().parent / "golden"
pytestmark = pytest.mark.slow


def _golden(version: str) -> list[Path]:
    return sorted(GOLDEN.glob(f"modelinfo-{version}-*.json"))


@pytest.mark.parametrize("version", ["0.12.0", "0.23.0", "0.33.0"])
def test_capabilities_match_vllm_inspection(vllm_tree, version):
    """Agreement with `_ModelInfo.from_model_cls` run by the real release (tools/golden)."""
    files = _golden(version)
    if not files:
        pytest.skip(f"no golden modelinfo for {version} in tests/golden (run tools/golden/make_golden.sh)")
    tree = vllm_tree(version)
    entries = read_registry(tree)
    for path in files:
        gold = json.loads(path.read_text())
        platform = gold["platform"]
        assert platform in PLATFORMS, f"{path.name}: platform {platform} not modelled"
        caps, _ = analyze_release(tree, entries, (platform,))
        ours = {c.arch: c for c in caps}
        fields = {"supports_pp": "supports_pp", "supports_multimodal": "supports_multimodal",
                  "supports_encoder_tp_data": "supports_multimodal_encoder_tp_data",
                  "is_hybrid": "is_hybrid", "has_inner_state": "has_inner_state",
                  "is_attention_free": "is_attention_free", "supports_transcription": "supports_transcription",
                  "is_pooling_model": "is_pooling_model", "is_text_generation_model": "is_text_generation_model",
                  "supports_lora": "supports_lora", "supports_eagle3": "supports_eagle3", "is_moe": "is_moe"}
        report = []
        for flag, gkey in fields.items():
            total = agree = 0
            for arch, g in gold["archs"].items():
                if "load_error" in g or gkey not in g or arch not in ours:
                    continue
                total += 1
                if bool(g[gkey]) == bool(ours[arch].flags.get(flag)):
                    agree += 1
                else:
                    report.append(f"{path.name} {flag} {arch}: vllm={g[gkey]} static={ours[arch].flags.get(flag)}")
            loaded = sum(1 for g in gold["archs"].values() if "load_error" not in g)
            assert total >= 0.99 * loaded, f"{path.name}: only {total} of {loaded} archs compared on {flag}"
            assert agree / total >= 0.995, "\n".join(report)
        print("\n".join(report) or f"{path.name}: full agreement")


def test_glm5_mtp_draft_per_release(vllm_tree):
    """The bug report's chain: the MTP draft of glm_moe_dsa and whether it inherits PP."""
    cfg = {"model_type": "glm_moe_dsa", "architectures": ["GlmMoeDsaForCausalLM"], "num_nextn_predict_layers": 1}
    results = {}
    for v in ("0.23.0", "0.33.0"):
        tree = vllm_tree(v)
        res = OverrideRunner(tree).run(cfg)
        caps, _ = analyze_release(tree, [e for e in read_registry(tree) if e.arch == res.architectures[0]], ("cuda",))
        results[v] = (res.architectures[0], caps[0].flags["supports_pp"], draft_parallel_facts(tree).pp_source("mtp"))
    assert results["0.23.0"] == ("DeepSeekMTPModel", False, "target")
    assert results["0.33.0"] == ("DeepseekV32MTPModel", True, "one")


def test_every_registry_entry_resolves(vllm_tree):
    for v in ("0.23.0", "0.33.0"):
        tree = vllm_tree(v)
        caps, rules = analyze_release(tree, read_registry(tree), ("cuda", "rocm"))
        assert rules.pp_rule is not None and not rules.notes
        bad = [(c.platform, c.arch, c.reason) for c in caps if c.status != "resolved"]
        assert not bad
        assert all(c.flags[f] is not None for c in caps for f in FLAGS)


def test_speculators_checkpoints_use_the_release_algorithm(vllm_tree):
    """Speculators-format drafts: 0.23.0 always builds Eagle3Llama; 0.33.0 maps by model_type."""
    from compat.vllm.speculative import speculators_rewrite

    qwen = {"speculators_model_type": "eagle3", "transformer_layer_config": {"model_type": "qwen3"}}
    mistral = {"speculators_model_type": "eagle3", "transformer_layer_config": {"model_type": "mistral"}}
    assert speculators_rewrite(vllm_tree("0.23.0"), qwen)[0] == ["Eagle3LlamaForCausalLM"]
    assert speculators_rewrite(vllm_tree("0.33.0"), qwen)[0] == ["Eagle3Qwen3ForCausalLM"]
    archs, _, why = speculators_rewrite(vllm_tree("0.33.0"), mistral)
    assert archs is None and "Unsupported model_type mistral" in why
