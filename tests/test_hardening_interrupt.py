"""Hardening: an interrupted build leaves the previous database intact; concurrent builds do not corrupt it.

`compat` runs in a subprocess with a `sitecustomize.py` (written to a tmp dir put on
PYTHONPATH) that slows one stage down and drops a marker file when the stage starts, so
the test can send SIGINT at a known point without depending on machine speed:

* `compute_facts`: the static scan of a release (before the database is opened);
* `replace_rows`: `Store.replace` inside `compat.store.writing` (build and scan), while the
  private copy of the database is being filled (the temp file exists next to the database at
  that moment).

The product code is not changed for this; the stage is wrapped from outside.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compat import api

HERE = Path(__file__).resolve().parent
MINIMAL = HERE / "fixtures" / "recipes" / "minimal"
MINITREE = HERE / "fixtures" / "minitrees" / "dispatch"
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

SITECUSTOMIZE = '''
import json, os, signal, time

# Python's KeyboardInterrupt handler even when the test runner started us with SIGINT
# ignored (as background jobs of a non-interactive shell are).
signal.signal(signal.SIGINT, signal.default_int_handler)
_here = os.path.dirname(os.path.abspath(__file__))
_cfg = json.load(open(os.path.join(_here, "slow.json")))


def _slow(name, real):
    state = {"done": False}

    def wrapper(*args, **kwargs):
        if not state["done"]:
            state["done"] = True
            open(os.path.join(_cfg["markers"], f"{name}-{os.getpid()}"), "w").close()
            time.sleep(_cfg["seconds"])
        return real(*args, **kwargs)

    return wrapper


if _cfg["stage"] == "compute_facts":
    import compat.scan as _m
    _m.compute_facts = _slow("compute_facts", _m.compute_facts)
elif _cfg["stage"] == "replace_rows":
    import compat.store as _m  # every command's writer
    _m.Store.replace = _slow("replace_rows", _m.Store.replace)
'''


def slow_env(tmp_path: Path, stage: str, seconds: float, cache: Path) -> tuple[dict[str, str], Path]:
    site = tmp_path / "site"
    markers = tmp_path / "markers"
    site.mkdir(exist_ok=True)
    markers.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    (site / "slow.json").write_text(json.dumps({"stage": stage, "seconds": seconds, "markers": str(markers)}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])]),
               COMPAT_CACHE=str(cache), COMPAT_INDEX_URL="http://127.0.0.1:9/simple")
    return env, markers


def start(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "compat.cli", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def wait_for_markers(markers: Path, n: int, proc: list[subprocess.Popen], timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while len(list(markers.iterdir())) < n:
        for p in proc:
            if p.poll() is not None:
                _out, err = p.communicate()
                pytest.fail(f"compat exited ({p.returncode}) before the slow stage: {err}")
        if time.monotonic() > deadline:
            pytest.fail("the slow stage never started")
        time.sleep(0.02)


def neighbours(db: Path) -> list[str]:
    return sorted(p.name for p in db.parent.iterdir() if p.name != db.name)


@pytest.fixture(scope="module", autouse=True)
def _offline():
    """In-process builds look up the newest release on the index (model facts): refuse it."""
    from compat.sources import pypi

    def refuse(url: str, headers: dict[str, str]) -> bytes:
        raise OSError(f"network disabled in hardening tests: {url}")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pypi, "_default_open", refuse)
        yield


@pytest.fixture(scope="module")
def previous(tmp_path_factory) -> tuple[Path, bytes]:
    """A database from a complete earlier build (in-process), and its bytes."""
    d = tmp_path_factory.mktemp("prev")
    db = d / "db" / "compat.db"
    db.parent.mkdir()
    mp = pytest.MonkeyPatch()
    mp.setenv("COMPAT_CACHE", str(d / "cache"))
    try:
        api.build(MINIMAL, [], [f"{MINITREE}=0.0.1"], db)
    finally:
        mp.undo()
    return db, db.read_bytes()


@pytest.mark.parametrize("command,stage", [
    ("scan", "compute_facts"),  # mid-scan, before the database is opened
    ("build", "replace_rows"),  # mid-write, while the private copy exists next to the database
])
def test_sigint_mid_run_leaves_previous_database(tmp_path, previous, command, stage):
    _src_db, before = previous
    db = tmp_path / "db" / "compat.db"
    db.parent.mkdir()
    db.write_bytes(before)
    env, markers = slow_env(tmp_path, stage, 60, tmp_path / "cache")
    args = [command, "--vllm-src", f"{MINITREE}=0.0.2", "--db", str(db)]
    if command == "build":
        args += ["--recipes", str(MINIMAL)]
    proc = start(args, env)
    try:
        wait_for_markers(markers, 1, [proc])
        if stage == "replace_rows":
            assert any(n.endswith(".tmp") for n in neighbours(db)), "expected the private copy to exist mid-write"
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert time.monotonic() - t0 < 10
    assert proc.returncode == 130, (proc.returncode, err)
    assert "Traceback" not in err, err
    assert "interrupted" in err
    assert db.read_bytes() == before, "the previous database changed"
    assert neighbours(db) == [], f"left next to the database: {neighbours(db)}"


def test_sigint_with_no_previous_database_leaves_nothing(tmp_path):
    db = tmp_path / "db" / "compat.db"
    db.parent.mkdir()
    env, markers = slow_env(tmp_path, "replace_rows", 60, tmp_path / "cache")
    proc = start(["scan", "--vllm-src", f"{MINITREE}=0.0.2", "--db", str(db)], env)
    try:
        wait_for_markers(markers, 1, [proc])
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert not db.exists() and neighbours(db) == []


def test_sigterm_mid_write_leaves_previous_database_and_no_temp_file(tmp_path, previous):
    """SIGTERM (CI timeouts, `kill`) unwinds like SIGINT: exit 143, the private copy removed."""
    db = tmp_path / "db" / "compat.db"
    db.parent.mkdir()
    db.write_bytes(previous[1])
    env, markers = slow_env(tmp_path, "replace_rows", 60, tmp_path / "cache")
    proc = start(["scan", "--vllm-src", f"{MINITREE}=0.0.2", "--db", str(db)], env)
    try:
        wait_for_markers(markers, 1, [proc])
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 143 and "Traceback" not in err, (proc.returncode, err)
    assert db.read_bytes() == previous[1]
    assert neighbours(db) == [], f"left next to the database: {neighbours(db)}"


def _counts(db: Path) -> dict[str, object]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"

        def q(sql: str) -> list[tuple]:
            return con.execute(sql).fetchall()

        return {
            "releases": sorted(r[0] for r in q("SELECT version FROM release")),
            "caps": dict(q("SELECT vllm_version, count(*) FROM arch_capability GROUP BY vllm_version")),
            "gates": dict(q("SELECT vllm_version, count(*) FROM gate_status GROUP BY vllm_version")),
            "verdicts": dict(q("SELECT vllm_version, count(*) FROM verdict GROUP BY vllm_version")),
            "models": q("SELECT count(*) FROM model_fact")[0][0],
        }
    finally:
        con.close()


def test_two_concurrent_builds_on_one_database(tmp_path, previous):
    """Both overlap inside the write stage; the file ends as one complete build, never a mix."""
    ref = _counts(previous[0])  # one complete build at release 0.0.1
    (caps,), (gates,), (verdicts,) = ref["caps"].values(), ref["gates"].values(), ref["verdicts"].values()
    db = tmp_path / "db" / "compat.db"
    db.parent.mkdir()
    env, markers = slow_env(tmp_path, "replace_rows", 0.8, tmp_path / "cache")
    procs = [start(["build", "--recipes", str(MINIMAL), "--vllm-src", f"{MINITREE}={label}", "--db", str(db)], env)
             for label in ("1.0.0", "2.0.0")]
    try:
        wait_for_markers(markers, 2, procs)
        results = [p.communicate(timeout=600) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    for p, (_out, err) in zip(procs, results):
        assert "Traceback" not in err, err
        assert p.returncode in (0, 2), err  # both finish, or one refuses cleanly
    assert any(p.returncode == 0 for p in procs)
    got = _counts(db)
    assert got["releases"] in (["1.0.0"], ["2.0.0"], ["1.0.0", "2.0.0"])
    for rel in got["releases"]:
        assert got["caps"][rel] == caps and got["gates"][rel] == gates
    # The verdict table is replaced whole by each build: exactly one build's verdicts survive.
    assert len(got["verdicts"]) == 1 and list(got["verdicts"].values()) == [verdicts]
    assert got["models"] == ref["models"]
    assert neighbours(db) == []


def test_concurrent_identical_builds_do_not_double_rows(tmp_path, previous):
    ref = _counts(previous[0])
    db = tmp_path / "db" / "compat.db"
    db.parent.mkdir()
    db.write_bytes(previous[1])
    env, markers = slow_env(tmp_path, "replace_rows", 0.5, tmp_path / "cache")
    procs = [start(["build", "--recipes", str(MINIMAL), "--vllm-src", f"{MINITREE}=0.0.1", "--db", str(db)], env)
             for _ in range(2)]
    try:
        wait_for_markers(markers, 2, procs)
        results = [p.communicate(timeout=600) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    assert all(p.returncode == 0 for p in procs), [r[1] for r in results]
    assert _counts(db) == ref
    assert neighbours(db) == []
