"""The one way into the database: atomic writes, typed reads, the read-only SQL surface.

Every command reads and writes through here, with the standard library's sqlite3 only
(the tables are compat.tables' records). Writes go to a private copy of the database next
to it, which replaces the original only when everything succeeded: an interrupted or failed
run leaves the previous database untouched, and two runs never interleave rows (the later
finisher wins whole). Reads return frozen records (`Verdict`, `CauseRow`, `Capability`, ...)
or, for the documented views and ad-hoc joins, dicts keyed by column.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

from compat.errors import UserError
from compat.resources import schema_dir
from compat.tables import RELEASE_TABLES, TABLES, CauseRow, Table, Verdict, from_row, quoted, spec

T = TypeVar("T")

#: `PRAGMA application_id` of every database vllm-compat writes ("vcdb"), so a foreign
#: SQLite file is told apart from ours (older databases without it are known by their tables).
APPLICATION_ID = 0x76636462

#: The private copy is a scratch file until it replaces the database: no journal on disk and
#: no fsync per statement; one fsync of the finished file comes before the replace, so what
#: the rename exposes is on disk. A new database gets 16 KiB pages (a copy keeps its own): a
#: verdict row's reason chain is kilobytes, which on 4 KiB pages spills into overflow pages;
#: a build then writes its 100k verdicts a third faster, into a tenth less file.
SCRATCH_PRAGMAS = (
    "PRAGMA page_size = 16384",
    "PRAGMA journal_mode = MEMORY",
    "PRAGMA synchronous = OFF",
)


@lru_cache(maxsize=1)
def views_sql() -> str:
    return (schema_dir() / "views.sql").read_text(encoding="utf-8")


def view_names() -> list[str]:
    return re.findall(r"CREATE VIEW (?:IF NOT EXISTS )?(\w+)", views_sql(), flags=re.IGNORECASE)


class Store:
    """A connection to a vllm-compat database (a private copy while writing, read-only otherwise)."""

    def __init__(self, con: sqlite3.Connection, path: Path | None = None) -> None:
        self.con = con
        self.path = path  # the file, where a forked process may open it again
        self._pid = os.getpid()
        self._forked: Store | None = None

    def here(self) -> Store:
        """This store, or in a process forked since, a read-only connection of that process's
        own to the same file (an SQLite connection must not cross a fork). A forked process
        sees what was committed."""
        if os.getpid() == self._pid:
            return self
        if self._forked is None or self._forked._pid != os.getpid():
            if self.path is None:
                raise RuntimeError("a store without a file cannot be opened again")
            uri = f"{Path(self.path).resolve().as_uri()}?mode=ro"
            self._forked = Store(sqlite3.connect(uri, uri=True), self.path)
        return self._forked

    # -- writes (inside `writing`; committed when it ends) -------------------------------------
    def replace(self, record: type, rows: Iterable[Any], **where: Any) -> int:
        """Delete the rows of `record`'s table matching `where`, insert `rows` (dicts or records,
        each completed with the columns' defaults); returns how many were inserted."""
        t = spec(record)
        cond = " AND ".join(f"{quoted(k)} = ?" for k in where)
        self.con.execute(
            f"DELETE FROM {t.name}" + (f" WHERE {cond}" if cond else ""), tuple(where.values())
        )
        return self.append(record, rows)

    def append(self, record: type, rows: Iterable[Any]) -> int:
        t = spec(record)
        names = t.column_names
        defaults = [c.default for c in t.columns]
        # map() over dict.get: a build appends millions of values, a generator per row costs.
        values = [
            tuple(getattr(r, n) for n in names)
            if isinstance(r, record)
            else tuple(map(r.get, names, defaults))
            for r in rows
        ]
        if values:
            self.con.executemany(
                f"INSERT INTO {t.name} ({', '.join(quoted(n) for n in names)}) "
                f"VALUES ({', '.join('?' * len(names))})",
                values,
            )
        return len(values)

    def insert(self, record: type, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
        """Append rows given as values in `columns` order (a build writes 100k verdicts: no
        dict per row)."""
        t = spec(record)
        self.con.executemany(
            f"INSERT INTO {t.name} ({', '.join(quoted(n) for n in columns)}) "
            f"VALUES ({', '.join('?' * len(columns))})",
            rows,
        )

    def write_release_facts(self, facts: dict[str, Any]) -> dict[str, int]:
        """Replace one release's rows in every fact table."""
        rel = facts["release"]
        version = rel["version"]
        release_columns = set(TABLES["release"].column_names)
        self.replace(
            TABLES["release"].record,
            [{k: v for k, v in rel.items() if k in release_columns}],
            version=version,
        )
        return {
            t.name: self.replace(
                t.record,
                [dict(r, vllm_version=version) for r in facts.get(t.name, [])],
                vllm_version=version,
            )
            for t in RELEASE_TABLES
        }

    # -- reads -------------------------------------------------------------------------------
    def dicts(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        """Rows of any query (a view, a join), as dicts keyed by column."""
        cur = self.con.execute(sql, params)
        cols = [d[0] for d in cur.description or ()]
        return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]

    def rows(
        self, record: type[T], where: str = "", params: tuple[Any, ...] = (), order: str = ""
    ) -> list[T]:
        """Records of `record`'s table (`where` and `order` are SQL over its columns)."""
        t = spec(record)
        have = self._columns(t)
        cols = [c for c in t.column_names if c in have]
        sql = f"SELECT {', '.join(quoted(c) for c in cols)} FROM {t.name}"
        if where:
            sql += f" WHERE {where}"
        sql += f" ORDER BY {order or ('id' if 'id' in cols else cols[0])}"
        return [
            from_row(record, dict(zip(cols, r, strict=True))) for r in self.con.execute(sql, params)
        ]

    def verdicts(self, where: str = "", params: tuple[Any, ...] = ()) -> list[Verdict]:
        return self.rows(Verdict, where, params)

    def causes(
        self, where: str = "", params: tuple[Any, ...] = (), order: str = ""
    ) -> list[CauseRow]:
        return self.rows(CauseRow, where, params, order)

    def releases(self) -> list[str]:
        return [r[0] for r in self.con.execute("SELECT version FROM release")]

    def relations(self) -> list[str]:
        """Every table and view, by name."""
        return [
            r[0]
            for r in self.con.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' "
                "ORDER BY name"
            )
        ]

    def has_table(self, name: str) -> bool:
        return (
            self.con.execute(
                "SELECT 1 FROM sqlite_master WHERE type IN ('table', 'view') AND name = ?", (name,)
            ).fetchone()
            is not None
        )

    def _columns(self, t: Table) -> set[str]:
        return {r[1] for r in self.con.execute(f"PRAGMA table_info({t.name})")}

    # -- schema ------------------------------------------------------------------------------
    def init_schema(self) -> None:
        """Create what is missing: tables, columns added since an older vllm-compat wrote the
        database (appended, as the contract allows), the application id and the views."""
        have = {
            name
            for (name,) in self.con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        script = []
        for t in TABLES.values():
            if t.name not in have:
                script += [s + ";" for s in t.create_sql()]
                continue
            present = self._columns(t)
            for c in t.columns:
                if c.name not in present:
                    default = (
                        "NULL"
                        if c.default is None
                        else (
                            str(int(c.default))
                            if isinstance(c.default, (bool, int))
                            else "'" + str(c.default).replace("'", "''") + "'"
                        )
                    )
                    script.append(
                        f"ALTER TABLE {t.name} ADD COLUMN {quoted(c.name)} {c.sql_type} "
                        f"DEFAULT {default};"
                    )
        self.con.executescript(
            "\n".join(script) + f"\nPRAGMA application_id = {APPLICATION_ID};\n" + views_sql()
        )


@contextlib.contextmanager
def writing(path: Path) -> Iterator[Store]:
    """A store on a private copy of `path` (empty when there is none) with the current schema;
    committed, and moved over `path`, only when the block succeeds."""
    with _private_copy(Path(path)) as tmp, scratch(tmp) as store:
        yield store


@contextlib.contextmanager
def open_store(path: Path) -> Iterator[Store]:
    """A read-only store on `path`; UserError (naming the file) when it is missing or not ours."""
    path = Path(path)
    if not path.is_file():
        raise UserError(
            "no such database (run `compat scan` or `compat build` first)", where=str(path)
        )
    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise UserError(f"cannot open database: {exc}", where=str(path)) from None
    try:
        try:
            con.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.DatabaseError as exc:
            raise UserError(f"not a vllm-compat database: {exc}", where=str(path)) from None
        refuse_foreign(con, path, "not a vllm-compat database (it holds {listed})")
        yield Store(con)
    except sqlite3.DatabaseError as exc:
        raise UserError(
            f"cannot read the database ({exc}); rebuild it with `compat build`", where=str(path)
        ) from None
    finally:
        con.close()


@contextlib.contextmanager
def scratch(path: Path) -> Iterator[Store]:
    """A store on a working file nobody else reads (compat bisect's): no private copy."""
    con = sqlite3.connect(path)
    try:
        for pragma in SCRATCH_PRAGMAS:
            con.execute(pragma)
        store = Store(con, Path(path))
        store.init_schema()
        yield store
        con.commit()
    finally:
        con.close()


@contextlib.contextmanager
def _private_copy(path: Path) -> Iterator[Path]:
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise UserError(f"directory does not exist: {parent}", where="--db")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
    os.close(fd)
    try:
        if path.exists():
            try:
                src = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
                try:
                    refuse_foreign(src, path)
                    dst = sqlite3.connect(tmp)
                    src.backup(dst)
                    dst.close()
                finally:
                    src.close()
            except sqlite3.DatabaseError as exc:
                raise UserError(f"not a vllm-compat database: {exc}", where=str(path)) from None
        yield Path(tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        # mkstemp makes 0600; keep the old file's mode, else what a new file would get.
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def ensure_writable(path: Path) -> None:
    """Fail fast, before any work, when `path` exists but is not a vllm-compat database."""
    path = Path(path)
    if not path.exists():
        return
    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            refuse_foreign(con, path)
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        raise UserError(f"not a vllm-compat database: {exc}", where=str(path)) from None


def refuse_foreign(
    con: sqlite3.Connection,
    path: Path,
    message: str = "not a vllm-compat database (it holds {listed}); refusing to write "
    "into it, give another --db",
) -> None:
    """UserError unless `path` is empty, carries our application id, or holds only our tables.

    Writing into someone else's SQLite file would add a dozen tables to it.
    """
    if con.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID:
        return
    names = {
        r[0]
        for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%'"
        )
    }
    ours = set(TABLES) | set(view_names())
    foreign = sorted(names - ours)
    if foreign or (names and "release" not in names):
        listed = ", ".join(foreign[:5]) + (
            f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
        )
        raise UserError(message.format(listed=listed or "other tables"), where=str(path))


# --------------------------------------------------------------------------- compat sql

#: Read-only PRAGMAs `compat sql` lets through (they take a table or index name, change nothing).
_READ_PRAGMAS = frozenset(
    {
        "table_info",
        "table_xinfo",
        "index_list",
        "index_info",
        "index_xinfo",
        "foreign_key_list",
        "table_list",
    }
)
_ALLOWED_ACTIONS = frozenset(
    {
        sqlite3.SQLITE_SELECT,
        sqlite3.SQLITE_READ,
        sqlite3.SQLITE_FUNCTION,
        getattr(sqlite3, "SQLITE_RECURSIVE", 33),
    }
)
_ACTION_NAMES = {
    getattr(sqlite3, f"SQLITE_{n}"): n.replace("_", " ")
    for n in (
        "ALTER_TABLE",
        "ANALYZE",
        "ATTACH",
        "CREATE_INDEX",
        "CREATE_TABLE",
        "CREATE_TEMP_INDEX",
        "CREATE_TEMP_TABLE",
        "CREATE_TEMP_TRIGGER",
        "CREATE_TEMP_VIEW",
        "CREATE_TRIGGER",
        "CREATE_VIEW",
        "CREATE_VTABLE",
        "DELETE",
        "DETACH",
        "DROP_INDEX",
        "DROP_TABLE",
        "DROP_TEMP_INDEX",
        "DROP_TEMP_TABLE",
        "DROP_TEMP_TRIGGER",
        "DROP_TEMP_VIEW",
        "DROP_TRIGGER",
        "DROP_VIEW",
        "DROP_VTABLE",
        "INSERT",
        "PRAGMA",
        "REINDEX",
        "SAVEPOINT",
        "TRANSACTION",
        "UPDATE",
    )
    if hasattr(sqlite3, f"SQLITE_{n}")
}


def query(path: Path, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """One read-only statement over the database at `path`: (columns, rows).

    An authorizer admits only reads (SELECT, functions, CTEs and a few schema PRAGMAs), so
    ATTACH (which would create a file), PRAGMA writes and DML are refused with a UserError
    naming what was refused, before anything runs.
    """
    with open_store(path) as store:
        con = store.con
        refused: list[str] = []

        def authorize(
            action: int, arg1: str | None, arg2: str | None, _db: str | None, _src: str | None
        ) -> int:
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
                raise UserError(
                    f"compat sql is read-only: {what} is not allowed "
                    "(SELECT over the views in schema/views.sql)",
                    where="statement",
                ) from None
            raise UserError(f"SQL error: {str(exc).splitlines()[0]}", where="statement") from None
        finally:
            con.set_authorizer(None)
