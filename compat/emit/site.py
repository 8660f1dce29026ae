"""`compat site`: the static HTML compatibility matrix, rendered from verdict rows only.

The site reads nothing but the `verdict` and `release` tables, so it cannot disagree
with `compat check`, `explain` or the overrides. It must open from file:// (a CI
artifact, a checkout) and from any static host: no server, no CDN, relative links only,
classic scripts (module scripts are blocked on file://). Pages are complete HTML without
JavaScript; the small script in site/static adds filters, permalinks and the release
selector on top. The output directory is replaced whole: the site is built next to it
and swapped in, so a failed build leaves the previous site as it was.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import sqlite3
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import jinja2
import yaml

from compat.errors import UserError
from compat.recipes.synthesis import command_line
from compat.resources import site_dir
from compat.vocab import Status, release_key, status_rank, worst

VLLM_BLOB = "https://github.com/vllm-project/vllm/blob"
STATUSES = ("ok", "blocked", "warning", "unknown")
SYMBOLS = {"ok": "✓", "blocked": "✗", "warning": "!", "unknown": "?"}
MEANINGS = {
    "ok": "the command starts",
    "blocked": "cannot start: a config or startup error",
    "warning": "starts, with a fallback or a silent change",
    "unknown": "a needed fact is missing",
}
# Which status a cell shows when its variants or hardware profiles disagree.
MARKER = ".compat-site"  # marks a directory this module built, so it may be replaced

VERDICT_COLUMNS = ("id", "vllm_version", "platform", "hardware", "recipe", "model_id", "variant",
                   "strategy", "feature", "mode", "status", "message", "reason", "evidence",
                   "gated", "pinned", "works_from", "argv", "chain")
EXPORT_EXTRA = ("gated", "pinned", "works_from")
_STRATEGY_SHAPES = ("tp", "tep", "dep", "tp_dp", "tp_pp")
_RELEASE_RE = re.compile(r"^\d+(\.\d+)+((a|b|rc)\d+)?(\.post\d+)?$")
SHOWN_COMMANDS = 3  # per note; all of them are in compat.db (verdict.argv)
TITLE_REASON = 160  # characters of a reason repeated in a hover title; the note has all of it
_EVIDENCE_RE = re.compile(r"^(?P<path>[\w.-]+(?:/[\w.-]+)*\.\w+)(?::(?P<line>\d+))?$")


@dataclass(frozen=True)
class SiteReport:
    pages: int
    bytes: int
    seconds: float


def build_site(db_path: Path, out_dir: Path) -> SiteReport:
    """Render the site for `db_path` into `out_dir`, replacing a previous site there."""
    started = time.perf_counter()
    db_path, out_dir = Path(db_path), Path(os.path.abspath(out_dir))
    _check_out_dir(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_dir.parent / f".{out_dir.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
    os.mkdir(tmp)  # honours the umask, unlike mkdtemp's 0700: the site is meant to be served
    try:
        pages = _render_into(db_path, tmp)
        _swap(tmp, out_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    size = sum(p.stat().st_size for p in out_dir.rglob("*") if p.is_file())
    return SiteReport(pages=pages, bytes=size, seconds=round(time.perf_counter() - started, 3))


# ---------------------------------------------------------------------------- output dir


def _check_out_dir(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise UserError("exists and is not a directory", where=str(out))
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise UserError("directory is not empty and was not built by `compat site`; "
                        "refusing to replace it", where=str(out))


def _swap(tmp: Path, out: Path) -> None:
    if not out.exists():
        os.rename(tmp, out)
        return
    old = out.parent / f".{out.name}.old-{os.getpid()}-{secrets.token_hex(4)}"
    os.rename(out, old)
    try:
        os.rename(tmp, out)
    except OSError:
        os.rename(old, out)
        raise
    shutil.rmtree(old, ignore_errors=True)


# ---------------------------------------------------------------------------- reading


def _snapshot(src: Path, dst: Path) -> None:
    """Copy the database with SQLite's backup API: a consistent copy even while it is written."""
    if not src.is_file():
        raise UserError("no such database (run `compat build` first)", where=str(src))
    try:
        source = sqlite3.connect(src.resolve().as_uri() + "?mode=ro", uri=True)
        target = sqlite3.connect(dst)
        try:
            source.backup(target)
        finally:
            source.close()
            target.close()
    except sqlite3.DatabaseError as exc:
        raise UserError(f"not a vllm-compat database: {exc}", where=str(src)) from None


def _columns(con: sqlite3.Connection, name: str) -> list[str]:
    return [r[1] for r in con.execute(f'PRAGMA table_info("{name}")')]


def _load(con: sqlite3.Connection, where: str) -> tuple[list[dict[str, Any]], dict[str, str]]:
    have = set(_columns(con, "verdict"))
    if not have:
        raise UserError("no `verdict` table (run `compat build` first)", where=where)
    missing = [c for c in VERDICT_COLUMNS if c not in have]
    if missing:
        raise UserError(f"table verdict lacks columns {', '.join(missing)}", where=where)
    con.row_factory = sqlite3.Row
    cols = [f"v.{c}" for c in VERDICT_COLUMNS]
    if "command_id" in have and _columns(con, "command"):
        # argv is stored once per combination in `command` (verdict.argv stays '' then)
        cols[VERDICT_COLUMNS.index("argv")] = "COALESCE(NULLIF(v.argv, ''), c.argv, '') AS argv"
        sql = (f"SELECT {', '.join(cols)} FROM verdict v LEFT JOIN command c ON c.id = v.command_id "
               "ORDER BY v.id")
    else:
        sql = f"SELECT {', '.join(cols)} FROM verdict v ORDER BY v.id"
    rows = [dict(r) for r in con.execute(sql)]
    commits: dict[str, str] = {}
    if "commit_id" in _columns(con, "release"):
        commits = {r["version"]: r["commit_id"] or ""
                   for r in con.execute("SELECT version, commit_id FROM release")}
    for r in rows:
        for k in ("platform", "hardware", "variant", "strategy", "feature", "mode", "message",
                  "reason", "evidence", "works_from", "argv", "model_id"):
            r[k] = r[k] or ""
        if r["status"] not in set(Status):
            r["status"] = "unknown"
    return rows, commits


# ---------------------------------------------------------------------------- naming



def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9._]+", "-", text.lower()).strip("-")


def cell_id(recipe_slug: str, strategy: str, feature: str, mode: str) -> str:
    """Permalink id of a feature mode in a strategy: cell-<recipe>-<strategy>-<feature>[-<mode>].

    The base command is feature "base"; a feature without modes has no mode part.
    """
    parts = [recipe_slug, _slug(strategy) or "none", _slug(feature) or "base"]
    if mode:
        parts.append(_slug(mode))
    return "cell-" + "-".join(parts)


def strategy_key(strategy: str) -> str:
    """The filter value of a strategy; rows without one (omni recipes) get "none"."""
    return strategy or "none"


def strategy_label(strategy: str) -> str:
    return strategy or "no strategy"


def fm_label(feature: str, mode: str) -> str:
    if not feature:
        return "base"
    return f"{feature}:{mode}" if mode else feature


def _strategy_key(strategy: str) -> tuple:
    for group, prefix in enumerate(("single_node_", "multi_node_")):
        if strategy.startswith(prefix):
            shape = strategy[len(prefix):]
            known = shape in _STRATEGY_SHAPES
            rank = _STRATEGY_SHAPES.index(shape) if known else len(_STRATEGY_SHAPES)
            return (group, rank, strategy)
    return (2, 0, strategy)


def _safe_component(text: str) -> str:
    text = re.sub(r"[^A-Za-z0-9._-]+", "_", text)
    return "_" if text in ("", ".", "..") else text


@dataclass(frozen=True)
class RecipeRef:
    path: str  # as in the verdict table: models/<provider>/<name>.yaml
    provider: str
    name: str
    slug: str
    href: str  # relative to the site root
    depth: int  # directories between the page and the site root

    @classmethod
    def of(cls, path: str) -> RecipeRef:
        parts = PurePosixPath(path).parts
        if len(parts) >= 3 and parts[0] == "models":
            provider, rest = parts[1], list(parts[2:])
        elif len(parts) >= 2:
            provider, rest = parts[-2], [parts[-1]]
        else:
            provider, rest = "other", list(parts) or ["recipe"]
        rest[-1] = re.sub(r"\.ya?ml$", "", rest[-1])
        dirs = [_safe_component(provider)] + [_safe_component(p) for p in rest]
        return cls(path=path, provider=provider, name=rest[-1],
                   slug=_slug("-".join([provider, *rest])),
                   href="recipes/" + "/".join(dirs) + ".html", depth=len(dirs))


# ---------------------------------------------------------------------------- evidence


@dataclass(frozen=True)
class Link:
    text: str
    url: str | None


def git_ref(version: str, commit: str = "") -> str | None:
    """The vLLM git ref a release's evidence links point at: its tag, else its commit."""
    if _RELEASE_RE.match(version):
        return f"v{version}"
    return commit or None


def evidence_links(evidence: str, ref: str | None) -> list[Link]:
    links = []
    for part in (p.strip() for p in evidence.split(";")):
        if not part:
            continue
        m = _EVIDENCE_RE.match(part)
        if not (m and ref):
            links.append(Link(part, None))
            continue
        url = f"{VLLM_BLOB}/{ref}/{m['path']}" + (f"#L{m['line']}" if m["line"] else "")
        links.append(Link(part, url))
    return links


def _chain(raw: str) -> list[str]:
    try:
        steps = json.loads(raw or "[]")
    except json.JSONDecodeError:
        return [raw]
    if isinstance(steps, list):
        return [str(s) for s in steps if str(s).strip()]
    return [str(steps)] if steps else []


def _command(raw: str) -> str:
    """The shell command(s) of a row's argv: [[role, [arg, ...]], ...] or a flat [arg, ...].

    A role ('prefill', 'decode', ...) becomes a comment line above its command.
    """
    try:
        argvs = json.loads(raw)
    except json.JSONDecodeError:
        return raw
    if not isinstance(argvs, list):
        return raw
    if all(isinstance(a, str) for a in argvs):
        return command_line(argvs)
    lines = []
    for item in argvs:
        role, argv = (item if isinstance(item, list) and len(item) == 2
                      and isinstance(item[1], list) else ("", item))
        if role:
            lines.append(f"# {role}")
        lines.append(command_line([str(a) for a in argv]) if isinstance(argv, list) else str(argv))
    return "\n".join(lines)


def targets_text(pairs: Iterable[tuple[str, str]]) -> str:
    """(platform, hardware) pairs, grouped by platform: "cuda: b200, h100; rocm"."""
    by_platform: dict[str, set[str]] = defaultdict(set)
    for platform, hardware in pairs:
        by_platform[platform or "any platform"].add(hardware)
    parts = []
    for platform in sorted(by_platform):
        hardware = sorted(by_platform[platform])
        if hardware == [""]:
            parts.append(platform)
        else:
            parts.append(f"{platform}: " + ", ".join(h or "any profile" for h in hardware))
    return "; ".join(parts)


def _target(row: dict[str, Any]) -> tuple[str, str]:
    return (row["platform"], row["hardware"])


def _clip(text: str, limit: int = TITLE_REASON) -> str:
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def _worst(statuses: Iterable[str]) -> str:
    return worst(statuses).value


def _join_versions(versions: Iterable[str]) -> str:
    return ", ".join(sorted(set(versions), key=release_key))


# ---------------------------------------------------------------------------- index model


@dataclass
class Entry:
    """One feature mode in one matrix cell at the pinned release, over variants and hardware."""
    id: str
    label: str
    status: str
    mixed: bool
    gated: bool
    title: str
    href: str


@dataclass
class IndexRow:
    ref: RecipeRef
    model_id: str
    releases: str
    pinned: bool
    search: str
    cells: dict[str, list[Entry]]


def _entry(ref: RecipeRef, strategy: str, feature: str, mode: str,
           rows: list[dict[str, Any]]) -> Entry:
    status = _worst(r["status"] for r in rows)
    decisive = [r for r in rows if r["status"] == status]
    label = fm_label(feature, mode)
    versions = _join_versions(r["vllm_version"] for r in rows)
    mixed = len({r["status"] for r in rows}) > 1
    title = f"{label} on {strategy_label(strategy)}: {status} at vLLM {versions}"
    if mixed:
        title += f" on {len(decisive)} of {len(rows)} variant/hardware combinations"
    if status != "ok":
        if decisive[0]["reason"]:
            title += f". {_clip(decisive[0]['reason'])}"
        if all(r["works_from"] for r in decisive):
            title += f" Works from {_join_versions(r['works_from'] for r in decisive)}."
    gated = status != "ok" and all(r["gated"] for r in decisive)
    if gated:
        title += " The recipe already gates this combination."
    if status == "ok" and not mixed:
        title = ""  # the common case says nothing the symbol and the row's release do not
    cid = cell_id(ref.slug, strategy, feature, mode)
    return Entry(id=cid, label=label, status=status, mixed=mixed, gated=gated, title=title,
                 href=f"{ref.href}#{cid}")


def _pinned_rows(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], bool]:
    """A recipe's rows at the release(s) it pins; at the newest scanned one if none is pinned."""
    pinned = [r for r in rows if r["pinned"]]
    if pinned:
        # One release per combination. A combination pinned at several releases (a variant's
        # own pin aside, a build with explicit --vllm marks every judged release) shows the
        # lowest, as a recipe's pin is the minimum vLLM it needs.
        lowest: dict[tuple[str, ...], str] = {}
        for r in pinned:
            k = _combo(r)
            if k not in lowest or release_key(r["vllm_version"]) < release_key(lowest[k]):
                lowest[k] = r["vllm_version"]
        return [r for r in pinned if lowest[_combo(r)] == r["vllm_version"]], True
    newest = max((r["vllm_version"] for r in rows), key=release_key)
    return [r for r in rows if r["vllm_version"] == newest], False


def _fm_order(rows: list[dict[str, Any]]) -> dict[tuple[str, str], int]:
    """Feature modes in first-seen order (the order the recipe lists them), base first."""
    order: dict[tuple[str, str], int] = {("", ""): -1}
    for r in rows:
        order.setdefault((r["feature"], r["mode"]), len(order))
    return order


def _index_model(by_recipe: dict[str, list[dict[str, Any]]], strategies: list[str],
                 fm_order: dict[tuple[str, str], int]) -> dict[str, Any]:
    providers: dict[str, list[IndexRow]] = defaultdict(list)
    counts: Counter[str] = Counter()
    for path, rows in by_recipe.items():
        ref = RecipeRef.of(path)
        shown, pinned = _pinned_rows(rows)
        groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
        for r in shown:
            groups[(r["strategy"], r["feature"], r["mode"])].append(r)
        cells: dict[str, list[Entry]] = defaultdict(list)
        for (strategy, feature, mode) in sorted(groups, key=lambda k: fm_order[(k[1], k[2])]):
            e = _entry(ref, strategy, feature, mode, groups[(strategy, feature, mode)])
            cells[strategy].append(e)
            counts[e.status] += 1
        model_ids = sorted({r["model_id"] for r in rows if r["model_id"]})
        providers[ref.provider].append(IndexRow(
            ref=ref, model_id=rows[0]["model_id"],
            releases=_join_versions(r["vllm_version"] for r in shown), pinned=pinned,
            search=" ".join([ref.provider, ref.name, *model_ids]).lower(), cells=dict(cells)))
    ordered = sorted(fm_order, key=fm_order.__getitem__)
    feature_options = [("base", "base command")]
    for f in dict.fromkeys(feature for feature, _ in ordered if feature):
        feature_options.append((f, f))
        feature_options += [(fm_label(f, m), f"  {fm_label(f, m)}") for ff, m in ordered
                            if ff == f and m]
    return {
        "providers": [(p, sorted(rs, key=lambda r: r.ref.name.lower()))
                      for p, rs in sorted(providers.items(), key=lambda kv: kv[0].lower())],
        "strategies": strategies,
        "counts": counts,
        "total": sum(counts.values()),
        "feature_options": feature_options,
    }


# ---------------------------------------------------------------------------- recipe model


@dataclass
class Note:
    """One finding at one release, shared by every cell whose rows say the same thing."""
    n: int
    status: str
    combos: list[tuple[str, str]]  # (feature mode label, strategy)
    applies: list[tuple[str, str, str]]  # (variant, platform, hardware)
    reason: str
    chain: list[str]
    message: str
    evidence: list[Link]
    works_from: str
    gated: bool
    commands: list[str]

    @property
    def heading(self) -> str:
        """"spec_decoding:mtp on multi_node_tp_pp", or pairs when the combos are no product."""
        labels = list(dict.fromkeys(label for label, _ in self.combos))
        strategies = list(dict.fromkeys(strategy for _, strategy in self.combos))
        if len(self.combos) == len(labels) * len(strategies):
            return f"{', '.join(labels)} on {', '.join(strategies)}"
        return "; ".join(f"{label} on {strategy}" for label, strategy in self.combos)

    @property
    def applies_text(self) -> str:
        """"variant default (cuda: b200, h100; rocm); variant nvfp4 (cuda: b200)"."""
        by_variant: dict[str, list[tuple[str, str]]] = defaultdict(list)
        for variant, platform, hardware in self.applies:
            by_variant[variant].append((platform, hardware))
        return "; ".join(f"variant {v or '(none)'} ({targets_text(t)})"
                         for v, t in by_variant.items())


@dataclass
class Part:
    """The targets of a cell that share one status (all of them when they agree)."""
    status: str
    where: str
    notes: list[int]


@dataclass
class Cell:
    id: str
    status: str
    parts: list[Part]
    title: str
    was: str = ""  # the status at the default release, when it differs
    anchor: bool = False  # carries the permalink id (first occurrence at the default release)

    @property
    def note_ids(self) -> list[int]:
        return [n for p in self.parts for n in p.notes]


@dataclass
class VariantTable:
    name: str
    label: str
    model_ids: list[str]
    targets: str
    pinned: bool
    rows: list[tuple[str, str, list[Cell | None]]]  # (label, feature, cells by strategy)


@dataclass
class ReleaseSection:
    version: str
    pinned: bool
    is_default: bool
    ref: str | None
    strategies: list[str]
    variants: list[VariantTable]
    notes: list[Note]
    counts: Counter[str] = field(default_factory=Counter)


def _notes_for(rows: list[dict[str, Any]], notes: dict[tuple, Note], ref: str | None) -> list[int]:
    numbers: list[int] = []
    for r in rows:
        if r["status"] == "ok":
            continue
        key = (r["status"], r["message"], r["reason"], r["evidence"], r["chain"], r["works_from"],
               bool(r["gated"]))
        note = notes.get(key)
        if note is None:
            note = notes[key] = Note(
                n=len(notes) + 1, status=r["status"], combos=[], applies=[], reason=r["reason"],
                chain=_chain(r["chain"]), message=r["message"],
                evidence=evidence_links(r["evidence"], ref), works_from=r["works_from"],
                gated=bool(r["gated"]), commands=[])
        combo = (fm_label(r["feature"], r["mode"]), strategy_label(r["strategy"]))
        if combo not in note.combos:
            note.combos.append(combo)
        where = (r["variant"], *_target(r))
        if where not in note.applies:
            note.applies.append(where)
        cmd = _command(r["argv"])
        if cmd and cmd not in note.commands:
            note.commands.append(cmd)
        if note.n not in numbers:
            numbers.append(note.n)
    return numbers


def _cell(cid: str, rows: list[dict[str, Any]], notes: dict[tuple, Note], ref: str | None,
          version: str) -> Cell:
    by_status: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_status[r["status"]].append(r)
    order = sorted(by_status, key=lambda s: -status_rank(s))
    parts = []
    for s in order:
        where = targets_text(_target(r) for r in by_status[s]) if len(order) > 1 else ""
        parts.append(Part(status=s, where=where,
                          notes=_notes_for(by_status[s], notes, ref)))
    status = order[0]
    first = by_status[status][0]
    title = f"{status} at vLLM {version}"
    if status != "ok" and first["reason"]:
        title += f": {_clip(first['reason'])}"
    return Cell(id=cid, status=status, parts=parts, title=title)


def _combo(r: dict[str, Any]) -> tuple[str, ...]:
    """A row's key within one release."""
    return (r["variant"], r["strategy"], r["feature"], r["mode"], r["platform"], r["hardware"])


def _recipe_model(ref: RecipeRef, rows: list[dict[str, Any]], commits: dict[str, str],
                  fm_order: dict[tuple[str, str], int]) -> dict[str, Any]:
    versions = sorted({r["vllm_version"] for r in rows}, key=release_key)
    pinned_versions = Counter(r["vllm_version"] for r in rows if r["pinned"])
    if pinned_versions:  # the release most rows pin; the lowest of a tie
        top = max(pinned_versions.values())
        default = min((v for v, n in pinned_versions.items() if n == top), key=release_key)
    else:
        default = versions[-1]
    variant_order: dict[str, int] = {}
    for r in rows:
        variant_order.setdefault(r["variant"], len(variant_order))
    baseline = {_combo(r): r["status"] for r in rows if r["vllm_version"] == default}
    sections = []
    for version in versions:
        at = [r for r in rows if r["vllm_version"] == version]
        ref_name = git_ref(version, commits.get(version, ""))
        strategies = sorted({r["strategy"] for r in at}, key=_strategy_key)
        notes: dict[tuple, Note] = {}
        counts: Counter[str] = Counter()
        tables = []
        anchored: set[str] = set()
        for variant in sorted({r["variant"] for r in at}, key=variant_order.__getitem__):
            vrows = [r for r in at if r["variant"] == variant]
            grid: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = defaultdict(
                lambda: defaultdict(list))
            for r in vrows:
                grid[(r["feature"], r["mode"])][r["strategy"]].append(r)
            table_rows = []
            for feature, mode in sorted(grid, key=fm_order.__getitem__):
                cells: list[Cell | None] = []
                for strategy in strategies:
                    crows = grid[(feature, mode)].get(strategy)
                    if not crows:
                        cells.append(None)
                        continue
                    c = _cell(cell_id(ref.slug, strategy, feature, mode), crows, notes,
                              ref_name, version)
                    if version != default:
                        before = {baseline.get(_combo(r)) for r in crows}
                        before.discard(None)
                        if before and _worst(before) != c.status:
                            c.was = f"{_worst(before)} at {default}"
                    elif c.id not in anchored:
                        c.anchor = True
                        anchored.add(c.id)
                    counts[c.status] += 1
                    cells.append(c)
                table_rows.append((fm_label(feature, mode), feature, cells))
            tables.append(VariantTable(
                name=variant, label=variant or "(no variant)",
                model_ids=sorted({r["model_id"] for r in vrows if r["model_id"]}),
                targets=targets_text(_target(r) for r in vrows),
                pinned=any(r["pinned"] for r in vrows), rows=table_rows))
        sections.append(ReleaseSection(
            version=version, pinned=version in pinned_versions, is_default=version == default,
            ref=ref_name, strategies=strategies, variants=tables, notes=list(notes.values()),
            counts=counts))
    model_ids = list(dict.fromkeys(r["model_id"] for r in rows if r["model_id"]))
    return {"ref": ref, "model_ids": model_ids, "default": default,
            "sections": sections, "pinned": sorted(pinned_versions, key=release_key)}


# ---------------------------------------------------------------------------- rendering


def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(site_dir() / "templates"),
                             autoescape=True, trim_blocks=True, lstrip_blocks=True,
                             undefined=jinja2.StrictUndefined)
    env.globals.update(SYMBOLS=SYMBOLS, MEANINGS=MEANINGS, STATUSES=STATUSES,
                       SHOWN_COMMANDS=SHOWN_COMMANDS, strategy_key=strategy_key,
                       strategy_label=strategy_label)
    return env


def _render_into(db_path: Path, out: Path) -> int:
    _snapshot(db_path, out / "compat.db")
    con = sqlite3.connect(out / "compat.db")
    try:
        rows, commits = _load(con, str(db_path))
        releases = sorted({r["vllm_version"] for r in rows} | set(commits), key=release_key)
        _write_export(con, out / "verdicts.json")
        tables = {name: _columns(con, name) for (name,) in con.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
            "AND name NOT LIKE 'sqlite_%' ORDER BY name")}
    finally:
        con.close()
    (out / "metadata.yaml").write_text(datasette_metadata(tables), encoding="utf-8")
    static = site_dir() / "static"
    (out / "static").mkdir()
    for f in sorted(static.iterdir()):
        if f.suffix in (".css", ".js", ".svg"):
            shutil.copyfile(f, out / "static" / f.name)

    by_recipe: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_recipe[r["recipe"]].append(r)
    strategies = sorted({r["strategy"] for r in rows}, key=_strategy_key)
    fm_order = _fm_order(rows)
    env = _env()
    index = _index_model(by_recipe, strategies, fm_order)
    common = {"releases": releases, "n_rows": len(rows)}
    (out / "index.html").write_text(
        env.get_template("index.html").render(root="", **index, **common), encoding="utf-8")
    page = env.get_template("recipe.html")
    for path, recipe_rows in by_recipe.items():
        model = _recipe_model(RecipeRef.of(path), recipe_rows, commits, fm_order)
        target = out / model["ref"].href
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(page.render(root="../" * model["ref"].depth, **model, **common),
                          encoding="utf-8")
    (out / MARKER).write_text("built by `compat site`; this directory is replaced on rebuild\n",
                              encoding="utf-8")
    return 1 + len(by_recipe)


def _write_export(con: sqlite3.Connection, path: Path) -> None:
    """verdicts.json: the v_verdict rows plus gated, pinned and works_from."""
    view = _columns(con, "v_verdict") or [c for c in VERDICT_COLUMNS[1:14]]
    cols = view + [c for c in EXPORT_EXTRA if c not in view]
    con.row_factory = None
    has_cause = bool(_columns(con, "cause"))
    exprs = [f"c.{c}" if c in ("fix_kind", "fix") and has_cause else f"v.{c}" for c in cols]
    join = " LEFT JOIN cause c ON c.id = v.cause_id" if has_cause else ""
    cur = con.execute(f"SELECT {', '.join(exprs)} FROM verdict v{join} ORDER BY v.id")
    data = [dict(zip(cols, r, strict=True)) for r in cur]
    path.write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n",
                    encoding="utf-8")


# ---------------------------------------------------------------------------- datasette

TITLE = "vLLM recipes compatibility"
DESCRIPTION = ("Which synthesized `vllm serve` commands of the vLLM recipes can start, per vLLM "
               "release, read statically from each release's source. Start with v_verdict "
               "(every combination) or v_finding (the non-ok ones).")
DESCRIPTIONS = {
    "release": "One row per scanned vLLM release: where its source came from, its sha256 and "
               "fingerprint, and the pipeline-parallel rule that release uses.",
    "arch_capability": "Per release and platform: each registered architecture, the class vLLM "
                       "resolves it to (file:line) and its capabilities, computed statically the "
                       "way vLLM's _ModelInfo computes them.",
    "spec_method": "Speculative decoding methods each release accepts, and what legacy MTP "
                   "aliases become.",
    "draft_parallel": "How each release builds the draft model's parallel config per method: "
                      "whether the target's pipeline-parallel size and expert parallelism are "
                      "copied to the draft.",
    "draft_mapping": "For a target model type and a speculative method: the draft architecture "
                     "and class vLLM picks, and whether that draft supports pipeline parallelism.",
    "gate_status": "Curated runtime gates re-checked against each release: verified when the "
                   "anchor string is still in its file, unverified when it is gone.",
    "raise_message": "Exception messages raised in each release's source, with file:line.",
    "cli_flag": "Every valid `vllm serve` flag and dotted sub-key of JSON flags, per release.",
    "cli_value": "How argparse reads each `vllm serve` option's value per release: action, nargs, "
                 "type callable, choices (with the file:line they come from), default.",
    "config_field": "Fields of the config classes JSON flags are validated against (pydantic), per "
                    "release: type, default, validators; field '' is the class (extra keys policy).",
    "shell_variable": "Placeholders the recipes checkout writes into commands ($HEAD_IP): values the "
                      "user's shell supplies.",
    "parser_name": "Tool-call and reasoning parser names each release registers.",
    "class_attr_fact": "Classes that set a capability attribute runtime gates depend on, per "
                       "release: attention impls returning the softmax LSE (DCP), inner decoders "
                       "relaying auxiliary hidden states over pipeline stages.",
    "release_fact": "Scalar facts read from each release's source as JSON: how the model runner "
                    "is chosen, which packages a default install brings.",
    "command": "Each synthesized `vllm serve` argv (JSON), stored once and referenced by "
               "verdict.command_id.",
    "model_fact": "Model id to HF config facts (architectures, model_type, MTP layers, experts), "
                  "with source and provenance.",
    "verdict": "One row per (release, platform, hardware, recipe, variant, strategy, feature, "
               "mode): whether the synthesized `vllm serve` command can start, the vLLM error it "
               "predicts, the reason chain and the evidence.",
    "v_arch_capability": "Architecture capabilities per release and platform (booleans 0/1, "
                         "NULL = unknown).",
    "v_draft": "Draft model chosen per target model type and speculative method, per release.",
    "v_gate": "Curated runtime gates and whether each release still contains their anchor.",
    "v_flag": "`vllm serve` flags and JSON sub-keys per release.",
    "v_parser": "Tool-call and reasoning parser names per release.",
    "v_flag_value": "Value handling of each `vllm serve` option per release: type, nargs, choices "
                    "and where the choices are written.",
    "v_config_field": "Keys (and their types) the JSON config flags accept per release.",
    "v_verdict": "Every verdict: can this recipe, variant, strategy and feature mode start on "
                 "this vLLM release?",
    "v_cause": "One row per (recipe, cause): the recipe element whose arguments make commands "
               "fail, where it is in the file, how many commands it blocks, the first release "
               "where they start, and the fix planned for it (or why there is none).",
    "cause": "Causes found by judging each non-ok combination again with one recipe element "
             "removed, with the fix the fix stage planned and re-judged (edits as JSON).",
    "verdict_cause": "Which causes each verdict row has (a row can fail for more than one).",
    "recipe_file": "sha256 of each recipe file as the build read it; an apply refuses a file "
                   "changed since.",
    "v_finding": "The verdicts that are not ok, with whether the recipe gates them, whether the "
                 "release is the one the recipe pins, and the first release where they work.",
}
VERDICT_COLUMN_DOCS = {
    "vllm_version": "vLLM release the verdict is for.",
    "platform": "cuda or rocm (follows the hardware profile's brand).",
    "hardware": "Taxonomy hardware profile id; empty where the arguments do not depend on it.",
    "recipe": "Recipe file relative to the recipes root, e.g. models/zai-org/GLM-5.2.yaml.",
    "model_id": "Hugging Face model id served.",
    "variant": "Recipe variant (precision/checkpoint); empty when the recipe has none.",
    "strategy": "Serving strategy, e.g. single_node_tp or multi_node_tp_pp.",
    "feature": "Opt-in feature; empty for the base command.",
    "mode": "Feature mode; empty when the feature has no modes.",
    "status": "ok, blocked (cannot start), warning (starts with a fallback) or unknown "
              "(a needed fact is missing).",
    "message": "The vLLM error message the command is predicted to fail with.",
    "reason": "Why, in one sentence.",
    "evidence": "file:line in the vLLM source of that release; several separated by '; '.",
    "gated": "1 when the recipe already keeps this combination from being offered.",
    "pinned": "1 when vllm_version is the release the recipe pins.",
    "works_from": "First release on the package index where this combination starts (found by "
                  "bisection); empty if none.",
    "cause_kind": "What makes it fail, as a recipe element: feature, pin (a later release accepts "
                  "it), variant, hardware, strategy, base_args, recipe, omni or fact (a missing fact).",
    "cause": "The culprit, e.g. spec_decoding:mtp or model.base_args (see v_cause).",
    "fix_kind": "The fix the fix stage planned and re-judged: gate, mode_variants, pin_bump, "
                "spelling, or none.",
    "fix": "What the fix does, in one line (`compat fix --apply DIR` writes it).",
}
CAPABILITY_COLUMN_DOCS = {
    "vllm_version": "vLLM release.",
    "platform": "cuda or rocm.",
    "arch": "Architecture name as in a HF config's `architectures`.",
    "class_path": "module.Class vLLM resolves the architecture to on this platform.",
    "file": "Source file of the class, relative to the vLLM source root.",
    "line": "Line of the class definition.",
    "supports_pp": "Pipeline parallelism (SupportsPP, by that release's rule).",
    "supports_lora": "LoRA adapters (SupportsLoRA).",
    "supports_multimodal": "Multimodal inputs (SupportsMultiModal).",
    "supports_encoder_tp_data": "Data-parallel vision encoder under tensor parallelism.",
    "is_hybrid": "Hybrid attention/state-space model.",
    "has_inner_state": "Keeps inner state between steps (e.g. Mamba).",
    "is_attention_free": "No attention layers.",
    "supports_transcription": "Speech-to-text (SupportsTranscription).",
    "is_pooling_model": "Pooling/embedding model.",
    "is_text_generation_model": "Generates text.",
    "supports_eagle3": "Can be the target of an EAGLE-3 draft (SupportsEagle3).",
    "is_moe": "Mixture of experts (MixtureOfExperts).",
}


def datasette_metadata(tables: dict[str, list[str]], db_name: str = "compat") -> str:
    """metadata.yaml for `datasette compat.db -m metadata.yaml`: titles and descriptions.

    `tables` maps each table and view of the database to its columns; only columns that
    exist are described.
    """
    column_docs = {"v_verdict": VERDICT_COLUMN_DOCS, "v_finding": VERDICT_COLUMN_DOCS,
                   "verdict": VERDICT_COLUMN_DOCS, "v_arch_capability": CAPABILITY_COLUMN_DOCS,
                   "arch_capability": CAPABILITY_COLUMN_DOCS}
    entries: dict[str, Any] = {}
    for name, columns in tables.items():
        entry: dict[str, Any] = {}
        if name in DESCRIPTIONS:
            entry["description"] = DESCRIPTIONS[name]
        docs = column_docs.get(name, {})
        described = {c: docs[c] for c in columns if c in docs}
        if described:
            entry["columns"] = described
        if entry:
            entries[name] = entry
    meta = {"title": TITLE, "description": DESCRIPTION, "source": "vllm-compat",
            "databases": {db_name: {"title": TITLE, "description": DESCRIPTION, "tables": entries}}}
    return yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=100)
