"""The contract `pip install .` then `compat --help`: schema/, data/ and site/ ship as package data."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MINI = REPO / "tests" / "fixtures" / "minitrees" / "dispatch"
pytestmark = pytest.mark.slow


def test_non_editable_install_runs_every_stage(tmp_path, snapshot):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    py = venv / "bin" / "python"
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(REPO)],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    compat = venv / "bin" / "compat"
    assert subprocess.run([str(compat), "--help"], capture_output=True, cwd=tmp_path).returncode == 0
    where = subprocess.run([str(py), "-c", "import compat.resources as r; print(r.data_dir())"],
                           capture_output=True, text=True, cwd=tmp_path).stdout
    assert "site-packages" in where  # the installed copy, not the checkout
    db = tmp_path / "c.db"
    r = subprocess.run([str(compat), "build", "--recipes", str(snapshot), "--vllm-src", f"{MINI}=0.0.1",
                        "--db", str(db)], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([str(compat), "site", "--db", str(db), "-o", str(tmp_path / "site")],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "site" / "index.html").is_file()
