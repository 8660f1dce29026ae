"""The CLI as a user meets it: exit codes, one-line errors, atomic database writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_kit import run

MINI = Path(__file__).resolve().parent / "fixtures" / "minitrees" / "dispatch"


def test_scan_and_sql_json(tmp_path, isolated_cache):
    db = tmp_path / "c.db"
    r = run("scan", "--vllm-src", f"{MINI}=mini", "--db", str(db))
    assert r.returncode == 0, r.stderr
    r = run("sql", "SELECT arch, supports_pp FROM v_arch_capability WHERE platform='cuda' ORDER BY arch",
            "--db", str(db), "--format", "json")
    rows = json.loads(r.stdout)
    assert {"arch": "PPModel", "supports_pp": 1} in rows
    cols = run("sql", "SELECT * FROM v_arch_capability LIMIT 1", "--db", str(db), "--format", "csv").stdout
    assert cols.splitlines()[0] == ("vllm_version,platform,arch,class_path,file,line,supports_pp,supports_lora,"
                                    "supports_multimodal,supports_encoder_tp_data,is_hybrid,has_inner_state,"
                                    "is_attention_free,supports_transcription,is_pooling_model,"
                                    "is_text_generation_model,supports_eagle3,is_moe")


def test_bad_inputs_exit_2_one_line(tmp_path, isolated_cache):
    db = tmp_path / "c.db"
    for args in (["scan", "--vllm-src", str(tmp_path), "--db", str(db)],
                 ["sql", "SELECT 1", "--db", str(tmp_path / "missing.db")],
                 ["sql", "SELECT 1", "--db", str(db), "--format", "xml"]):
        r = run(*args)
        assert r.returncode == 2, (args, r.stderr)
        assert "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_failed_scan_leaves_database_untouched(tmp_path, isolated_cache):
    db = tmp_path / "c.db"
    assert run("scan", "--vllm-src", f"{MINI}=mini", "--db", str(db)).returncode == 0
    before = db.read_bytes()
    r = run("scan", "--vllm-src", f"{MINI}=mini", "--vllm-src", str(tmp_path / "nope"), "--db", str(db))
    assert r.returncode == 2
    assert db.read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.slow
def test_unknown_release_on_index(tmp_path):
    r = run("scan", "--vllm", "9.99.0", "--db", str(tmp_path / "c.db"))
    assert r.returncode == 2 and "not on the package index" in r.stderr


def test_tree_without_registry_names_what_is_missing(tmp_path, isolated_cache):
    root = tmp_path / "tree"
    (root / "vllm").mkdir(parents=True)
    (root / "vllm" / "_version.py").write_text("__version__ = version = '9.0.0'\n")
    r = run("scan", "--vllm-src", str(root), "--db", str(tmp_path / "c.db"))
    assert r.returncode == 2
    assert "vllm/model_executor/models/registry.py" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "c.db").exists()


def test_installed_package_is_read_not_imported(tmp_path, isolated_cache, monkeypatch):
    """--installed finds `vllm` on sys.path without importing it (importing would fail here)."""
    import shutil

    site = tmp_path / "site"
    shutil.copytree(MINI / "vllm", site / "vllm")
    (site / "vllm" / "__init__.py").write_text("raise RuntimeError('vllm must not be imported')\n")
    monkeypatch.syspath_prepend(str(site))
    db = tmp_path / "c.db"
    r = run("scan", "--installed", "--db", str(db))
    assert r.returncode == 0, r.stderr
    rows = json.loads(run("sql", "SELECT version, origin FROM release", "--db", str(db), "--format", "json").stdout)
    assert rows == [{"version": "0.0.1", "origin": "installed"}]


def test_an_escaping_exception_reads_as_a_traceback_and_exit_1(monkeypatch, tmp_path):
    """cli_kit does what the interpreter does, so "no Traceback on stderr" checks stay real."""
    from compat import api

    def broken(db):
        raise RuntimeError("a bug, not a user error")

    monkeypatch.setattr(api, "check", broken)
    r = run("check", "--db", str(tmp_path / "c.db"))
    assert r.returncode == 1
    assert r.stderr.startswith("Traceback") and "RuntimeError: a bug, not a user error" in r.stderr
