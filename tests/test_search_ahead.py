"""A pinned build downloads, with the releases it judges, the releases works_from's search may
visit (compat.api._search_ahead): fetched in release order, not scanned ahead, not judged."""

from __future__ import annotations

from pathlib import Path

import pytest

from compat import api
from compat.errors import UserError
from compat.sources import pypi
from compat.sources.tree import VllmTree

INDEX = ["0.4.2", "0.5.0", "0.5.1rc1", "0.6.0", "0.6.1", "0.6.1.post1", "0.7.0", "0.8.0.dev1", "0.9.0"]


def test_the_search_releases_are_the_later_final_ones_not_judged_nor_on_disk(monkeypatch):
    monkeypatch.setattr(pypi, "versions_on_index", lambda: INDEX)
    monkeypatch.setattr(pypi, "on_disk", lambda v, *_, sdist=False: v == "0.7.0" and sdist)
    said: list[str] = []
    assert api._search_ahead(["0.5.0", "0.6.1"], said.append) == ["0.6.0", "0.9.0"]
    assert said == ["works_from: 2 more releases its search may visit, downloading"]
    assert api._search_ahead([], said.append) == []


def test_offline_nothing_is_fetched_ahead(monkeypatch):
    def offline():
        raise UserError("cannot reach the package index", where="--vllm")

    monkeypatch.setattr(pypi, "versions_on_index", offline)
    assert api._search_ahead(["0.5.0"], None) == []


def test_the_search_releases_download_in_release_order_and_are_neither_scanned_nor_judged(
    monkeypatch,
):
    import compat.scan

    monkeypatch.setattr(api, "_resolve_pins", lambda pins, _p: {p: p for p in pins})
    monkeypatch.setattr(api, "_search_ahead", lambda judged, _p: ["0.6.0", "0.9.0"])
    scanned: list[str] = []
    monkeypatch.setattr(compat.scan, "scan_ahead", lambda _p: lambda tree: scanned.append(tree.version))
    fetched: list[list[str]] = []

    def trees(versions, progress=None, ready=None, sdist_only=()):
        fetched.append(list(versions))
        assert sorted(sdist_only) == ["0.6.0", "0.9.0"]  # fetched, not unpacked
        out = {}
        for v in versions:
            if v in sdist_only:
                continue
            out[v] = VllmTree(root=Path("/nonexistent"), version=v, origin="pypi", sha256=v)
            ready(out[v])
        return out

    monkeypatch.setattr(pypi, "trees_from_index", trees)
    got, pin_of, unavailable = api._open_trees({"0.7.0", "0.5.0"}, [], [], None)
    assert fetched == [["0.5.0", "0.6.0", "0.7.0", "0.9.0"]]
    assert sorted(got) == ["0.5.0", "0.7.0"] and scanned == ["0.5.0", "0.7.0"]
    assert pin_of == {"0.5.0": "0.5.0", "0.7.0": "0.7.0"} and unavailable == {}


@pytest.mark.parametrize("on_disk", [True, False])
def test_on_disk_is_a_stat_of_the_pack(isolated_cache, monkeypatch, on_disk):
    sha = "a" * 64
    monkeypatch.setattr(pypi, "sdist_entry", lambda v, *_: {"hashes": {"sha256": sha.upper()}})
    if on_disk:
        (isolated_cache / "trees").mkdir(parents=True)
        (isolated_cache / "trees" / f"{sha}.pack").write_bytes(b"")
    assert pypi.on_disk("1.0.0") is on_disk
