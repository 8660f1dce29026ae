"""The product as a user installs it: a wheel in a fresh venv (no system site packages), with
the dependency versions pip picks today, and the console script run as a user runs it.

In-process tests cannot see a missing dependency or an API that moved under us (typer
0.29 stopped installing click); only the installed script can.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MINI = REPO / "tests" / "fixtures" / "minitrees" / "dispatch"
pytestmark = pytest.mark.slow

#: One usage mistake per way `compat.cli.main` meets one: no command (before typer), a bad
#: --format (typer calls our parser), an unknown option (click's usage error). The whole list
#: runs in-process in test_cli_errors.py; here the installed typer and click answer.
USAGE_SMOKE = [
    [],
    ["check", "--format", "xml"],
    ["build", "--recipes", "x", "--vlm", "0.33.0"],
]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bin/ of a fresh venv holding the wheel built from a copy of the checkout.

    The copy keeps setuptools' build/ and *.egg-info out of the checkout.
    """
    base = tmp_path_factory.mktemp("install")
    before = _build_leftovers()
    src = base / "src"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(
        ".git", ".venv", "tests", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", ".hypothesis"))
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    wheels = base / "wheels"
    r = subprocess.run([str(py), "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(src)],
                       capture_output=True, text=True, cwd=base)
    assert r.returncode == 0, r.stderr
    wheel = next(wheels.glob("vllm_compat-*.whl"))
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", str(wheel)],
                       capture_output=True, text=True, cwd=base)
    assert r.returncode == 0, r.stderr
    assert _build_leftovers() == before  # nothing (build/, *.egg-info) left in the checkout
    return venv / "bin"


def _build_leftovers() -> set[str]:
    """What a package build leaves in a checkout (other tests, running alongside, may add
    their own caches: only these are the install's to leave)."""
    return {p.name for p in REPO.iterdir() if p.name in ("build", "dist") or p.name.endswith(".egg-info")}


def _run(bin_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(bin_dir / "compat"), *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


def test_venv_has_no_system_packages(installed: Path) -> None:
    cfg = (installed.parent / "pyvenv.cfg").read_text()
    assert "include-system-site-packages = false" in cfg


def test_usage_mistakes_are_one_line_exit_2(installed: Path, tmp_path: Path) -> None:
    for args in USAGE_SMOKE:
        r = _run(installed, *args, cwd=tmp_path)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr + r.stdout
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert r.stderr.startswith("error: ")


def test_help_renders(installed: Path, tmp_path: Path) -> None:
    r = _run(installed, "--help", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "build" in r.stdout and "Traceback" not in r.stdout
    r = _run(installed, "build", "--help", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    # Types are written as metavars a user reads, not Python annotations.
    assert "<bool>" not in r.stdout and "list[str]" not in r.stdout, r.stdout


def test_installed_copy_runs_every_stage(installed: Path, tmp_path: Path, snapshot: Path) -> None:
    where = subprocess.run([str(installed / "python"), "-c", "import compat.resources as r; print(r.data_dir())"],
                           capture_output=True, text=True, cwd=tmp_path).stdout
    assert "site-packages" in where  # the installed copy, not the checkout
    db = tmp_path / "c.db"
    r = _run(installed, "build", "--recipes", str(snapshot), "--vllm-src", f"{MINI}=0.0.1", "--db", str(db),
             cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = _run(installed, "site", "--db", str(db), "-o", str(tmp_path / "site"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    r = _run(installed, "check", "--db", str(db), cwd=tmp_path)
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr, r.stderr
