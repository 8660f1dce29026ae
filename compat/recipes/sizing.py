"""How many nodes each surface of the recipes site renders a strategy at, per source.

`resolveCommand` takes the deployment size as input (`nodeCount`, and `pdNodes`
for pd_cluster), and the site's two surfaces choose it differently, so the same
selection can copy out as different commands:

* the JSON API (`scripts/build-recipes-api.mjs` at 8959cf6): multi-node
  strategies at max(2, `strategy_min_gpus` floor) nodes (L431-434); pd_cluster
  pools from `pickPdNodes` (L238-251): both roles co-located on one node (half
  the GPUs each, `pdNodes` null) when the node holds the model twice
  (`pdFitsSingleNode`), else ceil(vram_minimum_gb / node VRAM) nodes per role,
  grown to the floor of the role's declared pool mode, and no PD command at all
  above 4 nodes per role. It publishes node 0 of each PD pool.
* the builder UI (`src/components/recipes/CommandBuilder.jsx`, `pdDefaults`,
  `pdDefaultPar`, `pdAvailableModes` and `effPd*Nodes`): multi-node strategies
  at the same max(2, floor) (its Nodes row grows to a picked strategy's floor);
  each PD pool at `strategy_overrides.pd_cluster.<role>.nodes` (a number, or a
  map read by exact profile id then `default`), else ceil(vram_minimum_gb /
  node VRAM) nodes, raised to the floor of the pool's mode, with the mode passed
  explicitly (recipe, then strategy file, then tp; snapped to the offered pool
  modes, then to those reachable here). Its node selector renders every node of
  a pool.

CommandBuilder.jsx is not part of the recipes snapshot; the UI rules follow the
builder as published (vllm-project/recipes), and its floors are read with the
profile id, as the snapshot's `nodesForStrategy(recipe, key, gpusPerNode, gpuId)`
allows and the API does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from compat.recipes.hardware import as_mapping, fits_single_node
from compat.recipes.offering import MAX_NODES, min_gpus, nodes_for, pd_pool_modes
from compat.recipes.repo import HardwareProfile, Problem, Recipe, Strategy

Source = Literal["api", "ui"]
#: The surfaces of the site whose commands are judged, in the order rows name them.
SOURCES: tuple[Source, ...] = ("api", "ui")
PD_ROLES = ("prefill", "decode")
#: `pickPdNodes` renders no PD command when a role would need more nodes than this.
API_MAX_PD_NODES = 4


@dataclass(frozen=True)
class PdPool:
    """One role's entry of `pdNodes`: its node count (0 = half a shared node) and mode pick."""

    nodes: int
    parallelism: str | None = None  # None: the synthesizer's own default chain


@dataclass(frozen=True)
class Sizing:
    """The size inputs `resolveCommand` gets from one surface for one selection."""

    source: Source
    node_count: int  # resolveCommand's nodeCount
    pd_pools: tuple[tuple[str, PdPool], ...] | None = None  # pdNodes; None = legacy sizing
    pool_followers: bool = False  # render every node of a PD pool, not only node 0
    problems: tuple[Problem, ...] = ()  # what the size inputs say that the site cannot render

    def pool(self, role: str) -> PdPool | None:
        return dict(self.pd_pools).get(role) if self.pd_pools is not None else None


def _number(value: Any) -> float:
    """`value || 0` for a size: a positive number, else 0."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if ok and value > 0 else 0.0


def multi_node_count(recipe: Recipe, strategy: Strategy, profile: HardwareProfile) -> int:
    """Nodes both surfaces render a strategy at: max(2, floor) for multi-node, else 1.

    Multi-node strategies never render at one node (the builder offers them
    from 2 nodes, the API renders them at `nodesFor`, L431-434).
    """
    if strategy.deploy_type != "multi_node":
        return 1
    return max(2, nodes_for(recipe, strategy.name, profile))


def declared_pool_mode(recipe: Recipe, strategy: Strategy, role: str) -> str:
    """The role's mode as declared (recipe, then strategy file, then tp), not yet snapped."""
    for block in (
        as_mapping(as_mapping(recipe.section("strategy_overrides").get("pd_cluster")).get(role)),
        as_mapping(strategy.data.get(role)),
    ):
        mode = block.get("parallelism")
        if isinstance(mode, str) and mode:
            return mode
    return "tp"


# --- the JSON API ---------------------------------------------------------------------


def pd_fits_single_node(profile: HardwareProfile, variant: dict[str, Any]) -> bool:
    """`pdFitsSingleNode`: two GPUs or more, and the node holds the model twice."""
    if profile.gpu_count < 2:
        return False
    return (profile.vram_gb or 0) >= 2 * _number(variant.get("vram_minimum_gb"))


def api_pd_pools(
    recipe: Recipe, variant: dict[str, Any], strategy: Strategy, profile: HardwareProfile
) -> tuple[tuple[str, PdPool], ...] | None | Literal["skip"]:
    """`pickPdNodes`: None = co-located (legacy sizing), 'skip' = not rendered, else pools."""
    if pd_fits_single_node(profile, variant):
        return None
    node_vram = profile.vram_gb or 0
    model_vram = _number(variant.get("vram_minimum_gb"))
    if node_vram <= 0 or model_vram <= 0:
        return None
    per_role = math.ceil(model_vram / node_vram)
    if per_role > API_MAX_PD_NODES:
        return "skip"
    return tuple(
        (
            role,
            PdPool(
                max(
                    per_role, nodes_for(recipe, declared_pool_mode(recipe, strategy, role), profile)
                )
            ),
        )
        for role in PD_ROLES
    )


def api_sizing(
    recipe: Recipe,
    variant: dict[str, Any],
    strategy: Strategy,
    profile: HardwareProfile,
    node_count: int | None = None,
) -> Sizing | None:
    """What the API renders a strategy with; None when it renders no command for it."""
    count = node_count if node_count is not None else multi_node_count(recipe, strategy, profile)
    if strategy.deploy_type != "pd_cluster":
        return Sizing("api", count)
    pools = api_pd_pools(recipe, variant, strategy, profile)
    if pools == "skip":
        return None
    return Sizing("api", count, pools)


# --- the builder UI -------------------------------------------------------------------


def _declared_pool_nodes(recipe: Recipe, role: str, profile: HardwareProfile) -> int | None:
    """`strategy_overrides.pd_cluster.<role>.nodes`: a number, or {<profile id>, default}."""
    block = as_mapping(as_mapping(recipe.section("strategy_overrides").get("pd_cluster")).get(role))
    declared = block.get("nodes")
    candidates = [declared]
    if isinstance(declared, dict):
        candidates = [declared.get(profile.id), declared.get("default")]
    for value in candidates:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return int(value)  # finite: the loader refuses .inf and .nan
    return None


def ui_pool(
    recipe: Recipe, variant: dict[str, Any], strategy: Strategy, profile: HardwareProfile, role: str
) -> PdPool:
    """One PD pool as the builder renders it by default (more than MAX_NODES: see `_capped`)."""
    offered = pd_pool_modes(recipe)
    mode = declared_pool_mode(recipe, strategy, role)
    if mode not in offered:
        mode = offered[0]
    per_node = profile.gpu_count or 8
    reachable = [m for m in offered if MAX_NODES * per_node >= min_gpus(recipe, m, profile)]
    if mode not in reachable:
        mode = reachable[0] if reachable else "tp"
    node_vram = profile.vram_gb or 0
    model_vram = _number(variant.get("vram_minimum_gb"))
    by_vram = max(1, math.ceil(model_vram / node_vram)) if model_vram > 0 and node_vram > 0 else 1
    declared = _declared_pool_nodes(recipe, role, profile)
    nodes = declared if declared is not None else by_vram
    return PdPool(max(nodes, nodes_for(recipe, mode, profile)), mode)


def ui_sizing(
    recipe: Recipe, variant: dict[str, Any], strategy: Strategy, profile: HardwareProfile
) -> Sizing:
    """What the builder renders a strategy with before the user changes any size."""
    if strategy.deploy_type != "pd_cluster":
        return Sizing("ui", multi_node_count(recipe, strategy, profile))
    # The builder's nodeCount: 2 when the variant does not fit one node (no effect on
    # PD argvs once every pool has an explicit size).
    count = 1 if fits_single_node(profile, variant) or not profile.scalable else 2
    pools = tuple((role, ui_pool(recipe, variant, strategy, profile, role)) for role in PD_ROLES)
    pools, problems = _capped(recipe, pools, profile)
    return Sizing("ui", count, pools, pool_followers=True, problems=problems)


def _capped(
    recipe: Recipe, pools: tuple[tuple[str, PdPool], ...], profile: HardwareProfile
) -> tuple[tuple[tuple[str, PdPool], ...], tuple[Problem, ...]]:
    """Pools the builder cannot offer, capped at MAX_NODES, each with a problem.

    The builder offers at most MAX_NODES nodes per PD pool (command-synthesis.js L175-176);
    what it renders for a default above that is not known, so the pool is rendered at
    MAX_NODES (never node by node up to an absurd size) and the problem makes the verdict
    unknown rather than ok.
    """
    out, problems = [], []
    for role, pool in pools:
        if pool.nodes > MAX_NODES:
            problems.append(
                Problem(
                    recipe.path,
                    f"strategy_overrides.pd_cluster.{role}.nodes",
                    f"the {role} pool needs more than {MAX_NODES} nodes on {profile.id} (declared, "
                    "or vram_minimum_gb over the node's VRAM); the builder offers at most "
                    f"{MAX_NODES} (MAX_NODES), so what it renders is unknown",
                )
            )
            pool = PdPool(MAX_NODES, pool.parallelism)
        out.append((role, pool))
    return tuple(out), tuple(problems)
