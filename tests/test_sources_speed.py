"""What makes opening releases fast stays correct: one index answer per build, no re-hash of an
extracted release's sdist, concurrent downloads (against the fake index of the sdist tests)."""

# The fixtures imported from the sdist tests are these tests' parameters (F811 by design).
# ruff: noqa: F811

from __future__ import annotations

import hashlib
import os
import urllib.error

import pytest

from compat.errors import UserError
from compat.sources import pypi
from compat.sources.pypi import one_index_answer, tree_from_index, trees_from_index
from compat.sources.tree import VllmTree
from tests.test_hardening_sdist import (  # noqa: F401 -- fixtures
    VERSION,
    FakeIndex,
    cache,
    index_doc,
    sdist,
)


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


def _two_release_index(sdist: bytes) -> FakeIndex:
    """The fake index with a second release, 9.9.8, served by the same sdist."""
    doc = index_doc(sdist)
    doc["files"].append({**doc["files"][-1], "filename": "vllm-9.9.8.tar.gz"})
    return FakeIndex(sdist, doc)


def test_trees_reach_ready_here_as_a_download_child_lands_them(sdist, cache):
    """With `ready`, the downloads run in a forked child and each tree is handed to `ready` in
    this process (a cold build scans it while the rest download); errors stay per release."""
    idx = _two_release_index(sdist)
    seen: list[tuple[int, str]] = []
    with one_index_answer():
        found = trees_from_index(
            [VERSION, "9.9.8", "1.2.3"],
            opener=idx,
            cache=cache,
            ready=lambda tree: seen.append((os.getpid(), tree.version)),
        )
    assert sorted(seen) == [(os.getpid(), "9.9.8"), (os.getpid(), VERSION)]
    assert all(isinstance(found[v], VllmTree) and found[v].version == v for v in (VERSION, "9.9.8"))
    err = found["1.2.3"]
    assert isinstance(err, UserError) and "not on the package index" in err.message
    assert err.where == "--vllm"
    assert idx.downloads == 0  # the child downloaded (its copy of the opener counted)
    assert [p.name for p in (cache / "sdists").iterdir() if not p.name.startswith(".")]


def test_a_warm_build_forks_no_download_child(sdist, cache, monkeypatch):
    idx = _two_release_index(sdist)
    tree_from_index(VERSION, opener=idx, cache=cache)

    def no_fork(*_args):
        raise AssertionError("every tree is on disk: nothing to download")

    monkeypatch.setattr(pypi, "_streamed", no_fork)
    seen: list[str] = []
    found = trees_from_index([VERSION, "9.9.8"], opener=idx, cache=cache, ready=seen.append)
    assert {v: t.version for v, t in found.items()} == {VERSION: VERSION, "9.9.8": "9.9.8"}
    assert seen == []  # the caller's build scans (or reads cached facts) as before


def test_a_download_child_that_dies_leaves_its_releases_to_this_process(sdist, cache, monkeypatch):
    idx = _two_release_index(sdist)
    monkeypatch.setattr(pypi, "_download_child", lambda *_args: os._exit(1))
    seen: list[str] = []
    with one_index_answer():
        found = trees_from_index([VERSION, "9.9.8"], opener=idx, cache=cache, ready=seen.append)
    assert all(isinstance(found[v], VllmTree) for v in (VERSION, "9.9.8"))
    assert idx.downloads >= 1 and seen == []  # opened here, on threads


class _TwoSdistIndex(FakeIndex):
    """The fake index with a second release, 9.9.8, whose sdist differs (its own hash and URL)."""

    OTHER_URL = "https://files.invalid/vllm-9.9.8.tar.gz"

    def __init__(self, sdist: bytes) -> None:
        from tests.test_hardening_sdist import make_sdist

        self.other = make_sdist({"vllm-9.9.9/vllm/only_in_998.py": b"x = 1\n"})
        doc = index_doc(sdist)
        doc["files"].append(
            {**doc["files"][-1], "filename": "vllm-9.9.8.tar.gz", "url": self.OTHER_URL,
             "size": len(self.other), "hashes": {"sha256": hashlib.sha256(self.other).hexdigest()}}
        )
        super().__init__(sdist, doc)
        self.other_downloads = 0

    def __call__(self, url: str, headers: dict[str, str]) -> bytes:
        if url == self.OTHER_URL:
            self.other_downloads += 1
            return self.other
        return super().__call__(url, headers)


def test_sdist_only_releases_are_fetched_not_unpacked_until_opened(sdist, cache, monkeypatch):
    """works_from's releases (compat.api._search_ahead) are downloaded with the judged ones but
    unpacked only when the search opens one; a later build neither fetches nor forks for them."""
    idx = _TwoSdistIndex(sdist)
    seen: list[str] = []
    with one_index_answer():
        found = trees_from_index(
            [VERSION, "9.9.8"], opener=idx, cache=cache, ready=lambda t: seen.append(t.version),
            sdist_only={"9.9.8"},
        )
        assert list(found) == [VERSION] and seen == [VERSION]
        assert not pypi.on_disk("9.9.8", cache, idx)  # no pack yet
        assert pypi.on_disk("9.9.8", cache, idx, sdist=True)  # the sdist is there
        assert len(list((cache / "trees").glob("*.pack"))) == 1

        monkeypatch.setattr(pypi, "_streamed", lambda *a: pytest.fail("nothing to download"))
        again = trees_from_index(
            [VERSION, "9.9.8"], opener=idx, cache=cache, ready=seen.append, sdist_only={"9.9.8"}
        )
        assert list(again) == [VERSION]

        tree = tree_from_index("9.9.8", opener=idx, cache=cache)  # the search opens it
    assert tree.exists("vllm/only_in_998.py")
    assert idx.other_downloads == 0  # only the download child fetched it (its own opener copy)
    assert pypi.on_disk("9.9.8", cache, idx)
