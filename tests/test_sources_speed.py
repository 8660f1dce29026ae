"""What makes opening releases fast stays correct: one index answer per build, no re-hash of an
extracted release's sdist, concurrent downloads (against the fake index of the sdist tests)."""

# The fixtures imported from the sdist tests are these tests' parameters (F811 by design).
# ruff: noqa: F811

from __future__ import annotations

import urllib.error

import pytest

from compat.errors import UserError
from compat.sources import pypi
from compat.sources.pypi import one_index_answer, tree_from_index, trees_from_index
from compat.sources.tree import VllmTree
from tests.test_hardening_sdist import VERSION, FakeIndex, cache, sdist  # noqa: F401 -- fixtures


def test_one_index_answer_per_session(sdist, cache):
    idx = FakeIndex(sdist)
    with one_index_answer():
        for _ in range(3):
            tree_from_index(VERSION, opener=idx, cache=cache)
        assert pypi.versions_on_index(opener=idx, cache=cache) == [VERSION]
    assert idx.index_requests == 1
    tree_from_index(VERSION, opener=idx, cache=cache)  # outside a session: asked again
    assert idx.index_requests == 2


def test_an_index_failure_is_remembered_for_the_session(cache):
    asked = []

    def offline(url: str, headers: dict[str, str]) -> bytes:
        asked.append(url)
        raise urllib.error.URLError("offline (test)")

    with one_index_answer():
        for _ in range(2):
            with pytest.raises(UserError, match="cannot reach the package index"):
                pypi.versions_on_index(opener=offline, cache=cache)
    assert len(asked) == 1  # offline, each ask would wait for a timeout


def test_an_extracted_release_does_not_read_its_sdist_again(sdist, cache):
    idx = FakeIndex(sdist)
    tree = tree_from_index(VERSION, opener=idx, cache=cache)
    for f in (cache / "sdists").iterdir():
        f.write_bytes(b"damaged after extraction")  # the extracted tree is what is read
    again = tree_from_index(VERSION, opener=idx, cache=cache)
    assert again.root == tree.root and again.sha256 == tree.sha256 and idx.downloads == 1


def test_trees_download_concurrently_and_errors_stay_per_release(sdist, cache):
    idx = FakeIndex(sdist)
    with one_index_answer():
        found = trees_from_index([VERSION, "1.2.3"], opener=idx, cache=cache)
    assert isinstance(found[VERSION], VllmTree) and found[VERSION].version == VERSION
    assert (
        isinstance(found["1.2.3"], UserError)
        and "not on the package index" in found["1.2.3"].message
    )
    assert idx.downloads == 1 and idx.index_requests == 1
