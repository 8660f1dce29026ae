"""compat.vllm.facts.share_workers: the releases one process scans go to two kept share
workers, which do not parse a file again whose text they parsed for the release before. The
facts must be those of a release scanned alone, in any order; a worker over its memory limit
is replaced; the workers end with the context."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from compat.sources.tree import VllmTree
from compat.vllm import facts as F

HERE = Path(__file__).resolve().parent
MINITREES = sorted(p for p in (HERE / "fixtures" / "minitrees").iterdir()
                   if (p / "vllm" / "model_executor" / "models" / "registry.py").is_file())
PLATFORMS = ("cuda", "rocm")


def _tree(root: Path) -> VllmTree:
    return VllmTree(root=root, version=root.name, origin="src")


@pytest.fixture()
def parses(tmp_path, monkeypatch):
    """The release files parsed (by any process forked after this), as (pid, path) lines."""
    log = tmp_path / "parses.log"
    real = ast.parse

    def counting(source, filename="<unknown>", *args, **kwargs):
        if str(filename).startswith("vllm/"):
            with log.open("a") as f:
                f.write(f"{os.getpid()} {filename}\n")
        return real(source, filename, *args, **kwargs)

    monkeypatch.setattr(F, "cpu_count", lambda: 2)
    monkeypatch.setattr(ast, "parse", counting)

    def lines() -> list[str]:
        out = log.read_text().splitlines() if log.is_file() else []
        log.unlink(missing_ok=True)
        return out

    return lines


def test_kept_workers_give_each_release_its_own_facts_in_any_order(parses):
    alone = {root: F.compute(_tree(root), PLATFORMS) for root in MINITREES}
    order = MINITREES + MINITREES[::-1]
    with F.share_workers():
        kept = [F.compute(_tree(root), PLATFORMS) for root in order]
        assert not F._KEPT.broken and len(F._KEPT.workers) == 2
    assert kept == [alone[root] for root in order]


def test_a_release_scanned_again_is_not_parsed_again(parses):
    root = MINITREES[0]
    with F.share_workers():
        first = F.compute(_tree(root), PLATFORMS)
        parsed_first = parses()
        again = F.compute(_tree(root), PLATFORMS)
        parsed_again = parses()
    assert first == again
    # Each worker keeps what it parsed; which worker takes which raise-inventory chunk may
    # change from one scan to the next, and the other one parses such a file anew.
    assert len(parsed_first) > 10 and not set(parsed_again) & set(parsed_first)
    assert len(parsed_again) < len(parsed_first) / 2


def test_the_workers_end_with_the_context(parses):
    with F.share_workers():
        F.compute(_tree(MINITREES[0]), PLATFORMS)
        procs = [proc for proc, _conn in F._KEPT.workers]
    assert len(procs) == 2 and not any(p.is_alive() for p in procs)
    assert F._KEPT is None


def test_a_worker_over_its_memory_limit_is_replaced(parses, monkeypatch):
    monkeypatch.setattr(F, "RETIRE_MIB", 0)
    root = MINITREES[0]
    alone = F.compute(_tree(root), PLATFORMS)
    parses()
    pids = []
    with F.share_workers():
        for _ in range(2):
            assert F.compute(_tree(root), PLATFORMS) == alone
            pids.append({line.split()[0] for line in parses()})
        assert not F._KEPT.broken
    assert pids[0] and pids[1] and not pids[0] & pids[1]  # fresh workers parse it all again


def test_a_process_forked_inside_forks_its_own_workers(parses):
    with F.share_workers():
        F._KEPT.owner = -1  # as a judging worker forked inside sees the pool it inherited
        assert F.compute(_tree(MINITREES[0]), PLATFORMS)["arch_capability"]
        assert F._KEPT.workers == []


def test_the_tree_sent_to_a_worker_carries_nothing_read_or_parsed_here():
    tree = _tree(MINITREES[0])
    tree.parse("vllm/model_executor/models/registry.py")
    tree.py_files("vllm")
    tree.derived["x"] = 1
    sent = tree.bare()
    assert (sent.root, sent.version, sent.origin, sent.sha256, sent.commit, sent.pack) == (
        tree.root, tree.version, tree.origin, tree.sha256, tree.commit, tree.pack)
    assert not (sent._ast or sent._text or sent._py_files or sent.derived) and sent.reuse is None
