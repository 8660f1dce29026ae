"""Every model id of the recipes snapshot, resolved against real vLLM releases (slow: sdists)."""

from __future__ import annotations

import time

import pytest
import yaml

from compat.hf import ModelResolver
from compat.hf.vllm_docs import VllmDocsIndex
from compat.hf.vllm_tests import VllmTestsIndex, parse_registry

from tests.conftest import SNAPSHOT  # noqa: E402 (COMPAT_RECIPES_SNAPSHOT, as every test reads it)
VERSIONS = ("0.33.0", "0.24.0", "0.23.0")
# Measured on the snapshot (339 distinct ids): 154 resolve from the package-index trees;
# 156 when the trees also carry tests/config/base_model_arch_groundtruth.json.
RESOLVED_FLOOR = 150

pytestmark = pytest.mark.slow


def snapshot_ids() -> list[str]:
    if not (SNAPSHOT / "models").is_dir():
        pytest.skip(f"recipes snapshot not found at {SNAPSHOT}")
    ids = []
    for path in sorted((SNAPSHOT / "models").rglob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        ids.append(data["model"]["model_id"])
        for variant in (data.get("variants") or {}).values():
            if isinstance(variant, dict) and variant.get("model_id"):
                ids.append(variant["model_id"])
    return ids


@pytest.fixture(scope="module")
def trees(vllm_tree):
    return [vllm_tree(v) for v in VERSIONS]


@pytest.fixture(scope="module")
def resolver(trees):
    return ModelResolver(trees=trees)


def test_snapshot_coverage(trees, capsys):
    ids = snapshot_ids()
    start = time.perf_counter()
    resolver = ModelResolver(trees=trees)  # fresh: the timing includes building every index
    cov = resolver.coverage(ids)
    elapsed = time.perf_counter() - start
    with capsys.disabled():
        print(
            f"\nmodel ids: {cov['total']} distinct, {cov['resolved']} resolved "
            f"({cov['inferred']} inferred), {len(cov['unknown'])} unknown, {elapsed:.2f}s"
        )
        for source, n in cov["by_source"].items():
            print(f"  {source:11} {n}")
        print("  unknown, e.g.: " + ", ".join(cov["unknown"][:8]))
    assert cov["total"] == len({i.casefold() for i in ids})
    assert cov["resolved"] >= RESOLVED_FLOOR
    assert elapsed < 10


@pytest.mark.parametrize(
    ("model_id", "arch", "model_type"),
    [
        ("deepseek-ai/DeepSeek-V3.2", "DeepseekV32ForCausalLM", "deepseek_v32"),
        ("deepseek-ai/DeepSeek-V3", "DeepseekV3ForCausalLM", "deepseek_v3"),
        ("Qwen/Qwen3-Next-80B-A3B-Instruct", "Qwen3NextForCausalLM", "qwen3_next"),
        ("Qwen/Qwen3-30B-A3B", "Qwen3MoeForCausalLM", "qwen3_moe"),
        ("zai-org/GLM-4.5", "Glm4MoeForCausalLM", "glm4_moe"),
        ("zai-org/GLM-5", "GlmMoeDsaForCausalLM", "glm_moe_dsa"),
        ("zai-org/GLM-5.2-FP8", "GlmMoeDsaForCausalLM", "glm_moe_dsa"),
        # vLLM's own tests/test_config.py pairs these two ids with these classes
        ("nvidia/GLM-5.2-NVFP4", "GlmMoeDsaForCausalLM", "glm_moe_dsa"),
        ("nvidia/DeepSeek-V3.2-NVFP4", "DeepseekV32ForCausalLM", "deepseek_v32"),
        ("stepfun-ai/Step-3.5-Flash", "Step3p5ForCausalLM", None),
        ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "Llama4ForConditionalGeneration", "llama4"),
    ],
)
def test_known_ids(resolver, model_id, arch, model_type):
    f = resolver.resolve(model_id)
    assert f.status == "resolved", f.reason
    assert f.architecture == arch
    if model_type is not None:
        assert f.model_type == model_type
    assert f.provenance


def test_no_recipe_id_resolves_to_a_draft_architecture(resolver, trees):
    drafts = {
        e.arch
        for t in trees
        for e in parse_registry(t)
        if e.table == "_SPECULATIVE_DECODING_EXAMPLE_MODELS"
    }
    for model_id in set(snapshot_ids()):
        f = resolver.resolve(model_id)
        if f.resolved:
            assert f.architecture not in drafts, (model_id, f.architecture, f.provenance)
    # spec-decoding targets only: their registry key is the draft, so they stay unresolved there
    assert (
        resolver.resolve("Qwen/Qwen2.5-VL-7B-Instruct").architecture != "Eagle3Qwen2_5vlForCausalLM"
    )


@pytest.mark.parametrize(
    ("model_id", "candidates"),
    [
        ("google/gemma-4-E2B-it", ("Gemma4ForCausalLM", "Gemma4ForConditionalGeneration")),
        (
            "MiniMaxAI/MiniMax-M3",
            ("MiniMaxM3SparseForCausalLM", "MiniMaxM3SparseForConditionalGeneration"),
        ),
    ],
)
def test_ids_vllm_lists_under_several_classes_stay_unknown(resolver, model_id, candidates):
    f = resolver.resolve(model_id)
    assert f.status == "unknown"
    for arch in candidates:
        assert arch in f.reason


def test_docs_family_rule_never_contradicts_the_test_registry(trees):
    """The org + family-name rule, checked on every id vLLM's tests pin to one class."""
    tests, docs = VllmTestsIndex(trees), VllmDocsIndex(trees)
    checked = 0
    for key in {e.model_id.casefold() for t in trees for e in parse_registry(t)}:
        example, _, _ = tests.architecture(key)
        if example is None:
            continue
        match, _ = docs.match(example.model_id, rules=("org + family name",))
        if match is None or match.arch is None:
            continue
        checked += 1
        assert match.arch == example.arch, (example.model_id, match.where)
    assert checked >= 20
