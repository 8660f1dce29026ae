"""Hardening: nothing from the recipes checkout is executed.

Recipe YAML is read with a safe loader (python/* tags are not constructed), strings in
recipes are data (no shell ever sees them), and the checkout's own Python files are never
imported, also when `compat` runs with the checkout as its working directory. Each attack
tries to create a marker file; the tests assert the file never appears and the run ends
with exit 2 (one line naming the file) or, for plain strings, exit 0 with the strings kept
verbatim as data.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests import cli_kit

HERE = Path(__file__).resolve().parent
MINIMAL = HERE / "fixtures" / "recipes" / "minimal"
MINITREE = HERE / "fixtures" / "minitrees" / "dispatch"
HF = HERE / "fixtures" / "hardening" / "hf"

TAGS = {
    "apply_os_system": '!!python/object/apply:os.system ["touch {m}"]',
    "apply_subprocess": '!!python/object/apply:subprocess.check_call [["touch", "{m}"]]',
    "new_os_system": '!!python/object/new:os.system ["touch {m}"]',
    "apply_exec": "!!python/object/apply:builtins.exec [\"open(r'{m}', 'w').close()\"]",
    "name": "!!python/name:os.system",
    "module": "!!python/module:os",
    "object": "!!python/object:os._wrap_close {{}}",
    "verbose_tag": '!<tag:yaml.org,2002:python/object/apply:os.system> ["touch {m}"]',
    "tag_directive": '%TAG !p! tag:yaml.org,2002:python/\n---\nx_evil: !p!object/apply:os.system ["touch {m}"]',
}
FILES = ["models/acme/Widget.yaml", "taxonomy.yaml", "strategies/single_node_tp.yaml"]


@pytest.fixture(autouse=True)
def _offline(monkeypatch, tmp_path):
    from compat.sources import pypi

    def refuse(url: str, headers: dict[str, str]) -> bytes:
        raise OSError(f"network disabled in hardening tests: {url}")

    monkeypatch.setattr(pypi, "_default_open", refuse)
    monkeypatch.setenv("COMPAT_CACHE", str(tmp_path / "cache"))


def _cli(argv: list[str], cwd: Path | None = None) -> tuple[int, str]:
    """compat.cli.main in-process (tests/cli_kit.py): (exit code, stderr)."""
    r = cli_kit.run(*argv, cwd=cwd)
    return r.returncode, r.stderr


def _poison(root: Path, rel: str, tag: str, marker: Path) -> None:
    path = root / rel
    snippet = TAGS[tag].format(m=marker)
    text = path.read_text()
    if tag == "tag_directive":  # a directive must open the document: the whole file becomes it
        body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
        path.write_text(snippet + "\n" + body + "\n")
    else:
        path.write_text(f"x_evil: {snippet}\n{text}")


def _error_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("error:")]


@pytest.mark.parametrize("rel", FILES)
@pytest.mark.parametrize("tag", sorted(TAGS))
def test_python_tags_are_not_constructed(tmp_path, tag, rel):
    root = tmp_path / "recipes"
    shutil.copytree(MINIMAL, root)
    marker = tmp_path / "PWNED"
    _poison(root, rel, tag, marker)
    db = tmp_path / "c.db"
    code, err = _cli(["build", "--recipes", str(root), "--vllm-src", f"{MINITREE}=0.0.1", "--db", str(db)])
    assert not marker.exists(), "a python tag in a recipe file was executed"
    assert code == 2, err
    lines = _error_lines(err)
    assert len(lines) == 1 and lines[0].startswith(f"error: {rel}: "), err
    assert not db.exists()


def test_python_tag_from_the_checkout_as_working_directory(tmp_path):
    """`compat build --recipes .` from inside the checkout, with a relative `touch`."""
    root = tmp_path / "recipes"
    shutil.copytree(MINIMAL, root)
    _poison(root, "models/acme/Widget.yaml", "apply_os_system", Path("PWNED"))
    code, err = _cli(["build", "--recipes", ".", "--vllm-src", f"{MINITREE}=0.0.1", "--db",
                      str(tmp_path / "c.db")], cwd=root)
    assert not list(tmp_path.rglob("PWNED"))
    assert code == 2 and "Traceback" not in err, err
    assert len(_error_lines(err)) == 1


def test_overrides_apply_does_not_construct_python_tags(tmp_path):
    """`compat overrides --apply` reads recipe files itself; a tagged file is refused, not run or rewritten."""
    db = tmp_path / "c.db"
    code, err = _cli(["build", "--recipes", str(MINIMAL), "--vllm-src", f"{MINITREE}=0.0.1",
                      "--hf-config-dir", str(HF), "--db", str(db)])
    assert code == 0, err
    target = tmp_path / "target"
    shutil.copytree(MINIMAL, target)
    marker = tmp_path / "PWNED"
    rel = "models/acme/Widget.yaml"
    # A planned fix for this file, so the apply path has to read it (the fix stage plans none
    # for this fixture: every failure here is one no recipe edit can fix without taking
    # away a command that works).
    import sqlite3

    from compat.fix.edits import Edit, dumps

    con = sqlite3.connect(db)
    edit = Edit("set", ("features", "spec_decoding", "strategies"), ["single_node_tp"], after="description")
    con.execute("UPDATE cause SET fix_kind = 'gate', fix = 'test', fix_edits = ? WHERE recipe = ?",
                (dumps([edit]), rel))
    con.commit()
    con.close()
    # Control: the untouched copy is edited (so the apply path really reads this file).
    code, err = _cli(["overrides", "--db", str(db), "--apply", str(target),
                      "--dry-run"])
    assert code == 0 and "would change 1 recipe files" in err, err
    for tag in ("apply_os_system", "apply_exec", "new_os_system"):
        shutil.copy(MINIMAL / rel, target / rel)
        _poison(target, rel, tag, marker)
        before = (target / rel).read_bytes()
        code, err = _cli(["overrides", "--db", str(db), "--apply", str(target)])
        assert not marker.exists()
        assert code == 2, err
        lines = _error_lines(err)
        assert len(lines) == 1 and lines[0].startswith(f"error: {rel}: "), err
        assert (target / rel).read_bytes() == before


def test_shell_metacharacters_in_recipes_are_data(tmp_path):
    root = tmp_path / "recipes"
    shutil.copytree(MINIMAL, root)
    marker = tmp_path / "PWNED"
    rel = root / "models/acme/Widget.yaml"
    evil_args = [f"$(touch {marker})", f"`touch {marker}`", f"; touch {marker}", f"| touch {marker}"]
    text = rel.read_text().replace('["--reasoning-parser", "widget"]', json.dumps(["--reasoning-parser", *evil_args]))
    text = text.replace("model_id: acme/Widget-Small", f"model_id: \"acme/Widget-Small$(touch {marker})\"")
    rel.write_text(text)
    db = tmp_path / "c.db"
    code, err = _cli(["build", "--recipes", str(root), "--vllm-src", f"{MINITREE}=0.0.1", "--db", str(db)])
    assert code == 0, err
    assert not marker.exists()
    con = sqlite3.connect(db)
    # The argv of a verdict row, inline or (since the command table) stored once and referenced.
    argvs = [json.loads(a) for (a,) in con.execute(
        "SELECT CASE WHEN v.argv != '' THEN v.argv ELSE c.argv END FROM verdict v "
        "LEFT JOIN command c ON c.id = v.command_id")]
    ids = {m for (m,) in con.execute("SELECT model_id FROM verdict")}
    con.close()
    flat = {tok for argv in argvs for _role, toks in argv for tok in toks}
    assert set(evil_args) <= flat  # kept verbatim, as data
    assert f"acme/Widget-Small$(touch {marker})" in ids


PLANTED = {
    "yaml.py": "", "typer.py": "", "sqlmodel.py": "", "rich/__init__.py": "", "jinja2.py": "",
    "compat/__init__.py": "", "compat/cli.py": "", "sitecustomize.py": "", "usercustomize.py": "",
    "conftest.py": "", "setup.py": "", "models/__init__.py": "", "models/acme/__init__.py": "",
    "models/acme/Widget.py": "", "strategies/__init__.py": "", "__init__.py": "",
}


def test_python_files_in_the_checkout_are_never_imported(tmp_path):
    """The console script, run from inside a checkout full of importable names, imports none of them."""
    script = Path(sys.executable).parent / "compat"
    if not script.is_file():
        pytest.skip("console script `compat` not installed next to this interpreter")
    root = tmp_path / "recipes"
    shutil.copytree(MINIMAL, root)
    markers = tmp_path / "markers"
    markers.mkdir()
    for rel in PLANTED:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"open({str(markers / rel.replace('/', '_'))!r}, 'w').close()\n")
    env = dict(os.environ, COMPAT_CACHE=str(tmp_path / "cache"), COMPAT_INDEX_URL="http://127.0.0.1:9/simple")
    env.pop("PYTHONPATH", None)
    r = subprocess.run([str(script), "build", "--recipes", ".", "--vllm-src", f"{MINITREE}=0.0.1",
                        "--db", str(tmp_path / "c.db")], cwd=root, capture_output=True, text=True, env=env,
                       timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in markers.iterdir()) == [], "files from the recipes checkout were imported"
