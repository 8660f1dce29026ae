"""Feature states: which features are on, which mode a modal feature runs, and gates.

Mirrors the recipes synthesizer at 8959cf6: `defaultFeaturesFor` (API L138-143),
`resolveModeKey` (L421-432), `isModeAllowedForVariant` (L362-365),
`isModeSupported` (L347-354) and `isFeatureAllowedForStrategy` (L375-378), plus
the builder-only rule that `text_only` and `encoder_parallel` exclude each other
(CommandBuilder L1404-1411).
"""

from __future__ import annotations

from typing import Any

from compat.recipes.repo import HardwareProfile, Recipe

#: Features the builder never lets be on together.
MUTUALLY_EXCLUSIVE: dict[str, str] = {
    "text_only": "encoder_parallel",
    "encoder_parallel": "text_only",
}


def feature_modes(feature: Any) -> dict[str, Any] | None:
    """The feature's `modes` map, or None for a boolean feature."""
    if not isinstance(feature, dict):
        return None
    modes = feature.get("modes")
    return modes if isinstance(modes, dict) else None


def allowed_for_strategy(feature: Any, strategy: str) -> bool:
    """Only a non-empty list gates; a map-shaped gate is ignored (fails open) like the site."""
    gate = feature.get("strategies") if isinstance(feature, dict) else None
    return not isinstance(gate, list) or not gate or strategy in gate


def _mode_allowed_for_variant(mode: Any, variant_key: str) -> bool:
    allow = mode.get("variants") if isinstance(mode, dict) else None
    return not isinstance(allow, list) or not allow or variant_key in allow


def _mode_supported_on(mode: Any, profile: HardwareProfile) -> bool:
    """Only generation and exact-id keys gate a mode; brand and `default` keys do nothing."""
    hardware = mode.get("hardware") if isinstance(mode, dict) else None
    if not isinstance(hardware, dict):
        return True
    if profile.generation is not None and hardware.get(profile.generation) == "unsupported":
        return False
    return hardware.get(profile.id) != "unsupported"


def available_modes(feature: Any, variant_key: str, profile: HardwareProfile) -> list[str]:
    """Modes of a modal feature usable on this variant and profile, in declaration order."""
    modes = feature_modes(feature) or {}
    return [
        key
        for key, mode in modes.items()
        if _mode_allowed_for_variant(mode, variant_key) and _mode_supported_on(mode, profile)
    ]


def resolve_mode(
    feature: Any,
    feature_key: str,
    variant: dict[str, Any],
    variant_key: str,
    profile: HardwareProfile,
    selected: str | None,
) -> str | None:
    """The mode that emits: the pick > the variant's default_modes > default_mode > the first."""
    allowed = available_modes(feature, variant_key, profile)
    if not allowed:
        return None
    variant_defaults = variant.get("default_modes")
    preferred = variant_defaults.get(feature_key) if isinstance(variant_defaults, dict) else None
    for candidate in (selected, preferred, feature.get("default_mode")):
        if candidate and candidate in allowed:
            return candidate
    return allowed[0]


def default_features(
    recipe: Recipe, variant: dict[str, Any], profile: HardwareProfile
) -> list[str]:
    """Features on by default, in `features` order.

    Everything not opt-in (recipe-wide or for this profile) is on; a variant's
    `default_modes` forces its features on.
    """
    opt_in = {f for f in recipe.data.get("opt_in_features") or [] if isinstance(f, str)}
    per_hw = recipe.section("hardware_opt_in_features").get(profile.id)
    if isinstance(per_hw, list):
        opt_in.update(f for f in per_hw if isinstance(f, str))
    forced = variant.get("default_modes")
    forced_keys = set(forced) if isinstance(forced, dict) else set()
    return [f for f in recipe.features if f in forced_keys or f not in opt_in]


def with_feature(recipe: Recipe, enabled: list[str], feature_key: str) -> list[str]:
    """`enabled` plus `feature_key`, in `features` order, dropping its exclusive partner."""
    partner = MUTUALLY_EXCLUSIVE.get(feature_key)
    wanted = (set(enabled) | {feature_key}) - ({partner} if partner else set())
    return [f for f in recipe.features if f in wanted]


def switched_on(enabled: list[str], feature_key: str) -> list[str]:
    """The builder's `toggleFeature` turning `feature_key` on: it goes last.

    The builder keeps the features in the order they were switched on (the
    defaults in `features` order, then each click appended, its exclusive
    partner dropped), and the synthesizer emits them in that order. A feature
    already on stays where it is.
    """
    partner = MUTUALLY_EXCLUSIVE.get(feature_key)
    kept = [f for f in enabled if f != partner]
    return kept if feature_key in kept else [*kept, feature_key]
