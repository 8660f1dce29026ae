"""A rebuild over a database written before a column was added keeps working."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from compat import store
from compat.tables import Verdict


def test_writing_adds_columns_an_older_database_lacks(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with store.writing(path) as db:
        db.append(Verdict, [
            {"vllm_version": "0.23.0", "platform": "cuda", "recipe": "r", "status": "ok"}])
    con = sqlite3.connect(path)  # make it look like a database from before `verdict.source`
    con.executescript(
        "DROP VIEW v_verdict; DROP VIEW v_finding; ALTER TABLE verdict DROP COLUMN source;"
    )
    con.commit()
    con.close()
    with store.writing(path) as db:
        db.append(
            Verdict,
            [dict(vllm_version="0.33.0", platform="cuda", recipe="r", status="ok", source="api")],
        )
    con = sqlite3.connect(path)
    got = con.execute("SELECT vllm_version, source FROM v_verdict ORDER BY vllm_version").fetchall()
    con.close()
    assert got == [("0.23.0", "ui"), ("0.33.0", "api")]  # old rows read as the builder's
