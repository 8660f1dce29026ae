"""Every combination judged at its releases: status, the true first working release, and causes.

One pass per combination: the engine's verdict at each release the build judges; for a
blocked verdict the first release on the index where it starts (`ReleasePool`, by
bisection); for any non-ok verdict its causes (`cause.causes`, judged again with one
recipe element removed). Causes are collected per (recipe, cause) so that the fix stage,
`check` and the site speak of one cause once, however many combinations it blocks.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from compat.recipes import Combination
from compat.verdict.cause import Cause, Render, causes
from compat.verdict.engine import Outcome
from compat.verdict.releases import STARTS, ReleasePool
from compat.vocab import Status, release_key

#: (release, judged, pinned) targets of one combination.
Targets = list[tuple[str, int, int]]


@dataclass
class CauseBook:
    """Causes met while judging, one id per (recipe, cause key)."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    _ids: dict[tuple[str, tuple[str, str, str]], int] = field(default_factory=dict)

    def id_for(self, recipe: str, cause: Cause) -> int:
        key = (recipe, cause.key)
        found = self._ids.get(key)
        if found is None:
            found = self._ids[key] = len(self.rows) + 1
            self.rows.append(cause_row(found, recipe, cause))
        return found


def cause_row(cause_id: int, recipe: str, cause: Cause) -> dict[str, Any]:
    """A `cause` table row (fix columns empty until the fix stage fills them)."""
    return {
        "id": cause_id,
        "recipe": recipe,
        "kind": cause.kind,
        "element": cause.element,
        "mode": cause.mode,
        "carrier": cause.carrier,
        "label": cause.label,
        "finding": cause.finding,
        "field": "",
        "line": 0,
        "works_from": "",
        "fix_kind": "",
        "fix": "",
        "fix_why": "",
        "fix_edits": "[]",
    }


@dataclass
class Judged:
    """One verdict row (dict, `verdict` table columns) and the cause ids it links to."""

    row: dict[str, Any]
    cause_ids: list[int]
    combo: Combination
    outcome: Outcome
    cause_keys: dict[int, tuple[str, ...]] = field(default_factory=dict)  # cause id -> finding keys


class Sweep:
    """Judges combinations through a release pool, memoising what identical commands share."""

    def __init__(self, pool: ReleasePool, render: Render, book: CauseBook) -> None:
        self.pool = pool
        self.render = render
        self.book = book
        self._works_from: dict[tuple, str | None] = {}
        self._gone_later: dict[tuple, bool] = {}
        self._causes: dict[tuple, list[Cause]] = {}

    def works_from(self, version: str, c: Combination) -> str | None:
        key = (version, c.recipe, c.platform, c.model_id, c.argvs)
        if key not in self._works_from:
            self._works_from[key] = self.pool.first_working(version, [c])
        return self._works_from[key]

    def gone_later(self, version: str, c: Combination, finding: str) -> bool:
        """Does a later release no longer have the blocking finding for `c` (it may fail otherwise)?"""
        key = (version, c.recipe, c.platform, c.model_id, c.argvs, finding)
        if key not in self._gone_later:
            self._gone_later[key] = self.pool.gone_later(version, c, finding)
        return self._gone_later[key]

    def causes_of(self, version: str, c: Combination, o: Outcome) -> list[Cause]:
        key = (
            version,
            c.recipe,
            c.variant,
            c.strategy,
            c.feature,
            c.mode,
            c.platform,
            c.profiles[:1],
            c.argvs,
            c.gated,
        )
        if key not in self._causes:
            assert self.pool.judge_at(version) is not None  # judged releases are in the pool
            self._causes[key] = causes(
                c,
                o,
                self.pool.memoised(version),
                self.render,
                gone_later=lambda k: self.gone_later(version, c, k),
            )
        return self._causes[key]

    def judge(
        self,
        c: Combination,
        targets: Targets,
        command_id: int,
        later_scanned: Callable[[str], list[str]],
    ) -> Iterator[Judged]:
        """Rows for `c` at its targets, plus unjudged rows at later scanned releases for blocked ones."""
        seen = {v for v, _, _ in targets}
        for v, judged, pinned in targets:
            o = self.pool.outcome(v, c)
            assert o is not None
            row = verdict_row(c, v, o, judged=judged, pinned=pinned, command_id=command_id)
            ids: list[int] = []
            keys: dict[int, tuple[str, ...]] = {}
            if o.status != "ok":
                cs = self.causes_of(v, c, o)
                for x in cs:
                    cid = self.book.id_for(c.recipe, x)
                    ids.append(cid)
                    keys[cid] = (*keys.get(cid, ()), x.finding_key)
                if cs:
                    row.update(cause_kind=cs[0].kind, cause=cs[0].label, cause_id=ids[0])
            if o.status == "blocked":
                row["works_from"] = self.works_from(v, c) or ""
                # Rows at later scanned releases, up to the first where it starts (release tabs, diffs).
                for later in later_scanned(v):
                    lo = self.pool.outcome(later, c)
                    if lo is None:
                        continue
                    if later not in seen:
                        seen.add(later)
                        yield Judged(
                            verdict_row(c, later, lo, judged=0, pinned=0, command_id=command_id),
                            [],
                            c,
                            lo,
                            {},
                        )
                    if lo.status in STARTS:
                        break
            yield Judged(row, list(dict.fromkeys(ids)), c, o, keys)


def verdict_row(
    c: Combination, version: str, o: Outcome, *, judged: int, pinned: int, command_id: int | None
) -> dict[str, Any]:
    return {
        "vllm_version": version,
        "platform": c.platform,
        "hardware": c.hardware,
        "recipe": c.recipe,
        "model_id": c.model_id,
        "variant": c.variant,
        "strategy": c.strategy,
        "feature": c.feature,
        "mode": c.mode,
        "status": o.status,
        "message": o.message,
        "reason": o.reason,
        "evidence": "; ".join(e for e in o.evidence if e),
        "gated": int(c.gated),
        "pinned": pinned,
        "judged": judged,
        "works_from": "",
        "argv": "",
        "command_id": command_id,
        "chain": json.dumps(o.chain),
        "cause_kind": "",
        "cause": "",
        "cause_id": None,
        "profiles": ",".join(c.profiles),
        "source": c.source,
    }


def unavailable_row(c: Combination, version: str, why: str, command_id: int) -> dict[str, Any]:
    o = Outcome(
        status=Status.UNKNOWN, chain=[f"[unknown] pinned release {c.vllm_pin!r} unavailable: {why}"]
    )
    row = verdict_row(c, version, o, judged=1, pinned=1, command_id=command_id)
    row.update(cause_kind="pin", cause="the pinned release")
    return row


def later_than(releases: list[str]) -> Callable[[str], list[str]]:
    def later(v: str) -> list[str]:
        return [x for x in releases if release_key(x) > release_key(v)]

    return later
