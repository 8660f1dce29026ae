"""(a) A feature gate: `features.<f>.strategies`, the one strategy x feature gate the site honours.

`isFeatureAllowedForStrategy` (command-synthesis.js L375-378) drops a feature whose
non-empty `strategies` list lacks the strategy, whether the feature was opted into or is
on by default. The gate is per feature, not per mode, variant or hardware, so it is
proposed only where every command that uses the feature on that strategy fails: a
strategy where the feature starts in some mode, variant or hardware would lose it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from compat.fix import wording
from compat.fix.context import Case, Context, Proposal, Row
from compat.fix.edits import Edit
from compat.recipes.offering import effective_compatible_strategies
from compat.recipes.repo import Recipe

KIND = "gate"


def allowlist_for(
    recipe: str, data: dict[str, Any], feature: str, blocked: Iterable[str]
) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None, str]:
    """(allowlist, existing allowlist, why-not) for gating `feature` off `blocked` in a recipe.

    The allowlist is the recipe's effective strategies (`compatible_strategies` plus
    `strategy_hardware` grants, in that order) minus `blocked`, kept to the existing
    allowlist when there is one. None with a reason when the recipe cannot take it.
    """
    blocked = set(blocked)
    features = data.get("features")
    feat = features.get(feature) if isinstance(features, dict) else None
    if not isinstance(feat, dict):
        return (
            None,
            None,
            f"features.{feature}: not in the recipe file (verdicts older than the recipe?)",
        )
    current = feat.get("strategies")
    if "strategies" in feat and not isinstance(current, list):
        return (
            None,
            None,
            (
                f"features.{feature}.strategies is a {type(current).__name__}, which the "
                "synthesizer ignores; replace it by hand"
            ),
        )
    existing = tuple(str(s) for s in current) if isinstance(current, list) and current else None
    effective = effective_compatible_strategies(Recipe(recipe, data))
    allow = tuple(s for s in effective if s not in blocked and (existing is None or s in existing))
    if not allow:
        return (
            None,
            existing,
            (
                f"features.{feature} is blocked on every strategy it is offered on "
                f"({', '.join(sorted(blocked))}); an empty `strategies` list means no gate "
                "to the synthesizer, so remove the feature or fix it by hand"
            ),
        )
    return allow, existing, ""


def propose(case: Case, cause: dict[str, Any], blocked: list[Row], ctx: Context) -> Proposal | str:
    if cause["kind"] != "feature":
        return "not a feature's args"
    feature = cause["element"].removeprefix("features.")
    strategies = list(dict.fromkeys(r.combo.strategy for r in blocked))
    for strategy in strategies:
        working = [
            r
            for r in case.ungated()
            if r.combo.strategy == strategy and r.uses(feature) and r.starts
        ]
        if working:
            w = working[0].combo
            where = f"{w.feature or 'base command'}{':' + w.mode if w.mode else ''}, variant {w.variant}"
            return (
                f"{feature} starts on {strategy} in {len(working)} command(s) (e.g. {where}); "
                "a whole-feature gate would take them away"
            )
    allow, _existing, why = allowlist_for(case.path, case.recipe.data, feature, strategies)
    if allow is None:
        return why
    unknown = sum(
        1
        for r in case.ungated()
        if r.combo.strategy in strategies and r.uses(feature) and r.outcome.status == "unknown"
    )
    note = f"also gates {unknown} command(s) whose verdict is unknown" if unknown else ""
    edit = Edit(
        "set",
        ("features", feature, "strategies"),
        list(allow),
        after="description",
        comment=_comment(cause, strategies, blocked),
    )
    return Proposal(KIND, (edit,), f"gate {feature} off {', '.join(strategies)}", note=note)


def _comment(cause: dict[str, Any], strategies: list[str], blocked: list[Row]) -> str:
    release = wording.releases_text([r.release for r in blocked])
    evidence = next((e for r in blocked for e in r.outcome.evidence if e), "")
    label = cause["label"]
    return wording.comment(
        [
            f"{label} cannot start on {', '.join(strategies)} at vLLM {release}",
            f"{label} cannot start on {len(strategies)} strategies at vLLM {release}",
            f"{label} cannot start here at vLLM {release}",
        ],
        wording.first_evidence([evidence]),
    )
