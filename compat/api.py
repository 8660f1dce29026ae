"""The library behind the CLI: each command is one call here, reachable from tests.

A command's work is one function here (`compat check` is `check`, `compat models lock` is
`lock_models`); what it prints comes from the `render_*` function of its `--format` set.
Imports stay inside the functions, so `compat --help` and a usage error load no stage.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compat.vocab import resolve_pin

if TYPE_CHECKING:
    from compat.bisect import BisectResult
    from compat.emit.site import SiteReport
    from compat.fix.edits import Edit
    from compat.fix.writer import ApplyResult
    from compat.lint import LintResult

Progress = Callable[[str], None]


class TextFormat(StrEnum):
    """`--format` of diff, bisect, lint and models outdated."""

    TEXT = "text"
    JSON = "json"


class CheckFormat(StrEnum):
    """`--format` of check: GitHub workflow annotations besides text and JSON."""

    TEXT = "text"
    GITHUB = "github"
    JSON = "json"


class ExplainFormat(StrEnum):
    """`--format` of explain: the causal chain, or a bug report for a vLLM-side cause."""

    TEXT = "text"
    ISSUE = "issue"


class FixFormat(StrEnum):
    """`--format` of fix: the fixes as lines, or as the PR body of `--commit`."""

    TEXT = "text"
    MARKDOWN = "markdown"


class SqlFormat(StrEnum):
    """`--format` of sql."""

    TABLE = "table"
    JSON = "json"
    CSV = "csv"


def scan(
    versions: list[str],
    srcs: list[str],
    installed: bool,
    db_path: Path,
    use_cache: bool = True,
    progress: Progress | None = None,
) -> list[dict[str, Any]]:
    """Scan releases into `db_path` (atomically); returns a summary row per release."""
    from compat import store
    from compat.scan import release_facts
    from compat.sources import open_trees
    from compat.vllm.facts import share_workers

    store.ensure_writable(db_path)
    trees = open_trees(versions, srcs, installed, progress)
    summary = []
    facts_all = []
    with share_workers():  # a file unchanged since the release before is not parsed again
        scanned = [release_facts(tree, progress, use_cache) for tree in trees]
    for tree, (facts, cached) in zip(trees, scanned):
        facts_all.append(facts)
        caps = [r for r in facts["arch_capability"] if r["platform"] == "cuda"]
        summary.append(
            {
                "version": tree.version,
                "origin": tree.origin,
                "archs": len(caps),
                "pp": sum(1 for r in caps if r["supports_pp"]),
                "cached": cached,
                "seconds": facts["release"].get("seconds", 0.0),
            }
        )
    with store.writing(db_path) as db:
        for facts in facts_all:
            db.write_release_facts(facts)
    return summary


def _resolve_pins(pins: set[str], progress: Progress | None) -> dict[str, str]:
    """Map each pin ('0.23.0', 'nightly', '0.11') to a release on the index, where possible."""
    from compat.errors import UserError
    from compat.sources.pypi import versions_on_index

    try:
        available = versions_on_index()
    except UserError:
        available = []
    found = {pin: resolve_pin(pin, available) for pin in pins}
    return {pin: v for pin, v in found.items() if v is not None}


def build(
    recipes: Path,
    versions: list[str],
    srcs: list[str],
    db_path: Path,
    hf_config_dir: Path | None = None,
    allow_hub: bool = False,
    progress: Progress | None = None,
    facts_lock: Path | None = None,
) -> dict[str, Any]:
    """Scan + load recipes + resolve models + decide every combination; one atomic write.

    With `facts_lock`, the lock answers first for every id it holds (offline). A recipe whose
    inputs are unchanged since a build that cached its results is not judged again
    (compat.reuse)."""
    import time

    from compat import store
    from compat.blocks import model_ids
    from compat.hf.lock import read_lock
    from compat.recipes import load_repo
    from compat.reuse import RecipeCache
    from compat.sources.pypi import one_index_answer
    from compat.tables import ModelFact, RecipeFile, ShellVariable
    from compat.verdict import arg_memo
    from compat.verdict.shell import read_placeholders
    from compat.vllm.facts import share_workers

    say = progress or (lambda _m: None)
    t0 = time.perf_counter()
    store.ensure_writable(db_path)
    lock = read_lock(facts_lock) if facts_lock is not None else None
    # share_workers: the releases this process scans (as they land, and for works_from's
    # search) go to two kept workers, which do not parse a file unchanged since the last.
    with one_index_answer(), share_workers():
        repo = load_repo(recipes)
        cache = RecipeCache(repo.root, repo.recipes)
        outlines, combos = _outlines(repo, cache)
        count = sum(o.count for o in outlines.values())
        say(f"recipes: {len(repo.recipes)} files, {count} combinations")
        explicit = bool(versions or srcs)
        # A build from local trees only stays offline (model facts, works_from's search).
        online = bool(versions or not explicit)
        pins = {p for o in outlines.values() for p in o.pins}
        trees, pin_of, unavailable = _open_trees(pins, versions, srcs, progress)
        models = _model_resolver(trees, hf_config_dir, allow_hub, lock, online, say)
        models.prefetch(model_ids(outlines.values()))
        coverage = models.coverage([m for o in outlines.values() for m in o.served])
        for mid in model_ids(outlines.values()):  # resolved in one order, whoever reads them
            models.resolve(mid)
        say(f"models: {coverage.get('resolved', '?')} of {coverage.get('total', '?')} ids resolved")
        with store.writing(db_path) as db:
            releases = _write_release_facts(db, trees, unavailable, say)
            shell = read_placeholders(Path(recipes))  # $HEAD_IP & co.: the user's shell supplies
            db.replace(ShellVariable, shell.rows())
            index = _index_or_none() if online else None
            judging = _judging(db, repo, trees, releases, models, shell, index, say)
            judging.explicit, judging.pin_of, judging.unavailable = explicit, pin_of, unavailable
            cache.share(_shared_inputs(judging, index))
            with arg_memo.session():
                written, by_status = _judge_all(db, judging, outlines, combos, cache, say)
            db.replace(RecipeFile, _recipe_hashes(repo))
            served = {m for o in outlines.values() for m in o.model_ids}
            db.replace(ModelFact, _model_fact_rows(models, served))
    return {
        "combinations": count,
        "releases": releases,
        "unavailable": unavailable,
        "coverage": coverage,
        "works_from_basis": "index"
        if index is not None
        else "scanned releases (index unreachable)",
        "verdicts": written,
        "by_status": dict(by_status),
        "seconds": round(time.perf_counter() - t0, 2),
    }


def _outlines(repo: Any, cache: Any) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """Each recipe's outline (compat.blocks.Outline), from the cache where its inputs are
    unchanged; the combinations of the recipes enumerated to make theirs."""
    from compat.blocks import Outline
    from compat.recipes import enumerate_recipe

    from compat.workers import split_map

    outlines = {path: cache.outline(path) for path in repo.recipes}
    todo = [path for path, outline in outlines.items() if outline is None]
    combos = dict(zip(todo, split_map(lambda p: enumerate_recipe(repo, repo.recipes[p]), todo)))
    for path in todo:
        outlines[path] = Outline.of(combos[path])
        cache.put_outline(path, outlines[path])
    return outlines, combos


def _open_trees(
    pins: set[str], versions: list[str], srcs: list[str], progress: Progress | None
) -> tuple[dict[str, Any], dict[str, str], dict[str, str]]:
    """(label -> tree, pin -> release, release or pin -> why unavailable) of the releases a
    build judges: those given, else every release a recipe pins. Sdists download at once, and
    each release is scanned as soon as it lands (compat.scan.scan_ahead)."""
    from compat.scan import scan_ahead
    from compat.sources import tree_from_path
    from compat.sources.pypi import trees_from_index
    from compat.sources.tree import VllmTree
    from compat.vocab import release_key

    trees: dict[str, Any] = {}
    unavailable: dict[str, str] = {}
    ready = scan_ahead(progress)  # releases scanned as they land, while the rest download
    if versions or srcs:
        for v, found in trees_from_index(versions, progress, ready=ready).items():
            if not isinstance(found, VllmTree):
                raise found  # a release asked for by name must be there
            trees[v] = found
        for s in srcs:
            t = tree_from_path(s)
            trees[t.version] = t
        return trees, {}, unavailable
    pin_of = _resolve_pins(pins, progress)
    for pin in sorted(pins):
        if pin not in pin_of:
            unavailable[pin] = f"release {pin!r} is not on the package index"
    wanted = sorted(set(pin_of.values()), key=release_key)
    ahead = _search_ahead(wanted, progress)
    # In release order: the search's releases land between the judged ones, not after them all
    # (the build waits for every download before it judges). They are fetched only: neither
    # handed to `ready` nor in the result, and unpacked if the search opens one.
    fetch = sorted(wanted + ahead, key=release_key)
    for v, found in trees_from_index(fetch, progress, ready=ready, sdist_only=ahead).items():
        if isinstance(found, VllmTree):
            trees[v] = found
        else:
            unavailable[v] = found.line()
    return trees, pin_of, unavailable


def _search_ahead(judged: list[str], progress: Progress | None) -> list[str]:
    """The releases works_from's search may scan that are not on disk: the final releases on
    the index after the oldest judged one. A cold pinned build's search visits 15 of these 34,
    each scanned when first asked; downloaded with the judged releases, no judging worker waits
    on the network while it holds a release's lock. They are neither scanned nor unpacked ahead
    (more than half would be for nothing): a release is unpacked when the search opens it."""
    from compat.errors import UserError
    from compat.sources.pypi import on_disk, versions_on_index
    from compat.verdict.releases import final_releases
    from compat.vocab import release_key

    if not judged:
        return []
    try:
        index = versions_on_index()
    except UserError:
        return []  # offline: the search spans the scanned releases only
    oldest = release_key(judged[0])
    out = [
        v
        for v in final_releases(index)
        if release_key(v) > oldest and v not in judged and not on_disk(v, sdist=True)
    ]
    if out and progress is not None:
        progress(f"works_from: {len(out)} more releases its search may visit, downloading")
    return out


def _write_release_facts(
    db: Any, trees: dict[str, Any], unavailable: dict[str, str], say: Progress
) -> list[str]:
    """Each release's facts into the database, one at a time (none is held once written);
    returns the releases that have facts, oldest first."""
    from compat.errors import UserError
    from compat.scan import release_facts
    from compat.vocab import release_key

    releases = []
    for v in sorted(trees, key=release_key):
        try:
            facts, _cached = release_facts(trees[v], say)
        except UserError as exc:  # e.g. a release whose layout the analysis does not know
            unavailable[v] = f"vLLM {v} layout not analysable: {exc.message}"
            say(unavailable[v])
            continue
        db.write_release_facts(facts)
        releases.append(v)
    return releases


def _model_resolver(
    trees: dict[str, Any],
    hf_config_dir: Path | None,
    allow_hub: bool,
    lock: Any,
    online: bool,
    say: Progress,
) -> Any:
    """Model facts from every source the build may read (online: also the newest release's
    docs and test registry, and the newest transformers' documented checkpoints)."""
    from compat.hf import ModelResolver
    from compat.hf.release_sources import newest_tree, transformers_checkpoints

    return ModelResolver(
        hf_config_dir=hf_config_dir,
        allow_hub=allow_hub,
        trees=list(trees.values()) + (newest_tree(trees, say) if online else []),
        lock=lock,
        checkpoints=transformers_checkpoints(say) if online else None,
    )


def _judging(
    db: Any,
    repo: Any,
    trees: dict[str, Any],
    releases: list[str],
    models: Any,
    shell: Any,
    index: list[str] | None,
    say: Progress,
) -> Any:
    """What every recipe is judged with: a pool whose judges of the build's releases load
    their knowledge from the database on first use, and a recorder listening to them."""
    from functools import partial

    from compat.blocks import Judging, Recorder
    from compat.reuse import model_hasher
    from compat.verdict.releases import ReleasePool

    moe = repo.declared_moe()
    lazy = {v: partial(_judge_of, db, trees[v], models, moe, shell) for v in releases}
    recorder = Recorder(releases)
    pool = ReleasePool(
        {}, models, moe, index=index, progress=say, shell=shell, lazy=lazy, trace=recorder
    )
    fingerprints = {v: trees[v].fingerprint() for v in releases}
    return Judging(
        repo, pool, releases, False, {}, {}, recorder, model_hasher(models.resolve), fingerprints
    )


def _judge_of(db: Any, tree: Any, models: Any, moe: dict[str, bool], shell: Any) -> Any:
    from compat.verdict.engine import Judge
    from compat.verdict.knowledge import load_knowledge

    return Judge(load_knowledge(db.here(), tree.version, tree), models, moe, shell)


def _judge_all(
    db: Any,
    j: Any,
    outlines: dict[str, Any],
    combos: dict[str, list[Any]],
    cache: Any,
    say: Progress,
) -> tuple[int, Counter[tuple[str, str]]]:
    """Every recipe's block, reused or judged (on every core), then written in recipe order;
    returns (verdict rows written, count per (release, status) at the judged releases)."""
    from compat.blocks import DraftRows, Offsets, write_block, write_gates
    from compat.recipes import enumerate_recipe
    from compat.tables import CauseRow, Command, DraftMapping, Verdict, VerdictCause
    from compat.workers import judge_all

    paths = [path for path, o in outlines.items() if o.count]
    blocks = {p: b for p in paths if (b := cache.block(p, j.model_hash)) is not None}
    todo = [p for p in paths if p not in blocks]
    say(f"recipes: {len(todo)} to judge, {len(blocks)} reused (inputs unchanged)")
    db.con.commit()  # the release facts, for workers reading them through their own connection
    # The largest recipes first: the workers then end together, not one waiting on the other's
    # last big recipe (a block does not depend on which recipes were judged before it).
    order = sorted(todo, key=lambda p: -outlines[p].count)
    for n, (path, block) in enumerate(
        judge_all(
            j, order, lambda p: combos.get(p) or enumerate_recipe(j.repo, j.repo.recipes[p]), say
        ),
        1,
    ):
        blocks[path] = block
        cache.put_block(path, block)
        if n % 20 == 0:
            say(f"recipes: {n} of {len(todo)} judged")
    for record in (Verdict, VerdictCause, Command, CauseRow):
        db.replace(record, [])
    at, drafts, by_status = Offsets(), DraftRows(j.releases), Counter[tuple[str, str]]()
    gates: list[dict[str, Any]] = []  # ungate proposals, after every recipe's causes
    for path in paths:
        block = blocks.pop(path)
        write_block(db, block, at)
        drafts.add(block)
        by_status.update(block.judged_statuses())
        gates += block.gates
    if n_gates := write_gates(db, gates, at):
        say(f"gates: {n_gates} whose hidden commands start (ungate proposals)")
    db.append(DraftMapping, drafts.rows())
    say(f"recipes: {len(todo)} judged, {len(paths) - len(todo)} reused (inputs unchanged)")
    return at.verdicts, by_status


def _shared_inputs(j: Any, index: list[str] | None) -> dict[str, Any]:
    """What every recipe's results depend on besides its own file and the model facts it
    read (compat.reuse)."""
    from compat.sources.pypi import sdist_hashes

    return {
        "explicit": j.explicit,
        "releases": [[v, j.fingerprints[v]] for v in j.releases],
        "pin_of": sorted(j.pin_of.items()),
        "unavailable": sorted(j.unavailable.items()),
        "index": sdist_hashes() if index is not None else None,
    }


def _index_or_none() -> list[str] | None:
    """Releases on the package index, or None offline (works_from then spans scanned releases)."""
    from compat.errors import UserError
    from compat.sources.pypi import versions_on_index

    try:
        return versions_on_index()
    except UserError:
        return None


def _recipe_hashes(repo: Any) -> list[dict[str, str]]:
    import hashlib

    return [
        {"path": path, "sha256": hashlib.sha256((repo.root / path).read_bytes()).hexdigest()}
        for path in repo.recipes
    ]


def _model_fact_rows(models: Any, ids: set[str]) -> list[dict[str, Any]]:
    import json

    out = []
    for mid in sorted(ids):
        f = models.resolve(mid)
        out.append(
            {
                "model_id": mid,
                "status": f.status,
                "reason": f.reason or "",
                "architectures": json.dumps(list(f.architectures)),
                "model_type": f.model_type,
                "num_nextn_predict_layers": f.num_nextn_predict_layers,
                "num_experts": f.num_experts,
                "source": f.source or "",
                "provenance": f.provenance or "",
                "revision": f.revision or "",
                "inferred": int(bool(f.inferred)),
            }
        )
    return out


def recipe_model_ids(combos: list[Any]) -> list[str]:
    """Every model id the combinations use: served models (omni recipes aside) and the draft
    checkpoints their --speculative-config names, in first-seen order."""
    from compat.blocks import Outline, model_ids

    return model_ids([Outline.of(combos)])


def lock_models(
    recipes: Path,
    output: Path,
    versions: list[str],
    srcs: list[str],
    hf_config_dir: Path | None = None,
    allow_hub: bool = True,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Resolve every model id the recipes use afresh (Hub, HF cache, offline sources) and write
    the facts lock atomically; entries unchanged since the previous lock keep their date."""
    from collections import Counter

    from compat.hf import ModelResolver
    from compat.hf.lock import READ_KEYS, build_lock, read_lock, sandbox_keys, write_lock
    from compat.hf.release_sources import transformers_checkpoints
    from compat.recipes import enumerate_repo, load_repo

    say = progress or (lambda _m: None)
    combos = enumerate_repo(load_repo(recipes)).combinations
    ids = recipe_model_ids(combos)
    trees = _model_fact_trees(versions, srcs, say)
    models = ModelResolver(
        hf_config_dir=hf_config_dir,
        allow_hub=allow_hub,
        trees=trees,
        checkpoints=transformers_checkpoints(say) if (versions or not srcs) else None,
    )
    models.prefetch(ids)
    facts = [models.resolve(mid) for mid in ids]
    previous = read_lock(output) if output.is_file() else None
    sources = {
        "vllm": sorted(t.version for t in trees),
        "transformers": models.transformers_version,
    }
    doc = build_lock(facts, set(READ_KEYS) | sandbox_keys(trees), sources, previous)
    write_lock(doc, output)
    return {
        "ids": len(ids),
        "output": str(output),
        "by_status": dict(Counter(f.status for f in facts)),
        "by_source": dict(Counter(f.source or "unknown" for f in facts)),
        "revisions": sum(1 for f in facts if f.revision),
    }


def outdated_models(lock_path: Path, progress: Progress | None = None) -> list[dict[str, Any]]:
    """For every locked id whose config came from the Hub or an HF cache (it has a revision):
    the commit of main upstream now, and whether it moved."""
    from compat.hf.hub import HubClient
    from compat.hf.lock import read_lock

    lock = read_lock(lock_path)
    # A quantized or curated copy carries its base's config and revision: ask about the base.
    pinned = {
        mid: (e.get("base_model_id") or mid, e["revision"])
        for mid, e in lock.models.items()
        if e.get("revision")
    }
    hub = HubClient()
    now = hub.fetch_many(sorted({repo for repo, _ in pinned.values()}), fetch=hub.upstream_revision)
    rows = []
    for mid, (repo, locked) in pinned.items():
        sha, why = now[repo]
        state = "error" if sha is None else ("unchanged" if sha == locked else "changed")
        rows.append(
            {
                "model_id": mid,
                "repo": repo,
                "locked": locked,
                "upstream": sha,
                "state": state,
                "reason": why or "",
            }
        )
    return rows


def _model_fact_trees(versions: list[str], srcs: list[str], say: Progress) -> list[Any]:
    """The releases whose tests and docs inform model facts: those named, plus the newest."""
    from compat.hf.release_sources import newest_tree
    from compat.sources import tree_from_index, tree_from_path

    trees = {v: tree_from_index(v) for v in versions}
    for s in srcs:
        t = tree_from_path(s)
        trees[t.version] = t
    if versions or not srcs:
        trees.update({t.version: t for t in newest_tree(trees, say)})
    return list(trees.values())


def lint(
    command: list[str],
    db_path: Path | None,
    versions: list[str],
    platform: str = "cuda",
    hf_config_dir: Path | None = None,
    allow_hub: bool = False,
    search: bool = True,
    progress: Progress | None = None,
    srcs: list[str] | None = None,
    facts_lock: Path | None = None,
) -> LintResult:
    """`compat lint`: one serve command judged at the database's releases (compat.lint)."""
    from compat.lint import lint as run

    return run(
        command,
        db_path,
        versions,
        platform,
        hf_config_dir,
        allow_hub,
        search,
        progress,
        srcs,
        facts_lock,
    )


def render_lint(result: LintResult, format: TextFormat = TextFormat.TEXT) -> str:
    """What `compat lint` prints."""
    from compat import lint as lintm

    return lintm.as_json(result) + "\n" if format == TextFormat.JSON else lintm.render(result)


def render_outdated(rows: list[dict[str, Any]], format: TextFormat = TextFormat.TEXT) -> str:
    """What `compat models outdated` prints: the ids that moved or failed, then the counts."""
    import json

    if format == TextFormat.JSON:
        return json.dumps(rows, indent=1) + "\n"
    lines = []
    for r in rows:
        if r["state"] != "unchanged":
            detail = f"{r['locked'][:12]} -> {r['upstream'][:12]}" if r["upstream"] else r["reason"]
            lines.append(f"{r['state']:9} {r['model_id']}: {detail}\n")
    counts = {st: sum(r["state"] == st for r in rows) for st in ("changed", "unchanged", "error")}
    lines.append(", ".join(f"{v} {k}" for k, v in counts.items()) + "\n")
    return "".join(lines)


def sql(db_path: Path, statement: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """`compat sql`: one read-only statement over the tables and views; (columns, rows)."""
    from compat import store

    return store.query(db_path, statement)


def check(db_path: Path) -> dict[str, Any]:
    """`compat check`: blocked, ungated combinations grouped by (recipe, cause), with fixes; the
    gates to review (ungate proposals) and the vLLM-side causes (`upstream`)."""
    from compat import report, upstream

    return report.findings(db_path) | {"upstream": upstream.upstream_causes(db_path)}


def render_check(
    findings: dict[str, Any],
    format: CheckFormat = CheckFormat.TEXT,
    verbose: bool = False,
    upstream: bool = False,
    prefix: str = "",
) -> str:
    """What `compat check` prints: a line per cause, workflow annotations, or everything; with
    `upstream`, a line per vLLM-side cause instead. `prefix`: the recipes root as the
    repository sees it, for annotation paths."""
    import json

    from compat import report
    from compat import upstream as up

    if format == CheckFormat.JSON:
        return json.dumps(findings, indent=1) + "\n"
    if upstream:
        lines = [up.upstream_line(e) for e in findings["upstream"]]
        lines.append(f"{len(findings['upstream'])} vLLM-side cause(s)")
        return "\n".join(lines) + "\n"
    if format == CheckFormat.GITHUB:
        return report.render_github(findings, prefix)
    return report.render_text(findings, verbose)


def explain(
    db_path: Path,
    model: str,
    strategy: str,
    feature: str,
    vllm: str | None,
    format: ExplainFormat = ExplainFormat.TEXT,
) -> str:
    """`compat explain`: the causal chain behind a verdict, or (`issue`) the bug report of its
    vLLM-side cause."""
    from compat import report, upstream

    if format == ExplainFormat.ISSUE:
        return upstream.issue(db_path, model, strategy, feature, vllm)
    return report.explain(db_path, model, strategy, feature, vllm)


def overrides(db_path: Path) -> str:
    """`compat overrides`: the fix stage's plans per recipe file, as YAML."""
    from compat.emit.overrides import generate_overrides, render_yaml

    return render_yaml(generate_overrides(db_path))


def _fix_kinds(only: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    from compat.errors import UserError
    from compat.fix import KINDS

    bad = [k for k in only if k not in KINDS]
    if bad:
        raise UserError(f"unknown fix kind {bad[0]!r} ({', '.join(KINDS)})", where="--only")
    return tuple(only)


def fixes(
    db_path: Path, only: list[str] | tuple[str, ...] = ()
) -> dict[str, list[tuple[str, str, list[Edit]]]]:
    """`compat fix`: recipe -> [(fix kind, summary, edits)] the build planned, of `only` kinds
    (default: every kind, the ungate proposals included; `--apply` leaves those out)."""
    from compat.fix import KINDS
    from compat.fix.writer import planned_fixes

    return planned_fixes(db_path, _fix_kinds(only) or KINDS)


def apply_fixes(
    db_path: Path,
    root: Path,
    dry_run: bool = False,
    only: list[str] | tuple[str, ...] = (),
    commit: bool = False,
    branch: str = "",
    describe: bool = False,
) -> ApplyResult:
    """`compat fix --apply` (and `overrides --apply`): write the planned fixes into `root`; with
    `commit`, as one commit on a new branch; with `describe` (or `commit`), the commit message
    and PR body come with the result (compat.fix.commit)."""
    from compat.fix.commit import DEFAULT_BRANCH, apply_and_commit
    from compat.fix.writer import apply_fixes as write

    kinds = _fix_kinds(only)
    if commit or describe:
        return apply_and_commit(
            db_path,
            root,
            only=kinds,
            dry_run=dry_run,
            commit_it=commit,
            branch=branch or DEFAULT_BRANCH,
        )
    return write(db_path, root, dry_run=dry_run, only=kinds)


def render_applied(result: ApplyResult, format: FixFormat = FixFormat.TEXT) -> str:
    """What `compat fix --apply` prints on stdout: the diffs, or the PR body (`markdown`)."""
    if format == FixFormat.MARKDOWN:
        return result.markdown or "No fixes to write.\n"
    return "".join(result.diffs[path] for path in sorted(result.diffs))


def site(db_path: Path, out_dir: Path, recipes_url: str) -> SiteReport:
    """`compat site`: the static HTML matrix and its exports, replacing `out_dir`."""
    from compat.emit.site import build_site

    return build_site(db_path, out_dir, recipes_url=recipes_url)


def diff(db_path: Path, a: str, b: str) -> dict[str, Any]:
    """`compat diff`: what changed between two scanned releases."""
    from compat import diff as diffm

    return diffm.diff(db_path, a, b)


def render_diff(d: dict[str, Any], format: TextFormat = TextFormat.TEXT) -> str:
    import json

    from compat import diff as diffm

    return json.dumps(d, indent=1) + "\n" if format == TextFormat.JSON else diffm.render_text(d)


def bisect(
    recipes: Path,
    model: str,
    strategy: str,
    feature: str = "",
    start: str | None = None,
    end: str | None = None,
    progress: Progress | None = None,
) -> BisectResult:
    """`compat bisect`: the first release where a blocked combination starts, and why."""
    from compat import bisect as bis

    return bis.bisect(recipes, model, strategy, feature, start, end, progress=progress)


def render_bisect(r: BisectResult, format: TextFormat = TextFormat.TEXT) -> str:
    from compat import bisect as bis

    return bis.as_json(r) + "\n" if format == TextFormat.JSON else bis.render(r)
