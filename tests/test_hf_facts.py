"""Reading config facts the way vLLM does, and the id helpers."""

from __future__ import annotations

import pytest

from compat.hf.facts import facts_from_config, num_experts_of, text_config_of
from compat.hf.ids import base_candidates, norm_name, split_id


def facts(config):
    return facts_from_config("org/m", config, source="local", provenance="org/m/config.json")


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({}, 0),
        ({"num_experts": 8}, 8),
        ({"moe_num_experts": 16}, 16),
        ({"n_routed_experts": 256, "num_local_experts": 8}, 256),  # first alias present wins
        ({"num_experts": 4, "n_routed_experts": 256}, 4),
        ({"moe_num_experts": [64, 64]}, 64),  # Ernie VL: [0] of a list
        (
            {
                "num_experts": None,
                "block_configs": [
                    {"block_type": "moe", "n_routed_experts": 32},
                    {"block_type": "mamba"},
                    {"block_type": "moe", "n_routed_experts": 64},
                ],
            },
            64,
        ),
        ({"num_experts": 0, "block_configs": [{"block_type": "attention"}]}, 0),
    ],
)
def test_num_experts_follows_vllm(config, expected):
    assert num_experts_of(config) == expected


def test_text_config_is_the_single_known_subconfig():
    assert text_config_of({"text_config": {"a": 1}, "vision_config": {}}) == {"a": 1}
    flat = {"num_attention_heads": 4}
    assert text_config_of(flat) is flat
    ambiguous = {"text_config": {"a": 1}, "decoder": {"b": 2}}
    assert text_config_of(ambiguous) is ambiguous
    assert text_config_of({"llm_config": {"c": 3}}) == {"c": 3}
    # a standard key wins over the remote-code spellings
    assert text_config_of({"text_config": {"a": 1}, "llm_config": {"c": 3}}) == {"a": 1}


def test_facts_from_deepseek_like_config():
    f = facts(
        {
            "architectures": ["DeepseekV32ForCausalLM"],
            "model_type": "deepseek_v32",
            "num_nextn_predict_layers": 1,
            "n_routed_experts": 256,
            "kv_lora_rank": 512,
            "num_attention_heads": 128,
        }
    )
    assert f.resolved and not f.inferred
    assert f.architecture == "DeepseekV32ForCausalLM"
    assert (f.model_type, f.text_model_type) == ("deepseek_v32", "deepseek_v32")
    assert (f.num_experts, f.is_moe, f.use_mla) == (256, True, True)
    assert f.num_nextn_predict_layers == 1
    assert f.num_key_value_heads == 128  # no GQA key: KV heads = attention heads
    assert f.config["model_type"] == "deepseek_v32"


def test_facts_from_multimodal_config_read_the_text_config():
    f = facts(
        {
            "architectures": ["XForConditionalGeneration"],
            "model_type": "x",
            "text_config": {
                "model_type": "x_text",
                "num_attention_heads": 40,
                "num_key_value_heads": 8,
                "num_experts": 0,
            },
        }
    )
    assert (f.model_type, f.text_model_type) == ("x", "x_text")
    assert (f.num_attention_heads, f.num_key_value_heads) == (40, 8)
    assert (f.num_experts, f.is_moe, f.use_mla) == (0, False, False)
    assert f.num_nextn_predict_layers is None


def test_config_without_architectures_is_noted():
    f = facts({"model_type": "x"})
    assert f.architectures == () and f.architecture is None
    assert any("architectures" in n for n in f.notes)


def test_to_row_is_flat_and_hashable_facts():
    f = facts({"architectures": ["A"], "model_type": "a"})
    row = f.to_row()
    assert "config" not in row and row["architectures"] == ["A"]
    hash(f)  # the config dict does not take part in hashing


@pytest.mark.parametrize(
    ("model_id", "bases"),
    [
        ("zai-org/GLM-5.2-FP8", ["zai-org/GLM-5.2"]),
        ("Qwen/Qwen3.5-27B-GPTQ-Int4", ["Qwen/Qwen3.5-27B"]),
        ("RedHatAI/gemma-4-31B-it-FP8-dynamic", ["RedHatAI/gemma-4-31B-it"]),
        ("RedHatAI/Hy3-NVFP4-FP8", ["RedHatAI/Hy3-NVFP4", "RedHatAI/Hy3"]),
        ("org/Llama-3.2-1B-Instruct-quantized.w8a8", ["org/Llama-3.2-1B-Instruct"]),
        ("google/gemma-4-E2B-it-qat-mobile-ct", ["google/gemma-4-E2B-it"]),
        ("amd/gpt-oss-120b-w-mxfp4-a-fp8", ["amd/gpt-oss-120b"]),
        ("org/Model-AWQ", ["org/Model"]),
        ("org/Model-MXFP4", ["org/Model"]),
        # not quantization tags: the model itself changes, or these are the base weights
        ("org/Model-Instruct", []),
        ("org/Model-BF16", []),
        ("org/Model-2507", []),
        ("org/FP8", []),
    ],
)
def test_base_candidates_strip_only_quantization_tags(model_id, bases):
    assert [b for b, _ in base_candidates(model_id)] == bases


def test_id_helpers():
    assert split_id("org/name") == ("org", "name")
    assert split_id("bare") == ("", "bare")
    assert norm_name(" Kimi K2_5 ") == "kimi-k2-5"
