"""One recipe's results as a block: judged (verdicts, causes, fixes), then written with ids shifted.

Nothing one recipe's verdicts, causes and fixes say depends on another recipe: the judges
share caches across recipes, never answers. So a build judges recipe by recipe, writes each
block when it is done (no row is held for the whole checkout), and can reuse a block whose
inputs did not change (compat.reuse). A block numbers its commands, verdicts and causes
from 1; writing shifts them by what the blocks before it hold, so a reused block gets the
ids a full build gives it, and the tables are the same row for row.

Draft mappings (the `draft_mapping` table) are the one thing judges share that is written:
a judge notes a mapping the first time any recipe meets it. A block keeps the mappings its
recipe met, in order, per phase (judging, fix planning, then gate reviews); `DraftRows`
replays them in the order a build meets them, so which recipe was reused does not change the
rows.

Ungate proposals (`cause` rows of kind `gate`, linked to no verdict) come after every
recipe's causes, as they did when a build planned every recipe's fixes before reviewing any
gate: a block keeps its own, numbered from 1, and the build writes them once every block's
causes are written (`write_gates`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from compat.tables import Verdict, spec
from compat.vocab import resolve_pin

if TYPE_CHECKING:
    from compat.fix.context import Row as FixRow
    from compat.recipes import Combination
    from compat.recipes.repo import RecipesRepo
    from compat.store import Store
    from compat.verdict.batch import CauseBook, Sweep
    from compat.verdict.releases import ReleasePool

#: The `verdict` table's columns, the order a block keeps a verdict row's values in.
VERDICT_COLUMNS = tuple(spec(Verdict).column_names)
_VERDICT_DEFAULTS = tuple(c.default for c in spec(Verdict).columns)
_ID, _COMMAND, _CAUSE, _VERSION, _STATUS, _JUDGED = map(
    VERDICT_COLUMNS.index, ("id", "command_id", "cause_id", "vllm_version", "status", "judged")
)

#: Draft mappings met, per phase: [release, mapping key, mapping] in the order first met.
Drafts = dict[str, list[list[Any]]]
PHASES = ("judge", "fix", "gate")


@dataclass
class Block:
    """A recipe's rows, its ids counted from 1, and what its judging read.

    Verdict rows are values in `VERDICT_COLUMNS` order. Stored, every value is an index into
    one list of the block's distinct values: a block's rows repeat a few hundred reason chains
    thousands of times (a pinned build's verdicts are 150 MB of text, 5 MB of it distinct).
    """

    recipe: str
    commands: list[str] = field(default_factory=list)  # argv JSON; command id = position + 1
    verdicts: list[list[Any]] = field(default_factory=list)  # values in VERDICT_COLUMNS order
    links: list[list[int]] = field(default_factory=list)  # [verdict id, cause id]
    causes: list[dict[str, Any]] = field(default_factory=list)
    gates: list[dict[str, Any]] = field(default_factory=list)  # ungate proposals, ids from 1
    models: dict[str, str] = field(default_factory=dict)  # model id -> hash of its facts, read
    drafts: Drafts = field(default_factory=lambda: {p: [] for p in PHASES})
    # The `as_json` text this block was read from (a worker's message): kept by the cache as is.
    _text: str | None = field(default=None, compare=False, repr=False)

    def text(self) -> str:
        """The `as_json` document as JSON text."""
        return self._text if self._text is not None else json.dumps(self.as_json())

    @classmethod
    def from_text(cls, text: str) -> Block:
        block = cls.from_json(json.loads(text))
        block._text = text
        return block

    def as_json(self) -> dict[str, Any]:
        values, rows = _interned(self.verdicts)
        return {
            "recipe": self.recipe,
            "commands": self.commands,
            "columns": list(VERDICT_COLUMNS),
            "values": values,
            "verdicts": rows,
            "links": self.links,
            "causes": self.causes,
            "gates": self.gates,
            "models": self.models,
            "drafts": self.drafts,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Block:
        """The block a `as_json` document holds (KeyError: not one this version wrote)."""
        if tuple(doc["columns"]) != VERDICT_COLUMNS:
            raise KeyError("columns")
        at = doc["values"].__getitem__
        return cls(
            doc["recipe"],
            doc["commands"],
            [list(map(at, r)) for r in doc["verdicts"]],
            doc["links"],
            doc["causes"],
            doc["gates"],
            doc["models"],
            doc["drafts"],
        )

    def judged_statuses(self) -> Counter[tuple[str, str]]:
        """(release, status) of the rows at the releases the build judges."""
        return Counter((r[_VERSION], r[_STATUS]) for r in self.verdicts if r[_JUDGED])


def _interned(rows: list[list[Any]]) -> tuple[list[Any], list[list[int]]]:
    """(the distinct values, each row as indexes into them)."""
    index: dict[tuple[type, Any], int] = {}
    values: list[Any] = []
    out = []
    for row in rows:
        ids = []
        for v in row:
            key = (type(v), v)  # 1 and True are one dict key, not one value
            i = index.get(key)
            if i is None:
                i = index[key] = len(values)
                values.append(v)
            ids.append(i)
        out.append(ids)
    return values, out


def verdict_values(row: dict[str, Any], seen: dict[str, str]) -> list[Any]:
    """A `verdict` row (dict) as values in `VERDICT_COLUMNS` order, defaults filled in; a
    string equal to one in `seen` is that one (a block holds each reason chain once)."""
    return [
        seen.setdefault(v, v) if isinstance(v, str) else v
        for v in map(row.get, VERDICT_COLUMNS, _VERDICT_DEFAULTS)
    ]


@dataclass
class Outline:
    """What a build needs of a recipe's combinations before judging them, or instead of them
    when its block is reused: how many, the pins they name, the model ids they serve and the
    draft checkpoints their argvs name."""

    count: int
    pins: list[str]
    served: list[str]  # model ids of the combinations vLLM serves (omni aside), first seen first
    model_ids: list[str]  # every combination's model id, once each
    drafts: list[list[Any]]  # [argv, draft checkpoint] of each argv whose spec config names one

    @classmethod
    def of(cls, combos: list[Combination]) -> Outline:
        from compat.recipes import parsed_serve_args

        argvs = sorted({tuple(a) for c in combos if not c.omni for _role, a in c.argvs})
        drafts = []
        for argv in argvs:
            spec = parsed_serve_args(argv).speculative_config
            model = spec.get("model") if isinstance(spec, dict) else None
            if isinstance(model, str) and "/" in model and not model.startswith(("/", ".")):
                drafts.append([list(argv), model])
        return cls(
            count=len(combos),
            pins=sorted({c.vllm_pin for c in combos if c.vllm_pin}),
            served=list(dict.fromkeys(c.model_id for c in combos if not c.omni)),
            model_ids=list(dict.fromkeys(c.model_id for c in combos)),
            drafts=drafts,
        )


def model_ids(outlines: Iterable[Outline]) -> list[str]:
    """Every model id the combinations use: the served models (omni recipes aside) in first-seen
    order, then the draft checkpoints in the order of the argvs naming them; once each."""
    outlines = list(outlines)
    ids: dict[str, str] = {}
    for o in outlines:
        for mid in o.served:
            ids.setdefault(mid.casefold(), mid)
    drafts = {tuple(argv): model for o in outlines for argv, model in o.drafts}
    for argv in sorted(drafts):
        ids.setdefault(drafts[argv].casefold(), drafts[argv])
    return list(ids.values())


class Recorder:
    """Listens to every judge of a build (compat.verdict.trace) on behalf of the recipe being
    judged: the model ids it read, and the draft mappings it met at the build's releases."""

    def __init__(self, releases: Iterable[str]) -> None:
        self.releases = set(releases)
        self.phase = PHASES[0]
        self._models: dict[str, None] = {}
        self._drafts: dict[str, dict[tuple[Any, ...], list[Any]]] = {p: {} for p in PHASES}

    def model(self, model_id: str) -> None:
        self._models.setdefault(model_id)

    def draft(
        self,
        version: str,
        draft_model: str | None,
        mapping: tuple[tuple[str, ...], dict[str, Any]] | None,
    ) -> None:
        if draft_model:
            self._models.setdefault(draft_model)
        if mapping is not None and version in self.releases:
            key, m = mapping
            self._drafts[self.phase].setdefault((version, *key), [version, list(key), m])

    def take(self) -> tuple[list[str], Drafts]:
        """What was recorded since the last take (in the order met), and start afresh."""
        models, drafts = list(self._models), {p: list(d.values()) for p, d in self._drafts.items()}
        self._models.clear()
        for d in self._drafts.values():
            d.clear()
        self.phase = PHASES[0]
        return models, drafts


@dataclass
class Judging:
    """What every recipe of a build is judged with."""

    repo: RecipesRepo
    pool: ReleasePool
    releases: list[str]  # the releases the build judges, oldest first
    explicit: bool  # --vllm given: every recipe at every release; else each at its pin
    pin_of: dict[str, str]
    unavailable: dict[str, str]
    recorder: Recorder
    model_hash: Callable[[str], str]
    fingerprints: dict[str, str]  # release -> its source's fingerprint (the facts' key)

    def resolve_pin(self, pin: str) -> str | None:
        return self.pin_of.get(pin) or resolve_pin(pin, self.pool.releases)


def judge_recipe(j: Judging, path: str, combos: list[Combination]) -> Block:
    """Verdicts, causes and fixes of one recipe's combinations (in enumeration order)."""
    from compat.verdict.batch import CauseBook, Sweep
    from compat.verdict.cause import renderer

    j.recorder.take()  # nothing read before this recipe is its own
    book = CauseBook()
    block = Block(path)
    fix_rows = _verdicts(j, combos, Sweep(j.pool, renderer(j.repo), book), block)
    j.recorder.phase = "fix"
    _fixes(j, path, fix_rows, book, block, combos)
    block.causes = book.rows
    models, block.drafts = j.recorder.take()
    block.models = {m: j.model_hash(m) for m in models}
    j.pool.forget_outcomes()
    return block


def _verdicts(j: Judging, combos: list[Combination], sweep: Sweep, block: Block) -> list[FixRow]:
    """Every combination judged at its targets into `block`; the judged rows the fix stage reads."""
    from compat.fix.context import Row as FixRow
    from compat.verdict.batch import later_than, unavailable_row

    later = later_than(j.releases)
    fix_rows: list[FixRow] = []
    seen: dict[str, str] = {}
    for command_id, c in enumerate(combos, 1):
        block.commands.append(json.dumps([[r, list(a)] for r, a in c.argvs]))
        targets = _targets(j, c)
        if not targets:
            pin = j.pin_of.get(c.vllm_pin, c.vllm_pin)
            why = j.unavailable.get(pin) or j.unavailable.get(c.vllm_pin) or "not resolvable"
            row = unavailable_row(c, pin or "?", why, command_id)
            block.verdicts.append(verdict_values(dict(row, id=len(block.verdicts) + 1), seen))
            continue
        for judged in sweep.judge(c, targets, command_id, later):
            row_id = len(block.verdicts) + 1
            block.verdicts.append(verdict_values(dict(judged.row, id=row_id), seen))
            block.links += [[row_id, i] for i in dict.fromkeys(judged.cause_ids)]
            if judged.row["judged"]:
                version = judged.row["vllm_version"]
                ids = tuple(judged.cause_ids)
                fix_rows.append(FixRow(c, version, judged.outcome, ids, judged.cause_keys))
    return fix_rows


def _targets(j: Judging, c: Combination) -> list[tuple[str, int, int]]:
    """(release, judged, pinned) of one combination: every judged release, or its pin's."""
    if j.explicit:
        true_pin = resolve_pin(c.vllm_pin, j.releases)
        return [(v, 1, int(v == true_pin)) for v in j.releases]
    pinned = j.pin_of.get(c.vllm_pin)
    return [(pinned, 1, 1)] if pinned is not None and j.pool.knows(pinned) else []


def _fixes(
    j: Judging,
    path: str,
    rows: list[FixRow],
    book: CauseBook,
    block: Block,
    combos: list[Combination],
) -> None:
    """The fix stage on one recipe: a planned (and re-judged) fix, or why there is none, per
    cause; its ungate proposals (pinned builds); each cause's finding keys; and where in the
    recipe file each cause and proposal lives."""
    from compat.fix.context import Context
    from compat.fix.edits import dumps
    from compat.fix.plan import build_cases, plan_all

    ctx = Context(j.repo, j.pool, j.resolve_pin)
    ctx.know(j.repo.recipes[path], combos)  # as enumerated for judging
    planned = {}
    if book.rows:
        cases = build_cases(j.repo, {path: rows} if rows else {}, book.rows, pinned=not j.explicit)
        planned = plan_all(cases, ctx)
    if not j.explicit and rows:  # gates are reviewed at the pin, which only a pinned build judges
        j.recorder.phase = "gate"
        block.gates = _gate_reviews(j, path, rows, ctx)
    _fill_keys(book.rows, rows)
    for row in book.rows:
        p = planned.get(row["id"])
        if p is not None:
            row.update(
                fix_kind=p.kind,
                fix=p.summary,
                fix_why=p.why,
                fix_edits=dumps(p.edits),
                works_from=p.works_from,
                clear_from=p.clear_from,
            )
    _locate(j, path, book.rows + block.gates)


def _gate_reviews(j: Judging, path: str, rows: list[FixRow], ctx: Any) -> list[dict[str, Any]]:
    """`cause` rows of kind `gate`, one per ungate proposal (compat.fix.ungate): a gate whose
    hidden commands start at the pin. Linked to no verdict, so `check` counts no row for them;
    numbered from 1 (`write_gates` puts them after every recipe's causes)."""
    from compat.fix.edits import dumps
    from compat.fix.ungate import review_recipe

    if path not in j.repo.recipes:
        return []
    out: list[dict[str, Any]] = []
    for r in review_recipe(j.repo.recipes[path], ctx, rows[0].release):
        p = r.proposal
        out.append(
            {
                "id": len(out) + 1,
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
    return out


def _fill_keys(causes: list[dict[str, Any]], rows: list[FixRow]) -> None:
    """Each cause's finding keys (engine.finding_key), so readers can tell vLLM-side causes
    (compat.upstream) without judging again."""
    keys: dict[int, dict[str, None]] = {}
    for r in rows:
        for cid, ks in r.cause_keys.items():
            keys.setdefault(cid, {}).update(dict.fromkeys(ks))
    for row in causes:
        if "finding_keys" not in row or row["finding_keys"] == "[]":
            row["finding_keys"] = json.dumps(list(keys.get(row["id"], {})))


def _locate(j: Judging, path: str, causes: list[dict[str, Any]]) -> None:
    """Where in the recipe file each cause (or ungate proposal) lives: its field and line."""
    from compat.fix.locate import cause_path, key_lines, line_of

    if not causes:
        return
    lines = key_lines((j.repo.root / path).read_text(encoding="utf-8"))
    for row in causes:
        where = cause_path(row)
        row.update(field=".".join(where), line=line_of(lines, where))


@dataclass
class Offsets:
    """How many commands, verdicts and causes the blocks written so far hold."""

    commands: int = 0
    verdicts: int = 0
    causes: int = 0


def write_block(db: Store, block: Block, at: Offsets) -> None:
    """Append `block`'s rows with their ids shifted past the blocks before it; advance `at`."""
    from compat.tables import CauseRow, Command, VerdictCause

    db.append(
        Command,
        [{"id": at.commands + i, "argv": argv} for i, argv in enumerate(block.commands, 1)],
    )
    rows = []
    for values in block.verdicts:
        r = list(values)
        r[_ID] += at.verdicts
        if r[_COMMAND] is not None:
            r[_COMMAND] += at.commands
        if r[_CAUSE] is not None:
            r[_CAUSE] += at.causes
        rows.append(r)
    db.insert(Verdict, VERDICT_COLUMNS, rows)
    db.append(
        VerdictCause,
        [{"verdict_id": v + at.verdicts, "cause_id": c + at.causes} for v, c in block.links],
    )
    db.append(CauseRow, [dict(r, id=r["id"] + at.causes) for r in block.causes])
    at.commands += len(block.commands)
    at.verdicts += len(block.verdicts)
    at.causes += len(block.causes)


def write_gates(db: Store, gates: list[dict[str, Any]], at: Offsets) -> int:
    """Append the blocks' ungate proposals (in block order, each block's numbered from 1)
    after every block's causes, renumbered from there; returns how many."""
    from compat.tables import CauseRow

    db.append(CauseRow, [dict(g, id=at.causes + i) for i, g in enumerate(gates, 1)])
    at.causes += len(gates)
    return len(gates)


class DraftRows:
    """The `draft_mapping` rows of a build, from its blocks' draft mappings.

    A build judges every recipe, then plans every recipe's fixes, then reviews every
    recipe's gates; a judge notes a mapping the first time it meets it. Replaying the blocks'
    mappings in that order (the judging ones as blocks come, the fix planning ones after the
    last block, the gate reviews' after those) gives the same rows in the same order,
    whichever blocks were reused.
    """

    def __init__(self, releases: list[str]) -> None:
        self._met: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = {v: {} for v in releases}
        self._later: list[list[Any]] = []
        self._last: list[list[Any]] = []

    def add(self, block: Block) -> None:
        self._meet(block.drafts.get("judge", []))
        self._later += block.drafts.get("fix", [])
        self._last += block.drafts.get("gate", [])

    def _meet(self, drafts: list[list[Any]]) -> None:
        for version, key, m in drafts:
            if version in self._met:
                self._met[version].setdefault(tuple(key), m)

    def rows(self) -> list[dict[str, Any]]:
        self._meet(self._later)
        self._meet(self._last)
        self._later, self._last = [], []
        return [dict(m, vllm_version=v) for v, met in self._met.items() for m in met.values()]
