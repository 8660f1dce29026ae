"""Plan the fixes of one recipe: fixers in order of preference, merged, then judged again.

Per cause with blocked commands: a gate, else a mode restriction; the causes left over
share one `min_vllm_version` bump (one target release per pin they live under); what is
still left gets a respelling, else the strategy is dropped when no release starts it, else
no automatic fix with every fixer's reason. A gate whose
commands start at the bumped release is dropped for the bump (it would take away commands
that start there). The merged plan is judged again (`rejudge`); if it fails, each cause's
fix is judged alone and only the ones that hold are kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

from compat.fix import gate, mode_variants, pin_bump, spelling, strategy, wording
from compat.fix.context import Case, Context, Proposal, Row
from compat.fix.edits import Edit, apply
from compat.fix.rejudge import describe, rejudge
from compat.vocab import NOT_BLOCKED, STARTS, release_key


@dataclass
class Planned:
    """What the fix stage decided for one cause."""

    kind: str  # gate | mode_variants | pin_bump | spelling | strategy | none
    summary: str = ""
    edits: list[Edit] = field(default_factory=list)
    why: str = ""  # for `none`: why each fixer declined; else notes to check by hand
    works_from: str = ""  # first release where every command it blocks starts ('' = none known)
    clear_from: str = ""  # with none known to start: the first where none is known to fail


def plan_recipe(case: Case, ctx: Context, depth: int = 0) -> dict[int, Planned]:
    """cause id -> Planned, for every cause of the recipe that blocks an ungated command.

    A bump moves the recipe to a release where other checks may fail (a feature that the
    old release rejected for one reason, the new one rejects for another): the bumped
    recipe is judged again and planned once more (`_follow_up`), and what that finds is
    added to the bump, verified together with it.
    """
    blocked = {cid: case.blocked_by(cid) for cid in case.causes}
    blocked = {cid: rows for cid, rows in blocked.items() if rows}
    if not blocked:
        return {}
    works_from = {cid: _first_working(rows, ctx) for cid, rows in blocked.items()}
    chosen: dict[int, Proposal] = {}
    reasons: dict[int, list[str]] = {cid: [] for cid in blocked}
    for cid, rows in blocked.items():
        for fixer in (gate, mode_variants):
            proposal = fixer.propose(case, case.causes[cid], rows, ctx)
            if isinstance(proposal, Proposal):
                chosen[cid] = proposal
                break
            reasons[cid].append(f"{fixer.KIND}: {proposal}")
    _plan_bump(case, ctx, [cid for cid in blocked if cid not in chosen], blocked, chosen, reasons)
    for cid, rows in blocked.items():
        for fixer in (spelling, strategy):  # the last resorts, in this order
            if cid in chosen:
                break
            proposal = fixer.propose(case, case.causes[cid], rows, ctx)
            if isinstance(proposal, Proposal):
                chosen[cid] = proposal
            else:
                reasons[cid].append(f"{fixer.KIND}: {proposal}")
    _prefer_bump_over_gates(chosen, blocked, ctx)
    kept = _verified(case, ctx, chosen, blocked, reasons)
    if depth == 0:
        _follow_up(case, ctx, kept, blocked, reasons)
    out: dict[int, Planned] = {}
    for cid in blocked:
        p = kept.get(cid)
        if p is None:
            out[cid] = Planned(
                "none", why="; ".join(reasons[cid]), works_from=works_from[cid] or ""
            )
        else:
            out[cid] = Planned(
                p.kind,
                p.summary,
                _merge([kept[cid]]),
                p.note,
                works_from=p.works_from or works_from[cid] or "",
            )
        if not works_from[cid]:
            out[cid].clear_from = _first_working(blocked[cid], ctx, NOT_BLOCKED) or ""
    return out


#: How many times a plan is made again on the recipe as the fixes so far leave it: each round
#: meets what the previous one's new pin uncovers (0.4.2 -> 0.5.2 -> 0.6.0 -> 0.11.1).
FOLLOW_UP_ROUNDS = 5


def _follow_up(
    case: Case,
    ctx: Context,
    kept: dict[int, Proposal],
    blocked: dict[int, list[Row]],
    reasons: dict[int, list[str]],
) -> None:
    """Plan again on the recipe as the kept fixes leave it, at its new pins, until nothing more is
    found (a few rounds); attach what holds to every kept fix (each keeps its own edits: causes
    pinned by different `min_vllm_version`s bump different paths). A fix can uncover what the
    command also lacked: a respelled flag reveals a strategy flag the pin does not have."""
    if not kept:
        return
    releases = None if case.pinned else sorted({r.release for r in case.rows}, key=release_key)
    targets = [(r, r.cause_keys.get(cid, ())) for cid in kept for r in blocked[cid]]
    extra: list[Edit] = []
    found_summaries: list[str] = []
    found_bumps: list[str] = []
    leftover: list[Planned] = []
    for _ in range(FOLLOW_UP_ROUNDS):
        after = judged_case(case, _merge(_with_extra(kept, extra)), ctx)
        more = plan_recipe(after, ctx, depth=1)
        fixes = [p for p in more.values() if p.kind != "none"]
        leftover = [p for p in more.values() if p.kind == "none"]
        found = _merge([Proposal(p.kind, tuple(p.edits), p.summary) for p in fixes])
        if not found or all(e in extra for e in found):
            break
        candidate = [*extra, *found]
        if not rejudge(case, _merge(_with_extra(kept, candidate)), targets, ctx, releases).ok:
            leftover += fixes
            break
        extra = candidate
        found_summaries += [p.summary for p in fixes]
        found_bumps += [p.works_from for p in fixes if p.kind == pin_bump.KIND and p.works_from]
    _drop_stale_gates(case, ctx, kept, extra, targets, releases, found_bumps)
    there = "; there, " + "; ".join(dict.fromkeys(found_summaries)) if found_summaries else ""
    for cid, own in list(kept.items()):
        still = (
            f"at {own.works_from or 'the new pin'} {len(leftover)} other cause(s) still block "
            "commands: " + " | ".join(p.why.split("; ")[0] for p in leftover[:3])
            if leftover and own.kind == pin_bump.KIND
            else ""
        )
        note = "; ".join(x for x in (own.note, still) if x)
        kept[cid] = Proposal(
            own.kind, (*own.edits, *extra), own.summary + there, own.works_from, note
        )


def _drop_stale_gates(
    case: Case,
    ctx: Context,
    kept: dict[int, Proposal],
    extra: list[Edit],
    targets: list[tuple[Row, tuple[str, ...]]],
    releases: list[str] | None,
    found_bumps: list[str],
) -> None:
    """A gate (or mode scope) planned at the old pin, whose commands start at the pin the
    follow-up reached, is not written: its cause takes the bump (GLM-4.7's tool_calling gate at
    0.11.0, stale once the pin is 0.14.0). As _prefer_bump_over_gates at the first round, and
    only when the plan without the gate still clears every cause."""
    bump_ids = [cid for cid, p in kept.items() if p.kind == pin_bump.KIND]
    pins = [kept[c].works_from for c in bump_ids if kept[c].works_from] + found_bumps
    if not bump_ids or not pins:
        return
    final = max(pins, key=release_key)
    for cid, p in list(kept.items()):
        if p.kind not in (gate.KIND, mode_variants.KIND):
            continue
        rows = [(r, r.cause_keys.get(cid, ())) for r, _keys in targets if cid in r.cause_keys]
        if not rows or not all(pin_bump.gone_at(ctx, final, r, keys) for r, keys in rows):
            continue
        without = {c: q for c, q in kept.items() if c != cid}
        if rejudge(case, _merge(_with_extra(without, extra)), targets, ctx, releases).ok:
            kept[cid] = kept[bump_ids[0]]


def _with_extra(kept: dict[int, Proposal], extra: list[Edit]) -> list[Proposal]:
    """Every kept fix with the follow-up edits after its own (so they win where they overlap)."""
    return [Proposal(p.kind, (*p.edits, *extra), p.summary, p.works_from) for p in kept.values()]


def judged_case(case: Case, edits: list[Edit], ctx: Context) -> Case:
    """The recipe with `edits` applied, judged at its (new) pins, with the causes of what is blocked.

    Causes are numbered locally (negative ids): they exist only inside this plan.
    """
    from dataclasses import replace as dc_replace

    from compat.recipes.repo import Recipe
    from compat.verdict.batch import cause_row
    from compat.verdict.cause import causes, renderer

    recipe = Recipe(case.path, apply(case.recipe.data, edits))
    repo = dc_replace(ctx.repo, recipes={**ctx.repo.recipes, case.path: recipe})
    render = renderer(repo)
    rows: list[Row] = []
    book: dict[int, dict[str, Any]] = {}
    ids: dict[tuple[str, str, str], int] = {}
    fallback = case.rows[0].release
    for c in ctx.combinations(recipe):
        for release in (
            [ctx.release_for(c.vllm_pin, fallback)]
            if case.pinned
            else sorted({r.release for r in case.rows}, key=release_key)
        ):
            o = ctx.pool.outcome(release, c)
            judge = ctx.pool.judge_at(release)
            if o is None or judge is None:
                continue
            cause_ids: list[int] = []
            keys: dict[int, tuple[str, ...]] = {}
            if o.status == "blocked" and not c.gated:
                for cause in causes(
                    c,
                    o,
                    ctx.pool.memoised(release),
                    render,
                    gone_later=partial(_gone_later, ctx.pool, release, c),
                ):
                    cid = ids.setdefault(cause.key, -(len(ids) + 1))
                    book.setdefault(cid, cause_row(cid, case.path, cause))
                    cause_ids.append(cid)
                    keys[cid] = (*keys.get(cid, ()), cause.finding_key)
            rows.append(Row(c, release, o, tuple(dict.fromkeys(cause_ids)), keys))
    return Case(case.path, recipe, rows, book, case.pinned)


def _gone_later(pool: Any, release: str, c: Any, key: str) -> bool:
    """Whether a release after `release` no longer has finding `key` for command `c`."""
    return pool.gone_later(release, c, key)


def _first_working(rows: list[Row], ctx: Context, accept: frozenset[str] = STARTS) -> str | None:
    """The first release where every row's command starts; with `accept=NOT_BLOCKED`, where
    none is known to fail (for a cause no release is known to start: `clear_from`)."""
    return ctx.pool.first_working(rows[0].release, [r.combo for r in rows], accept=accept)


def _plan_bump(
    case: Case,
    ctx: Context,
    ids: list[int],
    blocked: dict[int, list[Row]],
    chosen: dict[int, Proposal],
    reasons: dict[int, list[str]],
) -> None:
    if not ids:
        return
    rows = list({id(r): r for cid in ids for r in blocked[cid]}.values())
    merged = dict(
        case.causes[ids[0]],
        ids=ids,
        finding=case.causes[ids[0]]["finding"]
        + (f" (+{len(ids) - 1} more)" if len(ids) > 1 else ""),
    )
    proposal = pin_bump.propose(case, merged, rows, ctx)
    if isinstance(proposal, Proposal):
        for cid in ids:
            chosen[cid] = proposal
        return
    for cid in ids:  # together they cannot move; maybe some can alone
        alone = (
            pin_bump.propose(case, case.causes[cid], blocked[cid], ctx)
            if len(ids) > 1
            else proposal
        )
        if isinstance(alone, Proposal):
            chosen[cid] = alone
        else:
            reasons[cid].append(f"{pin_bump.KIND}: {alone}")


def _prefer_bump_over_gates(
    chosen: dict[int, Proposal], blocked: dict[int, list[Row]], ctx: Context
) -> None:
    bumps = [p for p in chosen.values() if p.kind == pin_bump.KIND]
    if not bumps:
        return
    bump = max(bumps, key=lambda p: release_key(p.works_from))
    for cid, p in list(chosen.items()):
        if p.kind in (gate.KIND, mode_variants.KIND) and all(
            pin_bump.gone_at(ctx, bump.works_from, r, r.cause_keys.get(cid, ()))
            for r in blocked[cid]
        ):
            chosen[cid] = bump


def _verified(
    case: Case,
    ctx: Context,
    chosen: dict[int, Proposal],
    blocked: dict[int, list[Row]],
    reasons: dict[int, list[str]],
) -> dict[int, Proposal]:
    """The proposals that hold when the edited recipe is judged again."""
    if not chosen:
        return {}
    releases = None if case.pinned else sorted({r.release for r in case.rows}, key=release_key)

    def targets(ids: list[int]) -> list[tuple[Row, tuple[str, ...]]]:
        return [(r, r.cause_keys.get(cid, ())) for cid in ids for r in blocked[cid]]

    result = rejudge(case, _merge(list(chosen.values())), targets(list(chosen)), ctx, releases)
    if result.ok:
        return dict(chosen)
    kept: dict[int, Proposal] = {}
    for cid, p in chosen.items():
        alone = rejudge(case, _merge([p]), targets([cid]), ctx, releases)
        if alone.ok:
            kept[cid] = p
        else:
            bad = alone.broken or alone.still_blocked
            key, status = next(iter(bad.items()))
            what = "would break" if alone.broken else "leaves blocked"
            reasons[cid].append(
                f"{p.kind} fix failed re-judging: {what} {describe(key)} ({status}); not written"
            )
    if (
        kept
        and not rejudge(case, _merge(list(kept.values())), targets(list(kept)), ctx, releases).ok
    ):
        for cid in kept:
            reasons[cid].append("fixes that hold alone fail together; not written")
        return {}
    return kept


def _merge(proposals: list[Proposal]) -> list[Edit]:
    """One edit per path. Allowlists and variant lists intersect (each fix removed what it
    must); for a scalar the newest bump wins, so a pin and the docker tag that names it
    always come from the same proposal."""
    by_key: dict[tuple[Any, ...], Edit] = {}
    for p in sorted(proposals, key=lambda p: release_key(p.works_from or "0")):
        for e in p.edits:
            key = (*e.path, e.op, str(e.old))
            cur = by_key.get(key)
            if (
                cur is not None
                and e.path[-1] in ("strategies", "variants")
                and isinstance(e.value, list)
            ):
                e = Edit(
                    cur.op,
                    cur.path,
                    [v for v in cur.value if v in e.value],
                    after=cur.after,
                    comment=_joined(cur, e),
                )
            by_key[key] = e
    return list(by_key.values())


def _joined(a: Edit, b: Edit) -> str:
    return wording.joined(a.comment, b.comment)


def build_cases(
    repo: Any, judged: dict[str, list[Row]], cause_rows: list[dict[str, Any]], pinned: bool
) -> list[Case]:
    """One Case per recipe with a blocked, ungated command at the judged releases."""
    by_recipe: dict[str, dict[int, dict[str, Any]]] = {}
    for row in cause_rows:
        by_recipe.setdefault(row["recipe"], {})[row["id"]] = row
    return [
        Case(path, repo.recipes[path], rows, by_recipe.get(path, {}), pinned=pinned)
        for path, rows in judged.items()
        if path in repo.recipes and any(r.blocked for r in rows)
    ]


def plan_all(cases: list[Case], ctx: Context, say: Any = None) -> dict[int, Planned]:
    """Plans for every recipe with blocked commands; cause id -> Planned."""
    out: dict[int, Planned] = {}
    for i, case in enumerate(cases, 1):
        if say and i % 10 == 0:
            say(f"fixes: planned {i} of {len(cases)} recipes")
        out.update(plan_recipe(case, ctx))
    return out
