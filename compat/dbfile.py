"""The database file with the standard library only: private copy, schema, fact rows.

`compat scan` writes a few thousand rows; importing SQLAlchemy and SQLModel to do it
costs more CPU than writing them (~0.6 s of a ~3 s scan), so the scan writes through
`sqlite3` here and never imports them. The tables are still SQLModel's (compat/db.py):
`schema/tables.json` holds the statements `create_all` issues and each column's
default, generated from the models by `tools/update_schema.py`, and a test fails when
it no longer matches them. `compat.db.writing` builds on `private_copy` below, so the
atomic replace lives in one place for every command.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import tempfile
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

from compat.errors import UserError
from compat.resources import schema_dir

#: `PRAGMA application_id` of every database vllm-compat writes ("vcdb"), so a foreign
#: SQLite file is told apart from ours (older databases without it are known by their tables).
APPLICATION_ID = 0x76636462

#: The private copy is a scratch file until it replaces the database: no journal on
#: disk and no fsync per statement (create_all alone is 33 of them); one fsync of the
#: finished file comes before the replace, so what the rename exposes is on disk.
SCRATCH_PRAGMAS = ("PRAGMA journal_mode = MEMORY", "PRAGMA synchronous = OFF")

class SchemaDiffers(Exception):
    """The database's tables are not the ones schema/tables.json creates (an older release
    of vllm-compat wrote it): compat.db's SQLModel path has to bring it up to date."""


@lru_cache(maxsize=1)
def tables_document() -> dict[str, Any]:
    return json.loads((schema_dir() / "tables.json").read_text(encoding="utf-8"))


def table_names() -> list[str]:
    return list(tables_document()["tables"])


def release_table_names() -> list[str]:
    """Tables holding one release's facts (compat.db.RELEASE_TABLES), in write order."""
    return list(tables_document()["release_tables"])


@lru_cache(maxsize=1)
def views_sql() -> str:
    return (schema_dir() / "views.sql").read_text(encoding="utf-8")


def view_names() -> list[str]:
    return re.findall(r"CREATE VIEW (?:IF NOT EXISTS )?(\w+)", views_sql(), flags=re.I)


def scratch_connect(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(path)
    for pragma in SCRATCH_PRAGMAS:
        con.execute(pragma)
    return con


@contextlib.contextmanager
def private_copy(path: Path) -> Iterator[Path]:
    """A private copy of `path` (empty when there is none); it replaces `path` only on success.

    An interrupted or failed run leaves the previous database untouched, and two runs
    never interleave rows (the later finisher wins whole).
    """
    path = Path(path)
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


@contextlib.contextmanager
def writing(path: Path) -> Iterator[sqlite3.Connection]:
    """A sqlite3 connection on a private copy of `path` with the current schema.

    Raises SchemaDiffers (before anything is written) when the existing database has
    tables of another shape; the caller then writes through compat.db.writing.
    """
    with private_copy(path) as tmp:
        con = scratch_connect(tmp)
        try:
            init_schema(con)
            yield con
        finally:
            con.close()


def init_schema(con: sqlite3.Connection) -> None:
    """The tables `create_all` would create, our application id, and the views."""
    doc = tables_document()
    have = {name: sql for name, sql in con.execute(
        "SELECT name, sql FROM sqlite_master WHERE type IN ('table', 'index')")}
    script = []
    for stmt in doc["statements"]:
        name = stmt["name"]
        if name in have:
            if have[name] != stmt["sql"]:
                raise SchemaDiffers(name)
            continue
        script.append(stmt["sql"] + ";")
    con.executescript("\n".join(script) + f"\nPRAGMA application_id = {APPLICATION_ID};\n" + views_sql())


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


def refuse_foreign(con: sqlite3.Connection, path: Path) -> None:
    """UserError unless `path` is empty, carries our application id, or holds only our tables.

    Writing into someone else's SQLite file would add a dozen tables to it.
    """
    if con.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID:
        return
    names = {r[0] for r in con.execute(
        "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%'")}
    ours = set(table_names()) | set(view_names())
    foreign = sorted(names - ours)
    if foreign or (names and "release" not in names):
        listed = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise UserError(f"not a vllm-compat database (it holds {listed or 'other tables'}); "
                        "refusing to write into it, give another --db", where=str(path))


def replace_rows(con: sqlite3.Connection, table: str, rows: list[dict[str, Any]],
                 **where: Any) -> int:
    """Delete the rows matching `where` and insert `rows`, each completed with the model's
    defaults as compat.db.replace_rows does; no commit (the caller holds the transaction)."""
    columns = tables_document()["tables"][table]["columns"]
    names = [c["name"] for c in columns]
    quoted = ", ".join(f'"{n}"' for n in names)
    cond = " AND ".join(f'"{k}" = ?' for k in where)
    con.execute(f'DELETE FROM "{table}"' + (f" WHERE {cond}" if cond else ""), tuple(where.values()))
    if rows:
        defaults = [c["default"] for c in columns]
        values = [tuple(r.get(n, d) for n, d in zip(names, defaults, strict=True)) for r in rows]
        con.executemany(f'INSERT INTO "{table}" ({quoted}) VALUES ({", ".join("?" * len(names))})', values)
    return len(rows)


def write_release_facts(con: sqlite3.Connection, facts: dict[str, Any]) -> dict[str, int]:
    """Replace one release's rows in every fact table, in one transaction."""
    rel = facts["release"]
    version = rel["version"]
    release_columns = {c["name"] for c in tables_document()["tables"]["release"]["columns"]}
    counts: dict[str, int] = {}
    with con:
        replace_rows(con, "release", [{k: v for k, v in rel.items() if k in release_columns}],
                     version=version)
        for name in release_table_names():
            rows = [dict(r, vllm_version=version) for r in facts.get(name, [])]
            counts[name] = replace_rows(con, name, rows, vllm_version=version)
    return counts
