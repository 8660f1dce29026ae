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
    from compat.fix.context import Row as FixRow
    from compat.fix.edits import Edit
    from compat.fix.writer import ApplyResult
    from compat.hf import ModelResolver
    from compat.lint import LintResult
    from compat.verdict.batch import CauseBook

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

    store.ensure_writable(db_path)
    trees = open_trees(versions, srcs, installed, progress)
    summary = []
    facts_all = []
    for tree in trees:
        facts, cached = release_facts(tree, progress, use_cache)
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

    With `facts_lock`, the lock answers first for every id it holds (offline)."""
    import time

    from compat import store
    from compat.hf.lock import read_lock
    from compat.recipes import enumerate_repo, load_repo
    from compat.tables import CauseRow, DraftMapping, ModelFact, RecipeFile, ShellVariable
    from compat.verdict.cause import renderer
    from compat.verdict.engine import Judge
    from compat.verdict.knowledge import load_knowledge
    from compat.verdict.releases import ReleasePool
    from compat.verdict.shell import read_placeholders
    from compat.vocab import release_key

    say = progress or (lambda _m: None)
    t0 = time.perf_counter()
    store.ensure_writable(db_path)
    lock = read_lock(facts_lock) if facts_lock is not None else None
    repo = load_repo(recipes)
    enum = enumerate_repo(repo)
    combos = enum.combinations
    say(f"recipes: {len(repo.recipes)} files, {len(combos)} combinations")
    explicit = bool(versions or srcs)
    trees, pin_of, unavailable = _release_trees(combos, versions, srcs, progress)
    facts_all = _scan_trees(trees, unavailable, progress)
    releases = sorted(facts_all, key=release_key)
    # A build from local trees only stays offline; otherwise the newest release informs model facts.
    online = bool(versions or not explicit)
    models, coverage = _resolve_models(combos, trees, online, hf_config_dir, allow_hub, lock, say)
    summary: dict[str, Any] = {
        "combinations": len(combos),
        "releases": releases,
        "unavailable": unavailable,
        "coverage": coverage,
    }
    recipe_moe = repo.declared_moe()
    with store.writing(db_path) as db:
        for v in releases:
            db.write_release_facts(facts_all[v])
        shell = read_placeholders(Path(recipes))  # $HEAD_IP & co.: values the user's shell supplies
        db.replace(ShellVariable, shell.rows())
        judges = {
            v: Judge(load_knowledge(db, v, trees[v]), models, recipe_moe, shell) for v in releases
        }
        # Local trees only: stay offline, and search works_from among them (as for model facts).
        index = _index_or_none() if (versions or not explicit) else None
        pool = ReleasePool(judges, models, recipe_moe, index=index, progress=progress, shell=shell)
        written, by_status, book, judged = _judge_all(
            db, combos, releases, explicit, pin_of, unavailable, pool, renderer(repo), say
        )
        _plan_fixes(repo, pool, book, judged, explicit, pin_of, say)
        db.replace(CauseRow, book.rows)
        db.replace(RecipeFile, _recipe_hashes(repo))
        for v, judge in judges.items():  # the recipe models' drafts join v_draft
            db.append(DraftMapping, [dict(r, vllm_version=v) for r in judge.drafts.values()])
        db.replace(ModelFact, _model_fact_rows(models, combos))
        summary["works_from_basis"] = (
            "index" if pool.exhaustive else "scanned releases (index unreachable)"
        )

    summary["verdicts"] = written
    summary["by_status"] = dict(by_status)
    summary["seconds"] = round(time.perf_counter() - t0, 2)
    return summary


def _resolve_models(
    combos: list[Any],
    trees: dict[str, Any],
    online: bool,
    hf_config_dir: Path | None,
    allow_hub: bool,
    lock: Any,
    say: Progress,
) -> tuple[ModelResolver, dict[str, Any]]:
    """The model resolver (the releases' tests and docs, the newest release's too when online),
    with every recipe model resolved up front; and how many ids it resolved."""
    from compat.hf import ModelResolver
    from compat.hf.release_sources import newest_tree, transformers_checkpoints

    extra = newest_tree(trees, say) if online else []
    models = ModelResolver(
        hf_config_dir=hf_config_dir,
        allow_hub=allow_hub,
        trees=list(trees.values()) + extra,
        lock=lock,
        checkpoints=transformers_checkpoints(say) if online else None,
    )
    models.prefetch(recipe_model_ids(combos))
    coverage = models.coverage([c.model_id for c in combos if not c.omni])
    say(f"models: {coverage.get('resolved', '?')} of {coverage.get('total', '?')} ids resolved")
    return models, coverage


def _release_trees(
    combos: list[Any], versions: list[str], srcs: list[str], progress: Progress | None
) -> tuple[dict[str, Any], dict[str, str], dict[str, str]]:
    """(trees, the release each pin resolves to, why each unavailable pin or release is so).

    An explicit build opens the releases named (from the index) and the local trees; otherwise
    the releases the recipes pin."""
    from compat.errors import UserError
    from compat.sources import tree_from_index, tree_from_path
    from compat.vocab import release_key

    trees = {}
    unavailable: dict[str, str] = {}
    if versions or srcs:
        for v in versions:
            trees[v] = tree_from_index(v, progress=progress)
        for s in srcs:
            t = tree_from_path(s)
            trees[t.version] = t
        return trees, {}, unavailable
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
    return trees, pin_of, unavailable


def _scan_trees(
    trees: dict[str, Any], unavailable: dict[str, str], progress: Progress | None
) -> dict[str, dict[str, Any]]:
    """Each tree's facts, oldest release first; a layout the analysis does not know is recorded
    in `unavailable` (and said) instead."""
    from compat.errors import UserError
    from compat.scan import release_facts
    from compat.vocab import release_key

    say = progress or (lambda _m: None)
    facts_all = {}
    for v in sorted(trees, key=release_key):
        try:
            facts, _cached = release_facts(trees[v], progress)
        except UserError as exc:  # e.g. a release whose layout the analysis does not know
            unavailable[v] = f"vLLM {v} layout not analysable: {exc.message}"
            say(unavailable[v])
            continue
        facts_all[v] = facts
    return facts_all


def _judge_all(
    db: Any,
    combos: list[Any],
    releases: list[str],
    explicit: bool,
    pin_of: dict[str, str],
    unavailable: dict[str, str],
    pool: Any,
    render: Any,
    say: Progress,
) -> tuple[int, Counter[tuple[str, str]], CauseBook, dict[str, list[FixRow]]]:
    """Judge every combination into the verdict table (batched); returns (rows written, count
    per (release, status), the causes, each recipe's judged rows for the fix stage)."""
    import json

    from compat.fix.context import Row as FixRow
    from compat.tables import Command, Verdict, VerdictCause
    from compat.verdict.batch import CauseBook, Sweep, later_than

    book = CauseBook()
    sweep = Sweep(pool, render, book)
    later = later_than(releases)
    db.replace(Verdict, [])  # start empty; rows are appended in batches
    db.replace(VerdictCause, [])
    db.replace(
        Command,
        [
            {"id": i, "argv": json.dumps([[r, list(a)] for r, a in c.argvs])}
            for i, c in enumerate(combos, 1)
        ],
    )
    rows: list[dict[str, Any]] = []
    links: list[dict[str, int]] = []
    by_status: Counter[tuple[str, str]] = Counter()
    judged_rows: dict[str, list[FixRow]] = {}  # recipe -> its rows at the judged releases
    written = 0

    def flush() -> None:
        nonlocal written
        by_status.update((r["vllm_version"], r["status"]) for r in rows if r["judged"])
        db.append(Verdict, rows)
        db.append(VerdictCause, links)
        written += len(rows)
        rows.clear()
        links.clear()

    for command_id, c in enumerate(combos, 1):
        targets = _targets(c, releases, explicit, pin_of, pool.judges)
        if not targets:
            row = _unavailable_row(c, pin_of, unavailable, command_id)
            rows.append(dict(row, id=written + len(rows) + 1))
            continue
        for judged in sweep.judge(c, targets, command_id, later):
            row_id = written + len(rows) + 1
            rows.append(dict(judged.row, id=row_id))
            links += [
                {"verdict_id": row_id, "cause_id": i} for i in dict.fromkeys(judged.cause_ids)
            ]
            if judged.row["judged"]:
                judged_rows.setdefault(c.recipe, []).append(
                    FixRow(
                        c,
                        judged.row["vllm_version"],
                        judged.outcome,
                        tuple(judged.cause_ids),
                        judged.cause_keys,
                    )
                )
        if command_id % 2000 == 0:
            say(f"judged {command_id} of {len(combos)} combinations")
        if len(rows) >= 20000:
            flush()
    flush()
    return written, by_status, book, judged_rows


def _unavailable_row(
    c: Any, pin_of: dict[str, str], unavailable: dict[str, str], command_id: int
) -> dict[str, Any]:
    """The verdict row of a combination whose pinned release could not be judged, with why."""
    from compat.verdict.batch import unavailable_row

    why = (
        unavailable.get(pin_of.get(c.vllm_pin, c.vllm_pin))
        or unavailable.get(c.vllm_pin)
        or "not resolvable"
    )
    return unavailable_row(c, pin_of.get(c.vllm_pin, c.vllm_pin) or "?", why, command_id)


def _targets(
    c: Any, releases: list[str], explicit: bool, pin_of: dict[str, str], judges: dict[str, Any]
) -> list[tuple[str, int, int]]:
    """(release, judged, pinned) per release a combination is judged at: every release of an
    explicit build (pinned where its pin resolves to it), else the release its pin names."""
    if explicit:
        true_pin = resolve_pin(c.vllm_pin, releases)
        return [(v, 1, int(v == true_pin)) for v in releases]
    pinned = pin_of.get(c.vllm_pin)
    return [(pinned, 1, 1)] if pinned is not None and pinned in judges else []


def _plan_fixes(
    repo: Any,
    pool: Any,
    book: Any,
    judged: dict[str, list[Any]],
    explicit: bool,
    pin_of: dict[str, str],
    say: Progress,
) -> None:
    """The fix stage: a planned (and re-judged) fix, or the reason there is none, per cause."""
    from compat.fix.context import Context
    from compat.fix.edits import dumps
    from compat.fix.locate import cause_path, key_lines, line_of
    from compat.fix.plan import build_cases, plan_all

    def resolve(pin: str) -> str | None:
        return pin_of.get(pin) or resolve_pin(pin, pool.releases)

    cases = build_cases(repo, judged, book.rows, pinned=not explicit)
    ctx = Context(repo, pool, resolve)
    planned = plan_all(cases, ctx, say)
    if not explicit:  # gates are reviewed at the recipe's pin, which only a pinned build judges
        book.rows += _gate_reviews(repo, judged, ctx, len(book.rows), say)
    _fill_keys(book.rows, judged)
    lines: dict[str, dict[tuple[str, ...], int]] = {}
    for row in book.rows:
        if row["recipe"] not in lines:
            lines[row["recipe"]] = key_lines(
                (repo.root / row["recipe"]).read_text(encoding="utf-8")
            )
        path = cause_path(row)
        row.update(field=".".join(path), line=line_of(lines[row["recipe"]], path))
        p = planned.get(row["id"])
        if p is not None:
            row.update(
                fix_kind=p.kind,
                fix=p.summary,
                fix_why=p.why,
                fix_edits=dumps(p.edits),
                works_from=p.works_from,
            )


def _gate_reviews(
    repo: Any, judged: dict[str, list[Any]], ctx: Any, last_id: int, say: Progress
) -> list[dict[str, Any]]:
    """`cause` rows of kind `gate`, one per ungate proposal (compat.fix.ungate): a gate whose
    hidden commands start at the pin. Linked to no verdict, so `check` counts no row for them."""
    from compat.fix.edits import dumps
    from compat.fix.ungate import review_recipe

    rows: list[dict[str, Any]] = []
    for path, judged_rows in judged.items():
        if path not in repo.recipes or not judged_rows:
            continue
        for r in review_recipe(repo.recipes[path], ctx, judged_rows[0].release):
            p = r.proposal
            rows.append(
                {
                    "id": last_id + len(rows) + 1,
                    "recipe": path,
                    "kind": "gate",
                    "element": f"features.{r.gate.feature}",
                    "mode": r.gate.mode,
                    "carrier": "",
                    "label": f"gate {r.gate.where}",
                    "finding": f"hides {r.hidden} command(s) that start at vLLM {r.release}",
                    "field": "",
                    "line": 0,
                    "works_from": p.works_from,
                    "fix_kind": p.kind,
                    "fix": p.summary,
                    "fix_why": p.note,
                    "fix_edits": dumps(list(p.edits)),
                    "finding_keys": "[]",
                }
            )
    if rows:
        say(f"gates: {len(rows)} whose hidden commands start (ungate proposals)")
    return rows


def _fill_keys(rows: list[dict[str, Any]], judged: dict[str, list[Any]]) -> None:
    """Each cause's finding keys (engine.finding_key), so readers can tell vLLM-side causes
    (compat.upstream) without judging again."""
    import json

    keys: dict[int, dict[str, None]] = {}
    for recipe_rows in judged.values():
        for r in recipe_rows:
            for cid, ks in r.cause_keys.items():
                keys.setdefault(cid, {}).update(dict.fromkeys(ks))
    for row in rows:
        if "finding_keys" not in row or row["finding_keys"] == "[]":
            row["finding_keys"] = json.dumps(list(keys.get(row["id"], {})))


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


def _model_fact_rows(models: Any, combos: list[Any]) -> list[dict[str, Any]]:
    import json

    out = []
    for mid in sorted({c.model_id for c in combos}):
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
    from compat.recipes import parse_serve_args

    ids: dict[str, str] = {}
    argvs: set[tuple[str, ...]] = set()
    for c in combos:
        if c.omni:
            continue
        ids.setdefault(c.model_id.casefold(), c.model_id)
        argvs.update(tuple(a) for _role, a in c.argvs)
    for argv in sorted(argvs):
        spec = parse_serve_args(list(argv)).speculative_config
        model = spec.get("model") if isinstance(spec, dict) else None
        if isinstance(model, str) and "/" in model and not model.startswith(("/", ".")):
            ids.setdefault(model.casefold(), model)
    return list(ids.values())


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
