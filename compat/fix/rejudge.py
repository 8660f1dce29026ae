"""Judge an edited recipe again, through the same synthesis replay and engine, before writing.

A plan is kept only if, on the edited copy, every command it set out to fix starts, is
gated, or is no longer offered, and every command that started before still starts
(offered, ungated). Commands are compared per hardware profile, since an edit can split
or merge rows that collapsed identical profiles.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from compat.fix.context import Case, Context, Row
from compat.fix.edits import Edit, apply
from compat.recipes.repo import Recipe
from compat.verdict.engine import Outcome
from compat.verdict.releases import STARTS

Key = tuple[str, str, str, str, str, str, str]  # release-independent row identity, per profile


@dataclass
class Result:
    fixed: set[Key] = field(default_factory=set)
    still_blocked: dict[Key, str] = field(default_factory=dict)  # key -> reason
    broken: dict[Key, str] = field(default_factory=dict)  # started before, does not now

    @property
    def ok(self) -> bool:
        return not self.still_blocked and not self.broken


def keys(row: Row) -> list[Key]:
    c = row.combo
    return [
        ("", c.variant, c.strategy, c.feature, c.mode, c.platform, p)
        for p in (c.profiles or (c.hardware,))
    ]


def rejudge(
    case: Case,
    edits: list[Edit],
    targets: list[tuple[Row, tuple[str, ...]]],
    ctx: Context,
    releases: list[str] | None = None,
) -> Result:
    """Judge `case.recipe` with `edits` applied; check `targets` are fixed and nothing broke.

    A target (row, finding keys) is fixed when its command is gated, no longer offered, or
    none of those findings blocks it any more (another cause may still block it; that cause
    has its own fix or says why not). `releases`: judge at these (explicit --vllm builds);
    default, at each combination's pin.
    """
    recipe = Recipe(case.path, apply(case.recipe.data, edits))
    after: dict[Key, tuple[dict[str, Outcome], bool]] = {}
    for c in ctx.combinations(recipe):
        at = releases or [ctx.release_for(c.vllm_pin, case.rows[0].release)]
        at_release = {v: o for v in at if (o := ctx.pool.outcome(v, c)) is not None}
        for p in c.profiles or (c.hardware,):
            after[("", c.variant, c.strategy, c.feature, c.mode, c.platform, p)] = (
                at_release,
                c.gated,
            )
    result = Result()
    for row, finding_keys in targets:
        for key in keys(row):
            by_release, gated = after.get(key, ({}, False))
            if key not in after or gated:
                result.fixed.add(key)
                continue
            outcomes = list(by_release.values())
            left = [k for k in finding_keys if any(("blocked", k) in o.keys for o in outcomes)]
            if left or not outcomes:
                result.still_blocked[key] = left[0] if left else "not judged"
            else:
                result.fixed.add(key)
    for r in case.ungated():
        if not r.starts:
            continue
        for key in keys(r):
            by_release, gated = after.get(key, ({}, False))
            # What started at a release must start there still (not at every release judged:
            # a command that starts at 0.33.0 may fail at 0.23.0 before and after the fix). At
            # the pin, the one release judged is the edited recipe's, which a bump moves.
            outcomes = (
                [o for v, o in by_release.items() if v == r.release]
                if releases
                else list(by_release.values())
            )
            if (
                key not in after
                or gated
                or not outcomes
                or any(o.status not in STARTS for o in outcomes)
            ):
                result.broken[key] = (
                    "gated"
                    if gated
                    else "absent"
                    if key not in after
                    else next((o.status for o in outcomes if o.status not in STARTS), "not judged")
                )
    return result


def describe(key: Key) -> str:
    _, variant, strategy, feature, mode, platform, profile = key
    return f"{strategy} {feature + (':' + mode if mode else '') if feature else 'base'} variant {variant} on {profile or platform}"
