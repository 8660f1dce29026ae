"""The SQLite database: SQLModel tables for facts and verdicts, views from schema/views.sql.

Writes are atomic: a command works on a copy of the database next to it and moves
the copy over the original only when everything succeeded, so an interrupted or
failed run leaves the previous database untouched, and two runs never interleave
rows (the later finisher wins whole); compat.dbfile holds that copy, and writes the
scan's rows without SQLAlchemy from schema/tables.json, which is generated from the
tables here.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import delete, event, insert
from sqlalchemy.engine import Engine
from sqlmodel import Field, SQLModel, create_engine

from compat import dbfile
from compat.dbfile import APPLICATION_ID, ensure_writable  # noqa: F401 (the API)
from compat.errors import UserError



class Release(SQLModel, table=True):
    __tablename__ = "release"
    version: str = Field(primary_key=True)
    origin: str
    sha256: str | None = None
    fingerprint: str
    commit_id: str | None = None
    pp_rule: str | None = None
    notes: str = "[]"  # JSON list of analysis notes (predicates of unknown shape, ...)
    analyzer: str = ""


class ArchCapability(SQLModel, table=True):
    __tablename__ = "arch_capability"
    id: int | None = Field(default=None, primary_key=True)
    vllm_version: str = Field(index=True)
    platform: str
    arch: str = Field(index=True)
    category: str = ""
    registry_module: str = ""
    registry_class: str = ""
    class_path: str = ""
    file: str = ""
    line: int = 0
    status: str = "resolved"
    reason: str = ""
    supports_pp: int | None = None
    supports_lora: int | None = None
    supports_multimodal: int | None = None
    supports_encoder_tp_data: int | None = None
    is_hybrid: int | None = None
    has_inner_state: int | None = None
    is_attention_free: int | None = None
    supports_transcription: int | None = None
    is_pooling_model: int | None = None
    is_text_generation_model: int | None = None
    supports_eagle3: int | None = None
    is_moe: int | None = None
    evidence: str = "{}"
    mro_path: str = "[]"  # the class MRO as resolved, for explain


class SpecMethod(SQLModel, table=True):
    __tablename__ = "spec_method"
    id: int | None = Field(default=None, primary_key=True)
    vllm_version: str = Field(index=True)
    method: str
    canonical: str  # what the method becomes (legacy MTP aliases -> mtp)
    kind: str  # method | mtp_alias
    file: str = ""
    line: int = 0


class DraftParallel(SQLModel, table=True):
    __tablename__ = "draft_parallel"
    id: int | None = Field(default=None, primary_key=True)
    vllm_version: str = Field(index=True)
    method: str
    pp_source: str  # target (copied) | one (forced 1) | target_config (draft PC is the target PC) | none | unknown
    ep_source: str  # off | target | target_if_moe | unknown
    file: str = ""
    line: int = 0
    detail: str = ""


class DraftMapping(SQLModel, table=True):
    __tablename__ = "draft_mapping"
    id: int | None = Field(default=None, primary_key=True)
    vllm_version: str = Field(index=True)
    platform: str
    target_model_type: str
    target_arch: str
    method: str
    draft_arch: str = ""
    draft_class: str = ""
    draft_supports_pp: int | None = None
    draft_inherits_pp: int | None = None
    status: str = "ok"  # ok | error | unknown
    detail: str = ""  # how the draft arch was chosen, or the error
    file: str = ""
    line: int = 0


class GateStatus(SQLModel, table=True):
    __tablename__ = "gate_status"
    id: int | None = Field(default=None, primary_key=True)
    vllm_version: str = Field(index=True)
    rule_id: str
    status: str  # verified | unverified
    effect: str = ""
    message: str = ""
    file: str = ""
    line: int = 0
    reason: str = ""


class RaiseMessage(SQLModel, table=True):
    __tablename__ = "raise_message"
    id: int | None = Field(default=None, primary_key=True)
    vllm_version: str = Field(index=True)
    file: str
    line: int
    exception: str = ""
    template: str
    condition: str = ""


class CliFlag(SQLModel, table=True):
    __tablename__ = "cli_flag"
    id: int | None = Field(default=None, primary_key=True)
    vllm_version: str = Field(index=True)
    flag: str = Field(index=True)
    kind: str  # long | short | negated | subkey
    canonical: str
    value_type: str = ""
    file: str = ""
    line: int = 0


class CliValue(SQLModel, table=True):
    """How argparse reads one `vllm serve` option's value (from `_compute_kwargs` and the call)."""

    __tablename__ = "cli_value"
    id: int | None = Field(default=None, primary_key=True)
    vllm_version: str = Field(index=True)
    flag: str  # canonical long form, or the positional's dest ('model_tag')
    option_strings: str = "[]"  # JSON: every string argparse registers for it (-tp, --no-x, ...)
    dest: str = ""
    action: str = "store"
    nargs: str = ""  # '' one value; '?', '*', '+' or a count
    const: str = "null"  # JSON
    type: str = ""  # int|float|str|json|json_or_str|dataclass|human_readable_int|...|callable|transform
    parse: int = 0  # parse_type wrapper (its error text)
    optional: int = 0  # optional_type wrapper: '' and 'None' read as None
    callable_src: str = ""
    json_class: str = ""
    choices: str = "null"  # JSON list, null = any value
    metavar_only: int = 0
    choices_file: str = ""
    choices_line: int = 0
    default: str = "null"  # JSON
    default_kind: str = "literal"
    unknown: str = ""  # why this option's value handling is not known
    file: str = ""
    line: int = 0


class ConfigField(SQLModel, table=True):
    """A field of a config class a JSON flag is validated against (field '' = the class itself)."""

    __tablename__ = "config_field"
    id: int | None = Field(default=None, primary_key=True)
    vllm_version: str = Field(index=True)
    class_name: str = Field(index=True)
    field: str = ""
    type: str = ""  # JSON type spec (compat.vllm.config_schema)
    default: str = "null"
    default_kind: str = ""
    validators: str = "[]"
    extra: str = ""  # class row: forbid | ignore | allow | unknown
    file: str = ""
    line: int = 0


class ParserName(SQLModel, table=True):
    __tablename__ = "parser_name"
    id: int | None = Field(default=None, primary_key=True)
    vllm_version: str = Field(index=True)
    kind: str  # tool | reasoning
    name: str
    module: str = ""
    class_name: str = ""
    file: str = ""
    line: int = 0


class ShellVariable(SQLModel, table=True):
    """A placeholder the recipes checkout writes into commands ($HEAD_IP): the user's shell fills it."""

    __tablename__ = "shell_variable"
    id: int | None = Field(default=None, primary_key=True)
    pattern: str  # regex over the name: 'HEAD_IP', '[A-Za-z0-9_]+_DP_RPC_PORT'
    file: str = ""  # where the recipes write it (relative to the checkout)
    line: int = 0


class Command(SQLModel, table=True):
    """Synthesized argv (JSON), stored once however many releases judge it."""

    __tablename__ = "command"
    id: int | None = Field(default=None, primary_key=True)
    argv: str


class ClassAttrFact(SQLModel, table=True):
    """Classes that set a capability attribute gates depend on (LSE for DCP, aux states over PP)."""

    __tablename__ = "class_attr_fact"
    id: int | None = Field(default=None, primary_key=True)
    vllm_version: str = Field(index=True)
    attr: str
    class_name: str
    file: str = ""
    line: int = 0
    value: str = ""
    via: str = ""


class ReleaseFact(SQLModel, table=True):
    """Scalar facts of a release read from its source (JSON values), e.g. how the runner is chosen."""

    __tablename__ = "release_fact"
    id: int | None = Field(default=None, primary_key=True)
    vllm_version: str = Field(index=True)
    key: str
    value: str = "null"
    file: str = ""
    line: int = 0


class ModelFact(SQLModel, table=True):
    __tablename__ = "model_fact"
    model_id: str = Field(primary_key=True)
    status: str
    reason: str = ""
    architectures: str = "[]"
    model_type: str | None = None
    num_nextn_predict_layers: int | None = None
    num_experts: int | None = None
    source: str = ""
    provenance: str = ""
    revision: str = ""  # commit sha of the config.json read (HF Hub or cache)
    inferred: int = 0


class Verdict(SQLModel, table=True):
    __tablename__ = "verdict"
    id: int | None = Field(default=None, primary_key=True)
    vllm_version: str = Field(index=True)
    platform: str
    hardware: str = ""
    recipe: str = Field(index=True)
    model_id: str = ""
    variant: str = ""
    strategy: str = ""
    feature: str = ""
    mode: str = ""
    status: str
    message: str = ""
    reason: str = ""
    evidence: str = ""
    gated: int = 0
    pinned: int = 0  # 1 when vllm_version is the release the recipe pins
    judged: int = 0  # 1 at the releases the build judges (the pin, or every explicit --vllm)
    works_from: str = ""  # first release on the index where this combination starts (bisection)
    argv: str = ""  # JSON [[role, [arg, ...]], ...]; '' when stored once in `command`
    command_id: int | None = None  # -> command.id: the argv, shared by every release judged
    chain: str = "[]"  # JSON list of reason steps
    cause_kind: str = ""  # kind of the primary cause (compat.verdict.cause), '' when ok
    cause: str = ""  # its label
    cause_id: int | None = None  # -> cause.id
    profiles: str = ""  # comma-separated hardware profiles this row stands for (hardware '' = several)
    source: str = "ui"  # surfaces of the recipes site emitting the argv: api, ui or api,ui


class CauseRow(SQLModel, table=True):
    """One cause per (recipe, cause key): the element whose args make commands fail, and its fix."""

    __tablename__ = "cause"
    id: int | None = Field(default=None, primary_key=True)
    recipe: str = Field(index=True)
    kind: str  # feature | pin | variant | hardware | strategy | base_args | recipe | omni | fact
    element: str = ""
    mode: str = ""
    carrier: str = ""
    label: str = ""
    finding: str = ""  # the decisive finding it explains (first met)
    field: str = ""  # recipe YAML path the fix or annotation points at
    line: int = 0  # its line in the recipe file (1-based; 0 = unknown)
    works_from: str = ""  # first release on the index where every command it blocks starts
    fix_kind: str = ""  # gate | mode_variants | pin_bump | spelling | none ('' = not planned)
    fix: str = ""  # one line: what the fix does
    fix_why: str = ""  # why there is no automatic fix, or what re-judging found
    fix_edits: str = "[]"  # JSON list of edits (compat.fix.edits)


class VerdictCause(SQLModel, table=True):
    """Every cause of a verdict row (a row can fail for more than one reason)."""

    __tablename__ = "verdict_cause"
    verdict_id: int = Field(primary_key=True)
    cause_id: int = Field(primary_key=True, index=True)


class RecipeFile(SQLModel, table=True):
    """Recipe files as the build read them, so an apply can refuse a file changed since."""

    __tablename__ = "recipe_file"
    path: str = Field(primary_key=True)
    sha256: str


TABLES = [Release, ArchCapability, SpecMethod, DraftParallel, DraftMapping, GateStatus,
          RaiseMessage, CliFlag, CliValue, ConfigField, ParserName, ClassAttrFact, ReleaseFact, ModelFact,
          ShellVariable, Command, Verdict, CauseRow, VerdictCause, RecipeFile]
RELEASE_TABLES = [ArchCapability, SpecMethod, DraftParallel, DraftMapping, GateStatus,
                  RaiseMessage, CliFlag, CliValue, ConfigField, ParserName, ClassAttrFact, ReleaseFact]


def engine_for(path: Path) -> Engine:
    return create_engine(f"sqlite:///{path}")


def _add_missing_columns(engine: Engine) -> None:
    """Columns added since a database was written (appended, as the contract allows).

    `create_all` leaves existing tables alone, so a rebuild over an older
    database would fail on the first insert naming a new column.
    """
    with engine.begin() as conn:
        for model in TABLES:
            table = model.__table__  # type: ignore[attr-defined]
            have = {r[1] for r in conn.exec_driver_sql(f'PRAGMA table_info("{table.name}")')}
            for column in table.columns:
                if column.name in have:
                    continue
                default = column.default.arg if column.default is not None else None
                literal = "NULL" if default is None or callable(default) else (
                    str(int(default)) if isinstance(default, (bool, int)) else
                    "'" + str(default).replace("'", "''") + "'")
                kind = column.type.compile(dialect=engine.dialect)
                conn.exec_driver_sql(f'ALTER TABLE "{table.name}" ADD COLUMN "{column.name}" '
                                     f"{kind} DEFAULT {literal}")


def init_schema(engine: Engine) -> None:
    SQLModel.metadata.create_all(engine, tables=[t.__table__ for t in TABLES])  # type: ignore[attr-defined]
    _add_missing_columns(engine)
    raw = engine.raw_connection()
    try:
        raw.executescript(f"PRAGMA application_id = {APPLICATION_ID};\n" + dbfile.views_sql())  # type: ignore[attr-defined]
        raw.commit()
    finally:
        raw.close()


@contextlib.contextmanager
def writing(path: Path) -> Iterator[Engine]:
    """An engine on a private copy of `path` (compat.dbfile.private_copy): the copy replaces
    `path` only on success."""
    with dbfile.private_copy(path) as tmp:
        engine = engine_for(tmp)
        event.listen(engine, "connect", _scratch_pragmas)
        try:
            init_schema(engine)
            yield engine
        finally:
            engine.dispose()


def _scratch_pragmas(dbapi_connection: Any, _record: Any) -> None:
    for pragma in dbfile.SCRATCH_PRAGMAS:
        dbapi_connection.execute(pragma)


def schema_document() -> dict[str, Any]:
    """What `create_all` makes of the models, as compat.dbfile reads it from schema/tables.json:
    each CREATE statement as SQLite stores it, in creation order, and each column's default."""
    engine = create_engine("sqlite://")
    SQLModel.metadata.create_all(engine, tables=[t.__table__ for t in TABLES])  # type: ignore[attr-defined]
    with engine.connect() as conn:
        objects = conn.exec_driver_sql(
            "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid").fetchall()
    created = []  # each table, then its indexes by name (create_all's index order is a set's)
    for kind, name, _table, sql in objects:
        if kind == "table":
            created.append((name, sql))
            created += sorted((n, q) for k, n, t, q in objects if k == "index" and t == name)
    tables = {}
    for model in TABLES:
        t = model.__table__  # type: ignore[attr-defined]
        tables[t.name] = {"columns": [{
            "name": c.name,
            "default": c.default.arg if c.default is not None and not callable(c.default.arg) else None,
        } for c in t.columns]}
    return {
        "about": "Generated from the SQLModel tables in compat/db.py by tools/update_schema.py; "
                 "do not edit. compat.dbfile creates and fills these tables without SQLAlchemy.",
        "statements": [{"name": name, "sql": sql} for name, sql in created],
        "tables": tables,
        "release_tables": [t.__tablename__ for t in RELEASE_TABLES],  # type: ignore[attr-defined]
    }


def reading(path: Path) -> Engine:
    path = Path(path)
    if not path.is_file():
        raise UserError("no such database (run `compat scan` or `compat build` first)", where=str(path))
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        con.execute("select count(*) from sqlite_master").fetchone()
        con.close()
    except sqlite3.DatabaseError as exc:
        raise UserError(f"not a vllm-compat database: {exc}", where=str(path)) from None
    return create_engine(f"sqlite:///file:{path}?mode=ro&uri=true")


def _complete(t: Any, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with every column present (the model's default where a row leaves one out):
    a multi-row insert needs the same keys in each row."""
    defaults = {c.name: (c.default.arg if c.default is not None and not callable(c.default.arg) else None)
                for c in t.columns}
    if all(len(r) == len(defaults) for r in rows):
        return rows
    return [{**defaults, **r} for r in rows]


def replace_rows(engine: Engine, table: type[SQLModel], rows: Iterable[dict[str, Any]],
                 **where: Any) -> int:
    """Delete the rows matching `where`, insert `rows`; returns how many were inserted."""
    t = table.__table__  # type: ignore[attr-defined]
    rows = _complete(t, list(rows))
    with engine.begin() as conn:
        stmt = delete(t)
        for k, v in where.items():
            stmt = stmt.where(t.c[k] == v)
        conn.execute(stmt)
        if rows:
            conn.execute(insert(t), rows)
    return len(rows)


def append_rows(engine: Engine, table: type[SQLModel], rows: list[dict[str, Any]]) -> int:
    if rows:
        t = table.__table__  # type: ignore[attr-defined]
        with engine.begin() as conn:
            conn.execute(insert(t), _complete(t, rows))
    return len(rows)


def dict_rows(conn: Any, sql: str, params: tuple = ()) -> list[dict[str, Any]]:
    """Rows of a query on an open connection, as dicts keyed by column name."""
    res = conn.exec_driver_sql(sql, params)
    cols = list(res.keys())
    return [dict(zip(cols, r, strict=True)) for r in res.fetchall()]


#: Read-only PRAGMAs `compat sql` lets through (they take a table or index name, change nothing).
_READ_PRAGMAS = frozenset({"table_info", "table_xinfo", "index_list", "index_info", "index_xinfo",
                           "foreign_key_list", "table_list"})
_ALLOWED_ACTIONS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
                              getattr(sqlite3, "SQLITE_RECURSIVE", 33)})
_ACTION_NAMES = {getattr(sqlite3, f"SQLITE_{n}"): n.replace("_", " ") for n in (
    "ALTER_TABLE", "ANALYZE", "ATTACH", "CREATE_INDEX", "CREATE_TABLE", "CREATE_TEMP_INDEX",
    "CREATE_TEMP_TABLE", "CREATE_TEMP_TRIGGER", "CREATE_TEMP_VIEW", "CREATE_TRIGGER", "CREATE_VIEW",
    "CREATE_VTABLE", "DELETE", "DETACH", "DROP_INDEX", "DROP_TABLE", "DROP_TEMP_INDEX",
    "DROP_TEMP_TABLE", "DROP_TEMP_TRIGGER", "DROP_TEMP_VIEW", "DROP_TRIGGER", "DROP_VIEW",
    "DROP_VTABLE", "INSERT", "PRAGMA", "REINDEX", "SAVEPOINT", "TRANSACTION", "UPDATE")
    if hasattr(sqlite3, f"SQLITE_{n}")}


def query(path: Path, sql: str) -> tuple[list[str], list[tuple]]:
    """One read-only statement over the database at `path`: (columns, rows).

    An authorizer admits only reads (SELECT, functions, CTEs and a few schema PRAGMAs), so
    ATTACH (which would create a file), PRAGMA writes and DML are refused with a UserError
    naming what was refused, before anything runs.
    """
    reading(path)  # the same checks and messages as every reader
    con = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
    refused: list[str] = []

    def authorize(action: int, arg1: str | None, arg2: str | None, _db: str | None, _src: str | None) -> int:
        if action in _ALLOWED_ACTIONS:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() in _READ_PRAGMAS:
            return sqlite3.SQLITE_OK
        what = _ACTION_NAMES.get(action, str(action))
        refused.append(f"{what} {arg1}" if what == "PRAGMA" and arg1 else what)
        return sqlite3.SQLITE_DENY

    con.set_authorizer(authorize)
    try:
        cur = con.execute(sql)
        cols = [d[0] for d in cur.description or ()]
        return cols, [tuple(r) for r in cur.fetchall()]
    except (sqlite3.Error, sqlite3.Warning) as exc:
        if refused:
            verb = sql.split(None, 1)[0].upper() if sql.split() else refused[0]
            what = refused[0] if refused[0].startswith("PRAGMA") else verb
            raise UserError(f"compat sql is read-only: {what} is not allowed "
                            "(SELECT over the views in schema/views.sql)", where="statement") from None
        raise UserError(f"SQL error: {str(exc).splitlines()[0]}", where="statement") from None
    finally:
        con.close()


def dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))
