"""Benchmark: `compat build` on a recipes checkout with several releases, cold and warm, peak memory.

Usage: python benchmarks/bench_build.py RECIPES_DIR [VERSION ...]
       (default versions: 0.23.0 0.24.0 0.27.1 0.30.0 0.33.0; sdists download once into the
       user cache first, so the timing excludes the network)

cold: a fresh cache directory holding only the downloaded sdists (every release is
      extracted and scanned, facts computed); warm: the same command again (facts cached).
Peak memory is the child process's maximum resident set size.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time

DEFAULT = ["0.23.0", "0.24.0", "0.27.1", "0.30.0", "0.33.0"]


def _run(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, capture_output=True)
    dt = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return dt, max(peak, before) / 1024  # MiB (ru_maxrss is KiB on Linux)


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    recipes, versions = sys.argv[1], sys.argv[2:] or DEFAULT
    from compat.sources.pypi import cache_dir, fetch_sdist

    for v in versions:
        fetch_sdist(v)
    user = cache_dir()
    with tempfile.TemporaryDirectory() as tmp:
        os.symlink(user / "sdists", os.path.join(tmp, "sdists"))
        os.symlink(user / "index", os.path.join(tmp, "index"))
        env = dict(os.environ, COMPAT_CACHE=tmp)
        db = os.path.join(tmp, "bench.db")
        cmd = [sys.executable, "-m", "compat.cli", "build", "--recipes", recipes, "--db", db]
        for v in versions:
            cmd += ["--vllm", v]
        cold, peak = _run(cmd, env)
        warm, peak2 = _run(cmd, env)
        size = os.path.getsize(db) / 1e6
    print(f"compat build, {len(versions)} releases ({' '.join(versions)}): cold {cold:.1f} s, "
          f"warm {warm:.1f} s, peak RSS {max(peak, peak2):.0f} MiB, database {size:.0f} MB")


if __name__ == "__main__":
    main()
