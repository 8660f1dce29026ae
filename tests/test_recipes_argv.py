"""parse_serve_args reads argv the way vLLM's FlexibleArgumentParser + argparse do."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compat.recipes.argv import SHORT_FLAGS, human_readable_int, parse_serve_args


def test_model_is_first_positional_with_or_without_vllm_serve() -> None:
    assert parse_serve_args(["vllm", "serve", "org/m", "-tp", "2"]).model == "org/m"
    assert parse_serve_args(["serve", "org/m"]).model == "org/m"
    assert parse_serve_args(["org/m", "--tensor-parallel-size", "4"]).tensor_parallel_size == 4


def test_model_from_model_flag_when_no_positional() -> None:
    args = parse_serve_args(["vllm", "serve", "--model", "org/m", "-tp", "2"])
    assert args.model == "org/m"


def test_equals_form_and_space_form_agree() -> None:
    a = parse_serve_args(["m", "--tensor-parallel-size=8", "--pipeline-parallel-size", "2"])
    assert (a.tensor_parallel_size, a.pipeline_parallel_size) == (8, 2)
    use = a.last("--tensor-parallel-size")
    assert use is not None and use.raw == "--tensor-parallel-size=8" and use.value == "8"


def test_underscores_normalised_in_flag_name_only() -> None:
    args = parse_serve_args(["m", "--tensor_parallel_size", "4", "--tool_call_parser=some_parser"])
    assert args.tensor_parallel_size == 4
    assert args.tool_call_parser == "some_parser"  # the value keeps its underscores
    assert [u.flag for u in args.tokens] == ["--tensor-parallel-size", "--tool-call-parser"]


@pytest.mark.parametrize("short,long", sorted(SHORT_FLAGS.items()))
def test_every_short_alias_maps_to_its_long_flag(short: str, long: str) -> None:
    args = parse_serve_args(
        ["m", short, "1"] if long not in ("--enable-expert-parallel",) else ["m", short]
    )
    use = args.tokens[0]
    assert use.flag == long and use.is_short and use.raw == short


def test_short_aliases_set_sizes() -> None:
    args = parse_serve_args(
        ["m", "-tp", "4", "-pp", "2", "-dp", "3", "-dcp", "2", "-ep", "-n", "2"]
    )
    assert args.tensor_parallel_size == 4
    assert args.pipeline_parallel_size == 2
    assert args.data_parallel_size == 3
    assert args.decode_context_parallel_size == 2
    assert args.enable_expert_parallel is True
    assert args.nnodes == 2


def test_last_occurrence_wins_like_argparse() -> None:
    args = parse_serve_args(["m", "--tensor-parallel-size", "8", "-tp", "2"])
    assert args.tensor_parallel_size == 2
    assert len(args.uses("--tensor-parallel-size")) == 2


def test_no_prefix_turns_booleans_off() -> None:
    args = parse_serve_args(["m", "--enable-expert-parallel", "--no-enable-expert-parallel"])
    assert args.enable_expert_parallel is False
    use = args.tokens[-1]
    assert use.flag == "--enable-expert-parallel" and use.negated
    on = parse_serve_args(["m", "--no-enable-expert-parallel", "-ep"])
    assert on.enable_expert_parallel is True


def test_boolean_flags_do_not_swallow_the_next_token() -> None:
    args = parse_serve_args(
        ["vllm", "serve", "--trust-remote-code", "org/m", "--enable-auto-tool-choice"]
    )
    assert args.model == "org/m"
    assert args.enable_auto_tool_choice is True


def test_unknown_flag_pairs_with_following_value_like_the_site() -> None:
    args = parse_serve_args(
        ["m", "--max-num-seqs", "8", "--some-new-switch", "--max-model-len", "-1"]
    )
    assert args.last("--max-num-seqs").value == "8"
    assert args.last("--some-new-switch").value is None
    assert args.last("--max-model-len").value == "-1"  # negative numbers are values, as in argparse


def test_json_speculative_config() -> None:
    args = parse_serve_args(
        ["m", "--speculative-config", '{"method":"mtp","num_speculative_tokens":5}']
    )
    assert args.speculative_config == {"method": "mtp", "num_speculative_tokens": 5}
    assert args.speculative_config_error is None


def test_dotted_speculative_config_glm45_style() -> None:
    args = parse_serve_args(
        [
            "m",
            "--speculative-config.method",
            "mtp",
            "--speculative-config.num_speculative_tokens",
            "1",
        ]
    )
    assert args.speculative_config == {"method": "mtp", "num_speculative_tokens": 1}
    assert [(u.flag, u.subkey) for u in args.tokens] == [
        ("--speculative-config", "method"),
        ("--speculative-config", "num_speculative_tokens"),
    ]


def test_dotted_with_underscored_flag_and_short_alias() -> None:
    args = parse_serve_args(
        ["m", "--attention_config.backend", "FLASHMLA", "-cc.cudagraph_mode=FULL_DECODE_ONLY"]
    )
    assert args.json_config("--attention-config") == ({"backend": "FLASHMLA"}, None)
    assert args.json_config("--compilation-config") == (
        {"cudagraph_mode": "FULL_DECODE_ONLY"},
        None,
    )
    cc = args.tokens[1]
    assert cc.flag == "--compilation-config" and cc.is_short and cc.subkey == "cudagraph_mode"


def test_dotted_nested_keys_lists_and_human_readable_ints() -> None:
    args = parse_serve_args(
        [
            "m",
            "-cc.pass_config.fuse_rope_kvcache=True",
            "-cc.custom_ops+",
            "+a,-b",
            "-cc.custom_ops+=c",
            "-cc.max_capture_size",
            "1k",
        ]
    )
    value, error = args.json_config("--compilation-config")
    assert error is None
    assert value == {
        "pass_config": {"fuse_rope_kvcache": "True"},  # 'True' is not JSON: kept as a string
        "custom_ops": ["+a", "-b", "c"],
        "max_capture_size": 1000,
    }


def test_dotted_object_replaces_explicit_json_because_vllm_appends_it_last() -> None:
    args = parse_serve_args(
        [
            "m",
            "--speculative-config.num_speculative_tokens",
            "3",
            "--speculative-config",
            '{"method":"eagle"}',
        ]
    )
    assert args.speculative_config == {"num_speculative_tokens": 3}


def test_spec_shorthands_merge_and_clash() -> None:
    merged = parse_serve_args(["m", "--spec-method", "ngram", "--spec-tokens", "4"])
    assert merged.speculative_config == {"method": "ngram", "num_speculative_tokens": 4}
    clash = parse_serve_args(["m", "-sc", '{"method":"mtp"}', "--spec-method", "eagle"])
    assert clash.speculative_config == {"method": "mtp"}
    assert (
        clash.speculative_config_error
        == "--spec-method and --speculative-config['method'] are mutually exclusive"
    )


def test_malformed_speculative_json_is_recorded_not_raised() -> None:
    bad = '{"method": "mtp",'
    args = parse_serve_args(["m", "--speculative-config", bad])
    assert args.speculative_config is None
    with pytest.raises(json.JSONDecodeError) as real:
        json.loads(bad)
    assert args.speculative_config_error == (
        f"argument --speculative-config/-sc: Value {bad} cannot be converted to json.loads "
        f"({real.value})"
    )
    assert args.speculative_config_error in args.errors


def test_speculative_config_must_be_an_object() -> None:
    args = parse_serve_args(["m", "--speculative-config", "[1, 2]"])
    assert args.speculative_config is None
    assert "JSON object" in (args.speculative_config_error or "")


def test_none_and_empty_json_mean_unset() -> None:
    assert parse_serve_args(["m", "--speculative-config", "None"]).speculative_config is None
    assert parse_serve_args(["m", "--speculative-config", "None"]).speculative_config_error is None


def test_kv_transfer_config_and_parsers() -> None:
    args = parse_serve_args(
        [
            "m",
            "--kv-transfer-config",
            '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}',
            "--tool-call-parser",
            "glm47",
            "--enable-auto-tool-choice",
            "--reasoning-parser",
            "glm45",
            "--language-model-only",
            "--mm-encoder-tp-mode",
            "data",
        ]
    )
    assert args.kv_transfer_config == {"kv_connector": "NixlConnector", "kv_role": "kv_producer"}
    assert (args.tool_call_parser, args.reasoning_parser, args.mm_encoder_tp_mode) == (
        "glm47",
        "glm45",
        "data",
    )
    assert args.enable_auto_tool_choice and args.language_model_only


def test_data_parallel_external_lb_from_rank_or_flag() -> None:
    assert parse_serve_args(["m", "--data-parallel-rank", "1"]).data_parallel_external_lb
    assert parse_serve_args(["m", "-dpn", "0"]).data_parallel_external_lb
    assert parse_serve_args(["m", "-dpe"]).data_parallel_external_lb
    assert not parse_serve_args(["m", "--data-parallel-hybrid-lb"]).data_parallel_external_lb


def test_optimization_level_short_forms() -> None:
    for argv in (["m", "-O3"], ["m", "-O", "3"], ["m", "-O=3"]):
        use = parse_serve_args(argv).tokens[0]
        assert (use.flag, use.value) == ("--optimization-level", "3"), argv


def test_invalid_int_and_missing_values_are_errors() -> None:
    args = parse_serve_args(["m", "-tp", "eight", "--pipeline-parallel-size"])
    assert args.tensor_parallel_size == 1 and args.pipeline_parallel_size == 1
    assert "argument --tensor-parallel-size/-tp: invalid int value: 'eight'" in args.errors
    assert "argument --pipeline-parallel-size/-pp: expected one argument" in args.errors


def test_stray_positionals_and_unknown_short_flags_are_errors() -> None:
    args = parse_serve_args(["m", "extra", "-zz", "1"])
    assert "unrecognized arguments: extra" in args.errors
    assert "unrecognized arguments: -zz" in args.errors


def test_values_vllm_would_mistake_for_dotted_flags_are_flagged() -> None:
    args = parse_serve_args(["m", "--some-threshold", "-0.5"])
    assert any("dotted-argument rewrite" in e for e in args.errors)


def test_human_readable_int_matches_vllm() -> None:
    assert human_readable_int("25.6k") == 25600
    assert human_readable_int("1K") == 1024
    assert human_readable_int("7") == 7
    with pytest.raises(ValueError):
        human_readable_int("1.5K")


_TOKENS = st.one_of(
    st.text(max_size=12),
    st.sampled_from(
        [
            "-",
            "--",
            "--=",
            "-.",
            "--.",
            "--x.",
            "-O",
            "-O=",
            "-tp",
            "-sc.method",
            "--speculative-config",
            "--speculative-config.a.b+",
            "--no-",
            "--no-enable-expert-parallel",
            "--spec-tokens",
            "{",
            "[" * 50,
            "9" * 400 + "k",
            "-1",
            "-0.5",
            "None",
            "",
        ]
    ),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_TOKENS, max_size=12))
def test_fuzz_never_raises(argv: list[str]) -> None:
    args = parse_serve_args(argv)
    assert isinstance(args.errors, list)
    assert all(u.flag for u in args.tokens)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.one_of(st.integers(), st.none(), st.binary(max_size=4)), max_size=5))
def test_fuzz_non_string_items_never_raise(argv: list[object]) -> None:
    args = parse_serve_args(argv)  # type: ignore[arg-type]
    assert len(args.errors) >= sum(not isinstance(a, str) for a in argv)
