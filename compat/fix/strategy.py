"""(e) Drop a strategy from `compatible_strategies`, where no release on the index starts it.

`effectiveCompatibleStrategies` (command-synthesis.js L86-101) offers only the strategies the
recipe lists (plus `strategy_hardware` grants), so a dropped strategy is emitted nowhere.
It is the last resort, tried after every other fixer declined: proposed only when the
cause is the strategy itself (no feature, variant or hardware override explains it), its
blocked commands start at no release on the index (so no pin bump will ever fix them), and
no command of the recipe starts on that strategy (dropping it takes nothing away that works;
the re-judge checks it again). The recipes' schema has no per-variant strategy list, so
there is no narrower form.
"""

from __future__ import annotations

from typing import Any

from compat.fix import wording
from compat.fix.context import Case, Context, Proposal, Row
from compat.fix.edits import Edit

KIND = "strategy"


def _never_start(blocked: list[Row], ctx: Context) -> str:
    """Why not, when some blocked command starts at a later release (or the index is unknown)."""
    if not ctx.pool.exhaustive:
        return "the package index is unreachable: a later release may start them"
    for r in blocked:
        later = ctx.pool.first_working(r.release, [r.combo])
        if later is not None:
            return f"{r.combo.variant} on {r.combo.strategy} starts at vLLM {later}"
    return ""


def propose(case: Case, cause: dict[str, Any], blocked: list[Row], ctx: Context) -> Proposal | str:
    if cause["kind"] != "strategy":
        return "not the strategy's args"
    listed = case.recipe.data.get("compatible_strategies")
    if not isinstance(listed, list):
        return "compatible_strategies is not a list"
    strategies = list(dict.fromkeys(r.combo.strategy for r in blocked))
    for strategy in strategies:
        why = _keeps(case, strategy, listed)
        if why:
            return why
    why = _never_start(blocked, ctx)
    if why:
        return why
    keep = [s for s in listed if s not in strategies]
    if not keep:
        return "every strategy the recipe lists fails; fix the recipe by hand"
    unknown = sum(
        1
        for r in case.ungated()
        if r.combo.strategy in strategies and r.outcome.status == "unknown"
    )
    newest = ctx.pool.releases[-1] if ctx.pool.releases else ""
    pin = wording.releases_text([r.release for r in blocked])
    evidence = next((e for r in blocked for e in r.outcome.evidence if e), "")
    names = ", ".join(strategies)
    comment = wording.comment(
        [
            f"{names} dropped: {cause['finding']}; no release from {pin} to {newest} starts it",
            f"{names} dropped: no vLLM release from {pin} to {newest} starts it",
            f"{names} dropped: no vLLM release starts it",
        ],
        evidence,
    )
    edit = Edit("set", ("compatible_strategies",), keep, comment=comment)
    note = f"also drops {unknown} command(s) whose verdict is unknown" if unknown else ""
    return Proposal(KIND, (edit,), f"drop strategy {names}", note=note)


def _keeps(case: Case, strategy: str, listed: list[Any]) -> str:
    """Why `strategy` cannot be dropped from the list, or ''."""
    if strategy not in listed:
        return f"{strategy} is offered by a strategy_hardware grant, not compatible_strategies"
    if case.recipe.data.get("default_strategy") == strategy:
        return f"{strategy} is the recipe's default_strategy; choose another default by hand"
    working = [r for r in case.ungated() if r.combo.strategy == strategy and r.starts]
    if working:
        w = working[0].combo
        return (
            f"{strategy} starts in {len(working)} command(s) (e.g. "
            f"{w.feature or 'base command'}, variant {w.variant}); dropping it would take them away"
        )
    return ""
