"""The code's own checks as a test, so `.ci/run` fails when they do: ruff's lint rules (the ones
pyproject.toml names) over the repository and ruff's format over compat/. Skipped cleanly where
ruff is not installed (it comes with the `test` extra). Neither writes a cache into the checkout
(the tests run in parallel, and test_install checks that the checkout is left as it was)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff() -> list[str]:
    exe = shutil.which("ruff")
    if exe:
        return [exe]
    try:
        import ruff  # noqa: F401
    except ImportError:
        pytest.skip("ruff is not installed (pip install -e '.[test]')")
    return [sys.executable, "-m", "ruff"]


def test_ruff_lint_is_clean() -> None:
    proc = subprocess.run([*_ruff(), "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_compat_is_formatted() -> None:
    proc = subprocess.run(
        [*_ruff(), "format", "--no-cache", "--check", "compat"], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
