"""Usage and input mistakes a new user makes: one line naming what is wrong, exit 2, nothing written."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from compat.errors import UserError
from tests.cli_kit import Result, run

MINI = Path(__file__).resolve().parent / "fixtures" / "minitrees" / "dispatch"
RECIPES = Path(__file__).resolve().parent / "fixtures" / "recipes" / "minimal"


def one_line_exit_2(r: Result) -> str:
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


#: Usage mistakes a new user makes on the first command: each is exit 2 and one line.
USAGE_MISTAKES = [
    [],
    ["biuld"],
    ["build"],
    ["build", "--recipes", "x", "--vlm", "0.33.0"],
    ["explain", "zai-org/GLM-5.2"],
    ["check", "--format", "xml"],
    ["sql"],
    ["scan"],
    ["lint"],
    ["lint", "--", "python", "serve.py"],
    ["lint", "--format", "xml", "--", "vllm", "serve", "m"],
    ["lint", "--", "vllm", "serve", "m"],  # no database and no --vllm
    ["lint", "--vllm", "0.33.0", "--config", "serve.yaml", "--", "vllm", "serve", "m"],  # not a lint option
]


@pytest.mark.parametrize("args", USAGE_MISTAKES, ids=lambda a: " ".join(a) or "(none)")
def test_usage_mistake_is_one_line_exit_2(tmp_path: Path, args: list[str]) -> None:
    r = run(*args, cwd=tmp_path)
    assert r.returncode == 2, (args, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr + r.stdout
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stderr.startswith("error: ")


@pytest.fixture(scope="module")
def scan_only_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("scan") / "scan.db"
    r = run("scan", "--vllm-src", f"{MINI}=mini", "--db", str(db))
    assert r.returncode == 0, r.stderr
    return db


def test_check_on_a_scan_only_database_is_not_a_pass(scan_only_db: Path) -> None:
    line = one_line_exit_2(run("check", "--db", str(scan_only_db)))
    assert "no verdicts" in line and str(scan_only_db) in line


def test_build_refuses_a_foreign_sqlite_file(tmp_path: Path) -> None:
    db = tmp_path / "mine.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE invoices (n INTEGER)")
    con.commit()
    con.close()
    before = db.read_bytes()
    line = one_line_exit_2(run("build", "--recipes", str(RECIPES), "--vllm-src", f"{MINI}=mini", "--db", str(db)))
    assert "not a vllm-compat database" in line and "invoices" in line and str(db) in line
    assert db.read_bytes() == before


def test_rebuild_into_our_own_database_is_fine(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    for _ in range(2):
        r = run("scan", "--vllm-src", f"{MINI}=mini", "--db", str(db))
        assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("statement,refused", [
    ("ATTACH DATABASE 'other.db' AS e", "ATTACH"),
    ("PRAGMA user_version = 7", "PRAGMA user_version"),
    ("PRAGMA journal_mode = DELETE", "PRAGMA journal_mode"),
    ("DELETE FROM release", "DELETE"),
    ("UPDATE release SET origin = 'x'", "UPDATE"),
    ("DROP VIEW v_verdict", "DROP"),
])
def test_sql_is_read_only(scan_only_db: Path, tmp_path: Path, statement: str, refused: str) -> None:
    before = scan_only_db.read_bytes()
    line = one_line_exit_2(run("sql", statement, "--db", str(scan_only_db), cwd=tmp_path))
    assert "read-only" in line and refused in line, line
    assert not (tmp_path / "other.db").exists()  # ATTACH created nothing
    assert scan_only_db.read_bytes() == before


def test_sql_reads_still_work(scan_only_db: Path) -> None:
    r = run("sql", "PRAGMA table_info(verdict)", "--db", str(scan_only_db), "--format", "csv")
    assert r.returncode == 0 and "vllm_version" in r.stdout, r.stderr
    r = run("sql", "WITH n(x) AS (SELECT 1) SELECT x FROM n", "--db", str(scan_only_db), "--format", "csv")
    assert r.returncode == 0 and r.stdout.split() == ["x", "1"]
    one_line_exit_2(run("sql", "SELECT 1; SELECT 2", "--db", str(scan_only_db)))


def test_missing_recipes_directory_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-recipes"
    line = one_line_exit_2(run("build", "--recipes", str(missing), "--vllm-src", f"{MINI}=mini",
                               "--db", str(tmp_path / "c.db")))
    assert str(missing) in line and "does not exist" in line
    assert not (tmp_path / "c.db").exists()


def test_bisect_with_a_reversed_range_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import compat.bisect as bis

    monkeypatch.setattr(bis, "versions_on_index", lambda: ["0.23.0", "0.30.0", "0.33.0"])
    with pytest.raises(UserError) as exc:
        bis.bisect(RECIPES, "acme/Widget", "single_node_tp", "", "0.33.0", "0.23.0")
    assert "--to" in exc.value.line() and "older" in exc.value.line()


PROGRAM = """
import atexit, sys, threading, time
from compat.cli import run

atexit.register(lambda: print("exit handler ran"))
def late():
    time.sleep(0.2)
    print("thread finished")
threading.Thread(target=late).start()
sys.argv = ["compat", *sys.argv[1:]]
run()
"""


@pytest.mark.parametrize(
    ("args", "code"), [(["check", "--format", "xml"], 2), (["--help"], 0)], ids=["usage", "help"]
)
def test_the_program_exit_skips_only_the_teardown(tmp_path: Path, args: list[str], code: int) -> None:
    """`compat.cli.run` ends with os._exit: the exit code, other threads, exit handlers and
    buffered output (a pipe, not a terminal) are as a normal exit leaves them."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    r = subprocess.run([sys.executable, "-c", PROGRAM, *args], capture_output=True, text=True,
                       cwd=tmp_path, env=env)
    assert r.returncode == code, r.stderr
    assert r.stdout.endswith("thread finished\nexit handler ran\n"), r.stdout
    if code:
        assert r.stderr.startswith("error: ") and len(r.stderr.splitlines()) == 1, r.stderr
    else:
        assert "build" in r.stdout
