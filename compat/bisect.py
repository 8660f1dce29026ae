"""`compat bisect`: the first release where a blocked combination starts working, and why.

Releases between the pinned one (or --from) and the newest on the index (or --to)
are searched by bisection through the build's own release pool (compat.verdict.releases),
fetching and scanning only the releases the search visits (facts are cached by sdist
hash, so re-runs are cheap). The search assumes
the combination, once fixed, stays fixed; both ends are checked, and a release
where it breaks again would show up in `compat diff`. The explanation compares
the facts the verdict used at the last blocked and the first working release.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from compat.errors import UserError
from compat.hf import ModelResolver
from compat.recipes import Combination, enumerate_repo, load_repo
from compat.scan import release_facts
from compat.sources.pypi import tree_from_index, versions_on_index
from compat.verdict.engine import Outcome
from compat.verdict.releases import ReleasePool, final_releases
from compat.vocab import NOT_BLOCKED, STARTS, release_key, resolve_pin, status_rank, worst

Progress = Callable[[str], None]


@dataclass
class BisectResult:
    target: str
    searched: list[str]  # candidate releases, oldest first
    visited: dict[str, str] = field(default_factory=dict)  # release -> worst status
    first_ok: str | None = None
    # With no first working release: the first where no command is known to fail any more (its
    # verdict `unknown`: a fact the engine lacks decides), and what changed there.
    first_clear: str | None = None
    last_blocked: str | None = None
    why_blocked: list[str] = field(default_factory=list)
    why_ok: list[str] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)
    note: str = ""


def select(combos: list[Combination], model: str, strategy: str, feature: str) -> list[Combination]:
    feat, _, mode = feature.partition(":")
    name = model.split("/")[-1]
    out = [
        c
        for c in combos
        if (c.model_id == model or c.recipe == model or c.recipe.endswith(f"/{name}.yaml"))
        and c.strategy == strategy
        and c.feature == feat
        and (not mode or c.mode == mode)
    ]
    return out


def bisect(
    recipes: Path,
    model: str,
    strategy: str,
    feature: str,
    start: str | None = None,
    end: str | None = None,
    progress: Progress | None = None,
) -> BisectResult:
    """The first release after the pin (or --from) where every selected combination starts,
    searched by the build's own release pool (`ReleasePool.first_release`)."""
    from compat.verdict.shell import read_placeholders

    repo = load_repo(recipes)
    combos = select(enumerate_repo(repo).combinations, model, strategy, feature)
    if not combos:
        raise UserError(
            f"no synthesizable combination for {model} {strategy} {feature or '(base)'}",
            where=str(recipes),
        )
    available = final_releases(versions_on_index())
    pin = resolve_pin(start or combos[0].vllm_pin, available)
    if pin is None:
        raise UserError(
            f"release {start or combos[0].vllm_pin!r} is not on the package index", where="--from"
        )
    last = end or available[-1]
    if last not in available:
        raise UserError(f"release {last!r} is not on the package index", where="--to")
    if release_key(last) < release_key(pin):
        raise UserError(
            f"--to {last} is older than the start {pin}; give --from OLDER --to NEWER", where="--to"
        )
    span = [v for v in available if release_key(pin) <= release_key(v) <= release_key(last)]
    res = BisectResult(target=f"{model} {strategy} {feature}", searched=span)
    # Model facts do not depend on the release judged: the newest release's docs and test
    # registry answer them, as in a build.
    models = ModelResolver(trees=[tree_from_index(available[-1], progress=progress)])
    pool = ReleasePool(
        {},
        models,
        repo.declared_moe(),
        index=available,
        progress=progress,
        shell=read_placeholders(Path(recipes)),
    )

    def passes(accept: frozenset[str]) -> Callable[[str], bool | None]:
        """Does every selected combination's status at a release fall in `accept`? (None:
        the release cannot be judged). The worst status is recorded as visited."""

        def test(version: str) -> bool | None:
            outcomes = [pool.outcome(version, c) for c in combos]
            if any(o is None for o in outcomes):
                return None
            res.visited[version] = worst(o.status for o in outcomes if o is not None).value
            return res.visited[version] in accept

        return test

    if passes(STARTS)(pin):
        res.first_ok, res.note = pin, f"already works at {pin}"
        res.why_ok = _chain(_outcomes(pool, pin, combos))
        return res
    res.first_ok = pool.first_release(pin, passes(STARTS), until=last)
    if res.first_ok is None:
        res.first_clear = pool.first_release(pin, passes(NOT_BLOCKED), until=last)
    _explain(res, pool, combos, span)
    return res


def _explain(
    res: BisectResult, pool: ReleasePool, combos: list[Combination], span: list[str]
) -> None:
    """The chains at the last blocked release and the first that works (or is no longer known
    to fail), and the facts that changed between them."""
    found = res.first_ok or res.first_clear
    if found is None:
        res.last_blocked = span[-1]
        res.note = f"still {res.visited.get(span[-1], 'unknown')} at {span[-1]}"
        res.why_blocked = _chain(_outcomes(pool, span[-1], combos))
        return
    before = [v for v in res.visited if release_key(v) < release_key(found)]
    res.last_blocked = max(before, key=release_key)
    res.why_blocked = _chain(_outcomes(pool, res.last_blocked, combos), worst_only=True)
    res.why_ok = _chain(_outcomes(pool, found, combos))
    res.changes = _changes(res.why_blocked, res.last_blocked, found)
    if res.first_clear:
        res.note = (
            f"no release is known to start it; from {found} no command is known to fail, and "
            "there the verdict is unknown (a fact decides it)"
        )


def _outcomes(pool: ReleasePool, version: str, combos: list[Combination]) -> list[Outcome]:
    return [o for o in (pool.outcome(version, c) for c in combos) if o is not None]


def _chain(outcomes: list[Outcome], worst_only: bool = False) -> list[str]:
    worst_outcome = max(outcomes, key=lambda o: status_rank(o.status))
    steps = [
        s
        for s in worst_outcome.chain
        if not worst_only or s.startswith(f"[{worst_outcome.status}]")
    ]
    return steps + (
        [f"vLLM raises: {worst_outcome.message}"]
        if worst_outcome.message and worst_outcome.status != "ok"
        else []
    )


def _changes(blocked_chain: list[str], bad: str, good: str) -> list[str]:
    """Facts that differ between the two releases and are named in the blocked chain (their
    facts, cached by the scan, written to a scratch database for `compat.diff`)."""
    from compat import store
    from compat.diff import _draft, diff

    words = " ".join(blocked_chain)
    with tempfile.TemporaryDirectory(prefix="compat-bisect-") as tmp:
        db = Path(tmp) / "bisect.db"
        with store.scratch(db) as facts_db:
            for v in (bad, good):
                facts_db.write_release_facts(release_facts(tree_from_index(v))[0])
        d = diff(db, bad, good)
    out = []
    for p in d["draft_parallel"]:
        if f"method {p['method']}" in words:
            out.append(
                f"create_draft_parallel_config: draft PP for {p['method']} {p['from']['pp'] if p['from'] else '-'}"
                f" -> {p['to']['pp'] if p['to'] else '-'} ({p['evidence']} at {good})"
            )
    for c in d["capabilities"]["changed"]:
        cls = (c["class"] or [""])[-1]
        if c["platform"] == "cuda" and (
            c["arch"] in words or (cls and cls.rsplit(".", 1)[-1] in words)
        ):
            flips = ", ".join(f"{f} {a}->{b}" for f, (a, b) in c["flags"].items())
            moved = f" class now {c['class'][1]}" if c["class"] else ""
            out.append(f"{c['arch']}: {flips}{moved} ({c['evidence']} at {good})")
    for x in d["drafts"]:
        if (
            x["platform"] == "cuda"
            and x["from"]
            and x["to"]
            and x["from"]["draft_arch"]
            and x["from"]["draft_arch"] in words
            and x["from"] != x["to"]
        ):
            out.append(
                f"{x['method']} draft of {x['target']}: {_draft(x['from'])} -> {_draft(x['to'])}"
            )
    for f in d["flags"]["added"]:
        if f in words:
            out.append(f"flag {f} added")
    for kind in ("tool", "reasoning"):
        for n in d[f"{kind}_parsers"]["added"]:
            if n in words:
                out.append(f"{kind} parser {n} registered")
    for m in d["spec_methods"]["added"]:
        if f"'{m}'" in words:
            out.append(f"speculative method {m} accepted")
    for g in d["gates"]:
        if g["rule"] in words:
            out.append(f"gate {g['rule']}: {g['from']} -> {g['to']}")
    return out


def render(r: BisectResult) -> str:
    lines = [
        f"{r.target}: searched {r.searched[0]} .. {r.searched[-1]} ({len(r.searched)} releases, "
        f"scanned {len(r.visited)}: {', '.join(f'{v} {s}' for v, s in sorted(r.visited.items(), key=lambda x: release_key(x[0])))})"
    ]
    if r.note:
        lines.append(r.note)
    if r.first_ok and r.last_blocked:
        lines.append(f"first working release: {r.first_ok} (last blocked: {r.last_blocked})")
    if r.first_clear and r.last_blocked:
        lines.append(
            f"first release not known to fail: {r.first_clear} (last blocked: {r.last_blocked})"
        )
    if r.why_blocked:
        lines.append(f"blocked at {r.last_blocked}:")
        lines += [f"  {s}" for s in r.why_blocked]
    if r.changes:
        lines.append("what changed:")
        lines += [f"  {s}" for s in r.changes]
    if r.why_ok and (r.first_ok or r.first_clear):
        lines.append(f"at {r.first_ok or r.first_clear}:")
        lines += [f"  {s}" for s in r.why_ok]
    return "\n".join(lines) + "\n"


def as_json(r: BisectResult) -> str:
    return json.dumps(r.__dict__, indent=1)
