"""synthesize() rebuilds the site's argv: order, override precedence, dedupe, strategy rules."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from compat.errors import UserError
from compat.recipes import load_repo, parse_serve_args
from compat.recipes.features import default_features, with_feature
from compat.recipes.repo import Recipe, RecipesRepo
from compat.recipes.requirements import DEFAULT_PATH, default_requirements, load_requirements
from compat.recipes.sizing import api_sizing
from compat.recipes.synthesis import dedupe_args, synthesize

from tests.conftest import SNAPSHOT  # noqa: E402 (COMPAT_RECIPES_SNAPSHOT, as every test reads it)
MINIMAL = Path(__file__).resolve().parent / "fixtures" / "recipes" / "minimal"


@pytest.fixture(scope="module")
def snap() -> RecipesRepo:
    if not (SNAPSHOT / "taxonomy.yaml").is_file():
        pytest.skip(f"recipes snapshot not found at {SNAPSHOT}")
    return load_repo(SNAPSHOT)


@pytest.fixture(scope="module")
def mini() -> RecipesRepo:
    return load_repo(MINIMAL)


def api_sizing_for(repo: RecipesRepo, recipe: str, variant: str, strategy: str, hw: str):
    r = repo.recipes[recipe]
    return api_sizing(r, r.variants[variant], repo.strategies[strategy], repo.hardware[hw])


def _argv(
    repo: RecipesRepo, recipe: str, variant: str, strategy: str, hw: str, feature: str = "", **kw
):
    r = repo.recipes[recipe]
    profile = repo.hardware[hw]
    enabled = default_features(r, r.variants[variant], profile)
    if feature:
        enabled = with_feature(r, enabled, feature)
    return synthesize(r, variant, repo.strategies[strategy], profile, enabled, **kw)


# --- dedupe -------------------------------------------------------------------------


def test_dedupe_keeps_last_occurrence_at_its_last_position() -> None:
    args = [
        "--kv-cache-dtype",
        "fp8_e4m3",
        "--tensor-parallel-size",
        "8",
        "--kv-cache-dtype",
        "fp8",
    ]
    assert dedupe_args(args) == ["--tensor-parallel-size", "8", "--kv-cache-dtype", "fp8"]


def test_dedupe_is_literal_and_pairs_flags_with_non_dash_values() -> None:
    args = [
        "--load_format",
        "a",
        "--load-format",
        "b",
        "--x=1",
        "--x=2",
        "--flag",
        "--flag",
        "pos",
        "",
    ]
    # underscore and '=' spellings are distinct strings; '--flag pos' pairs; '' is filtered out
    assert dedupe_args(args) == [
        "--load_format",
        "a",
        "--load-format",
        "b",
        "--x=1",
        "--x=2",
        "--flag",
        "pos",
    ]


# --- strategy requirements data -----------------------------------------------------


def test_requirements_file_is_schema_valid_and_names_its_source() -> None:
    req = load_requirements(DEFAULT_PATH)
    assert req.source["commit"] == "8959cf6"
    assert req.source["file"] == "src/lib/command-synthesis.js"
    for name, spec in req.raw["branches"].items():
        assert spec["provenance"], name


def test_broken_requirements_file_is_a_user_error(tmp_path: Path) -> None:
    data = yaml.safe_load(DEFAULT_PATH.read_text())
    data["branches"]["multi_node_tp_pp"]["flags"][0]["value"] = "tp_times_two"
    bad = tmp_path / "strategy_requirements.yaml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(UserError) as err:
        load_requirements(bad)
    assert err.value.where == "strategy_requirements.yaml: branches.multi_node_tp_pp.flags.0.value"


def test_requirements_symbols_must_be_computed_by_their_branch(tmp_path: Path) -> None:
    data = yaml.safe_load(DEFAULT_PATH.read_text())
    data["branches"]["multi_node_tp"]["flags"][0]["value"] = "pool_gpus"
    bad = tmp_path / "strategy_requirements.yaml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(UserError) as err:
        load_requirements(bad)
    assert err.value.where == "strategy_requirements.yaml: branches.multi_node_tp.flags.0"


def _size(value: object, symbols: dict[str, int]) -> int:
    return value if isinstance(value, int) else symbols[str(value)]


def test_every_snapshot_strategy_renders_the_sizes_the_data_declares(snap: RecipesRepo) -> None:
    """A bare recipe on b200 (G=8, N=2): the parsed argv has exactly the declared layout."""
    req = default_requirements()
    assert set(req.strategies) == set(snap.strategies)
    profile = snap.hardware["b200"]
    symbols = {
        "G": 8,
        "N": 2,
        "NG": 16,
        "single_node_tp": 8,
        "pool_gpus": 8,
        "role_tp": 1,
        "dp_local": 8,
        "dp_size": 8,
    }
    for sid, spec in req.strategies.items():
        cases = (
            [(None, spec["sizes"])]
            if "sizes" in spec
            else [(p, s["sizes"]) for p, s in spec["pools"].items()]
        )
        for pool, sizes in cases:
            data = {
                "model": {"model_id": "acme/Bare"},
                "variants": {"default": {"precision": "bf16"}},
                "compatible_strategies": [
                    sid,
                    "single_node_tp",
                    "single_node_tep",
                    "single_node_dep",
                ],
                "strategy_overrides": {"pd_cluster": {"prefill": {"parallelism": pool}}}
                if pool
                else {},
            }
            result = synthesize(
                Recipe("models/acme/Bare.yaml", data), "default", snap.strategies[sid], profile, []
            )
            role_argv = dict(result.argvs)["prefill" if pool else ""]
            args = parse_serve_args(role_argv)
            assert args.errors == [], (sid, pool)
            got = (args.tensor_parallel_size, args.pipeline_parallel_size, args.data_parallel_size)
            want = tuple(_size(sizes[k], symbols) for k in ("tp", "pp", "dp"))
            assert got == want, (sid, pool, role_argv)
            assert args.enable_expert_parallel is sizes["expert_parallel"], (sid, pool)
            if "dp_local" in sizes:
                assert args.last("--data-parallel-size-local").value == str(
                    _size(sizes["dp_local"], symbols)
                )


# --- the real recipes ---------------------------------------------------------------


def test_glm52_tp_pp_on_b200_with_mtp(snap: RecipesRepo) -> None:
    result = _argv(
        snap, "models/zai-org/GLM-5.2.yaml", "default", "multi_node_tp_pp", "b200", "spec_decoding"
    )
    (role, argv), (worker, worker_argv) = result.argvs
    assert role == "" and argv[:3] == ("vllm", "serve", "zai-org/GLM-5.2-FP8")
    joined = " ".join(argv)
    assert "--tensor-parallel-size 8 --pipeline-parallel-size 2" in joined
    assert "--nnodes 2 --node-rank 0 --master-addr $HEAD_IP" in joined
    assert "--headless" not in argv
    assert worker == "worker 1"
    assert "--nnodes 2 --node-rank 1 --master-addr $HEAD_IP --headless" in " ".join(worker_argv)
    spec = parse_serve_args(argv).speculative_config
    assert parse_serve_args(worker_argv).speculative_config == spec
    assert parse_serve_args(argv).speculative_config == {
        "method": "mtp",
        "num_speculative_tokens": 5,
    }
    assert result.node_count == 2


def test_glm52_hopper_override_shadows_base_kv_cache_dtype(snap: RecipesRepo) -> None:
    ((_, argv),) = _argv(
        snap, "models/zai-org/GLM-5.2.yaml", "default", "single_node_tp", "h200"
    ).argvs
    assert list(argv[3:7]) == ["--tensor-parallel-size", "8", "--kv-cache-dtype", "fp8"]


def test_minimax_m25_amd_override_keeps_tp2_after_dep_sizes(snap: RecipesRepo) -> None:
    (_, argv), (_, worker) = _argv(
        snap, "models/MiniMaxAI/MiniMax-M2.5.yaml", "default", "multi_node_dep", "mi300x"
    ).argvs
    joined = " ".join(argv)
    assert (
        "--data-parallel-size 16 --data-parallel-size-local 8 --data-parallel-address $HEAD_IP"
        in joined
    )
    args = parse_serve_args(argv)
    assert (args.tensor_parallel_size, args.data_parallel_size) == (2, 16)  # 32 ranks on 16 GPUs
    assert parse_serve_args(worker).last("--data-parallel-start-rank").value == "8"


def test_kimi_k3_floor_sets_node_count_and_pd_roles(snap: RecipesRepo) -> None:
    k3 = "models/moonshotai/Kimi-K3.yaml"
    gb200 = _argv(snap, k3, "default", "multi_node_tp_pp", "gb200")
    assert gb200.node_count == 4  # strategy_min_gpus 16 on 4-GPU trays
    assert "--tensor-parallel-size 4 --pipeline-parallel-size 4" in " ".join(gb200.argvs[0][1])
    # 1680 GB on 1440 GB nodes: two nodes per pool, by VRAM (builder) and by pickPdNodes (API)
    for sizing in ("ui", "api"):
        api = api_sizing_for(snap, k3, "default", "pd_cluster", "b200")
        pools = None if sizing == "ui" else api
        pd = dict(_argv(snap, k3, "default", "pd_cluster", "b200", sizing=pools).argvs)
        assert set(pd) == (
            {"prefill", "prefill worker 1", "decode", "decode worker 1"}
            if sizing == "ui" else {"prefill", "decode"}
        )
        prefill, decode = parse_serve_args(pd["prefill"]), parse_serve_args(pd["decode"])
        assert (prefill.tensor_parallel_size, prefill.enable_expert_parallel) == (16, True)  # tep
        assert (decode.tensor_parallel_size, decode.data_parallel_size) == (1, 16)  # dep, tp: 1
        assert prefill.kv_transfer_config["kv_role"] == "kv_producer"
        assert decode.kv_transfer_config["kv_role"] == "kv_consumer"


def test_feature_gate_drops_args_unless_ungated(snap: RecipesRepo) -> None:
    k3 = "models/moonshotai/Kimi-K3.yaml"
    gated = _argv(snap, k3, "default", "multi_node_tp_pp", "b200", "spec_decoding")
    assert parse_serve_args(gated.argvs[0][1]).speculative_config is None
    forced = _argv(
        snap, k3, "default", "multi_node_tp_pp", "b200", "spec_decoding", ungated=["spec_decoding"]
    )
    assert parse_serve_args(forced.argvs[0][1]).speculative_config["method"] == "dspark"


def test_mode_hardware_override_swaps_args(snap: RecipesRepo) -> None:
    flash = "models/deepseek-ai/DeepSeek-V4-Flash.yaml"
    hopper = _argv(
        snap,
        flash,
        "fp8",
        "single_node_tp",
        "h200",
        "spec_decoding",
        modes={"spec_decoding": "mtp"},
    )
    blackwell = _argv(
        snap,
        flash,
        "fp8",
        "single_node_tp",
        "b200",
        "spec_decoding",
        modes={"spec_decoding": "mtp"},
    )
    assert parse_serve_args(hopper.argvs[0][1]).speculative_config["num_speculative_tokens"] == 1
    assert parse_serve_args(blackwell.argvs[0][1]).speculative_config["num_speculative_tokens"] == 2


# --- precedence on the synthetic tree -----------------------------------------------


def test_single_node_tp_override_caps_at_gpu_count(mini: RecipesRepo) -> None:
    w = "models/acme/Widget.yaml"
    for hw, tp in (("b200", 4), ("gb200", 4), ("rtx_box", 1)):
        args = parse_serve_args(_argv(mini, w, "default", "single_node_tp", hw).argvs[0][1])
        assert args.tensor_parallel_size == tp, hw


def test_recipe_amd_override_beats_strategy_tp(mini: RecipesRepo) -> None:
    argv = _argv(mini, "models/acme/Widget.yaml", "default", "multi_node_tp_pp", "mi300x").argvs[0][
        1
    ]
    args = parse_serve_args(argv)
    assert (args.tensor_parallel_size, args.pipeline_parallel_size) == (2, 2)


def test_unknown_default_mode_falls_back_to_default_mode(mini: RecipesRepo) -> None:
    # variants.small.default_modes names 'warp' (a problem): spec_decoding is forced on,
    # with its default mode
    argv = _argv(mini, "models/acme/Widget.yaml", "small", "single_node_tp", "b200").argvs[0][1]
    assert parse_serve_args(argv).speculative_config == {
        "method": "mtp",
        "num_speculative_tokens": 2,
    }


def test_bad_args_become_combination_problems(mini: RecipesRepo) -> None:
    result = _argv(mini, "models/acme/Gadget.yaml", "default", "single_node_tp", "b200", "fancy")
    lines = [p.line() for p in result.problems]
    assert (
        "models/acme/Gadget.yaml: features.fancy.args[1]: "
        "is a number, not a string (rendered as '8')" in lines
    )
    assert "--max-num-seqs" in result.argvs[0][1] and "8" in result.argvs[0][1]


def test_deduplicated_lists_are_kept_but_never_shared() -> None:
    """dedupe_args keeps its results per argument list: a caller changing the list it got
    changes nothing the next caller gets."""
    from compat.recipes.synthesis import dedupe_args

    args = ["--tp", "2", "--x", "--tp", "4", "model"]
    first = dedupe_args(args)
    assert first == ["--x", "--tp", "4", "model"]
    first.append("--changed")
    assert dedupe_args(iter(args)) == ["--x", "--tp", "4", "model"]
