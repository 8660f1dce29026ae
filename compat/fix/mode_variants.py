"""(b) A mode restriction: `features.<f>.modes.<m>.variants`, where the failure follows the variant.

`isModeAllowedForVariant` (command-synthesis.js L362-365) offers a mode only to the
variants its non-empty `variants` list names. Proposed when mode M fails for some
variants everywhere they use it (every strategy and hardware) and starts for at least one
other variant: the restriction then takes nothing away that works.
"""

from __future__ import annotations

from typing import Any

from compat.fix import wording
from compat.fix.context import Case, Context, Proposal, Row
from compat.fix.edits import Edit
from compat.recipes.features import feature_modes

KIND = "mode_variants"


def propose(case: Case, cause: dict[str, Any], blocked: list[Row], ctx: Context) -> Proposal | str:
    if cause["kind"] != "feature" or not cause["mode"]:
        return "not a mode's args"
    feature, mode = cause["element"].removeprefix("features."), cause["mode"]
    modes = feature_modes(case.recipe.features.get(feature)) or {}
    spec = modes.get(mode)
    if not isinstance(spec, dict):
        return f"features.{feature}.modes.{mode}: not in the recipe"
    failing = list(dict.fromkeys(r.combo.variant for r in blocked))
    using = [r for r in case.ungated() if r.uses(feature, mode)]
    for variant in failing:
        works = [r for r in using if r.combo.variant == variant and r.starts]
        if works:
            return (
                f"mode {mode} starts for variant {variant} on {works[0].combo.strategy}: "
                "the failure follows the strategy, not the variant"
            )
    if not any(r.starts for r in using if r.combo.variant not in failing):
        return (
            f"mode {mode} starts for no other variant: a variant restriction would leave it to none"
        )
    current = spec.get("variants")
    offered = [
        v
        for v in (current if isinstance(current, list) and current else case.recipe.variants)
        if isinstance(v, str)
    ]
    keep = [v for v in offered if v not in failing]
    if not keep:
        return f"every variant mode {mode} is offered to fails"
    for variant in failing:
        defaults = (case.recipe.variants.get(variant) or {}).get("default_modes")
        if isinstance(defaults, dict) and defaults.get(feature) == mode:
            return (
                f"variants.{variant}.default_modes names {feature}: {mode}; the site's validator "
                "rejects a default mode the variant cannot use"
            )
    release = wording.releases_text([r.release for r in blocked])
    evidence = next((e for r in blocked for e in r.outcome.evidence if e), "")
    comment = wording.comment(
        [
            f"{feature}:{mode} cannot start for {', '.join(failing)} at vLLM {release}",
            f"{feature}:{mode} cannot start for {len(failing)} variants at vLLM {release}",
        ],
        evidence,
    )
    edit = Edit(
        "set",
        ("features", feature, "modes", mode, "variants"),
        keep,
        after="description",
        comment=comment,
    )
    return Proposal(KIND, (edit,), f"offer {feature}:{mode} only to {', '.join(keep)}")
