"""Files shipped with the package: schema/ (contracts), data/ (curated facts), site/ (templates).

In a checkout they are the top-level directories; installed, they are package data
under compat._schema, compat._data and compat._site (see pyproject.toml).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

_REPO = Path(__file__).resolve().parent.parent


def _dir(top: str, pkg: str) -> Path:
    local = _REPO / top
    if local.is_dir() and (_REPO / "pyproject.toml").is_file():
        return local
    return Path(str(resources.files(pkg)))


def schema_dir() -> Path:
    return _dir("schema", "compat._schema")


def data_dir() -> Path:
    return _dir("data", "compat._data")


def site_dir() -> Path:
    return _dir("site", "compat._site")
