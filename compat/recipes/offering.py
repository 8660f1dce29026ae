"""Which strategies the site offers for a recipe on a hardware profile (sizes: `sizing`).

`resolveCommand` enforces none of this itself (research notes §0.4): the UI and
the JSON API filter strategies before calling it. A checker that synthesized a
strategy the site never offers would report conflicts nobody can reach, so the
callers' filters are repeated here (recipes `command-synthesis.js` at 8959cf6).
"""

from __future__ import annotations

import math
import re
from typing import Any

from compat.recipes.hardware import keyed_value
from compat.recipes.repo import HardwareProfile, Recipe, RecipesRepo, Strategy

#: The builder's node ceiling for one deployment and per PD pool (`MAX_NODES`).
MAX_NODES = 16
#: Deploy types that scale out across nodes; non-scalable hardware cannot run them.
SCALE_OUT = ("multi_node", "pd_cluster")
#: PD pool parallelism modes, in the order the builder offers them.
POOL_MODES = ("tp", "tep", "dep")


def effective_compatible_strategies(recipe: Recipe) -> list[str]:
    """`compatible_strategies` plus `strategy_hardware` grants of `supported` (L93-101)."""
    listed = [s for s in recipe.data.get("compatible_strategies") or [] if isinstance(s, str)]
    grants = [
        sid
        for sid, gate in recipe.section("strategy_hardware").items()
        if sid not in listed and isinstance(gate, dict) and "supported" in gate.values()
    ]
    return listed + grants


def strategy_supported_on(recipe: Recipe, strategy: str, profile: HardwareProfile) -> bool:
    """`isStrategySupportedOnHardware` (L77-83): an explicit gate wins, else list membership."""
    gate = keyed_value(recipe.section("strategy_hardware").get(strategy), profile)
    if gate is not None:
        return gate != "unsupported"
    return strategy in (recipe.data.get("compatible_strategies") or [])


def _floor_from_block(block: Any, key: str) -> int:
    if block is None:
        return 0
    if isinstance(block, (int, float)) and not isinstance(block, bool):
        return int(block)
    if not isinstance(block, dict):
        return 0
    for candidate in (key, f"multi_node_{key}", f"single_node_{key}"):
        value = block.get(candidate)
        if value is not None:
            return (
                int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0
            )
    return 0


def min_gpus(recipe: Recipe, key: str, profile: HardwareProfile) -> int:
    """`minGpusForStrategy` (L188-230): the strategy (or pool mode) floor, or an exact-id one."""
    config = recipe.data.get("strategy_min_gpus")
    if config is None:
        return 0
    if isinstance(config, (int, float)) and not isinstance(config, bool):
        return int(config)
    if not isinstance(config, dict):
        return 0
    return max(_floor_from_block(config, key), _floor_from_block(config.get(profile.id), key))


def nodes_for(recipe: Recipe, key: str, profile: HardwareProfile) -> int:
    """`nodesForStrategy`: nodes needed to clear the floor, at least 1."""
    per_node = profile.gpu_count or 8
    return max(1, math.ceil(min_gpus(recipe, key, profile) / per_node))


def reachable(recipe: Recipe, strategy: Strategy, profile: HardwareProfile) -> bool:
    """`isStrategyReachable`: scale-out strategies may grow to MAX_NODES, others have one node."""
    max_nodes = MAX_NODES if strategy.deploy_type in SCALE_OUT else 1
    return max_nodes * (profile.gpu_count or 8) >= min_gpus(recipe, strategy.name, profile)


def offered_strategies(
    repo: RecipesRepo, recipe: Recipe, profile: HardwareProfile
) -> list[Strategy]:
    """Strategies offered on this profile, in the recipe's order (unknown ids are skipped)."""
    out: list[Strategy] = []
    for sid in effective_compatible_strategies(recipe):
        strategy = repo.strategies.get(sid)
        if strategy is None:
            continue
        if not strategy_supported_on(recipe, sid, profile):
            continue
        if not reachable(recipe, strategy, profile):
            continue
        if not profile.scalable and strategy.deploy_type in SCALE_OUT:
            continue
        out.append(strategy)
    return out


_SUFFIX_MODES = (
    (re.compile(r"(?:^|_)dep$"), "dep"),
    (re.compile(r"(?:^|_)tep$"), "tep"),
    (re.compile(r"(?:^|_)tp(?:_pp|_dp)?$"), "tp"),
)


def pd_pool_modes(recipe: Recipe) -> list[str]:
    """`pdPoolModes` (L251-269): pool modes from strategy suffixes, narrowed by `pool_modes`."""
    modes: set[str] = set()
    for sid in effective_compatible_strategies(recipe):
        if sid == "pd_cluster":
            continue
        for pattern, mode in _SUFFIX_MODES:
            if pattern.search(sid):
                modes.add(mode)
                break
    ordered = [m for m in POOL_MODES if m in modes] or ["tp"]
    pd = recipe.section("strategy_overrides").get("pd_cluster")
    restrict = pd.get("pool_modes") if isinstance(pd, dict) else None
    if isinstance(restrict, list) and restrict:
        narrowed = [m for m in ordered if m in restrict]
        if narrowed:
            ordered = narrowed
    return ordered


def pd_role_parallelism(
    recipe: Recipe, strategy: Strategy, role: str, pick: str | None = None
) -> str:
    """The pool mode a PD role renders with (L1130-1137).

    The caller's pick (the builder's pool-mode pill), else the recipe's
    `strategy_overrides.pd_cluster.<role>.parallelism`, else the strategy file's
    role default, else tp; snapped to the offered modes the way the synthesizer
    snaps it.
    """
    allowed = pd_pool_modes(recipe)
    candidates: list[Any] = [pick]
    overrides = recipe.section("strategy_overrides").get(strategy.name)
    if isinstance(overrides, dict) and isinstance(overrides.get(role), dict):
        candidates.append(overrides[role].get("parallelism"))
    role_spec = strategy.data.get(role)
    if isinstance(role_spec, dict):
        candidates.append(role_spec.get("parallelism"))
    chosen = next((c for c in candidates if isinstance(c, str) and c), "tp")
    return chosen if chosen in allowed else allowed[0]
