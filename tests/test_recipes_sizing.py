"""Deployment sizes per surface of the site (sizing) and what the JSON API publishes (json_api).

The JavaScript comparison (test_recipes_site_js, slow) proves these against the
site itself on the whole snapshot; these pin the rules one at a time.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from compat.recipes import load_repo
from compat.recipes.json_api import (
    api_renderings,
    default_hardware,
    published_variants,
    recommend_strategy,
)
from compat.recipes.repo import Recipe, RecipesRepo
from compat.recipes.sizing import (
    PdPool,
    api_pd_pools,
    api_sizing,
    multi_node_count,
    ui_pool,
    ui_sizing,
)

PRO = "models/deepseek-ai/DeepSeek-V4-Pro.yaml"
K3 = "models/moonshotai/Kimi-K3.yaml"
GLM = "models/zai-org/GLM-5.2.yaml"


@pytest.fixture(scope="module")
def snap(snapshot: Path) -> RecipesRepo:
    return load_repo(snapshot)


def _with_vram(recipe: Recipe, gb: int) -> Recipe:
    data = copy.deepcopy(recipe.data)
    data["variants"]["default"]["vram_minimum_gb"] = gb
    return Recipe(recipe.path, data)


def test_api_co_locates_pd_when_one_node_holds_the_model_twice(snap: RecipesRepo) -> None:
    glm = snap.recipes[GLM]
    variant, pd = glm.variants["default"], snap.strategies["pd_cluster"]
    assert api_pd_pools(glm, variant, pd, snap.hardware["b300"]) is None  # 2304 GB >= 2 x need
    pools = ui_sizing(glm, variant, pd, snap.hardware["b300"]).pd_pools
    assert [(role, pool.nodes) for role, pool in pools] == [("prefill", 1), ("decode", 1)]


def test_api_renders_no_pd_above_four_nodes_per_role(snap: RecipesRepo) -> None:
    big = _with_vram(snap.recipes[GLM], 5000)  # 8 h100 nodes per role
    pd, h100 = snap.strategies["pd_cluster"], snap.hardware["h100"]
    assert api_pd_pools(big, big.variants["default"], pd, h100) == "skip"
    assert api_sizing(big, big.variants["default"], pd, h100) is None
    assert ui_pool(big, big.variants["default"], pd, h100, "prefill").nodes == 8


@pytest.mark.parametrize(
    "size",
    [
        ("vram", 10**300),  # a fuzzed recipe once rendered the pool node by node (an OOM kill)
        ("vram", 1e308),
        ("declared", 10**12),
        ("declared", 17),
    ],
)
def test_builder_caps_a_pool_above_max_nodes_and_says_unknown(snap: RecipesRepo, size) -> None:
    """A builder pool never renders more than MAX_NODES nodes; above it, a problem (unknown)."""
    from compat.recipes.offering import MAX_NODES
    from compat.recipes.synthesis import Synthesizer

    kind, value = size
    glm, pd, h100 = snap.recipes[GLM], snap.strategies["pd_cluster"], snap.hardware["h100"]
    data = copy.deepcopy(_with_vram(glm, 5000).data)
    if kind == "vram":
        data["variants"]["default"]["vram_minimum_gb"] = value
    else:
        data.setdefault("strategy_overrides", {})["pd_cluster"] = {"prefill": {"nodes": value}}
    recipe = Recipe(glm.path, data)
    sizing = ui_sizing(recipe, recipe.variants["default"], pd, h100)
    nodes = dict((role, pool.nodes) for role, pool in sizing.pd_pools)
    assert nodes["prefill"] == MAX_NODES
    assert nodes["decode"] == (MAX_NODES if kind == "vram" else 8)
    fields = [p.field for p in sizing.problems]
    assert "strategy_overrides.pd_cluster.prefill.nodes" in fields
    assert len(fields) == (2 if kind == "vram" else 1)
    synth = Synthesizer(recipe, "default", pd, h100, sizing=sizing)
    assert len(synth.nodes_rendered()) == (2 * MAX_NODES if kind == "vram" else MAX_NODES + 8)
    assert any("MAX_NODES" in p.message for p in synth.problems)
    at_limit = copy.deepcopy(data)
    at_limit["variants"]["default"]["vram_minimum_gb"] = 5000
    at_limit["strategy_overrides"] = {"pd_cluster": {"prefill": {"nodes": MAX_NODES}}}
    recipe = Recipe(glm.path, at_limit)
    assert not ui_sizing(recipe, recipe.variants["default"], pd, h100).problems


def test_builder_reads_declared_pool_nodes_by_profile_the_api_reads_vram(
    snap: RecipesRepo,
) -> None:
    pro, pd = snap.recipes[PRO], snap.strategies["pd_cluster"]
    variant = pro.variants["default"]
    assert ui_pool(pro, variant, pd, snap.hardware["b200"], "prefill") == PdPool(2, "dep")
    assert ui_pool(pro, variant, pd, snap.hardware["gb300"], "decode") == PdPool(1, "dep")
    api = dict(api_pd_pools(pro, variant, pd, snap.hardware["b200"]))
    assert api == {"prefill": PdPool(1), "decode": PdPool(1)}  # ceil(960 / 1440)


def test_floors_are_read_with_the_profile_id(snap: RecipesRepo) -> None:
    k3, pd = snap.recipes[K3], snap.strategies["pd_cluster"]
    variant = k3.variants["default"]
    h100, h200 = snap.hardware["h100"], snap.hardware["h200"]
    assert multi_node_count(k3, snap.strategies["multi_node_tp"], h100) == 4  # h100: 32 GPUs
    assert multi_node_count(k3, snap.strategies["multi_node_tp"], h200) == 2
    assert multi_node_count(k3, snap.strategies["single_node_tp"], h200) == 1
    # VRAM asks 3 h100 nodes per role, the h100 floor 4; the declared modes pass explicitly
    assert dict(ui_sizing(k3, variant, pd, h100).pd_pools) == {
        "prefill": PdPool(4, "tep"),
        "decode": PdPool(4, "dep"),
    }
    assert dict(api_pd_pools(k3, variant, pd, h100)) == {"prefill": PdPool(4), "decode": PdPool(4)}


def test_api_publishes_the_last_variant_of_a_shared_model_id(snap: RecipesRepo) -> None:
    ernie = snap.recipes["models/baidu/ERNIE-4.5-VL-28B-A3B-PT.yaml"]
    shared = [
        k
        for k, v in ernie.variants.items()
        if v.get("model_id") == "baidu/ERNIE-4.5-VL-424B-A47B-PT"
    ]
    assert len(shared) == 2
    assert published_variants(snap, ernie) == ["default", shared[-1]]
    assert {r.variant for r in api_renderings(snap, ernie)} == {"default", shared[-1]}


def test_api_defaults_and_recommendation(snap: RecipesRepo) -> None:
    glm = snap.recipes[GLM]
    assert default_hardware(glm, glm.variants["default"], snap.hardware) == "h200"
    nvfp4 = next(k for k, v in glm.variants.items() if v.get("precision") == "nvfp4")
    assert default_hardware(glm, glm.variants[nvfp4], snap.hardware) == "b200"
    assert recommend_strategy(glm, 1) == "single_node_tp"
    assert recommend_strategy(glm, 2) == "multi_node_tp"


def test_api_renders_only_base_commands_of_published_variants(snap: RecipesRepo) -> None:
    glm = snap.recipes[GLM]
    rendered = list(api_renderings(snap, glm))
    assert {r.variant for r in rendered} <= set(published_variants(snap, glm))
    pd_h100 = [r for r in rendered if r.strategy.name == "pd_cluster" and r.profile.id == "h100"]
    assert pd_h100 and all(
        r.sizing.source == "api" and not r.sizing.pool_followers for r in pd_h100
    )
