"""Benchmark: static scan of an unpacked vLLM tree vs griffe's static load, and a cached re-scan.

Usage: python benchmarks/bench_scan.py [VERSION]   (default 0.23.0; downloads the sdist once)
Prints: cold scan seconds (empty fact cache), griffe.load seconds on the same tree, their
ratio (goal <= 0.2), and the in-process time of a cached re-scan (goal < 1 s).
Needs the `bench` extra (griffe).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time


def main() -> None:
    version = sys.argv[1] if len(sys.argv) > 1 else "0.23.0"
    from compat.sources.pypi import tree_from_index

    tree = tree_from_index(version)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["COMPAT_CACHE_FACTS"] = tmp
        from compat import scan as scan_mod

        t0 = time.perf_counter()
        facts = scan_mod.compute_facts(tree)
        cold = time.perf_counter() - t0
    print(f"cold scan of vllm {version}: {cold:.2f} s ({len(facts['arch_capability'])} capability rows)")
    t0 = time.perf_counter()
    scan_mod.release_facts(tree)  # fills the cache if empty
    t0 = time.perf_counter()
    _, cached = scan_mod.release_facts(tree)
    warm = time.perf_counter() - t0
    print(f"cached re-scan (load facts): {warm:.3f} s (cached={cached})")
    try:
        import griffe
    except ImportError:
        print("griffe not installed (pip install -e '.[bench]'); no ratio")
        return
    sys.setrecursionlimit(10000)
    t0 = time.perf_counter()
    griffe.load("vllm", search_paths=[str(tree.root)], allow_inspection=False)
    g = time.perf_counter() - t0
    print(f"griffe.load('vllm', allow_inspection=False): {g:.2f} s; ratio {cold / g:.3f} (goal <= 0.2)")


if __name__ == "__main__":
    main()
