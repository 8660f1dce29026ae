"""Benchmark: static scan of an unpacked vLLM tree vs griffe's static load; cached re-scan.

Usage: python benchmarks/bench_scan.py [--repeat N] [VERSION ...]   (default 0.23.0; sdists download once)

Each measurement runs in a fresh interpreter so they cannot warm each other up:
- cold scan, in-process: every fact of the release computed with an empty fact cache;
- cold scan, as the user runs it: the whole `compat scan --vllm-src TREE` process with an
  empty fact cache (wall time: interpreter start, imports, facts, database write, exit);
- griffe: `griffe.load("vllm", allow_inspection=False)` on the same unpacked tree;
- cached re-scan: `release_facts` on a warm fact cache (in-process time), and the whole
  `compat scan` command (wall time).
Goal (issue 12): the whole cold process <= 0.2 x griffe, both measured in the same run, so a
busy machine slows both: `--repeat N` runs N rounds (griffe, whole process, in-process, one
after the other) and takes the best of each; the load average is printed with the numbers.
Needs the `bench` extra (griffe).
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


def _cli_scan(root: str, version: str) -> float:
    """Wall time of a whole `compat scan` process with an empty fact cache."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, COMPAT_CACHE=tmp)
        cmd = [COMPAT, "scan", "--vllm-src", f"{root}={version}", "--db", os.path.join(tmp, "bench.db")]
        t0 = time.perf_counter()
        subprocess.run(cmd, capture_output=True, env=env, check=True)
        return time.perf_counter() - t0


COMPAT = os.path.join(os.path.dirname(sys.executable), "compat")


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def bench(version: str, repeat: int = 1) -> None:
    """Best of `repeat` rounds; each round runs griffe, the whole cold process and the cold
    in-process scan one after the other, so a busy spell slows all three alike."""
    from compat.sources.pypi import tree_from_index

    root = str(tree_from_index(version).root)
    load_before = _load()
    griffe_s: list[float] = []
    whole_s: list[float] = []
    cold_runs: list[dict] = []
    griffe_error = None
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, COMPAT_CACHE=tmp)
        for _ in range(repeat):
            if griffe_error is None:
                try:
                    griffe_s.append(_run(GRIFFE, root, dict(os.environ))["seconds"])
                except (subprocess.CalledProcessError, json.JSONDecodeError) as exc:
                    griffe_error = exc
            whole_s.append(_cli_scan(root, version))
            cold_runs.append(_run(COLD, root, env))
        warm = _run(WARM, root, env)
        db = os.path.join(tmp, "bench.db")
        cmd = [COMPAT, "scan", "--vllm-src", f"{root}={version}", "--db", db]
        subprocess.run(cmd, capture_output=True, env=env, check=True)
        t0 = time.perf_counter()
        subprocess.run(cmd, capture_output=True, env=env, check=True)
        cli_warm = time.perf_counter() - t0
    cold = min(cold_runs, key=lambda r: r["seconds"])
    whole = min(whole_s)
    print(f"vllm {version}: cold scan {cold['seconds']:.2f} s in-process ({cold['rows']} capability rows), "
          f"{whole:.2f} s as a whole `compat scan` process; cached re-scan {warm['seconds'] * 1000:.0f} ms "
          f"in-process, {cli_warm:.2f} s as a process")
    if griffe_error is not None:
        print(f"  griffe not measured ({griffe_error}); pip install -e '.[bench]'")
    else:
        g = min(griffe_s)
        print(f"  griffe.load: {g:.2f} s; ratio in-process {cold['seconds'] / g:.3f}, "
              f"whole process {whole / g:.3f} (goal <= 0.2)")
    print(f"  best of {repeat}; load average {load_before} before, {_load()} after")


if __name__ == "__main__":
    args = sys.argv[1:]
    n = 1
    if "--repeat" in args:
        i = args.index("--repeat")
        n = int(args[i + 1])
        del args[i:i + 2]
    for v in args or ["0.23.0"]:
        bench(v, n)
