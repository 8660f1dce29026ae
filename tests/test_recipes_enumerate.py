"""enumerate_combinations over the real snapshot and the synthetic tree."""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

import pytest

from compat.recipes import Combination, Enumeration, enumerate_repo, load_repo, parse_serve_args

from tests.conftest import SNAPSHOT  # noqa: E402 (COMPAT_RECIPES_SNAPSHOT, as every test reads it)
MINIMAL = Path(__file__).resolve().parent / "fixtures" / "recipes" / "minimal"


_TIMING: dict[str, float] = {}


@pytest.fixture(scope="module")
def enumeration() -> Enumeration:
    if not (SNAPSHOT / "taxonomy.yaml").is_file():
        pytest.skip(f"recipes snapshot not found at {SNAPSHOT}")
    start = time.perf_counter()
    repo = load_repo(SNAPSHOT)
    _TIMING["load"] = time.perf_counter() - start
    result = enumerate_repo(repo)
    _TIMING["enumerate"] = time.perf_counter() - start - _TIMING["load"]
    return result


def _rows(e: Enumeration, recipe: str, **match: object) -> list[Combination]:
    return [
        c
        for c in e.combinations
        if c.recipe == f"models/{recipe}.yaml" and all(getattr(c, k) == v for k, v in match.items())
    ]


def _on(rows: list[Combination], profile: str) -> Combination:
    (row,) = [c for c in rows if profile in c.profiles]
    return row


def test_counts(enumeration: Enumeration) -> None:
    """Sanity of the whole enumeration; run with -s to see the numbers."""
    summary = enumeration.summary()
    print(
        f"\nrecipes snapshot: load {_TIMING['load']:.2f}s, "
        f"enumerate {_TIMING['enumerate']:.2f}s: {summary}"
    )
    assert summary["recipes"] == 173
    assert set(summary["by_platform"]) == {"cuda", "rocm"}
    assert summary["total"] == summary["hardware_collapsed"] + summary["per_profile"]
    assert 20_000 < summary["total"] < 40_000
    assert summary["by_platform"]["cuda"] > summary["by_platform"]["rocm"] > 1_000
    assert 0 < summary["gated"] < 200
    assert set(summary["by_source"]) == {"api", "ui", "api,ui"}
    assert summary["by_source"]["ui"] > summary["by_source"]["api,ui"] > summary["by_source"]["api"]
    assert summary["omni"] > 0
    assert set(summary["skipped_non_cuda_rocm_renders"]) <= {"Intel", "Google", "Huawei"}


def test_rows_are_distinct_and_collapsing_is_sound(enumeration: Enumeration) -> None:
    groups: dict[tuple, list[Combination]] = defaultdict(list)
    for c in enumeration.combinations:
        groups[(c.recipe, c.variant, c.strategy, c.feature, c.mode, c.platform)].append(c)
    for key, rows in groups.items():
        if any(c.hardware == "" for c in rows):
            assert len(rows) == 1, key
        else:
            assert len({(c.argvs, c.docker_pin, c.source) for c in rows}) > 1, key
            assert all(c.profiles == (c.hardware,) for c in rows), key
            per_profile = [(c.hardware, c.source) for c in rows]
            assert len(per_profile) == len(set(per_profile)), key
            for hw in {c.hardware for c in rows}:
                sources = sorted(c.source for c in rows if c.hardware == hw)
                assert sources in (["api"], ["ui"], ["api,ui"], ["api", "ui"]), (key, hw)
                if sources == ["api", "ui"]:  # kept apart only when the builder differs
                    api, ui = (next(c for c in rows if (c.hardware, c.source) == (hw, s))
                               for s in ("api", "ui"))
                    assert not set(api.argvs) <= set(ui.argvs), (key, hw)


def test_api_rows_are_base_rows(enumeration: Enumeration) -> None:
    api = [c for c in enumeration.combinations if "api" in c.source.split(",")]
    assert api and all(c.feature == "" and not c.omni for c in api)


def test_snapshot_has_no_problems_and_every_argv_parses(enumeration: Enumeration) -> None:
    assert [c for c in enumeration.combinations if c.problems] == []
    for c in enumeration.combinations[::50]:
        for _, argv in c.argvs:
            assert argv[:2] == ("vllm", "serve")
            assert parse_serve_args(argv).model == c.model_id


def test_glm52_tp_pp_b200_mtp_row(enumeration: Enumeration) -> None:
    rows = _rows(enumeration, "zai-org/GLM-5.2", variant="default", strategy="multi_node_tp_pp")
    mtp = _on([c for c in rows if (c.feature, c.mode) == ("spec_decoding", "mtp")], "b200")
    assert mtp.platform == "cuda" and not mtp.gated and mtp.nodes == 2
    assert mtp.model_id == "zai-org/GLM-5.2-FP8"
    assert mtp.source == "ui"  # spec_decoding is opt-in: the JSON API never renders it on
    (_, argv), (worker, worker_argv) = mtp.argvs
    assert "--tensor-parallel-size 8 --pipeline-parallel-size 2" in " ".join(argv)
    assert worker == "worker 1"
    assert "--nnodes 2 --node-rank 1 --master-addr $HEAD_IP --headless" in " ".join(worker_argv)
    assert parse_serve_args(argv).speculative_config == {
        "method": "mtp",
        "num_speculative_tokens": 5,
    }
    assert (mtp.vllm_pin, mtp.docker_pin) == ("0.23.0", "0.23.0")
    base = _on([c for c in rows if c.feature == ""], "b200")
    assert parse_serve_args(base.argvs[0][1]).speculative_config is None  # spec_decoding is opt-in
    modes = {c.mode for c in rows if c.feature == "spec_decoding"}
    assert modes == {"mtp", "dspark"}
    nvfp4_modes = {
        c.mode
        for c in _rows(enumeration, "zai-org/GLM-5.2", variant="nvfp4", feature="spec_decoding")
    }
    assert nvfp4_modes == {"mtp"}  # dspark is limited to the default variant
    rocm = _rows(enumeration, "zai-org/GLM-5.2", variant="default", platform="rocm")
    assert {c.docker_pin for c in rocm} == {"nightly"}


def test_kimi_k3_spec_decoding_is_gated_under_tp_pp(enumeration: Enumeration) -> None:
    rows = _rows(
        enumeration, "moonshotai/Kimi-K3", strategy="multi_node_tp_pp", feature="spec_decoding"
    )
    assert rows and all(c.gated for c in rows)
    for c in rows:  # rendered as if the gate were absent, so a verdict can judge the gate
        assert parse_serve_args(c.argvs[0][1]).speculative_config["method"] == "dspark"
    other = _rows(
        enumeration, "moonshotai/Kimi-K3", strategy="multi_node_tp", feature="spec_decoding"
    )
    assert other and not any(c.gated for c in other)
    base = _rows(enumeration, "moonshotai/Kimi-K3", strategy="multi_node_tp_pp", feature="")
    assert base and not any(c.gated for c in base)
    assert not _rows(enumeration, "moonshotai/Kimi-K3", strategy="multi_node_dep", hardware="h200")


def test_minimax_m25_mi300x_multi_node_dep_keeps_amd_tp(enumeration: Enumeration) -> None:
    rows = _rows(
        enumeration,
        "MiniMaxAI/MiniMax-M2.5",
        variant="default",
        strategy="multi_node_dep",
        feature="",
    )
    row = _on(rows, "mi300x")
    assert row.platform == "rocm"
    args = parse_serve_args(row.argvs[0][1])
    assert (args.tensor_parallel_size, args.data_parallel_size) == (2, 16)


def test_glm45_dotted_speculative_config_parses(enumeration: Enumeration) -> None:
    rows = _rows(
        enumeration, "zai-org/GLM-4.5", variant="default", feature="spec_decoding", platform="cuda"
    )
    assert rows
    for row in rows:
        argv = row.argvs[0][1]
        assert "--speculative-config.method" in argv
        assert parse_serve_args(argv).speculative_config["method"] == "mtp"


def test_pins_prefer_the_variant(enumeration: Enumeration) -> None:
    flash = _rows(enumeration, "deepseek-ai/DeepSeek-V4-Flash", variant="default")
    assert {c.vllm_pin for c in flash} == {"0.25.0"}
    assert {
        c.vllm_pin for c in _rows(enumeration, "deepseek-ai/DeepSeek-V4-Flash", variant="fp8")
    } == {"0.20.0"}
    assert {c.vllm_pin for c in _rows(enumeration, "Qwen/Qwen3.8-2.4T-A95B")} == {"nightly"}


def test_variant_default_modes_force_feature_on_in_base_row(enumeration: Enumeration) -> None:
    rows = _rows(
        enumeration,
        "deepseek-ai/DeepSeek-V4-Flash",
        variant="default",
        strategy="single_node_tp",
        feature="",
    )
    assert rows
    for row in rows:
        assert parse_serve_args(row.argvs[0][1]).speculative_config["method"] == "dspark"


def test_text_only_drops_encoder_parallel(enumeration: Enumeration) -> None:
    k25 = "moonshotai/Kimi-K2.5"
    text = _on(
        _rows(enumeration, k25, variant="default", strategy="single_node_tp", feature="text_only"),
        "h200",
    )
    args = parse_serve_args(text.argvs[0][1])
    assert args.language_model_only and args.mm_encoder_tp_mode is None
    base = _on(
        _rows(enumeration, k25, variant="default", strategy="single_node_tp", feature=""), "h200"
    )
    assert parse_serve_args(base.argvs[0][1]).mm_encoder_tp_mode == "data"
    gb200 = _on(
        _rows(enumeration, k25, variant="default", strategy="single_node_tp", feature=""), "gb200"
    )
    assert parse_serve_args(gb200.argvs[0][1]).mm_encoder_tp_mode is None  # opt-in on gb200 only


def test_pd_cluster_rows_carry_both_roles(enumeration: Enumeration) -> None:
    rows = _rows(
        enumeration, "zai-org/GLM-5.2", variant="default", strategy="pd_cluster", feature=""
    )
    assert rows
    for row in rows:
        roles = [role for role, _ in row.argvs]
        assert [r for r in roles if " worker " not in r] == ["prefill", "decode"]


def test_pd_pools_by_source_glm52_on_b300(enumeration: Enumeration) -> None:
    """The API co-locates both roles on one node when it holds the model twice; the builder
    gives each role its own node."""
    rows = _rows(
        enumeration, "zai-org/GLM-5.2", variant="default", strategy="pd_cluster", feature=""
    )
    on_b300 = {c.source: c for c in rows if c.hardware == "b300"}
    assert set(on_b300) == {"api", "ui"}
    api = {role: parse_serve_args(a) for role, a in on_b300["api"].argvs}
    ui = {role: parse_serve_args(a) for role, a in on_b300["ui"].argvs}
    assert (api["prefill"].tensor_parallel_size, api["decode"].tensor_parallel_size) == (4, 4)
    assert (ui["prefill"].tensor_parallel_size, ui["decode"].tensor_parallel_size) == (8, 8)


def test_kimi_k3_pd_on_h100_spans_four_nodes_per_pool(enumeration: Enumeration) -> None:
    (row,) = [
        c
        for c in _rows(enumeration, "moonshotai/Kimi-K3", variant="default", strategy="pd_cluster",
                       feature="")
        if "h100" in c.profiles
    ]
    assert row.source == "api,ui"  # the API publishes node 0 of each pool; the builder all four
    roles = dict(row.argvs)
    assert list(roles) == ["prefill", "prefill worker 1", "prefill worker 2", "prefill worker 3",
                           "decode", "decode worker 1", "decode worker 2", "decode worker 3"]
    head = " ".join(roles["prefill"])
    assert "--tensor-parallel-size 32 --enable-expert-parallel --nnodes 4 --node-rank 0" in head
    assert "--node-rank 3 --master-addr $PREFILL_NODE_1 --headless" in " ".join(
        roles["prefill worker 3"])
    decode = parse_serve_args(roles["decode worker 2"])
    start = decode.last("--data-parallel-start-rank").value
    assert (decode.data_parallel_size, start) == (32, "16")


def test_a_feature_switched_on_goes_last(enumeration: Enumeration) -> None:
    """The builder appends a feature the user turns on after the default ones."""
    (row,) = [
        c
        for c in _rows(enumeration, "Qwen/Qwen3.5-122B-A10B", variant="default",
                       strategy="single_node_tp", feature="spec_decoding")
        if "h200" in c.profiles
    ]
    argv = row.argvs[0][1]
    assert argv.index("--speculative-config") > argv.index("--mm-encoder-tp-mode")


def test_omni_rows(enumeration: Enumeration) -> None:
    omni = [c for c in enumeration.combinations if c.omni]
    assert {c.feature for c in omni} == {""}
    assert all(c.argvs[0][1][-1] == "--omni" for c in omni)
    assert {c.strategy for c in _rows(enumeration, "Wan-AI/Wan2.2-T2V-A14B-Diffusers")} == {""}
    assert {c.strategy for c in _rows(enumeration, "zai-org/GLM-Image")} == {"single_node_tp"}
    assert not any(c.omni for c in _rows(enumeration, "zai-org/GLM-5.2"))


def test_fixture_tree_problems_ride_on_rows() -> None:
    e = enumerate_repo(load_repo(MINIMAL))
    gadget = [c for c in e.combinations if c.recipe == "models/acme/Gadget.yaml"]
    assert gadget and all(c.problems for c in gadget)
    spec_error = 'argument --speculative-config/-sc: Value {"method": "mtp", cannot be converted to json.loads'
    assert all(any(p.startswith(spec_error) for p in c.problems) for c in gadget)
    fancy = [c for c in gadget if c.feature == "fancy"]
    assert all(any("features.fancy.args[2]" in p for p in c.problems) for c in fancy)
    assert {c.strategy for c in gadget} == {
        "single_node_tp",
        "multi_node_dep",
    }  # the unknown id is skipped
    widget = [c for c in e.combinations if c.recipe == "models/acme/Widget.yaml"]
    assert "rtx_box" in {p for c in widget if c.variant == "default" for p in c.profiles}
    assert "rtx_box" not in {
        p for c in widget if c.variant == "small" for p in c.profiles
    }  # does not fit
    assert "xeon6" not in {p for c in widget for p in c.profiles}  # restricted and undeclared
    assert {c.strategy for c in widget if "rtx_box" in c.profiles} == {
        "single_node_tp"
    }  # not scalable
    assert not [
        c for c in widget if c.platform == "rocm" and c.mode == "eagle"
    ]  # mode unsupported on amd
