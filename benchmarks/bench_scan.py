"""Benchmark: static scan of an unpacked vLLM tree vs griffe's static load; cached re-scan.

Usage: python benchmarks/bench_scan.py [VERSION ...]   (default 0.23.0; sdists download once)

Each measurement runs in a fresh interpreter so they cannot warm each other up:
- cold scan: every fact of the release computed with an empty fact cache (in-process time);
- griffe: `griffe.load("vllm", allow_inspection=False)` on the same unpacked tree;
- cached re-scan: `release_facts` on a warm fact cache (in-process time), and the whole
  `compat scan` command (wall time, includes interpreter start and imports).
Goals (issue #2): cold <= 0.2 x griffe; cached re-scan < 1 s. Needs the `bench` extra (griffe).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

COLD = """
import json, sys, time
from compat.sources import tree_from_path
from compat.scan import compute_facts
t = tree_from_path(sys.argv[1])
t0 = time.perf_counter(); f = compute_facts(t); dt = time.perf_counter() - t0
print(json.dumps({"seconds": dt, "rows": len(f["arch_capability"])}))
"""
WARM = """
import json, sys, time
from compat.sources import tree_from_path
from compat.scan import release_facts
t = tree_from_path(sys.argv[1])
release_facts(t)
t0 = time.perf_counter(); _, cached = release_facts(t); dt = time.perf_counter() - t0
print(json.dumps({"seconds": dt, "cached": cached}))
"""
GRIFFE = """
import json, sys, time
import griffe
sys.setrecursionlimit(10000)
t0 = time.perf_counter()
griffe.load("vllm", search_paths=[sys.argv[1]], allow_inspection=False)
print(json.dumps({"seconds": time.perf_counter() - t0}))
"""


def _run(code: str, root: str, env: dict[str, str]) -> dict:
    out = subprocess.run([sys.executable, "-c", code, root], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench(version: str) -> None:
    from compat.sources.pypi import tree_from_index

    root = str(tree_from_index(version).root)
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, COMPAT_CACHE=tmp)
        cold = _run(COLD, root, env)
        warm = _run(WARM, root, env)
        db = os.path.join(tmp, "bench.db")
        cmd = [sys.executable, "-m", "compat.cli", "scan", "--vllm-src", f"{root}={version}", "--db", db]
        subprocess.run(cmd, capture_output=True, env=env, check=True)
        t0 = time.perf_counter()
        subprocess.run(cmd, capture_output=True, env=env, check=True)
        cli_warm = time.perf_counter() - t0
    print(f"vllm {version}: cold scan {cold['seconds']:.2f} s ({cold['rows']} capability rows); "
          f"cached re-scan {warm['seconds'] * 1000:.0f} ms in-process, `compat scan` {cli_warm:.2f} s wall")
    try:
        g = _run(GRIFFE, root, dict(os.environ))
    except (subprocess.CalledProcessError, json.JSONDecodeError) as exc:
        print(f"  griffe not measured ({exc}); pip install -e '.[bench]'")
        return
    print(f"  griffe.load: {g['seconds']:.2f} s; ratio {cold['seconds'] / g['seconds']:.3f} (goal <= 0.2)")


if __name__ == "__main__":
    for v in sys.argv[1:] or ["0.23.0"]:
        bench(v)
