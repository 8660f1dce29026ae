"""compat.store and compat.tables: the tables defined once, written atomically, read as records."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from compat import store
from compat import tables as t
from compat.errors import UserError
from compat.scan import release_facts
from compat.sources import tree_from_path

MINI = Path(__file__).resolve().parent / "fixtures" / "minitrees" / "dispatch"


@pytest.fixture(scope="module")
def mini_facts(tmp_path_factory) -> list[dict]:
    mp = pytest.MonkeyPatch()
    mp.setenv("COMPAT_CACHE", str(tmp_path_factory.mktemp("cache")))
    try:
        return [release_facts(tree_from_path(f"{MINI}={label}"))[0] for label in ("0.0.1", "0.0.2")]
    finally:
        mp.undo()


def test_every_column_is_documented_and_typed() -> None:
    for table in t.TABLES.values():
        assert table.doc, table.name
        assert [c for c in table.columns if c.pk], table.name
        for c in table.columns:
            assert c.doc, f"{table.name}.{c.name} has no description"
            assert c.sql_type in ("VARCHAR", "INTEGER")
    for view in t.VIEWS.values():
        assert view.doc


def test_the_database_holds_what_the_records_define(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    with store.writing(db):
        pass
    con = sqlite3.connect(db)
    have = dict(con.execute("SELECT name, sql FROM sqlite_master WHERE type IN ('table', 'index') "
                            "AND sql IS NOT NULL"))
    views = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'view'")}
    assert con.execute("PRAGMA application_id").fetchone()[0] == store.APPLICATION_ID
    con.close()
    want = {}
    for table in t.TABLES.values():
        for sql in table.create_sql():
            want[sql.split()[2]] = sql
    assert have == want
    assert views == set(t.VIEWS) == set(store.view_names())


def test_view_columns_are_documented(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    with store.writing(db):
        pass
    with store.open_store(db) as s:
        for view in t.VIEWS:
            for c in s.dicts(f"PRAGMA table_info({view})"):
                assert t.column_doc(view, c["name"]), f"{view}.{c['name']} has no description"


def test_release_facts_replace_one_release_and_keep_the_others(tmp_path: Path, mini_facts) -> None:
    db = tmp_path / "c.db"
    with store.writing(db) as s:
        for facts in mini_facts:
            s.write_release_facts(facts)
    with store.open_store(db) as s:
        before = {v: len(s.rows(t.ArchCapability, "vllm_version = ?", (v,))) for v in ("0.0.1", "0.0.2")}
    assert all(before.values())
    with store.writing(db) as s:
        s.write_release_facts(mini_facts[0])
    with store.open_store(db) as s:
        after = {v: len(s.rows(t.ArchCapability, "vllm_version = ?", (v,))) for v in ("0.0.1", "0.0.2")}
        caps = s.rows(t.ArchCapability, "vllm_version = ?", ("0.0.1",))
    assert after == before
    assert isinstance(caps[0], t.Capability) and caps[0].vllm_version == "0.0.1"
    with pytest.raises(AttributeError):
        caps[0].arch = "x"  # type: ignore[misc]  # records are frozen


def test_an_older_database_gains_the_columns_added_since(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with store.writing(path) as s:
        s.append(t.Verdict, [{"vllm_version": "0.23.0", "platform": "cuda", "recipe": "r", "status": "ok"}])
    con = sqlite3.connect(path)  # make it look like a database from before `verdict.source`
    con.executescript("DROP VIEW v_verdict; DROP VIEW v_finding; ALTER TABLE verdict DROP COLUMN source;")
    con.commit()
    con.close()
    with store.open_store(path) as s:  # reading it: the missing column reads as its default
        assert [v.source for v in s.verdicts()] == ["ui"]
    with store.writing(path) as s:
        s.append(t.Verdict, [dict(vllm_version="0.33.0", platform="cuda", recipe="r", status="ok", source="api")])
    con = sqlite3.connect(path)
    got = con.execute("SELECT vllm_version, source FROM v_verdict ORDER BY vllm_version").fetchall()
    con.close()
    assert got == [("0.23.0", "ui"), ("0.33.0", "api")]  # old rows read as the builder's


def test_a_failed_write_leaves_the_database_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with store.writing(path) as s:
        s.append(t.RecipeFile, [{"path": "a.yaml", "sha256": "1"}])
    with pytest.raises(RuntimeError), store.writing(path) as s:
        s.replace(t.RecipeFile, [{"path": "b.yaml", "sha256": "2"}])
        raise RuntimeError("interrupted")
    with store.open_store(path) as s:
        assert [r.path for r in s.rows(t.RecipeFile, order="path")] == ["a.yaml"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.db"]  # no private copy left


def test_a_new_database_has_16k_pages_and_a_rewrite_keeps_the_old_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Large pages keep a verdict's kilobytes of reason chain out of overflow pages (faster
    writes); an existing database is copied page for page, its page size unchanged."""
    path = tmp_path / "c.db"
    with store.writing(path) as s:
        s.append(t.RecipeFile, [{"path": "a.yaml", "sha256": "1"}])
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA page_size").fetchone() == (16384,)
    con.close()
    old = tmp_path / "old.db"  # written before pages were 16 KiB
    with monkeypatch.context() as m:
        m.setattr(store, "SCRATCH_PRAGMAS", ("PRAGMA page_size = 4096", *store.SCRATCH_PRAGMAS[1:]))
        with store.writing(old) as s:
            s.append(t.RecipeFile, [{"path": "a.yaml", "sha256": "1"}])
    with store.writing(old) as s:
        s.replace(t.RecipeFile, [{"path": "b.yaml", "sha256": "2"}])
    con = sqlite3.connect(old)
    assert con.execute("PRAGMA page_size").fetchone() == (4096,)
    assert con.execute("SELECT path FROM recipe_file").fetchall() == [("b.yaml",)]
    con.close()


def test_refuses_a_foreign_file_before_any_work(tmp_path: Path) -> None:
    db = tmp_path / "theirs.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE notes (body TEXT)")
    con.commit()
    con.close()
    with pytest.raises(UserError, match="not a vllm-compat database"):
        store.ensure_writable(db)
    with pytest.raises(UserError, match="refusing to write"), store.writing(db):
        pass
    with pytest.raises(UserError, match="not a vllm-compat database"), store.open_store(db):
        pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["theirs.db"]


def test_records_read_what_a_row_holds() -> None:
    row = {"recipe": "r", "kind": "feature", "fix_edits": '[{"op": "set", "path": ["a"], "value": 1}]',
           "no_such_column": 1}
    c = t.from_row(t.CauseRow, row)
    assert c.recipe == "r" and c.fix_kind == "" and c.edits()[0].path == ("a",)
