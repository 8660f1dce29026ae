"""Argument findings kept across builds (compat.verdict.arg_memo): a build whose argv checks
all come from the cache writes the tables of one that ran them; what a forked worker found is
kept by the parent; a change of release, placeholders or code is a different document."""

from __future__ import annotations

import os
import shutil
import sqlite3
import types
from pathlib import Path

import pytest

from compat.verdict import arg_memo
from compat.verdict.arguments import ArgFinding
from compat.verdict.shell import Placeholder, ShellVars
from tests.test_reuse import tables


def _k(sha: str | None) -> types.SimpleNamespace:
    return types.SimpleNamespace(tree=types.SimpleNamespace(sha256=sha) if sha else None)


def _kept_rows(cache: Path) -> int:
    con = sqlite3.connect(cache / "arguments" / "findings.sqlite3")
    try:
        return con.execute("SELECT count(*) FROM finding").fetchone()[0]
    finally:
        con.close()


RECIPES = (
    "models/zai-org/GLM-5.2.yaml",
    "models/Qwen/Qwen3-32B.yaml",
    "models/Qwen/Qwen3-30B-A3B.yaml",
)


def _checkout(snapshot: Path, root: Path) -> Path:
    """Two recipes of the snapshot, with what they read (strategies, hardware, placeholders)."""
    shutil.copytree(snapshot, root, ignore=shutil.ignore_patterns(".git", "models"))
    for rel in RECIPES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(snapshot / rel, root / rel)
    return root


def _cache(root: Path, user: Path) -> Path:
    """Release sources and facts shared with the user cache; arguments and results empty."""
    for part in ("sdists", "index", "trees", "facts", "replay", "wheels", "hf-trees"):
        (user / part).mkdir(parents=True, exist_ok=True)
        (root / part).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(user / part, root / part)
    return root


@pytest.mark.slow
def test_a_build_from_kept_findings_writes_the_tables_of_one_that_ran_them(
    snapshot, vllm_tree, tmp_path, monkeypatch
):
    from compat import workers
    from compat.sources.pypi import cache_dir
    from compat.verdict import engine
    from tests.cli_kit import run

    vllm_tree("0.33.0")  # downloaded and scanned once, in the user cache
    recipes = _checkout(snapshot, tmp_path / "recipes")
    monkeypatch.setenv("COMPAT_CACHE", str(_cache(tmp_path / "cache", cache_dir())))
    monkeypatch.setenv("COMPAT_REUSE", "0")  # every recipe judged, each time
    monkeypatch.setattr(workers, "MIN_PARALLEL", 2)  # the checks run in forked workers
    monkeypatch.setattr(workers, "cpus", lambda: 2)

    def build(name: str) -> Path:
        db = tmp_path / f"{name}.db"
        r = run("build", "--recipes", str(recipes), "--vllm", "0.33.0", "--db", str(db))
        assert r.returncode == 0, r.stderr
        return db

    ran = build("ran")
    assert _kept_rows(tmp_path / "cache") > 100

    def check_arguments(*_a, **_kw):
        raise AssertionError("an argv the first build checked is checked again")

    monkeypatch.setattr(engine, "check_arguments", check_arguments)
    assert tables(build("kept")) == tables(ran)
    # the same build without the kept findings does run the checks (the test can fail)
    shutil.rmtree(tmp_path / "cache" / "arguments")
    with pytest.raises(AssertionError, match="checked again"):
        build("again")


def test_nothing_is_kept_outside_a_build_or_for_a_local_tree(isolated_cache):
    calls = []

    def check():
        calls.append(1)
        return [ArgFinding("parse", "blocked", "step", "msg", ["a.py:1"], ("k", "x"), "SystemExit")]

    for k in (_k("abc"), _k(None)):
        arg_memo.findings(k, ["--x"], None, check)  # no session
    with arg_memo.session():
        arg_memo.findings(_k(None), ["--x"], None, check)
        arg_memo.findings(_k(None), ["--x"], None, check)
    assert len(calls) == 4
    assert not (isolated_cache / "arguments").exists()


def test_kept_findings_come_back_as_they_were_found(isolated_cache):
    found = [ArgFinding("parse", "blocked", "step", "msg", ["a.py:1"], ("k", "x"), "SystemExit")]
    with arg_memo.session():
        assert arg_memo.findings(_k("abc"), ["--x", "1"], None, lambda: found) == found
    with arg_memo.session():
        again = arg_memo.findings(_k("abc"), ["--x", "1"], None, lambda: [])
        other_argv = arg_memo.findings(_k("abc"), ["--x", "2"], None, lambda: [])
    assert again == found and again[0] is not found[0]
    assert other_argv == []


def test_release_placeholders_and_code_each_key_their_own_document(monkeypatch):
    from compat import jsoncache

    shell = ShellVars([Placeholder("$HEAD_IP", "a.yaml", 1)])
    base = arg_memo._doc_key(_k("abc"), shell)
    assert arg_memo._doc_key(_k("abd"), shell) != base
    assert arg_memo._doc_key(_k("abc"), ShellVars([Placeholder("$IP", "a.yaml", 1)])) != base
    assert arg_memo._doc_key(_k("abc"), None) != base
    monkeypatch.setattr(jsoncache, "project_hash", lambda: "another version of the code")
    assert arg_memo._doc_key(_k("abc"), shell) != base
    assert arg_memo._doc_key(_k(None), shell) is None


def test_a_workers_findings_are_written_by_the_parent(isolated_cache):
    found = [ArgFinding("parse", "unknown", "s", "", [], ("u",), "")]
    with arg_memo.session():
        arg_memo.findings(_k("abc"), ["--y"], None, lambda: found)
        handed = arg_memo.take_new()  # what a worker sends before it ends
        assert arg_memo.take_new() == {}
    with arg_memo.session():
        arg_memo.add_new(handed)  # the parent, on the worker's message
    with arg_memo.session():
        assert arg_memo.findings(_k("abc"), ["--y"], None, lambda: []) == found


def test_rows_of_another_code_version_are_dropped_when_a_build_saves(isolated_cache, monkeypatch):
    from compat import jsoncache

    found = [ArgFinding("parse", "unknown", "s", "", [], ("u",), "")]
    monkeypatch.setattr(jsoncache, "project_hash", lambda: "old code")
    with arg_memo.session():
        arg_memo.findings(_k("abc"), ["--old"], None, lambda: found)
    assert _kept_rows(isolated_cache) == 1
    monkeypatch.setattr(jsoncache, "project_hash", lambda: "new code")
    with arg_memo.session():
        assert arg_memo.findings(_k("abc"), ["--old"], None, lambda: []) == []  # not the old row
        arg_memo.findings(_k("abc"), ["--new"], None, lambda: found)
    con = sqlite3.connect(isolated_cache / "arguments" / "findings.sqlite3")
    assert con.execute("SELECT DISTINCT project FROM finding").fetchall() == [("new code",)]
    assert _kept_rows(isolated_cache) == 2  # both argvs, as the new code found them
    con.close()


def test_an_unreadable_cache_costs_time_never_a_verdict(isolated_cache):
    path = isolated_cache / "arguments" / "findings.sqlite3"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a database " * 100)
    found = [ArgFinding("parse", "blocked", "s", "m", [], ("k",), "SystemExit")]
    with arg_memo.session():
        assert arg_memo.findings(_k("abc"), ["--x"], None, lambda: found) == found
        assert arg_memo.findings(_k("abc"), ["--y"], None, lambda: []) == []
