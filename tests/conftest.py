"""Shared fixtures: real vLLM sdists (downloaded once, cached by hash) and the recipes snapshot."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: The recipes snapshot beside the checkout; COMPAT_RECIPES_SNAPSHOT points elsewhere (a git worktree).
SNAPSHOT = Path(
    os.environ.get("COMPAT_RECIPES_SNAPSHOT") or REPO.parent / "shared" / "recipes-snapshot"
)
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="session")
def compat_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist/fact cache tests use: COMPAT_CACHE if set (CI keeps it), else the user cache."""
    from compat.sources.pypi import cache_dir

    return cache_dir()


_TREES: dict[str, object] = {}


@pytest.fixture(scope="session")
def vllm_tree(compat_cache: Path):
    """`vllm_tree("0.23.0")` -> VllmTree of that release from the package index (cached)."""
    from compat.sources.pypi import tree_from_index

    def get(version: str):
        if version not in _TREES:
            _TREES[version] = tree_from_index(version, cache=compat_cache)
        return _TREES[version]

    return get


@pytest.fixture(scope="session")
def snapshot() -> Path:
    if not (SNAPSHOT / "taxonomy.yaml").is_file():
        pytest.skip(f"recipes snapshot not found at {SNAPSHOT}")
    return SNAPSHOT


@pytest.fixture()
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty COMPAT_CACHE for tests that must not see (or pollute) the shared cache."""
    monkeypatch.setenv("COMPAT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("COMPAT_SKIP_SLOW"):
        skip = pytest.mark.skip(reason="COMPAT_SKIP_SLOW set")
        for item in items:
            if "slow" in item.keywords:
                item.add_marker(skip)
