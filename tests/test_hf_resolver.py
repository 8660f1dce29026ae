"""ModelResolver on small fixtures: each source, the precedence order, and the unknowns."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from compat.errors import UserError
from compat.hf import ModelFacts, ModelResolver
from compat.hf.curated import load_curated
from compat.hf.model_types import VllmConfigTypes, config_registry
from compat.sources.tree import VllmTree
from tests.fake_hub import FakeHub

FIX = Path(__file__).resolve().parent / "fixtures" / "hf"
NEW = VllmTree(FIX / "tree_new", "9.1.0", "src")
OLD = VllmTree(FIX / "tree_old", "9.0.0", "src")
NO_FILE = FIX / "does-not-exist.yaml"


def make(**kw) -> ModelResolver:
    kw.setdefault("trees", (OLD, NEW))  # given oldest first: the resolver sorts newest first
    kw.setdefault("curated", FIX / "curated.yaml")
    kw.setdefault("transformers_types", FIX / "transformers_model_types.json")
    return ModelResolver(**kw)


def curated_file(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "model_configs.yaml"
    p.write_text(text, encoding="utf-8")
    return p


# -- local ---------------------------------------------------------------------------------


def test_local_hf_cache_layout_follows_refs_main():
    f = make(hf_config_dir=FIX / "hf_cache").resolve("acme/Foo-7B")
    assert (f.status, f.source, f.inferred) == ("resolved", "local", False)
    assert f.architectures == ("DeepseekV32ForCausalLM",)
    assert f.provenance == "models--acme--Foo-7B/snapshots/2222bbbb/config.json"
    assert (f.num_experts, f.use_mla, f.num_nextn_predict_layers) == (256, True, 1)
    assert f.config is not None and f.config["model_type"] == "deepseek_v32"


def test_local_hf_cache_without_ref_takes_the_newest_snapshot(tmp_path):
    repo = tmp_path / "hub" / "models--acme--Foo-7B"
    shutil.copytree(FIX / "hf_cache" / "models--acme--Foo-7B", repo)
    (repo / "refs" / "main").unlink()
    old = repo / "snapshots" / "2222bbbb" / "config.json"
    new = repo / "snapshots" / "1111aaaa" / "config.json"
    os.utime(old, (1_000_000, 1_000_000))
    os.utime(new, (2_000_000, 2_000_000))
    f = make(hf_config_dir=tmp_path).resolve("acme/Foo-7B")
    assert f.source == "local" and f.architectures == ("OldLocalForCausalLM",)
    assert f.provenance == "hub/models--acme--Foo-7B/snapshots/1111aaaa/config.json"


def test_local_plain_layout_and_vllm_expert_rule():
    r = make(hf_config_dir=FIX / "plain")
    moe = r.resolve("acme/Plain-MoE")
    assert moe.source == "local" and moe.provenance == "acme/Plain-MoE/config.json"
    assert (moe.num_experts, moe.is_moe) == (128, True)  # num_experts: null -> block_configs max
    assert (moe.num_attention_heads, moe.num_key_value_heads, moe.use_mla) == (32, 2, False)
    vl = r.resolve("acme/Vision-Local")
    assert (vl.model_type, vl.text_model_type) == ("acme_vl", "acme_vl_text")
    assert (vl.num_experts, vl.num_nextn_predict_layers, vl.num_attention_heads) == (64, 2, 40)


def test_local_unreadable_config_falls_through_with_reason():
    f = make(hf_config_dir=FIX / "plain").resolve("acme/Broken")
    assert f.status == "unknown"
    assert "acme/Broken/config.json is unreadable" in f.reason


# -- precedence ------------------------------------------------------------------------------

CURATED_FOO = """
models:
  - id: acme/Foo-7B
    architectures: [CuratedFooForCausalLM]
    provenance: "https://example.org/acme/Foo-7B (model card)"
"""


@pytest.mark.parametrize(
    ("local", "curated", "source", "arch"),
    [
        (True, True, "local", "DeepseekV32ForCausalLM"),
        (False, True, "curated", "CuratedFooForCausalLM"),
        (False, False, "vllm-tests", "FooForCausalLM"),
    ],
)
def test_precedence_local_then_curated_then_tests(tmp_path, local, curated, source, arch):
    r = make(
        hf_config_dir=FIX / "hf_cache" if local else None,
        curated=curated_file(tmp_path, CURATED_FOO) if curated else NO_FILE,
    )
    f = r.resolve("acme/Foo-7B")
    assert (f.source, f.architecture) == (source, arch)


def test_tests_beat_docs():
    f = make().resolve("acme/Renamed-1")  # docs say RenamedVLForConditionalGeneration
    assert (f.source, f.architecture) == ("vllm-tests", "RenamedForCausalLM")


def test_docs_when_nothing_else():
    f = make().resolve("docorg/DocOnly-1")
    assert (f.source, f.architecture, f.inferred) == ("vllm-docs", "DocOnlyForCausalLM", True)
    assert f.provenance == "vllm-9.1.0/docs/models/supported_models.md:13 (exact id)"


# -- hub (the real huggingface_hub client against a local resolve API) -----------------------


def hub_client(hub, tmp_path, **kw):
    from compat.hf.hub import HubClient

    kw.setdefault("token", False)
    return HubClient(endpoint=hub.endpoint, cache_dir=tmp_path / "hf-cache", timeout=1, **kw)


def test_hub_only_when_allowed_and_beats_curated(tmp_path):
    with FakeHub() as hub:
        repo = hub.add("acme/Curated-Only", {"architectures": ["HubForCausalLM"], "model_type": "hub"})
        offline = make(hub=hub_client(hub, tmp_path)).resolve("acme/Curated-Only")
        assert offline.source == "curated" and hub.requests == []
        online = make(allow_hub=True, hub=hub_client(hub, tmp_path)).resolve("acme/Curated-Only")
    assert (online.source, online.architecture, online.revision) == ("hub", "HubForCausalLM", repo.commit)
    assert online.provenance == f"{hub.endpoint}/acme/Curated-Only/resolve/{repo.commit}/config.json"


@pytest.mark.parametrize(
    ("setup", "reason"),
    [
        (lambda h: h.add("acme/Foo-7B", {"architectures": ["X"]}, token="hf_x"), "acme/Foo-7B is gated (HTTP 401)"),
        (lambda h: None, "no repository acme/Foo-7B (HTTP 404)"),
        (lambda h: h.add("acme/Foo-7B", {"architectures": ["X"]}, delay=3), "timed out fetching config.json of acme/Foo-7B"),
        (lambda h: h.add("acme/Foo-7B", b"<html>rate limited</html>"), "config.json of acme/Foo-7B is not valid JSON"),
    ],
)
def test_hub_failure_falls_through_and_keeps_the_reason(tmp_path, setup, reason):
    with FakeHub() as hub:
        setup(hub)
        f = make(allow_hub=True, hub=hub_client(hub, tmp_path)).resolve("acme/Foo-7B")
    assert (f.source, f.architecture) == ("vllm-tests", "FooForCausalLM")
    assert any(reason in n for n in f.notes)


def test_hub_is_asked_once_per_id(tmp_path):
    with FakeHub() as hub:
        r = make(allow_hub=True, hub=hub_client(hub, tmp_path))
        assert r.resolve("zai-org/GLM-5.2-FP8").source == "derived"  # base tried twice: strong, then docs
    assert [p for _m, p, _a in hub.requests].count("/zai-org/GLM-5.2/resolve/main/config.json") == 1


# -- curated ---------------------------------------------------------------------------------


def test_curated_facts_get_model_type_from_transformers():
    f = make().resolve("acme/Curated-Only")
    assert (f.source, f.architecture, f.model_type) == ("curated", "FooForCausalLM", "foo")
    assert (f.num_experts, f.is_moe, f.inferred) == (0, False, True)
    assert f.provenance.startswith("tests/fixtures/hf/curated.yaml:3: https://example.org/")
    assert any("transformers 0.0-fixture" in n for n in f.notes)


def test_curated_alias_borrows_the_base_facts():
    f = make().resolve("mirror/Foo-7B-NVFP4")
    assert (f.source, f.architecture, f.base_model_id, f.inferred) == (
        "curated",
        "FooForCausalLM",
        "acme/Foo-7B",
        True,
    )
    assert "quantized copy of acme/Foo-7B" in f.provenance
    assert "vllm-9.1.0/tests/models/registry.py" in f.provenance


def test_curated_alias_of_an_unknown_id_stays_unknown():
    f = make().resolve("mirror/Lost-FP8")
    assert f.status == "unknown" and "same as nowhere/Lost" in f.reason


def test_curated_alias_cycle_terminates():
    r = make()
    assert r.resolve("loop/A").status == "unknown"
    assert r.resolve("loop/B").status == "unknown"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("models:\n  - id: a/b\n    architectures: [X]\n", "'provenance' is a required property"),
        (
            (
                "models:\n  - id: a/b\n    same_as: c/d\n    relation: quantized\n"
                "    architectures: [X]\n    provenance: 'https://example.org'\n"
            ),
            "models/0",
        ),
        ("models:\n  - id: a/b\n    provenance: 'https://example.org'\n", "models/0"),
        (
            (
                "models:\n  - id: a/b\n    architectures: [X]\n    provenance: 'https://example.org'\n"
                "  - id: A/B\n    architectures: [Y]\n    provenance: 'https://example.org'\n"
            ),
            "duplicate id",
        ),
        (
            "models:\n  - id: not-an-id\n    architectures: [X]\n    provenance: 'https://x.org'\n",
            "models/0/id",
        ),
        ("models: [\n", "not valid YAML"),
    ],
)
def test_curated_file_is_schema_checked(tmp_path, text, message):
    path = curated_file(tmp_path, text)
    with pytest.raises(UserError) as info:
        load_curated(path)
    assert message in info.value.message
    assert info.value.where == "model_configs.yaml"


def test_curated_errors_surface_from_resolve(tmp_path):
    r = make(curated=curated_file(tmp_path, "models:\n  - id: a/b\n"))
    with pytest.raises(UserError):
        r.resolve("acme/Foo-7B")


# -- vLLM tests ------------------------------------------------------------------------------


def test_registry_extras_and_primary_dicts_win_over_pooling():
    r = make()
    big = r.resolve("acme/Llama-Big")
    assert (big.source, big.architecture, big.inferred) == ("vllm-tests", "LlamaForCausalLM", True)
    assert big.model_type == "llama"  # transformers' owner of the class, noted
    assert any("internlm3" in n for n in big.notes)
    assert r.resolve("acme/Llama-Tiny").architecture == "LlamaForCausalLM"  # not LlamaModel
    bert = r.resolve("acme/bert-embed")
    assert (bert.architecture, bert.model_type, bert.inferred) == ("BertModel", None, False)


def test_speculative_target_is_not_mapped_to_the_draft_arch():
    f = make().resolve("acme/Target-9B")
    assert f.status == "unknown"
    glm = make().resolve("zai-org/GLM-4.5")  # also the target of Glm4MoeMTPModel
    assert glm.architecture == "Glm4MoeForCausalLM"


def test_hf_overrides_and_backend_entries_are_not_used():
    exa = make().resolve("acme/Exa-1")
    assert exa.status == "unknown"
    assert any("hf_overrides of architectures" in n for n in exa.notes)
    assert make().resolve("acme/Backend-Only").status == "unknown"


def test_groundtruth_gives_config_facts():
    f = make().resolve("zai-org/GLM-4.5")
    assert (f.source, f.inferred) == ("vllm-tests", False)
    assert f.provenance == "vllm-9.1.0/tests/config/base_model_arch_groundtruth.json:2"
    assert (f.model_type, f.text_model_type, f.num_experts, f.is_moe) == (
        "glm4_moe",
        "glm4_moe",
        160,
        True,
    )
    assert (f.use_mla, f.num_attention_heads, f.num_key_value_heads) == (False, 96, 8)


def test_newest_release_first_and_older_disagreement_noted():
    r = make()
    foo = r.resolve("acme/Foo-7B")
    assert foo.provenance.startswith("vllm-9.1.0/tests/models/registry.py:")
    assert any("OldFooForCausalLM" in n for n in foo.notes)
    old = r.resolve("acme/Old-Only")
    assert old.provenance.startswith("vllm-9.0.0/tests/models/registry.py:")


def test_ambiguous_registry_id_falls_to_docs_among_candidates():
    # tests list acme/Both-1B under a text and a multimodal class; docs name the text one
    f = make(curated=NO_FILE).resolve("acme/Both-1B")
    assert (f.source, f.architecture) == ("vllm-docs", "AcmeTextForCausalLM")
    assert any("among vLLM tests' candidates" in n for n in f.notes)


def test_ambiguous_registry_id_without_docs_is_unknown(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(FIX / "tree_new" / "tests", tree / "tests")
    r = make(trees=(VllmTree(tree, "9.1.0", "src"),), curated=NO_FILE)
    f = r.resolve("acme/Both-1B")
    assert f.status == "unknown"
    assert "AcmeForConditionalGeneration, AcmeTextForCausalLM" in f.reason


def test_model_type_from_vllm_config_registry():
    f = make().resolve("acme/Vision-2B")
    assert (f.architecture, f.model_type) == ("AcmeVLForConditionalGeneration", "acme_vl")
    assert any("acme_vl.py:7 imports AcmeVLConfig" in n for n in f.notes)
    types = VllmConfigTypes([NEW])
    assert types.lookup("AcmeMultiForCausalLM").model_type == "acme_multi"  # both platforms agree
    assert types.lookup("SharedForCausalLM") is None  # one class, two model types
    assert config_registry(NEW)["DashConfig"] == ["dash-type"]


# -- vLLM docs -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model_id", "arch"),
    [
        ("zai-org/GLM-5.2", "GlmMoeDsaForCausalLM"),  # org + family name
        ("ZAI-ORG/glm-5.1", "GlmMoeDsaForCausalLM"),  # case-insensitive
        ("docorg/Doc-Only", "DocOnlyForCausalLM"),  # "Doc Only (preview)" read without the note
        ("olddoc/Old-1", "OldDocForCausalLM"),  # an older release's docs
    ],
)
def test_docs_matching(model_id, arch):
    f = make().resolve(model_id)
    assert (f.source, f.architecture, f.inferred) == ("vllm-docs", arch, True)


@pytest.mark.parametrize(
    ("model_id", "why"),
    [
        ("someone/GLM-5.2", "no supported_models.md row"),  # family name, other org
        ("zai-org/GLM-4.6V", "no supported_models.md row"),  # not a listed family
        ("Qwen/Qwen3-30B-A3B", "no supported_models.md row"),  # a prefix is not a family
        ("zai-org/chatglm3-6b", "several architectures"),  # the row names two classes
        ("zai-org/glm-4v-9b", "no supported_models.md row"),  # ^ row: needs --hf-overrides
    ],
)
def test_docs_matching_is_conservative(model_id, why):
    f = make().resolve(model_id)
    assert f.status == "unknown" and why in f.reason


def test_docs_override_row_is_noted():
    f = make().resolve("zai-org/glm-4v-9b")
    assert any("needs --hf-overrides" in n for n in f.notes)


# -- derived ---------------------------------------------------------------------------------


def test_derived_from_a_config_backed_base_beats_docs_on_the_copy():
    f = make().resolve("acme/Foo-7B-FP8")  # docs list it exactly; tests know the base
    assert (f.source, f.architecture, f.base_model_id, f.inferred) == (
        "derived",
        "FooForCausalLM",
        "acme/Foo-7B",
        True,
    )
    assert f.provenance.startswith("acme/Foo-7B-FP8 = acme/Foo-7B + '-FP8'")


def test_derived_peels_tags_until_a_base_resolves():
    f = make().resolve("acme/Llama-Big-NVFP4-FP8")
    assert (f.source, f.base_model_id) == ("derived", "acme/Llama-Big")
    docs = make().resolve("zai-org/GLM-5.2-FP8")  # base only in the docs
    assert (docs.source, docs.architecture) == ("derived", "GlmMoeDsaForCausalLM")
    assert "vllm-docs" in docs.provenance


def test_derived_needs_same_org_and_a_quantization_tag():
    r = make()
    other = r.resolve("other/Foo-7B-FP8")
    assert other.status == "unknown" and "base id other/Foo-7B unknown" in other.reason
    instruct = r.resolve("acme/Foo-7B-Instruct")
    assert instruct.status == "unknown" and "no quantization suffix" in instruct.reason


# -- coverage, unknowns, speed ---------------------------------------------------------------


def test_unknown_carries_every_source_reason():
    f = make().resolve("nobody/Nothing")
    assert isinstance(f, ModelFacts) and f.status == "unknown" and f.source is None
    for part in (
        "no --hf-config-dir",
        "hub not allowed",
        "no curated entry",
        "not a vLLM tests example id (9.1.0, 9.0.0)",
        "no supported_models.md row",
        "no quantization suffix",
    ):
        assert part in f.reason


def test_no_trees_means_no_vllm_sources():
    f = ModelResolver(curated=NO_FILE).resolve("zai-org/GLM-4.5")
    assert f.status == "unknown" and "no vLLM tree given" in f.reason


def test_coverage_counts_distinct_ids_per_source():
    r = make(hf_config_dir=FIX / "hf_cache")
    cov = r.coverage(
        [
            "acme/Foo-7B",
            "acme/Foo-7B ",
            "zai-org/GLM-4.5",
            "zai-org/GLM-5.2",
            "acme/Curated-Only",
            "acme/Foo-7B-FP8",
            "nobody/Nothing",
        ]
    )
    assert cov["total"] == 6 and cov["resolved"] == 5
    assert cov["by_source"] == {
        "local": 1,
        "curated": 1,
        "vllm-tests": 1,
        "vllm-docs": 1,
        "derived": 1,
    }
    assert cov["unknown"] == ["nobody/Nothing"]
    assert "no curated entry" in cov["unknown_reasons"]["nobody/Nothing"]


def test_results_and_indexes_are_cached(monkeypatch):
    r = make()
    first = r.resolve("acme/Foo-7B")
    assert r.resolve("acme/foo-7b") is first  # ids are case-insensitive on the Hub
    tests_index = r.tests
    r.resolve("zai-org/GLM-5.2")
    assert r.tests is tests_index
