"""A judging worker whose works_from search meets an unscanned release asks the build's
process to scan it (compat.scan.remote, compat.workers._scan_here), and a daemonic process
computes facts without forking: a judging worker used to die at its first such scan ("daemonic
processes are not allowed to have children"), and the parent judged every recipe left alone."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from compat import scan, workers
from compat.blocks import Block
from compat.errors import UserError
from compat.sources.tree import VllmTree
from compat.vllm import facts as F

DISPATCH = Path(__file__).resolve().parent / "fixtures" / "minitrees" / "dispatch"


def _compute_in_daemon(conn) -> None:
    try:
        facts = F.compute(VllmTree(root=DISPATCH, version="0.0.1", origin="src"), ("cuda",))
        conn.send(("ok", bool(facts["arch_capability"])))
    except BaseException as exc:  # noqa: BLE001
        conn.send(("failed", repr(exc)))
    finally:
        conn.close()
        os._exit(0)


def test_a_daemonic_process_computes_facts_without_forking(monkeypatch):
    monkeypatch.setattr(F, "cpu_count", lambda: 2)
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_compute_in_daemon, args=(send,), daemon=True)
    proc.start()
    send.close()
    assert recv.recv() == ("ok", True)
    proc.join()


def test_judging_workers_ask_the_parent_to_scan_and_all_recipes_are_judged_there(monkeypatch):
    parent = os.getpid()
    scanned: list[str] = []

    def judge(_j, path, _combos):
        assert scan.remote is not None  # set in the worker
        scan.remote(f"release-of-{path}")  # returns once the parent has scanned it
        return Block(recipe=f"{path} judged in {'parent' if os.getpid() == parent else 'worker'}")

    monkeypatch.setattr(workers, "judge_recipe", judge)
    monkeypatch.setattr(workers, "cpus", lambda: 2)
    monkeypatch.setattr(workers, "_scan_here", lambda version, _say: scanned.append(version))
    paths = [f"r{i}.yaml" for i in range(6)]
    j = SimpleNamespace(pool=SimpleNamespace(say=None))
    got = dict(workers.judge_all(j, paths, lambda _p: [], lambda _m: None))
    assert sorted(got) == paths
    assert {b.recipe for b in got.values()} == {f"{p} judged in worker" for p in paths}
    assert sorted(scanned) == sorted(f"release-of-{p}" for p in paths)
    assert scan.remote is None  # never set in the parent


def test_the_parent_scans_and_caches_what_a_worker_asks_for(isolated_cache, monkeypatch):
    import compat.sources as sources

    tree = VllmTree(root=DISPATCH, version="0.0.1", origin="src")
    monkeypatch.setattr(sources, "tree_from_index", lambda version, progress=None: tree)
    workers._scan_here("0.0.1", lambda _m: None)
    assert scan.facts_path(tree).is_file()

    def unavailable(version, progress=None):
        raise UserError(f"release {version!r} is not on the package index", where="--vllm")

    monkeypatch.setattr(sources, "tree_from_index", unavailable)
    workers._scan_here("9.9.9", lambda _m: None)  # left for the worker, which reports it


@pytest.mark.parametrize("cached", [False, True])
def test_the_search_asks_for_a_release_only_when_its_facts_are_not_cached(
    isolated_cache, monkeypatch, cached
):
    import compat.sources as sources
    from compat.verdict.releases import ReleasePool

    tree = VllmTree(root=DISPATCH, version="0.0.1", origin="src")
    monkeypatch.setattr(sources, "tree_from_index", lambda version, progress=None: tree)
    if cached:
        scan.release_facts(tree)
    asked: list[str] = []

    def remote(version: str) -> None:
        asked.append(version)
        scan.release_facts(tree)  # as the parent does: the facts are then in the cache

    monkeypatch.setattr(scan, "remote", remote)
    computed = []
    real = scan.release_facts
    monkeypatch.setattr(scan, "release_facts", lambda t, say=None: computed.append(1) or real(t, say))
    pool = ReleasePool({}, models=None, index=["0.0.1"])
    assert pool.judge_at("0.0.1") is not None
    assert asked == ([] if cached else ["0.0.1"])
    assert pool.judge_at("0.0.1") is pool.judge_at("0.0.1")  # scanned once, then kept
