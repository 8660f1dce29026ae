"""The library behind the CLI: each command is one call here, reachable from tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from compat import db as dbm
from compat.scan import release_facts, write_facts
from compat.sources import open_trees

Progress = Callable[[str], None]


def scan(versions: list[str], srcs: list[str], installed: bool, db_path: Path,
         use_cache: bool = True, progress: Progress | None = None) -> list[dict[str, Any]]:
    """Scan releases into `db_path` (atomically); returns a summary row per release."""
    dbm.ensure_writable(db_path)
    trees = open_trees(versions, srcs, installed, progress)
    summary = []
    facts_all = []
    for tree in trees:
        facts, cached = release_facts(tree, progress, use_cache)
        facts_all.append(facts)
        caps = [r for r in facts["arch_capability"] if r["platform"] == "cuda"]
        summary.append({
            "version": tree.version, "origin": tree.origin, "archs": len(caps),
            "pp": sum(1 for r in caps if r["supports_pp"]), "cached": cached,
            "seconds": facts["release"].get("seconds", 0.0),
        })
    with dbm.writing(db_path) as engine:
        for facts in facts_all:
            write_facts(engine, facts)
    return summary


def _resolve_pins(pins: set[str], progress: Progress | None) -> dict[str, str]:
    """Map each pin ('0.23.0', 'nightly', '0.11') to a release on the index, where possible."""
    from compat.errors import UserError
    from compat.sources.pypi import versions_on_index
    from compat.vocab import release_key

    try:
        available = versions_on_index()
    except UserError:
        available = []
    out: dict[str, str] = {}
    for pin in pins:
        if pin == "nightly":
            if available:
                out[pin] = available[-1]
        elif pin in available:
            out[pin] = pin
        else:
            # "0.11" or "0.11.0" spelled differently: the first release with that prefix.
            cands = [v for v in available if v == pin or v.startswith(pin.rstrip(".") + ".")]
            if cands:
                out[pin] = sorted(cands, key=release_key)[0]
    return out


def build(recipes: Path, versions: list[str], srcs: list[str], db_path: Path,
          hf_config_dir: Path | None = None, allow_hub: bool = False,
          progress: Progress | None = None) -> dict[str, Any]:
    """Scan + load recipes + resolve models + decide every combination; one atomic write."""
    import json
    import time

    from compat.errors import UserError
    from compat.hf import ModelResolver
    from compat.recipes import enumerate_repo, load_repo
    from compat.sources import tree_from_index, tree_from_path
    from compat.vocab import release_key
    from compat.verdict.engine import Judge
    from compat.verdict.knowledge import load_knowledge
    from collections import Counter

    say = progress or (lambda _m: None)
    t0 = time.perf_counter()
    dbm.ensure_writable(db_path)
    repo = load_repo(recipes)
    enum = enumerate_repo(repo)
    combos = enum.combinations
    say(f"recipes: {len(repo.recipes)} files, {len(combos)} combinations")
    explicit = bool(versions or srcs)
    trees = {}
    unavailable: dict[str, str] = {}
    if explicit:
        for v in versions:
            trees[v] = tree_from_index(v, progress=progress)
        for s in srcs:
            t = tree_from_path(s)
            trees[t.version] = t
        pin_of = {}
    else:
        pins = {c.vllm_pin for c in combos if c.vllm_pin}
        pin_of = _resolve_pins(pins, progress)
        for pin in sorted(pins):
            if pin not in pin_of:
                unavailable[pin] = f"release {pin!r} is not on the package index"
        for v in sorted(set(pin_of.values()), key=release_key):
            try:
                trees[v] = tree_from_index(v, progress=progress)
            except UserError as exc:
                unavailable[v] = exc.line()
    facts_all = {}
    for v in sorted(trees, key=release_key):
        try:
            facts, _cached = release_facts(trees[v], progress)
        except UserError as exc:  # e.g. a release whose layout the analysis does not know
            unavailable[v] = f"vLLM {v} layout not analysable: {exc.message}"
            say(unavailable[v])
            continue
        facts_all[v] = facts
    releases = sorted(facts_all, key=release_key)
    # A build from local trees only stays offline; otherwise the newest release informs model facts.
    extra = _newest_tree(trees, say) if (versions or not explicit) else []
    models = ModelResolver(hf_config_dir=hf_config_dir, allow_hub=allow_hub,
                           trees=list(trees.values()) + extra)
    coverage = models.coverage([c.model_id for c in combos if not c.omni])
    say(f"models: {coverage.get('resolved', '?')} of {coverage.get('total', '?')} ids resolved")
    summary: dict[str, Any] = {"combinations": len(combos), "releases": releases,
                               "unavailable": unavailable, "coverage": coverage}
    with dbm.writing(db_path) as engine:
        for v in releases:
            write_facts(engine, facts_all[v])
        recipe_moe = {path: r.model.get("architecture") == "moe" for path, r in repo.recipes.items()
                      if r.model.get("architecture") in ("moe", "dense")}
        judges = {v: Judge(load_knowledge(engine, v, trees[v]), models, recipe_moe) for v in releases}
        rows: list[dict[str, Any]] = []
        written = 0
        by_status: Counter[tuple[str, str]] = Counter()
        dbm.replace_rows(engine, dbm.Verdict, [])  # start empty; rows are appended in batches
        commands = []
        for i, c in enumerate(combos, 1):
            commands.append({"id": i, "argv": json.dumps([[r, list(a)] for r, a in c.argvs])})
        dbm.replace_rows(engine, dbm.Command, commands)

        def flush() -> None:
            nonlocal written
            by_status.update((r["vllm_version"], r["status"]) for r in rows if r["judged"])
            dbm.append_rows(engine, dbm.Verdict, rows)
            written += len(rows)
            rows.clear()
        for command_id, c in enumerate(combos, 1):
            if explicit:
                targets = [(v, 1) for v in releases]
                true_pin = _pin_in(c.vllm_pin, releases)
            else:
                pinned = pin_of.get(c.vllm_pin)
                targets = [(pinned, 1)] if pinned in judges else []
                true_pin = pinned
            if not targets:
                why = unavailable.get(pin_of.get(c.vllm_pin, c.vllm_pin)) or unavailable.get(c.vllm_pin) \
                    or "not resolvable"
                rows.append(_row(c, pin_of.get(c.vllm_pin, c.vllm_pin) or "?", "unknown",
                                 f"pinned release {c.vllm_pin!r} unavailable: {why}", "", [], 1,
                                 pinned=1, command_id=command_id))
                continue
            decided = {}
            row_at = {}
            for v, judged in targets:
                o = judges[v].judge(c)
                decided[v] = o
                row_at[v] = _row(c, v, o.status, o.reason, o.message, o.chain, judged, o.evidence,
                                 pinned=int(v == true_pin), command_id=command_id)
                rows.append(row_at[v])
            # For blocked rows, the first scanned release (newer) where the combination is ok.
            for v, o in list(decided.items()):
                if o.status != "blocked":
                    continue
                for later in releases:
                    if release_key(later) <= release_key(v):
                        continue
                    lo = decided.get(later) or judges[later].judge(c)
                    if later not in decided:
                        decided[later] = lo
                        rows.append(_row(c, later, lo.status, lo.reason, lo.message, lo.chain, 0, lo.evidence,
                                         pinned=int(later == true_pin), command_id=command_id))
                    if lo.status == "ok":
                        row_at[v]["works_from"] = later
                        break
            if len(rows) >= 20000:
                flush()
        flush()
        for v, judge in judges.items():  # the recipe models' drafts join v_draft
            dbm.append_rows(engine, dbm.DraftMapping,
                            [dict(r, vllm_version=v) for r in judge.drafts.values()])
        fact_rows = []
        for mid in sorted({c.model_id for c in combos}):
            f = models.resolve(mid)
            fact_rows.append({"model_id": mid, "status": f.status, "reason": f.reason or "",
                              "architectures": json.dumps(list(f.architectures)), "model_type": f.model_type,
                              "num_nextn_predict_layers": f.num_nextn_predict_layers,
                              "num_experts": f.num_experts, "source": f.source or "",
                              "provenance": f.provenance or "", "inferred": int(bool(f.inferred))})
        dbm.replace_rows(engine, dbm.ModelFact, fact_rows)

    summary["verdicts"] = written
    summary["by_status"] = dict(by_status)
    summary["seconds"] = round(time.perf_counter() - t0, 2)
    return summary


def _newest_tree(trees: dict[str, Any], say: Progress) -> list[Any]:
    """The newest release on the index, for model facts only (its docs and test registry).

    Facts about a model id do not depend on the release judged, so the resolver reads
    every source available; the newest release knows the newest models. Downloaded and
    extracted (cached), never scanned. Offline with nothing cached: skipped, said.
    """
    from compat.errors import UserError
    from compat.sources import tree_from_index
    from compat.sources.pypi import versions_on_index

    try:
        newest = versions_on_index()[-1]
        if newest in trees:
            return []
        return [tree_from_index(newest)]
    except (UserError, IndexError) as exc:
        say(f"model facts: newest release not available ({getattr(exc, 'message', exc)})")
        return []


def _pin_in(pin: str, releases: list[str]) -> str | None:
    """The release among `releases` a recipe pin names ('nightly' = the newest), if any."""
    if pin == "nightly":
        return releases[-1] if releases else None
    if pin in releases:
        return pin
    cands = [v for v in releases if v.startswith(pin.rstrip(".") + ".")]
    return cands[0] if cands else None


def _row(c: Any, version: str, status: str, reason: str, message: str, chain: list[str],
         judged: int, evidence: list[str] | None = None, *, pinned: int = 0,
         command_id: int | None = None) -> dict[str, Any]:
    import json

    return {
        "vllm_version": version, "platform": c.platform, "hardware": c.hardware, "recipe": c.recipe,
        "model_id": c.model_id, "variant": c.variant, "strategy": c.strategy, "feature": c.feature,
        "mode": c.mode, "status": status, "message": message, "reason": reason,
        "evidence": "; ".join(e for e in (evidence or []) if e), "gated": int(c.gated),
        "pinned": pinned, "judged": judged, "works_from": "", "argv": "", "command_id": command_id,
        "chain": json.dumps(chain),
    }
