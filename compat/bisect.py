"""`compat bisect`: the first release where a blocked combination starts working, and why.

Releases between the pinned one (or --from) and the newest on the index (or --to)
are searched by bisection, fetching and scanning only the releases the search
visits (facts are cached by sdist hash, so re-runs are cheap). The search assumes
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
from typing import Any

from compat import db as dbm
from compat.errors import UserError
from compat.hf import ModelResolver
from compat.recipes import Combination, enumerate_repo, load_repo
from compat.scan import release_facts, write_facts
from compat.sources.pypi import tree_from_index, versions_on_index
from compat.vocab import release_key, status_rank, worst
from compat.verdict.engine import Judge, Outcome
from compat.verdict.knowledge import load_knowledge

Progress = Callable[[str], None]


@dataclass
class BisectResult:
    target: str
    searched: list[str]  # candidate releases, oldest first
    visited: dict[str, str] = field(default_factory=dict)  # release -> worst status
    first_ok: str | None = None
    last_blocked: str | None = None
    why_blocked: list[str] = field(default_factory=list)
    why_ok: list[str] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)
    note: str = ""


def select(combos: list[Combination], model: str, strategy: str, feature: str) -> list[Combination]:
    feat, _, mode = feature.partition(":")
    name = model.split("/")[-1]
    out = [c for c in combos if (c.model_id == model or c.recipe == model or c.recipe.endswith(f"/{name}.yaml"))
           and c.strategy == strategy and c.feature == feat and (not mode or c.mode == mode)]
    return out


class _Releases:
    """Scans releases on demand into one temporary database and judges the selected combos."""

    def __init__(self, combos: list[Combination], progress: Progress | None, newest: str,
                 recipe_moe: dict[str, bool], shell: Any = None) -> None:
        self.combos = combos
        self.recipe_moe = recipe_moe
        self.shell = shell  # the recipes' shell placeholders: values the user's shell supplies
        # Facts about a model id do not depend on the release judged: resolve them with the
        # newest release's docs and test registry too (downloaded, not scanned).
        self.newest = tree_from_index(newest, progress=progress)
        self.say = progress or (lambda _m: None)
        self.tmp = tempfile.TemporaryDirectory(prefix="compat-bisect-")
        self.db = Path(self.tmp.name) / "bisect.db"
        self.engine = dbm.engine_for(self.db)
        dbm.init_schema(self.engine)
        self.trees: dict[str, Any] = {}
        self.outcomes: dict[str, list[Outcome]] = {}
        self.facts: dict[str, dict[str, Any]] = {}

    def judge(self, version: str) -> str:
        if version not in self.outcomes:
            self.say(f"bisect: scanning vllm {version}")
            tree = tree_from_index(version, progress=self.say)
            self.trees[version] = tree
            facts, _ = release_facts(tree, self.say)
            self.facts[version] = facts
            write_facts(self.engine, facts)
            models = ModelResolver(trees=[self.newest, *self.trees.values()])
            judge = Judge(load_knowledge(self.engine, version, tree), models, self.recipe_moe, self.shell)
            self.outcomes[version] = [judge.judge(c) for c in self.combos]
        return worst(o.status for o in self.outcomes[version]).value

    def close(self) -> None:
        self.engine.dispose()
        self.tmp.cleanup()


def bisect(recipes: Path, model: str, strategy: str, feature: str, start: str | None = None,
           end: str | None = None, progress: Progress | None = None) -> BisectResult:
    repo = load_repo(recipes)
    combos = select(enumerate_repo(repo).combinations, model, strategy, feature)
    if not combos:
        raise UserError(f"no synthesizable combination for {model} {strategy} {feature or '(base)'}",
                        where=str(recipes))
    available = versions_on_index()
    pin = start or combos[0].vllm_pin
    if pin == "nightly":
        pin = available[-1]
    if pin not in available:
        cands = [v for v in available if v.startswith(pin.rstrip(".") + ".")]
        if not cands:
            raise UserError(f"release {pin!r} is not on the package index", where="--from")
        pin = cands[0]
    last = end or available[-1]
    if last not in available:
        raise UserError(f"release {last!r} is not on the package index", where="--to")
    if release_key(last) < release_key(pin):
        raise UserError(f"--to {last} is older than the start {pin}; give --from OLDER --to NEWER",
                        where="--to")
    span = [v for v in available if release_key(pin) <= release_key(v) <= release_key(last)
            and not any(t in v for t in ("rc", "a", "b", "dev", "post"))]
    if not span:
        raise UserError(f"no final release between {pin} and {last} on the package index", where="--from")
    res = BisectResult(target=f"{model} {strategy} {feature}", searched=span)
    from compat.verdict.shell import read_placeholders

    rel = _Releases(combos, progress, available[-1], repo.declared_moe(), read_placeholders(Path(recipes)))
    try:
        lo_status = rel.judge(span[0])
        res.visited[span[0]] = lo_status
        if lo_status in ("ok", "warning"):
            res.first_ok = span[0]
            res.note = f"already works at {span[0]}"
            res.why_ok = _chain(rel.outcomes[span[0]])
            return res
        hi_status = rel.judge(span[-1])
        res.visited[span[-1]] = hi_status
        if hi_status not in ("ok", "warning"):
            res.last_blocked = span[-1]
            res.note = f"still {hi_status} at {span[-1]}"
            res.why_blocked = _chain(rel.outcomes[span[-1]])
            return res
        lo, hi = 0, len(span) - 1  # span[lo] not ok, span[hi] ok
        while hi - lo > 1:
            mid = (lo + hi) // 2
            st = rel.judge(span[mid])
            res.visited[span[mid]] = st
            if st in ("ok", "warning"):
                hi = mid
            else:
                lo = mid
        res.first_ok, res.last_blocked = span[hi], span[lo]
        res.why_blocked = _chain(rel.outcomes[span[lo]], worst_only=True)
        res.why_ok = _chain(rel.outcomes[span[hi]])
        res.changes = _changes(rel, span[lo], span[hi])
        return res
    finally:
        rel.close()


def _chain(outcomes: list[Outcome], worst_only: bool = False) -> list[str]:
    worst_outcome = max(outcomes, key=lambda o: status_rank(o.status))
    steps = [s for s in worst_outcome.chain if not worst_only or s.startswith(f"[{worst_outcome.status}]")]
    return steps + ([f"vLLM raises: {worst_outcome.message}"]
                    if worst_outcome.message and worst_outcome.status != "ok" else [])


def _changes(rel: _Releases, bad: str, good: str) -> list[str]:
    """Facts that differ between the two releases and are named in the blocked chain."""
    from compat.diff import _draft, diff

    words = " ".join(_chain(rel.outcomes[bad]))
    d = diff(rel.db, bad, good)
    out = []
    for p in d["draft_parallel"]:
        if f"method {p['method']}" in words:
            out.append(f"create_draft_parallel_config: draft PP for {p['method']} {p['from']['pp'] if p['from'] else '-'}"
                       f" -> {p['to']['pp'] if p['to'] else '-'} ({p['evidence']} at {good})")
    for c in d["capabilities"]["changed"]:
        cls = (c["class"] or [""])[-1]
        if c["platform"] == "cuda" and (c["arch"] in words or (cls and cls.rsplit(".", 1)[-1] in words)):
            flips = ", ".join(f"{f} {a}->{b}" for f, (a, b) in c["flags"].items())
            moved = f" class now {c['class'][1]}" if c["class"] else ""
            out.append(f"{c['arch']}: {flips}{moved} ({c['evidence']} at {good})")
    for x in d["drafts"]:
        if (x["platform"] == "cuda" and x["from"] and x["to"] and x["from"]["draft_arch"]
                and x["from"]["draft_arch"] in words and x["from"] != x["to"]):
            out.append(f"{x['method']} draft of {x['target']}: {_draft(x['from'])} -> {_draft(x['to'])}")
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
    lines = [f"{r.target}: searched {r.searched[0]} .. {r.searched[-1]} ({len(r.searched)} releases, "
             f"scanned {len(r.visited)}: {', '.join(f'{v} {s}' for v, s in sorted(r.visited.items(), key=lambda x: release_key(x[0])))})"]
    if r.note:
        lines.append(r.note)
    if r.first_ok and r.last_blocked:
        lines.append(f"first working release: {r.first_ok} (last blocked: {r.last_blocked})")
    if r.why_blocked:
        lines.append(f"blocked at {r.last_blocked}:")
        lines += [f"  {s}" for s in r.why_blocked]
    if r.changes:
        lines.append("what changed:")
        lines += [f"  {s}" for s in r.changes]
    if r.why_ok and r.first_ok:
        lines.append(f"at {r.first_ok}:")
        lines += [f"  {s}" for s in r.why_ok]
    return "\n".join(lines) + "\n"


def as_json(r: BisectResult) -> str:
    return json.dumps(r.__dict__, indent=1)
