"""compute() gives the same rows in forked workers as one share after the other.

The scan splits a release's work into two shares run in forked workers when it has two
cores (compat.vllm.facts.compute). What it writes must not depend on that: the same rows
in the same order, whichever share takes which raise-inventory chunk.
"""

from __future__ import annotations

import dataclasses
import gc
import os
from pathlib import Path

import pytest

from compat.sources.tree import VllmTree
from compat.vllm import facts as F

HERE = Path(__file__).resolve().parent
MINITREES = sorted(p for p in (HERE / "fixtures" / "minitrees").iterdir()
                   if (p / "vllm" / "model_executor" / "models" / "registry.py").is_file())


def _tree(root: Path, version: str = "0.0.1") -> VllmTree:
    return VllmTree(root=root, version=version, origin="src")


def _sequential(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(F, "cpu_count", lambda: 1)


@pytest.mark.parametrize("root", MINITREES, ids=lambda p: p.name)
def test_workers_and_one_process_give_the_same_rows(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    forked = F.compute(_tree(root), ("cuda", "rocm"))
    with monkeypatch.context() as mp:
        _sequential(mp)
        here = F.compute(_tree(root), ("cuda", "rocm"))
    assert forked == here
    assert forked["arch_capability"] and forked["release"]


def test_workers_are_used_with_two_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(F, "cpu_count", lambda: 2)
    ran: list[str] = []
    real = F._in_workers

    def spy(*args, **kwargs):
        result = real(*args, **kwargs)
        ran.append("workers" if result is not None else "fallback")
        return result

    monkeypatch.setattr(F, "_in_workers", spy)
    F.compute(_tree(MINITREES[0]), ("cuda",))
    assert ran == ["workers"]


def test_a_failing_worker_falls_back_to_computing_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(F, "cpu_count", lambda: 2)
    real = F._surface_share
    parent = os.getpid()

    def surface(tree, platforms, queue, say):
        if os.getpid() != parent:
            raise RuntimeError("worker died")  # in the forked worker only
        return real(tree, platforms, queue, say)

    monkeypatch.setattr(F, "_surface_share", surface)
    got = F.compute(_tree(MINITREES[0]), ("cuda",))
    monkeypatch.setattr(F, "_surface_share", real)
    _sequential(monkeypatch)
    assert got == F.compute(_tree(MINITREES[0]), ("cuda",))


def test_raise_queue_hands_out_every_file_once() -> None:
    files = [f"f{i}.py" for i in range(10)]
    queue = F.RaiseQueue(files)
    claimed = []
    while chunk := queue.claim():
        assert len(chunk) <= F.RaiseQueue.CHUNK
        claimed += chunk
    assert claimed == files


def test_collections_are_rarer_only_inside() -> None:
    before = gc.get_threshold()
    with F.rare_young_collections(50_000):
        assert gc.get_threshold()[0] >= 50_000
        assert gc.get_threshold()[1:] == before[1:]
    assert gc.get_threshold() == before


@pytest.mark.slow
@pytest.mark.parametrize("version", ["0.23.0", "0.33.0"])
def test_real_release_same_rows_either_way(vllm_tree, version: str, monkeypatch: pytest.MonkeyPatch) -> None:
    tree = vllm_tree(version)
    forked = F.compute(dataclasses.replace(tree), ("cuda", "rocm"))
    _sequential(monkeypatch)
    assert forked == F.compute(dataclasses.replace(tree), ("cuda", "rocm"))


def test_statement_walk_meets_classes_and_assignments_as_ast_walk_does() -> None:
    """gates._statements skips expressions: the statements it yields, and their order, are
    ast.walk's (checked on this project's own sources, nested classes and all)."""
    import ast

    from compat.vllm.gates import _statements

    sources = sorted((HERE.parent / "compat").rglob("*.py"))
    nested = "class A:\n    class B:\n        x.attr = 1\n    def f(self):\n        class C: pass\n" \
             "if x:\n    class D: pass\nelse:\n    try:\n        class E: pass\n    except E:\n        class F: pass\n" \
             "match y:\n    case 1:\n        class G: pass\n"
    modules = [ast.parse(nested)] + [ast.parse(p.read_text()) for p in sources]
    for mod in modules:
        want = [n for n in ast.walk(mod) if n is mod or isinstance(n, (ast.stmt, ast.excepthandler, ast.match_case))]
        assert list(_statements(mod)) == want
    assert sum(isinstance(n, ast.ClassDef) for n in _statements(modules[0])) == 7
