"""`compat site`: the static HTML compatibility matrix, rendered from the build's rows only.

The site reads what the build wrote (verdict; its causes and fixes in cause and
verdict_cause; argv in command; release) and decides nothing, so it cannot disagree with
`compat check`, `explain` or the fix stage. It must open from file:// (a CI artifact, a
checkout) and from any static host: no server, no CDN, relative links only, classic
scripts (module scripts are blocked on file://).

Pages hold every status, reason, cause and fix as text. The small script in site/static adds
filters, permalinks, the link from each index entry to its recipe cell and the "blocked
off-screen" cue; it computes per-cell ids and links from the row and column a cell sits
in, because writing them into every cell is what made the pages heavy. The budget
(BUDGET_*, issues 12 and 18) holds for the full snapshot at two releases and at each
recipe's pin: what repeats across variants, hardware and releases (a finding, its chain, a
command, a cause, a cell's hint) is written once per page and cited (see SaidOnce).

Written: index.html (each recipe at the release it pins), index-<release>.html (every
recipe judged at that release), recipes/<provider>/<name>.html (a table per release, those
that read the same sharing one, a row group per variant; the page's notes with reason, vLLM
error, evidence, cause and fix, site.js showing what they cite in place), verdicts.json and
compat.db.gz (see site_data), metadata.yaml for Datasette. The output directory is
replaced whole: the site is built next to it and swapped in, so a failed build leaves
the previous site as it was.
"""

from __future__ import annotations

import functools
import json
import os
import re
import secrets
import shutil
import sqlite3
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import jinja2
import yaml
from markupsafe import Markup, escape

from compat.chains import FOLLOWER_ROLE, shown_steps
from compat.emit.site_data import ship_database, targets_of, verdicts_document, write_verdicts
from compat.errors import UserError
from compat.recipes.sizing import PD_ROLES
from compat.recipes.synthesis import command_line
from compat.resources import site_dir
from compat.store import Store, open_store
from compat.tables import Release, VerdictCause
from compat.vocab import Status, release_key, status_rank, worst

VLLM_BLOB = "https://github.com/vllm-project/vllm/blob"
RECIPES_BLOB = "https://github.com/vllm-project/recipes/blob/main"  # --recipes-url default
STATUSES = tuple(s.value for s in Status)  # legend order, mildest first
PROBLEMS = tuple(s.value for s in sorted(Status, key=lambda s: -s.rank) if s != Status.OK)
SYMBOLS = {"ok": "✓", "blocked": "✗", "warning": "!", "unknown": "?"}
MEANINGS = {
    "ok": "the command starts",
    "blocked": "cannot start: a config or startup error",
    "warning": "starts, with a fallback or a silent change",
    "unknown": "a needed fact is missing",
}
MARKER = ".compat-site"  # marks a directory this module built, so it may be replaced

# The budget for the full recipes snapshot, judged at two releases or each recipe at its pin
# (issues 12 and 18).
BUDGET_PAGES_AND_JSON = 5_000_000  # bytes of every .html and .json file together
BUDGET_PAGE = 300_000  # bytes of any one page, index or recipe

#: The verdict columns the pages read.
_ROW_KEYS = (
    "id",
    "vllm_version",
    "platform",
    "hardware",
    "recipe",
    "model_id",
    "variant",
    "strategy",
    "feature",
    "mode",
    "status",
    "message",
    "reason",
    "evidence",
    "gated",
    "pinned",
    "works_from",
    "argv",
    "chain",
    "judged",
    "profiles",
    "cause_id",
    "command_id",
    "cause_kind",
    "cause",
    "source",
)
TEXT_COLUMNS = {
    "platform",
    "hardware",
    "variant",
    "strategy",
    "feature",
    "mode",
    "message",
    "reason",
    "evidence",
    "works_from",
    "argv",
    "model_id",
    "profiles",
    "cause",
    "cause_kind",
    "source",
}  # NULL reads as ''

_STRATEGY_SHAPES = ("tp", "tep", "dep", "tp_dp", "tp_pp")
_RELEASE_RE = re.compile(r"^\d+(\.\d+)+((a|b|rc)\d+)?(\.post\d+)?$")
FINDING_CLIP = 80  # characters of a cause's finding in an index row's cause list
ENTRY_REASON_CLIP = 100  # characters of a reason in an index entry's title (no cause found)
CAUSE_FIX_CLIP = 100  # characters of a fix (or why there is none) in an index row's cause list
_EVIDENCE_RE = re.compile(r"^(?P<path>[\w.-]+(?:/[\w.-]+)*\.\w+)(?::(?P<line>\d+))?$")


@dataclass(frozen=True)
class SiteReport:
    pages: int
    bytes: int  # everything written
    seconds: float
    pages_and_json_bytes: int = 0  # what BUDGET_PAGES_AND_JSON bounds
    largest_page_bytes: int = 0  # what BUDGET_PAGE bounds
    largest_page: str = ""  # its path in the site
    database_bytes: int = 0  # compat.db.gz

    def summary(self) -> str:
        return (
            f"{self.pages} pages + verdicts.json {self.pages_and_json_bytes / 1e6:.2f} MB "
            f"(largest page {self.largest_page_bytes / 1e3:.0f} kB, {self.largest_page}), "
            f"compat.db.gz {self.database_bytes / 1e6:.1f} MB; {self.bytes / 1e6:.1f} MB "
            f"written in {self.seconds:.1f}s"
        )


def build_site(db_path: Path, out_dir: Path, recipes_url: str = RECIPES_BLOB) -> SiteReport:
    """Render the site for `db_path` into `out_dir`, replacing a previous site there.

    `recipes_url` is where recipe files are linked (a cause links its recipe line):
    `<recipes_url>/models/<provider>/<name>.yaml#L<line>`.
    """
    started = time.perf_counter()
    db_path, out_dir = Path(db_path), Path(os.path.abspath(out_dir))
    _check_out_dir(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_dir.parent / f".{out_dir.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
    os.mkdir(tmp)  # honours the umask, unlike mkdtemp's 0700: the site is meant to be served
    try:
        pages = _render_into(db_path, tmp, recipes_url.rstrip("/"))
        _swap(tmp, out_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    sizes = {
        p.relative_to(out_dir).as_posix(): p.stat().st_size
        for p in out_dir.rglob("*")
        if p.is_file()
    }
    largest = max(((n, p) for p, n in sizes.items() if p.endswith(".html")), default=(0, ""))
    return SiteReport(
        pages=pages,
        bytes=sum(sizes.values()),
        seconds=round(time.perf_counter() - started, 3),
        pages_and_json_bytes=sum(n for p, n in sizes.items() if p.endswith((".html", ".json"))),
        largest_page_bytes=largest[0],
        largest_page=largest[1],
        database_bytes=sizes.get("compat.db.gz", 0),
    )


# ---------------------------------------------------------------------------- output dir


def _check_out_dir(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise UserError("exists and is not a directory", where=str(out))
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise UserError(
            "directory is not empty and was not built by `compat site`; refusing to replace it",
            where=str(out),
        )


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
    with open_store(src) as db:
        target = sqlite3.connect(dst)
        try:
            db.con.backup(target)
        finally:
            target.close()


def _columns(db: Store, name: str) -> list[str]:
    return [r["name"] for r in db.dicts(f'PRAGMA table_info("{name}")')]


@dataclass(frozen=True)
class CauseView:
    """A cause as the pages show it: the recipe element, where it is, and its fix."""

    id: int | None
    kind: str
    label: str
    field: str
    line: int
    fix_kind: str  # gate | mode_variants | pin_bump | spelling | none | '' (none planned)
    fix: str
    fix_why: str
    works_from: str
    finding: str = ""

    @property
    def has_fix(self) -> bool:
        return self.fix_kind not in ("", "none")

    @property
    def fix_text(self) -> str:
        """As `compat check` words it: "fix (gate): ..." or "no automatic fix: why"."""
        if self.has_fix:
            return f"fix ({self.fix_kind}): {self.fix}"
        return f"no automatic fix: {self.fix_why or 'none planned'}"

    @property
    def fix_short(self) -> str:
        return f"fix: {self.fix_kind}" if self.has_fix else "no automatic fix"


@dataclass
class SiteData:
    rows: list[dict[str, Any]]
    commits: dict[str, str]  # release -> vLLM commit, for evidence links of untagged trees
    causes: dict[int, CauseView]
    commands: dict[int, str]  # command id -> argv JSON, for the commands a note shows


def _load(db: Store, where: str) -> SiteData:
    """The rows the pages show, from the store's records (an older database's missing columns
    read as their defaults; a status this release does not know reads as unknown)."""
    if not db.has_table("verdict"):
        raise UserError("no `verdict` table (run `compat build` first)", where=where)
    known = {s.value for s in Status}
    rows = []
    for v in db.verdicts():
        r = {k: getattr(v, k) for k in _ROW_KEYS}
        r.update({k: r[k] or "" for k in TEXT_COLUMNS})
        r["status"] = v.status if v.status in known else "unknown"
        r["chain"] = "" if v.status == "ok" else v.chain  # ok rows: no note
        rows.append(r)
    also: dict[int, list[int]] = defaultdict(list)
    if db.has_table("verdict_cause"):
        for link in db.rows(VerdictCause, order="verdict_id, cause_id"):
            also[link.verdict_id].append(link.cause_id)
    for r in rows:
        primary, more = r["cause_id"], also.get(r["id"], ())
        r["causes"] = tuple(dict.fromkeys([primary, *more])) if primary is not None else tuple(more)
    causes: dict[int, CauseView] = {}
    if db.has_table("cause"):
        for c in db.causes():
            causes[c.id or 0] = CauseView(
                c.id,
                c.kind or "",
                c.label or "",
                c.field or "",
                c.line or 0,
                c.fix_kind or "",
                c.fix or "",
                c.fix_why or "",
                c.works_from or "",
                c.finding or "",
            )
    commands: dict[int, str] = {}
    if db.has_table("command"):
        commands = {
            r["id"]: r["argv"]
            for r in db.dicts(
                "SELECT id, argv FROM command WHERE id IN (SELECT command_id FROM verdict WHERE status <> 'ok')"
            )
        }
    commits = {r.version: r.commit_id or "" for r in db.rows(Release, order="version")}
    return SiteData(rows=rows, commits=commits, causes=causes, commands=commands)


def _causes_of(r: dict[str, Any], causes: dict[int, CauseView]) -> list[CauseView]:
    """A row's causes, primary first; a row whose cause has no `cause` entry keeps its label."""
    found = [causes[c] for c in r["causes"] if c in causes]
    if not found and r["cause"]:
        found = [CauseView(None, r["cause_kind"], r["cause"], "", 0, "", "", "", "")]
    return found


# ---------------------------------------------------------------------------- naming


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9._]+", "-", text.lower()).strip("-")


def cell_id(recipe_slug: str, strategy: str, feature: str, mode: str) -> str:
    """Permalink id of a feature mode in a strategy: cell-<recipe>-<strategy>-<feature>[-<mode>].

    The base command is feature "base"; a feature without modes has no mode part. The
    pages carry its parts (strategy_slug, fm_slug) and site.js joins them the same way.
    """
    return f"cell-{recipe_slug}-{strategy_slug(strategy)}-{fm_slug(feature, mode)}"


def strategy_slug(strategy: str) -> str:
    return _slug(strategy) or "none"


def fm_slug(feature: str, mode: str) -> str:
    return "-".join([_slug(feature) or "base", *([_slug(mode)] if mode else [])])


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
            shape = strategy[len(prefix) :]
            known = shape in _STRATEGY_SHAPES
            rank = _STRATEGY_SHAPES.index(shape) if known else len(_STRATEGY_SHAPES)
            return (group, rank, strategy)
    return (2, 0, strategy)


def _safe_component(text: str) -> str:
    text = re.sub(r"[^A-Za-z0-9._-]+", "_", text)
    return "_" if text in ("", ".", "..") else text


def index_page(view: str) -> str:
    """The file of an index view: index.html (each recipe at its pin) or index-<release>.html."""
    return "index.html" if view == PINNED_VIEW else f"index-{_safe_component(view)}.html"


PINNED_VIEW = "pinned"


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
        return cls(
            path=path,
            provider=provider,
            name=rest[-1],
            slug=_slug("-".join([provider, *rest])),
            href="recipes/" + "/".join(dirs) + ".html",
            depth=len(dirs),
        )


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


def recipe_line_link(recipe: str, line: int, recipes_url: str) -> Link:
    """models/x/y.yaml:60, linked at `recipes_url` (a cause's place in its recipe file)."""
    text = f"{recipe}:{line}" if line else recipe
    url = f"{recipes_url}/{recipe}" + (f"#L{line}" if line else "") if recipes_url else None
    return Link(text, url)


def _chain(raw: str) -> list[str]:
    return shown_steps(raw)


def _command(raw: str) -> str:
    """The shell command(s) of a row's argv: [[role, [arg, ...]], ...] or a flat [arg, ...].

    A role ('prefill', 'decode', ...) becomes a comment line above its command. Follower nodes
    ('worker N', 'prefill worker N') are counted, not shown: each is its lead's command at
    another node rank, and a page lists thousands of them.
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
    followers = 0
    for item in argvs:
        role, argv = (
            item
            if isinstance(item, list) and len(item) == 2 and isinstance(item[1], list)
            else ("", item)
        )
        if FOLLOWER_ROLE.match(str(role)):
            followers += 1  # a follower node: its lead's command, at another rank
            continue
        if role:
            lines.append(f"# {role}")
        lines.append(command_line([str(a) for a in argv]) if isinstance(argv, list) else str(argv))
    if followers:
        lines.append(
            f"# and {followers} follower node command(s) (--node-rank > 0): in compat.db.gz"
        )
    return "\n".join(lines)


def targets_text(pairs: Iterable[tuple[str, str]]) -> str:
    """(platform, hardware) pairs, grouped by platform: "cuda: b200, h100; rocm"."""
    by_platform: dict[str, set[str]] = defaultdict(set)
    for platform, hardware in pairs:
        by_platform[platform or "any platform"].add(hardware)
    parts = []
    for platform in sorted(by_platform):
        profiles = sorted(by_platform[platform])
        if profiles == [""]:
            parts.append(platform)
        else:
            parts.append(f"{platform}: " + ", ".join(h or "any profile" for h in profiles))
    return "; ".join(parts)


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _worst(statuses: Iterable[str]) -> str:
    return worst(set(statuses)).value


# compat.vocab's release order, remembered: the pages sort the same few labels many times.
_release_order = functools.lru_cache(maxsize=None)(release_key)


def _join_versions(versions: Iterable[str]) -> str:
    return ", ".join(sorted(set(versions), key=_release_order))


def _combo(r: dict[str, Any]) -> tuple[str, ...]:
    """A row's key within one release."""
    return (r["variant"], r["strategy"], r["feature"], r["mode"], r["platform"], r["hardware"])


# ---------------------------------------------------------------------------- index model


@dataclass
class Entry:
    """One feature mode in one matrix cell of an index view, over variants and hardware."""

    label: str
    status: str
    mixed: bool
    gated: bool
    title: str  # blocked and warning entries: what, where, cause, fix, works from
    hint: str  # blocked entries: the fix kind and the first working release, shown
    same: int = 0  # n > 0: title and hint are the row's n-th (see `_said_once_per_row`)


def _said_once_per_row(cells: dict[str, list[Entry]], strategies: list[str]) -> None:
    """A row's entries with the title and hint of an earlier entry say so (`same`: the n-th
    distinct title and hint of the row, in page order) instead of repeating them; site.js
    copies them over. A row's blocked entries mostly share one cause."""
    seen: dict[tuple[str, str], int] = {}
    for strategy in strategies:
        for e in cells.get(strategy, ()):
            key = (e.title, e.hint)
            if key == ("", ""):
                continue
            if key in seen:
                e.same = seen[key]
            else:
                seen[key] = len(seen) + 1


@dataclass
class RowCause:
    """A cause listed under a recipe's name: what fails, where, and its fix."""

    status: str
    label: str
    finding: str
    fix: str
    works_from: str
    strategies: list[str]
    entries: int


@dataclass
class IndexRow:
    ref: RecipeRef
    model_id: str
    releases: str
    pin: str  # the pinned view's one release of the row ('' for several), a release view narrows to
    search: str  # the model ids the row does not show; site.js adds provider, name and model
    cells: dict[str, list[Entry]]
    counts: Counter[str]
    causes: list[RowCause]

    @property
    def problems(self) -> list[tuple[str, int]]:
        """(status, entries) for the non-ok statuses of the row, worst first."""
        return [(s, self.counts[s]) for s in PROBLEMS if self.counts[s]]


@dataclass(frozen=True)
class IndexView:
    key: str  # PINNED_VIEW or a release
    page: str
    label: str
    recipes: int
    narrows: bool = False  # index.html narrowed to the recipes pinned here: no page of its own

    @property
    def href(self) -> str:
        return f"{index_page(PINNED_VIEW)}#release={self.key}" if self.narrows else self.page


def _entry(
    feature: str, mode: str, rows: list[dict[str, Any]], causes: dict[int, CauseView]
) -> Entry:
    status = _worst(r["status"] for r in rows)
    decisive = [r for r in rows if r["status"] == status]
    label = fm_label(feature, mode)
    mixed = len({r["status"] for r in rows}) > 1
    gated = status != "ok" and all(r["gated"] for r in decisive)
    title = hint = ""
    if status in ("blocked", "warning"):
        # The cell's place says which feature mode and strategy; the title says why, the hint
        # the fix kind and the first working release, the row's cause list the fix itself.
        parts = []
        if mixed:
            parts.append(
                f"{status} on {len(decisive)} of {len(rows)} variant/hardware combinations"
            )
        found = list({c.label: c for r in decisive for c in _causes_of(r, causes)[:1]}.values())
        if found:
            parts.append("cause: " + "; ".join(c.label for c in found))
        elif decisive[0]["reason"]:
            parts.append(_clip(decisive[0]["reason"], ENTRY_REASON_CLIP))
        works = _join_versions(r["works_from"] for r in decisive if r["works_from"])
        if status == "blocked":  # the hint says the fix kind and the first working release
            fixes = dict.fromkeys("fix: " + c.fix_kind if c.has_fix else "no fix" for c in found)
            hint = " · ".join(
                filter(
                    None,
                    [
                        "gated" if gated else " / ".join(fixes),
                        f"works from {works}" if works else "",
                    ],
                )
            )
        if gated:
            parts.append("the recipe already gates this combination")
        title = "; ".join(parts)
        title = title[:1].upper() + title[1:] + "." if title else ""
    return Entry(label=label, status=status, mixed=mixed, gated=gated, title=title, hint=hint)


def _row_causes(rows: list[dict[str, Any]], causes: dict[int, CauseView]) -> list[RowCause]:
    """The non-ok rows of an index row grouped by primary cause, worst first."""
    groups: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r["status"] != "ok":
            found = _causes_of(r, causes)
            groups[found[0] if found else ("reason", r["reason"])].append(r)
    out = []
    for key, grouped in groups.items():
        status = _worst(r["status"] for r in grouped)
        entries = len({(r["strategy"], r["feature"], r["mode"]) for r in grouped})
        strategies = sorted({strategy_label(r["strategy"]) for r in grouped}, key=_strategy_key)
        works = _join_versions(r["works_from"] for r in grouped if r["works_from"])
        if isinstance(key, CauseView):  # its own first release: where all it blocks starts
            fix = key.fix_text if (status == "blocked" or key.has_fix) else ""
            label, finding = key.label, key.finding or grouped[0]["reason"]
            works = key.works_from or works
        else:
            label, finding, fix = "", key[1], ""
        out.append(
            RowCause(
                status=status,
                label=label,
                finding=_clip(finding, FINDING_CLIP),
                fix=_clip(fix, CAUSE_FIX_CLIP),
                works_from=works,
                strategies=strategies,
                entries=entries,
            )
        )
    out.sort(key=lambda c: (-status_rank(c.status), -c.entries, c.label))
    unknown = [c for c in out if c.status == "unknown"]
    if len(unknown) > 1:  # missing facts are many and alike: one line, by cause
        merged = RowCause(
            status="unknown",
            label="",
            finding=_clip(
                ", ".join(f"{c.label or c.finding} ({c.entries})" for c in unknown), CAUSE_FIX_CLIP
            ),
            fix="",
            works_from="",
            entries=len(
                {(r["strategy"], r["feature"], r["mode"]) for r in rows if r["status"] == "unknown"}
            ),
            strategies=sorted({s for c in unknown for s in c.strategies}, key=_strategy_key),
        )
        out = [c for c in out if c.status != "unknown"] + [merged]
    return out


def _pinned_rows(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    """Each combination at the lowest release it is pinned at, else at the newest judged one.

    A combination pinned at several releases (a build with explicit --vllm marks every
    judged release the pin names) shows the lowest, as a pin is the minimum vLLM a
    recipe needs. Returns the rows and how the row's release reads on the index.
    """
    by_combo: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_combo[_combo(r)].append(r)
    shown: list[dict[str, Any]] = []
    pinned_at: set[str] = set()
    newest_at: set[str] = set()
    for combo_rows in by_combo.values():
        pinned = [r for r in combo_rows if r["pinned"]]
        if pinned:
            version = min((r["vllm_version"] for r in pinned), key=_release_order)
            pinned_at.add(version)
        else:
            pool = [r for r in combo_rows if r["judged"]] or combo_rows
            version = max((r["vllm_version"] for r in pool), key=_release_order)
            newest_at.add(version)
        shown += [r for r in combo_rows if r["vllm_version"] == version]
    parts = []
    if pinned_at:
        parts.append(f"vLLM {_join_versions(pinned_at)} · pinned")
    if newest_at:
        text = f"{_join_versions(newest_at)} · pin not scanned, newest shown"
        parts.append(f"vLLM {text}" if not pinned_at else f"{text} for the rest")
    return shown, "; ".join(parts)


def _fm_order(rows: list[dict[str, Any]]) -> dict[tuple[str, str], int]:
    """Feature modes in first-seen order (the order the recipe lists them), base first."""
    order: dict[tuple[str, str], int] = {("", ""): -1}
    for r in rows:
        order.setdefault((r["feature"], r["mode"]), len(order))
    return order


def _index_views(
    rows: list[dict[str, Any]], pinned: dict[str, list[dict[str, Any]]]
) -> list[IndexView]:
    """The pinned view, then one view per release judged, when more than one release is.

    `pinned`: each recipe's rows the pinned view shows. A release view that shows the same
    rows as the pinned view of the recipes pinned there (every release of a build judging
    each recipe at its pin) narrows index.html to them instead of repeating them in a page.
    """
    at: dict[str, dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))
    for r in rows:
        if r["judged"]:
            at[r["vllm_version"]][r["recipe"]].add(r["id"])
    pin = {path: _pin_of(shown) for path, shown in pinned.items()}
    views = [IndexView(PINNED_VIEW, index_page(PINNED_VIEW), "each recipe's pin", len(pinned))]
    if len(at) > 1:
        for v in sorted(at, key=release_key):
            narrows = {p for p, release in pin.items() if release == v} == set(at[v]) and all(
                ids == {r["id"] for r in pinned[p]} for p, ids in at[v].items()
            )
            views.append(IndexView(v, index_page(v), v, len(at[v]), narrows))
    return views


def _pin_of(shown: list[dict[str, Any]]) -> str:
    """The release the pinned view shows a recipe at, '' when it shows several."""
    versions = {r["vllm_version"] for r in shown}
    return versions.pop() if len(versions) == 1 else ""


def _index_model(
    view: IndexView,
    by_recipe: dict[str, list[dict[str, Any]]],
    pinned: dict[str, tuple[list[dict[str, Any]], str]],
    strategies: list[str],
    fm_order: dict[tuple[str, str], int],
    causes: dict[int, CauseView],
) -> dict[str, Any]:
    """An index view: its rows by provider, and only the strategies (columns) and feature modes
    (filter options) it shows, so a release judged for a few recipes is a small page."""
    providers: dict[str, list[IndexRow]] = defaultdict(list)
    counts: Counter[str] = Counter()
    seen: set[tuple[str, str, str]] = set()
    for path, rows in by_recipe.items():
        ref = RecipeRef.of(path)
        if view.key == PINNED_VIEW:
            shown, releases = pinned[path]
        else:
            shown = [r for r in rows if r["vllm_version"] == view.key and r["judged"]]
            releases = "pinned at this release" if any(r["pinned"] for r in shown) else ""
        if not shown:
            continue
        groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
        for r in shown:
            groups[(r["strategy"], r["feature"], r["mode"])].append(r)
        seen.update(groups)
        cells: dict[str, list[Entry]] = defaultdict(list)
        row_counts: Counter[str] = Counter()
        for strategy, feature, mode in sorted(groups, key=lambda k: fm_order[(k[1], k[2])]):
            e = _entry(feature, mode, groups[(strategy, feature, mode)], causes)
            cells[strategy].append(e)
            row_counts[e.status] += 1
        counts.update(row_counts)
        _said_once_per_row(cells, strategies)
        model_ids = sorted({r["model_id"] for r in rows if r["model_id"]})
        providers[ref.provider].append(
            IndexRow(
                ref=ref,
                model_id=rows[0]["model_id"],
                releases=releases,
                pin=_pin_of(shown) if view.key == PINNED_VIEW else "",
                search=" ".join(m for m in model_ids if m != rows[0]["model_id"]).lower(),
                cells=dict(cells),
                counts=row_counts,
                causes=_row_causes(shown, causes),
            )
        )
    shown_strategies = {strategy for strategy, _, _ in seen}
    return {
        "view": view,
        "providers": [
            (p, sorted(rs, key=lambda r: r.ref.name.lower()))
            for p, rs in sorted(providers.items(), key=lambda kv: kv[0].lower())
        ],
        "strategies": [s for s in strategies if s in shown_strategies],
        "counts": counts,
        "total": sum(counts.values()),
        "feature_options": _feature_options(fm_order, {(f, m) for _, f, m in seen}),
    }


def _feature_options(
    fm_order: dict[tuple[str, str], int], shown: set[tuple[str, str]]
) -> list[tuple[str, str]]:
    """The feature filter's options: base, then each feature and its modes, as the recipes
    list them; only those the view shows."""
    ordered = [fm for fm in sorted(fm_order, key=fm_order.__getitem__) if fm in shown]
    options = [("base", "base command")]
    for f in dict.fromkeys(feature for feature, _ in ordered if feature):
        options.append((f, f))
        options += [(fm_label(f, m), f"  {fm_label(f, m)}") for ff, m in ordered if ff == f and m]
    return options


# ---------------------------------------------------------------------------- recipe model

# A chain step or reason: "[blocked] prefill worker 1: <finding>"; the status and node role stay
# in the note, the finding is said once per page.
_ROLE = "|".join(PD_ROLES)
_STEP_PARTS = re.compile(
    rf"^(?:\[(\w+)\] )?((?:(?:{_ROLE})(?: worker \d+)?|worker \d+): )?(.*)$", re.DOTALL
)
#: Where a said text named the release it was judged at ("flag --nnodes does not exist in
#: vLLM 0.11.0"): the page shows it as a variable, the release of the note's line.
RELEASE_MARK = "\x00"


def unversioned(text: str, version: str) -> str:
    """`text` with "vLLM <version>" written "vLLM <RELEASE_MARK>", so that a finding said at
    several releases is one text."""
    if version not in text:
        return text
    return re.sub(rf"vLLM {re.escape(version)}(?!\w|\.\d)", f"vLLM {RELEASE_MARK}", text)


@dataclass(frozen=True)
class Cited:
    """A text as a note cites it: the status and node role it writes itself, and the id of the
    page's one copy of the rest."""

    status: str
    role: str
    ref: str

    @property
    def prefix(self) -> str:
        return (f"[{self.status}] " if self.status else "") + self.role


def pools_together(steps: list[Cited]) -> list[Cited]:
    """A PD deployment's chain with its pools said together where they say the same: "[note]
    prefill, decode: X" for "[note] prefill: X" ... "[note] decode: X"."""
    roles = [f"{role}: " for role in PD_ROLES]
    if not steps or any(c.role not in roles for c in steps):
        return steps
    said = {tuple((c.status, c.ref) for c in steps if c.role == role) for role in roles}
    if len(said) != 1:
        return steps
    both = ", ".join(PD_ROLES) + ": "
    return [Cited(status, both, ref) for status, ref in said.pop()]


@dataclass(frozen=True)
class CauseEntry:
    """A cause as the page says it once: id, the cause, and its recipe line."""

    id: str
    cause: CauseView
    link: Link


class SaidOnce:
    """The long texts of one recipe page (findings, vLLM errors, commands, causes with their fix),
    each written once at the foot of the page.

    A finding repeats across variants, hardware and releases: a model config unresolved at
    the pin is unresolved at each of the 22 releases judged after it, and a follower node's
    steps are its lead's. Written into each note, that made pages of 666 kB. Notes cite the
    texts by id; site.js shows each in place, and without scripts a citation links to it.
    """

    def __init__(self, recipe: str, recipes_url: str) -> None:
        self.recipe, self.recipes_url = recipe, recipes_url
        self.texts: dict[str, str] = {}  # text -> id, in first-cited order
        self.commands: dict[str, str] = {}
        self.causes: dict[CauseView, CauseEntry] = {}

    def text(self, text: str) -> str:
        """The id of `text` (its release written as RELEASE_MARK, see `unversioned`)."""
        return self.texts.setdefault(text, f"t{len(self.texts) + 1}")

    def step(self, step: str) -> Cited:
        m = _STEP_PARTS.match(step)
        assert m is not None  # the pattern matches any text
        return Cited(m[1] or "", m[2] or "", self.text(m[3]))

    def command(self, shell: str) -> str:
        return self.commands.setdefault(shell, f"c{len(self.commands) + 1}")

    def cause(self, cause: CauseView) -> CauseEntry:
        entry = self.causes.get(cause)
        if entry is None:
            link = recipe_line_link(self.recipe, cause.line, self.recipes_url)
            entry = self.causes[cause] = CauseEntry(f"k{len(self.causes) + 1}", cause, link)
        return entry


@dataclass
class Occurrence:
    """Where a note holds at one release: the hardware (its cells are those citing it, which
    site.js lists in the note)."""

    applies: list[tuple[str, str, str]] = field(default_factory=list)  # (variant, platform, hw)
    applies_text: str = ""  # set once the release's hardware per variant is known


@dataclass
class Note:
    """One outcome, shared by every cell of the page whose rows say the same thing, at every
    release they say it; its long texts are the page's (SaidOnce), cited by id."""

    n: int
    status: str
    reason: Cited | None
    chain: list[Cited]  # empty when the chain says no more than the reason
    message: str  # id of the vLLM error, '' without one
    evidence: list[Link]
    works_from: str
    gated: bool
    causes: list[CauseEntry]
    command: str  # id of the first command (the head node's), '' without one
    command_keys: set[Any] = field(default_factory=set)
    at: dict[str, Occurrence] = field(default_factory=dict)  # release -> where it holds
    places: list[tuple[str, str]] = field(default_factory=list)  # (releases, hardware)

    @property
    def more_commands(self) -> int:
        return len(self.command_keys) - bool(self.command)


def applies_text(
    applies: Iterable[tuple[str, str, str]], hardware: dict[str, set[tuple[str, str]]]
) -> str:
    """ "variant default (all its hardware); variant nvfp4 (cuda: b200)": `hardware` is what each
    variant is judged on at the release."""
    by_variant: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for variant, platform, profile in applies:
        by_variant[variant].append((platform, profile))
    parts = []
    for variant, targets in by_variant.items():
        every = set(targets) == hardware.get(variant) and len(set(targets)) > 1
        where = "all its hardware" if every else targets_text(targets)
        parts.append(f"variant {variant or '(none)'} ({where})")
    return "; ".join(parts)


def release_runs(versions: list[str], order: list[str]) -> str:
    """ "0.11.0, 0.17.0–0.28.0": `versions` as runs over `order` (the page's releases); three or
    more in a row read as a range."""
    index = {v: i for i, v in enumerate(order)}
    runs: list[list[str]] = []
    for v in sorted(versions, key=index.__getitem__):
        if runs and index[runs[-1][-1]] == index[v] - 1:
            runs[-1].append(v)
        else:
            runs.append([v])
    return ", ".join(f"{run[0]}–{run[-1]}" if len(run) > 2 else ", ".join(run) for run in runs)


def _places(note: Note, order: list[str]) -> list[tuple[str, str]]:
    """A note's releases grouped by the hardware it holds on there."""
    groups: dict[str, list[str]] = defaultdict(list)
    for version, occ in note.at.items():
        groups[occ.applies_text].append(version)
    return [(release_runs(vs, order), hardware) for hardware, vs in groups.items()]


@dataclass(frozen=True)
class Hint:
    """What a blocked part of a cell says next to its status: cause, fix, first working release.

    It is its notes' (`notes`), and a section writes it at the first cell citing them; site.js
    shows it at the others."""

    cause: str
    fix: str
    works_from: str
    notes: tuple[int, ...] = ()


@dataclass
class Part:
    """The targets of a cell that share one status (all of them when they agree)."""

    status: str
    where: str
    notes: list[int]
    hints: list[Hint]


@dataclass
class Cell:
    status: str
    parts: list[Part]
    was: str = ""  # the status at the default release, when it differs and the page does not say


@dataclass
class VariantRows:
    """One variant's rows of a release's table."""

    name: str
    label: str
    targets: str  # '' when the variant is judged on all the hardware the page lists for it
    pinned: bool
    rows: list[tuple[str, list[Cell | None]]]  # (feature mode label, cells by strategy)


@dataclass(frozen=True)
class Variant:
    """A variant as the page lists it once: model ids and the hardware it is judged on."""

    name: str
    label: str
    model_ids: list[str]
    targets: str


@dataclass
class ReleaseSection:
    """The table of one release, or of several whose tables read the same."""

    versions: list[str]
    pinned: bool
    is_default: bool
    partial: bool  # only combinations blocked at the pin were judged again here
    strategies: list[tuple[str, str]]  # (strategy, slug)
    variants: list[VariantRows]
    counts: Counter[str] = field(default_factory=Counter)
    label: str = ""  # its releases, as release_runs says them

    def reads_like(self, other: ReleaseSection) -> bool:
        return (self.pinned, self.partial, self.strategies, self.variants, self.counts) == (
            other.pinned,
            other.partial,
            other.strategies,
            other.variants,
            other.counts,
        )


def merged_sections(sections: list[ReleaseSection], order: list[str]) -> list[ReleaseSection]:
    """Releases whose tables read the same as one section: a pinned build judges the releases
    after a pin only where the pin is blocked, and those cells often stay as they are for
    many releases. Notes are the page's, so the same cells cite the same notes."""
    merged: list[ReleaseSection] = []
    for section in sections:
        same = next((m for m in merged if m.reads_like(section)), None)
        if same is None:
            merged.append(section)
        else:
            same.versions += section.versions
            same.is_default = same.is_default or section.is_default
    for section in merged:
        section.label = release_runs(section.versions, order)
    return merged


@dataclass(frozen=True)
class _RowTexts:
    """A row's texts as its note says them: release-free (see `unversioned`)."""

    reason: str
    message: str
    chain: tuple[str, ...]


class _NoteBook:
    """The notes of one recipe page, numbered in the order cells first cite them.

    An outcome said the same way at several releases (its texts naming the release as a
    variable) is one note, listing where it holds at each. Its evidence links point at the
    source of the first of them, and site.js points them at the release shown."""

    def __init__(self, data: SiteData, said: SaidOnce) -> None:
        self.data, self.said = data, said
        self.by_key: dict[tuple, Note] = {}

    @property
    def notes(self) -> list[Note]:
        return list(self.by_key.values())

    def cite(self, rows: list[dict[str, Any]], version: str, ref: str | None) -> list[Note]:
        cited: list[Note] = []
        for r in rows:
            if r["status"] == "ok":
                continue
            texts = _RowTexts(
                unversioned(r["reason"], version),
                unversioned(r["message"], version),
                tuple(unversioned(step, version) for step in shown_steps(r["chain"])),
            )
            key = (
                r["status"],
                texts,
                r["evidence"],
                r["works_from"],
                bool(r["gated"]),
                r["causes"],
                r["cause"],
            )
            note = self.by_key.get(key)
            if note is None:
                note = self.by_key[key] = self._note(r, texts, evidence_links(r["evidence"], ref))
            occ = note.at.setdefault(version, Occurrence())
            for platform, hardware in targets_of(r):
                if (r["variant"], platform, hardware) not in occ.applies:
                    occ.applies.append((r["variant"], platform, hardware))
            self._add_command(note, r)
            if note not in cited:
                cited.append(note)
        return cited

    def _note(self, r: dict[str, Any], texts: _RowTexts, evidence: list[Link]) -> Note:
        said = self.said
        reason = said.step(texts.reason) if texts.reason else None
        steps = pools_together([said.step(s) for s in texts.chain])
        if reason and len(steps) == 1 and steps[0] == Cited(r["status"], reason.role, reason.ref):
            steps = []  # the chain is the reason
        return Note(
            n=len(self.by_key) + 1,
            status=r["status"],
            reason=reason,
            chain=steps,
            message=said.text(texts.message) if texts.message else "",
            evidence=evidence,
            works_from=r["works_from"],
            gated=bool(r["gated"]),
            causes=[said.cause(c) for c in _causes_of(r, self.data.causes)],
            command="",
        )

    def _add_command(self, note: Note, r: dict[str, Any]) -> None:
        key = r["argv"] or r["command_id"]
        if key in note.command_keys or not key:
            return
        note.command_keys.add(key)
        if not note.command:
            raw = r["argv"] or self.data.commands.get(r["command_id"], "")
            if raw:
                note.command = self.said.command(_command(raw))


def _cell(
    rows: list[dict[str, Any]], book: _NoteBook, version: str, ref: str | None, hinted: set[int]
) -> Cell:
    """A cell: a part per status, worst first. `hinted`: the notes whose hint the section has
    written already."""
    by_status: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_status[r["status"]].append(r)
    order = sorted(by_status, key=lambda s: -status_rank(s))
    parts = []
    for s in order:
        where = (
            targets_text(t for r in by_status[s] for t in targets_of(r)) if len(order) > 1 else ""
        )
        notes = book.cite(by_status[s], version, ref)
        hints = _hints([n for n in notes if n.n not in hinted]) if s == "blocked" else []
        hinted.update(n for h in hints for n in h.notes)
        parts.append(Part(status=s, where=where, notes=[n.n for n in notes], hints=hints))
    return Cell(status=order[0], parts=parts)


def _hints(notes: list[Note]) -> list[Hint]:
    """The hints of blocked notes, each said once with the notes it stands for."""
    by_text: dict[tuple[str, str, str], list[int]] = {}
    for note in notes:
        cause = note.causes[0].cause if note.causes else None
        text = (
            cause.label if cause else "",
            "gated" if note.gated else cause.fix_short if cause else "",
            note.works_from,
        )
        if any(text):
            by_text.setdefault(text, []).append(note.n)
    return [Hint(*text, notes=tuple(ns)) for text, ns in by_text.items()]


@dataclass
class _RecipePage:
    """What every release section of one recipe page shares."""

    ref: RecipeRef
    fm_order: dict[tuple[str, str], int]
    book: _NoteBook
    default: str
    baseline: dict[tuple[str, ...], str]  # combination -> status at the default release
    variant_order: dict[str, int]
    variant_targets: dict[str, str]  # variant -> its hardware over every release, as text
    commits: dict[str, str]


def _default_release(rows: list[dict[str, Any]]) -> tuple[str, list[str]]:
    """The release a recipe page opens at: the one most rows pin (the lowest of a tie), else the
    newest; and the pinned releases."""
    pinned = Counter(r["vllm_version"] for r in rows if r["pinned"])
    if not pinned:
        return max((r["vllm_version"] for r in rows), key=release_key), []
    top = max(pinned.values())
    default = min((v for v, n in pinned.items() if n == top), key=release_key)
    return default, sorted(pinned, key=release_key)


def _recipe_model(
    ref: RecipeRef,
    rows: list[dict[str, Any]],
    data: SiteData,
    fm_order: dict[tuple[str, str], int],
    recipes_url: str,
) -> dict[str, Any]:
    default, pinned = _default_release(rows)
    by_version: dict[str, list[dict[str, Any]]] = defaultdict(list)
    by_variant: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_version[r["vllm_version"]].append(r)
        by_variant[r["variant"]].append(r)
    variants = [
        Variant(
            name=v,
            label=v or "(no variant)",
            model_ids=sorted({r["model_id"] for r in vrows if r["model_id"]}),
            targets=targets_text(t for r in vrows for t in targets_of(r)),
        )
        for v, vrows in by_variant.items()
    ]
    said = SaidOnce(ref.path, recipes_url)
    page = _RecipePage(
        ref=ref,
        fm_order=fm_order,
        book=_NoteBook(data, said),
        default=default,
        baseline={_combo(r): r["status"] for r in by_version[default]},
        variant_order={v.name: i for i, v in enumerate(variants)},
        variant_targets={v.name: v.targets for v in variants},
        commits=data.commits,
    )
    judged = {r["vllm_version"] for r in rows if r["judged"]}
    versions = sorted(by_version, key=release_key)
    sections = merged_sections(
        [
            _release_section(page, v, by_version[v], bool(judged) and v not in judged)
            for v in versions
        ],
        versions,
    )
    notes = page.book.notes
    for note in notes:
        note.places = _places(note, versions)
    return {
        "ref": ref,
        "default": default,
        "releases_judged": [(v, next(s for s in sections if v in s.versions)) for v in versions],
        "refs": {v: git_ref(v, data.commits.get(v, "")) for v in versions},
        "sections": sections,
        "pinned": pinned,
        "variants": variants,
        "partial": any(s.partial for s in sections),
        "notes": notes,
        "said": said,
    }


def _release_section(
    page: _RecipePage, version: str, rows: list[dict[str, Any]], partial: bool
) -> ReleaseSection:
    """One release of a recipe page: a table with a row group per variant."""
    ref_name = git_ref(version, page.commits.get(version, ""))
    strategies = sorted({r["strategy"] for r in rows}, key=_strategy_key)
    counts: Counter[str] = Counter()
    by_variant: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_variant[r["variant"]].append(r)
    groups = []
    hinted: set[int] = set()
    for variant in sorted(by_variant, key=page.variant_order.__getitem__):
        vrows = by_variant[variant]
        grid = _Grid(page, version, ref_name, strategies, partial, hinted)
        targets = targets_text(t for r in vrows for t in targets_of(r))
        groups.append(
            VariantRows(
                name=variant,
                label=variant or "(no variant)",
                targets="" if targets == page.variant_targets[variant] else targets,
                pinned=any(r["pinned"] for r in vrows),
                rows=grid.rows(vrows, counts),
            )
        )
    hardware: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for r in rows:
        hardware[r["variant"]].update(targets_of(r))
    for note in page.book.notes:
        if version in note.at:
            note.at[version].applies_text = applies_text(note.at[version].applies, hardware)
    return ReleaseSection(
        versions=[version],
        pinned=any(r["pinned"] for r in rows),
        is_default=version == page.default,
        partial=partial,
        strategies=[(s, strategy_slug(s)) for s in strategies],
        variants=groups,
        counts=counts,
    )


@dataclass
class _Grid:
    """A variant's feature modes x strategies at one release."""

    page: _RecipePage
    version: str
    ref: str | None
    strategies: list[str]
    partial: bool  # judged only where the pin is blocked: the section says what cells were
    hinted: set[int]  # notes whose hint the section has written

    def rows(
        self, vrows: list[dict[str, Any]], counts: Counter[str]
    ) -> list[tuple[str, list[Cell | None]]]:
        grid: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = defaultdict(
            lambda: defaultdict(list)
        )
        for r in vrows:
            grid[(r["feature"], r["mode"])][r["strategy"]].append(r)
        table_rows = []
        for feature, mode in sorted(grid, key=self.page.fm_order.__getitem__):
            cells: list[Cell | None] = []
            for strategy in self.strategies:
                crows = grid[(feature, mode)].get(strategy)
                cells.append(self.cell(crows) if crows else None)
            counts.update(c.status for c in cells if c)
            table_rows.append((fm_label(feature, mode), cells))
        return table_rows

    def cell(self, crows: list[dict[str, Any]]) -> Cell:
        """A cell says what it was at the default release when that differs, unless the
        section says it. Its permalink id (cell_id) is site.js's to give."""
        page = self.page
        c = _cell(crows, page.book, self.version, self.ref, self.hinted)
        if self.version != page.default:
            before = {s for r in crows if (s := page.baseline.get(_combo(r))) is not None}
            was = _worst(before) if before else c.status
            if was != c.status and not (self.partial and was == "blocked"):
                c.was = f"{was} at {page.default}"
        return c


# ---------------------------------------------------------------------------- rendering


BREAK_AFTER = 16  # characters: a longer part of a label may also break after each '_'


def breakable(text: str) -> Markup:
    """`text` escaped, with line-break chances after ':' and 'node_', and after every '_' of a
    long part (between colons): the matrix columns are as narrow as their longest word."""
    segments = []
    for raw in text.split(":"):
        segment = str(escape(raw))
        if len(raw) > BREAK_AFTER:
            segment = segment.replace("_", "_<wbr>")
        else:
            segment = segment.replace("node_", "node_<wbr>")
        segments.append(segment)
    return Markup(":<wbr>".join(segments))


def said_text(text: str) -> Markup:
    """A said text, escaped; where it names its release (RELEASE_MARK), a variable that site.js
    sets to the release shown."""
    return Markup('<var class="rel">release</var>').join(
        escape(part) for part in text.split(RELEASE_MARK)
    )


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(site_dir() / "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.globals.update(
        SYMBOLS=SYMBOLS,
        MEANINGS=MEANINGS,
        STATUSES=STATUSES,
        strategy_key=strategy_key,
        strategy_label=strategy_label,
        strategy_slug=strategy_slug,
    )
    env.filters["breakable"] = breakable
    env.filters["said"] = said_text
    return env


def _render_into(db_path: Path, out: Path, recipes_url: str) -> int:
    snapshot = out / ".compat.db"
    _snapshot(db_path, snapshot)
    shipped: list[Exception] = []

    def ship() -> None:  # gzip in a second thread: zlib releases the GIL while pages render
        try:
            ship_database(snapshot, out / "compat.db.gz")
        except Exception as exc:  # re-raised below, in the caller's thread
            shipped.append(exc)

    with open_store(snapshot) as db:
        data = _load(db, str(db_path))
        tables = {name: _columns(db, name) for name in db.relations()}
    shipper = threading.Thread(target=ship, name="compat-site-gzip")
    shipper.start()
    try:
        pages = _render_pages(data, out, recipes_url)
        releases = sorted(
            {r["vllm_version"] for r in data.rows} | set(data.commits), key=release_key
        )
        write_verdicts(
            out / "verdicts.json",
            verdicts_document(data.rows, {c: vars(v) for c, v in data.causes.items()}, releases),
        )
        (out / "metadata.yaml").write_text(datasette_metadata(tables), encoding="utf-8")
    finally:
        shipper.join()
    if shipped:
        raise shipped[0]
    snapshot.unlink()
    (out / MARKER).write_text(
        "built by `compat site`; this directory is replaced on rebuild\n", encoding="utf-8"
    )
    return pages


def _render_pages(data: SiteData, out: Path, recipes_url: str) -> int:
    rows = data.rows
    static = site_dir() / "static"
    (out / "static").mkdir()
    for f in sorted(static.iterdir()):
        if f.suffix in (".css", ".js", ".svg"):
            shutil.copyfile(f, out / "static" / f.name)
    releases = sorted({r["vllm_version"] for r in rows} | set(data.commits), key=release_key)
    by_recipe: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_recipe[r["recipe"]].append(r)
    strategies = sorted({r["strategy"] for r in rows}, key=_strategy_key)
    fm_order = _fm_order(rows)
    env = _env()
    common = {"releases": releases, "n_rows": len(rows)}
    pinned = {path: _pinned_rows(recipe_rows) for path, recipe_rows in by_recipe.items()}
    views = _index_views(rows, {path: shown for path, (shown, _) in pinned.items()})
    written = [view for view in views if not view.narrows]
    index = env.get_template("index.html")
    for view in written:
        model = _index_model(view, by_recipe, pinned, strategies, fm_order, data.causes)
        (out / view.page).write_text(
            index.render(
                root="",
                views=views,
                narrowing=any(v.narrows for v in views),
                **model,
                **common,
            ),
            encoding="utf-8",
        )
    page = env.get_template("recipe.html")
    for path, recipe_rows in by_recipe.items():
        model = _recipe_model(RecipeRef.of(path), recipe_rows, data, fm_order, recipes_url)
        target = out / model["ref"].href
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(
            page.render(root="../" * model["ref"].depth, **model, **common), encoding="utf-8"
        )
    return len(written) + len(by_recipe)


# ---------------------------------------------------------------------------- datasette

TITLE = "vLLM recipes compatibility"
DESCRIPTION = (
    "Which synthesized `vllm serve` commands of the vLLM recipes can start, per vLLM "
    "release, read statically from each release's source. Start with v_verdict "
    "(every combination) or v_finding (the non-ok ones)."
)


def datasette_metadata(tables: dict[str, list[str]], db_name: str = "compat") -> str:
    """metadata.yaml for `datasette compat.db -m metadata.yaml`: titles and descriptions, from
    the one description of each table, view and column (compat.tables).

    `tables` maps each table and view of the database to its columns; only columns that
    exist are described.
    """
    from compat.tables import column_doc, relation_doc

    entries: dict[str, Any] = {}
    for name, columns in tables.items():
        entry: dict[str, Any] = {}
        if relation_doc(name):
            entry["description"] = relation_doc(name)
        described = {c: column_doc(name, c) for c in columns if column_doc(name, c)}
        if described:
            entry["columns"] = described
        if entry:
            entries[name] = entry
    meta = {
        "title": TITLE,
        "description": DESCRIPTION,
        "source": "vllm-compat",
        "databases": {db_name: {"title": TITLE, "description": DESCRIPTION, "tables": entries}},
    }
    return yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=100)
