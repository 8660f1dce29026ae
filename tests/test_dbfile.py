"""The scan's database writer without SQLAlchemy (compat.dbfile): the same tables and rows as
the SQLModel path, a schema file that cannot drift from the models, no SQLAlchemy import."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from compat import db as dbm
from compat import dbfile
from compat.errors import UserError
from compat.resources import schema_dir
from compat.scan import release_facts, write_facts
from compat.sources import tree_from_path

MINI = Path(__file__).resolve().parent / "fixtures" / "minitrees" / "dispatch"
REPO = Path(__file__).resolve().parents[1]


def dump(path: Path) -> list[tuple]:
    """Schema objects and every row of every table, in rowid order."""
    con = sqlite3.connect(path)
    try:
        out: list[tuple] = list(con.execute(  # create_all makes indexes in no fixed order
            "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"))
        out.append(("application_id", con.execute("PRAGMA application_id").fetchone()[0]))
        for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"):
            out += [(name, *r) for r in con.execute(f'SELECT rowid, * FROM "{name}" ORDER BY rowid')]
        return out
    finally:
        con.close()


def reference_write(engine, facts: dict) -> None:
    """The scan's writer before compat.dbfile: SQLModel tables, one replace_rows per table."""
    rel = facts["release"]
    version = rel["version"]
    cols = [c.name for c in dbm.Release.__table__.columns]  # type: ignore[attr-defined]
    dbm.replace_rows(engine, dbm.Release, [{k: rel[k] for k in cols}], version=version)
    for table in dbm.RELEASE_TABLES:
        rows = [dict(r, vllm_version=version) for r in facts.get(table.__tablename__, [])]
        dbm.replace_rows(engine, table, rows, vllm_version=version)


@pytest.fixture(scope="module")
def mini_facts(tmp_path_factory) -> list[dict]:
    mp = pytest.MonkeyPatch()
    mp.setenv("COMPAT_CACHE", str(tmp_path_factory.mktemp("cache")))
    try:
        return [release_facts(tree_from_path(f"{MINI}={label}"))[0] for label in ("0.0.1", "0.0.2")]
    finally:
        mp.undo()


def test_tables_json_is_what_the_models_create():
    on_disk = json.loads((schema_dir() / "tables.json").read_text())
    assert on_disk == dbm.schema_document(), (
        "schema/tables.json is stale: run `python tools/update_schema.py` after changing compat/db.py")


def test_same_tables_and_rows_as_the_sqlmodel_writer(tmp_path, mini_facts):
    ours, theirs = tmp_path / "ours.db", tmp_path / "theirs.db"
    with dbfile.writing(ours) as con:
        for facts in mini_facts:
            write_facts(con, facts)
    with dbm.writing(theirs) as engine:
        for facts in mini_facts:
            reference_write(engine, facts)
    assert dump(ours) == dump(theirs)
    # ... and again over an existing database (rows of one release replaced, the other kept)
    with dbfile.writing(ours) as con:
        write_facts(con, mini_facts[0])
    with dbm.writing(theirs) as engine:
        reference_write(engine, mini_facts[0])
    assert dump(ours) == dump(theirs)


def test_the_engine_path_writes_the_same_rows(tmp_path, mini_facts):
    """build and bisect hand write_facts an engine: the rows go through the same writer."""
    ours, theirs = tmp_path / "ours.db", tmp_path / "theirs.db"
    with dbm.writing(ours) as engine:
        for facts in mini_facts:
            write_facts(engine, facts)
    with dbm.writing(theirs) as engine:
        for facts in mini_facts:
            reference_write(engine, facts)
    assert dump(ours) == dump(theirs)


def test_a_table_of_another_shape_goes_through_sqlmodel(tmp_path, mini_facts, monkeypatch):
    """A database whose tables differ from tables.json (an older vllm-compat) is not written
    with the fast path's schema: compat.db.writing takes it, as for every other command."""
    db = tmp_path / "old.db"
    with dbfile.writing(db) as con:
        write_facts(con, mini_facts[0])
    con = sqlite3.connect(db)
    con.execute("CREATE INDEX ix_cli_flag_extra ON cli_flag (kind)")
    con.execute("DROP INDEX ix_cli_flag_flag")
    con.execute("CREATE INDEX ix_cli_flag_flag ON cli_flag (flag, kind)")  # same name, other shape
    con.commit()
    con.close()
    with pytest.raises(dbfile.SchemaDiffers), dbfile.writing(db):
        pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.db"]  # no private copy left
    from compat import api

    used = []
    real = dbm.writing
    monkeypatch.setattr(dbm, "writing", lambda path: used.append(path) or real(path))
    api.scan([], [f"{MINI}=0.0.2"], False, db)
    assert used == [db]
    con = sqlite3.connect(db)
    assert sorted(r[0] for r in con.execute("SELECT version FROM release")) == ["0.0.1", "0.0.2"]
    con.close()


def test_refuses_a_foreign_file_before_any_work(tmp_path):
    db = tmp_path / "theirs.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE notes (body TEXT)")
    con.commit()
    con.close()
    with pytest.raises(UserError, match="not a vllm-compat database"):
        dbfile.ensure_writable(db)
    with pytest.raises(UserError, match="refusing to write"), dbfile.writing(db):
        pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["theirs.db"]


def test_scan_never_imports_sqlalchemy(tmp_path, isolated_cache):
    """The whole `compat scan` process, as the user runs it (issue 12: speed as the user feels it)."""
    code = (
        "import sys\n"
        "from compat import cli\n"
        f"sys.argv = ['compat', 'scan', '--vllm-src', {str(MINI) + '=mini'!r}, '--db', {str(tmp_path / 'c.db')!r}]\n"
        "cli.main()\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'sqlalchemy', 'sqlmodel'}))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]"
    con = sqlite3.connect(tmp_path / "c.db")
    assert con.execute("SELECT count(*) FROM arch_capability WHERE vllm_version = 'mini'").fetchone()[0] > 0
    con.close()
