"""Which commands the site's JSON API publishes, and with what inputs.

`scripts/build-recipes-api.mjs` (recipes 8959cf6) renders, for the default
variant and every promoted variant (one whose `model_id` is another HF repo
without a recipe of its own), on the variant's default hardware and every other
profile it may land on, the recommended strategy and each alternative, all at
default feature states. Its choices differ from the builder's in ways that
change the argv (sizes: see `sizing`), and in what it leaves out, so they are
replayed here rather than assumed:

* a variant whose default hardware renders nothing is not published at all
  (`renderAndWriteVariant`, L672);
* on non-scalable hardware a variant that does not fit is swapped for the
  largest one that does (L416-421), and multi-node and PD strategies are dropped;
* a PD pool that would need more than 4 nodes per role is skipped; when the
  recommended strategy is such a PD cluster, the profile renders nothing (L479);
* the recommended strategy renders even when the profile's filters dropped it,
  if no other serving strategy survived them (L464-470).

Mooncake compositions (the kv_store deployments, rendered as alternatives) are
counted but not synthesized here: vllm-compat does not render KV layers.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from compat.recipes.hardware import (
    as_mapping,
    fits_single_node,
    precision_allows,
    precision_constraint,
)
from compat.recipes.offering import (
    effective_compatible_strategies,
    nodes_for,
    reachable,
    strategy_supported_on,
)
from compat.recipes.repo import HardwareProfile, Recipe, RecipesRepo, Strategy
from compat.recipes.sizing import Sizing, api_sizing, multi_node_count


@dataclass(frozen=True)
class ApiRendering:
    """One (variant, profile, strategy) the API writes a command for, and its size."""

    variant: str  # the variant rendered (after the non-scalable swap)
    profile: HardwareProfile
    strategy: Strategy
    sizing: Sizing


def _variant_hardware_ok(variant: dict[str, Any], hid: str) -> bool:
    allow = variant.get("supported_hardware")
    return not isinstance(allow, list) or not allow or hid in allow


def compatible_hardware(
    recipe: Recipe, variant: dict[str, Any], profiles: dict[str, HardwareProfile]
) -> list[str]:
    """`listCompatibleHardware` plus the API's restricted filter (L659-662), taxonomy order."""
    declared = as_mapping(recipe.meta.get("hardware"))
    return [
        hid
        for hid, p in profiles.items()
        if precision_allows(p, variant)
        and declared.get(hid) != "unsupported"
        and _variant_hardware_ok(variant, hid)
        and (not p.restricted or hid in declared)
    ]


def default_hardware(
    recipe: Recipe, variant: dict[str, Any], profiles: dict[str, HardwareProfile]
) -> str:
    """`pickDefaultHardware` (command-synthesis.js L546-588): the author's pick, b200/gb200 for Blackwell-only, h200."""
    candidates = compatible_hardware(recipe, variant, profiles)
    authored = recipe.meta.get("default_hardware")
    if isinstance(authored, str) and authored in candidates:
        return authored
    constraint = precision_constraint(variant)
    if constraint is not None and constraint.get("generation") == "blackwell":
        for hid in ("b200", "gb200"):
            if hid in candidates:
                return hid
    if "h200" in candidates:
        return "h200"
    brand_order = {"NVIDIA": 0, "AMD": 1}
    ranked = sorted(candidates, key=lambda hid: (brand_order.get(profiles[hid].brand, 9), hid))
    return ranked[0] if ranked else "h200"


def recommend_strategy(recipe: Recipe, node_count: int) -> str:
    """`recommendStrategy` (command-synthesis.js L149-174): the recipe's default, else TP-first by node count."""
    compatible = effective_compatible_strategies(recipe)
    explicit = recipe.data.get("default_strategy")
    if isinstance(explicit, str) and explicit and explicit in compatible:
        if node_count > 1 and explicit.startswith("single_node_"):
            sibling = "multi_node_" + explicit[len("single_node_") :]
            if sibling in compatible:
                return sibling
        else:
            return explicit
    if node_count > 1:
        for sid in ("multi_node_tp", "multi_node_dep", "multi_node_tep"):
            if sid in compatible:
                return sid
    if "single_node_tp" in compatible:
        return "single_node_tp"
    return compatible[0] if compatible else "single_node_tp"


def _largest_fitting_variant(recipe: Recipe, profile: HardwareProfile) -> str | None:
    """`pickFittingVariant`: the biggest variant that runs on this (non-scalable) profile."""
    fitting = [
        (key, v)
        for key, v in recipe.variants.items()
        if precision_allows(profile, v)
        and _variant_hardware_ok(v, profile.id)
        and (profile.scalable or fits_single_node(profile, v))
    ]
    if not fitting:
        return None
    # Array.prototype.sort is stable: ties keep declaration order.
    fitting.sort(key=lambda kv: -float(_size(kv[1].get("vram_minimum_gb"))))
    return fitting[0][0]


def _size(value: Any) -> float:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _serving_strategies(
    repo: RecipesRepo, recipe: Recipe, profile: HardwareProfile
) -> list[Strategy]:
    """The API's `compatible` list without the kv_store deployments (L435-456)."""
    out = []
    for sid in effective_compatible_strategies(recipe):
        strategy = repo.strategies.get(sid)
        if strategy is None or not strategy_supported_on(recipe, sid, profile):
            continue
        if not reachable(recipe, strategy, profile):
            continue
        if profile.scalable or (not sid.startswith("multi_node_") and sid != "pd_cluster"):
            out.append(strategy)
    return out


def renderings_on(
    repo: RecipesRepo, recipe: Recipe, variant_key: str, profile: HardwareProfile
) -> list[ApiRendering] | None:
    """`buildVariantRendering`: every command for one (variant, profile); None = nothing."""
    variant = recipe.variants.get(variant_key)
    if variant is None or recipe.is_omni:
        return None
    if not profile.scalable and not fits_single_node(profile, variant):
        fitting = _largest_fitting_variant(recipe, profile)
        if fitting is None:
            return None
        variant_key, variant = fitting, recipe.variants[fitting]
    strategies = _serving_strategies(repo, recipe, profile)
    names = [s.name for s in strategies]
    multi = profile.scalable and any(n.startswith("multi_node_") for n in names)
    base_nodes = 2 if not fits_single_node(profile, variant) and multi else 1
    recommended_id = recommend_strategy(recipe, base_nodes)
    if recommended_id not in names:
        recommended_id = next(
            (n for n in names if n != "pd_cluster"), names[0] if names else recommended_id
        )
    recommended = repo.strategies.get(recommended_id)
    out: list[ApiRendering] = []
    if recommended is not None:
        # `nodesFor` (L431-434): multi-node strategies at max(2, floor), others at their floor.
        floor = (
            multi_node_count(recipe, recommended, profile)
            if recommended.deploy_type == "multi_node"
            else nodes_for(recipe, recommended.name, profile)
        )
        count = max(base_nodes, floor)
        sizing = api_sizing(recipe, variant, recommended, profile, count)
        if sizing is None:
            return None
        out.append(ApiRendering(variant_key, profile, recommended, sizing))
    for strategy in strategies:
        if strategy.name == recommended_id:
            continue
        node_count = 1 if strategy.deploy_type == "pd_cluster" else None
        sizing = api_sizing(recipe, variant, strategy, profile, node_count)
        if sizing is not None:
            out.append(ApiRendering(variant_key, profile, strategy, sizing))
    return out


def published_variants(repo: RecipesRepo, recipe: Recipe) -> list[str]:
    """The parent's `default` and each promoted variant (L744-756), in that order, once each.

    Variants sharing a `model_id` share its subtree, which each one clears before
    writing (L653), so only the last of them is published.
    """
    standalone = {_hf_id(path) for path in repo.recipes}
    promoted: dict[str, str] = {}  # model id -> the last variant promoted to it
    for key, variant in recipe.variants.items():
        model_id = variant.get("model_id")
        if isinstance(model_id, str) and "/" in model_id and model_id not in standalone:
            promoted.pop(model_id, None)
            promoted[model_id] = key
    keys = ["default"] if "default" in recipe.variants else []
    return list(dict.fromkeys(keys + list(promoted.values())))


def _hf_id(path: str) -> str:
    """The HF id the API derives from a recipe path: models/<org>/.../<repo>.yaml -> org/repo."""
    parts = path.split("/")[1:]
    if len(parts) < 2:
        return ""
    name = parts[-1].removesuffix(".yaml").removesuffix(".yml")
    return f"{parts[0]}/{name}"


def api_renderings(repo: RecipesRepo, recipe: Recipe) -> Iterator[ApiRendering]:
    """Every (variant, profile, strategy) the API publishes for a recipe, each once."""
    seen: set[tuple[str, str, str]] = set()
    profiles = repo.hardware
    for key in published_variants(repo, recipe):
        variant = recipe.variants[key]
        default = default_hardware(recipe, variant, profiles)
        order = list(dict.fromkeys([default, *compatible_hardware(recipe, variant, profiles)]))
        by_profile = {
            hid: renderings_on(repo, recipe, key, profiles[hid]) for hid in order if hid in profiles
        }
        if by_profile.get(default) is None:
            continue
        for rendered in by_profile.values():
            for r in rendered or ():
                ident = (r.variant, r.profile.id, r.strategy.name)
                if ident not in seen:
                    seen.add(ident)
                    yield r
