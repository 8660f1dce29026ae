"""Benchmark: `compat build` as a user runs it, each run a whole process (wall, CPU, peak RSS).

Usage: python benchmarks/bench_build.py RECIPES_DIR [VERSION ...] [--only RUN,...] [--code DIR]
                                        [--edit RECIPE] [--prime]

Runs, each `python -m compat.cli build` in a child process:

  warm pinned, judged   each recipe at its pin, facts cached, no results yet: every recipe judged
                        (vLLM's argument handling of each argv from `arguments`, as kept by an
                        earlier build of this code: compat.verdict.arg_memo)
  arguments cold        warm pinned, judged, with no argument findings kept: every argv replayed
  warm pinned           the same build again: every recipe's results reused (compat.reuse)
  incremental           then a copy of the checkout with one recipe edited (`--edit`, default
                        models/zai-org/GLM-5.2.yaml: one more base arg)
  two-release, judged   --vllm 0.23.0 --vllm 0.33.0, facts cached, every recipe judged
  two-release           the same again, results reused
  explicit cold/warm    --vllm VERSION ... (default 0.23.0 0.24.0 0.27.1 0.30.0 0.33.0): cold =
                        sdists downloaded beforehand, facts computed; warm = the same again
  cold pinned           an empty cache: sdists download from the package index, facts computed

The warm runs share a scratch cache whose sdists, trees, facts, argument replay findings
(`replay`, compat.verdict.replay_cache) and argument findings (`arguments`, compat.verdict.
arg_memo) are the user cache's (`COMPAT_CACHE` or the user cache dir; like facts, functions of a
release's source and the code) and whose results start empty; `--prime` first runs a pinned
build there (reusing nothing) so every release it visits has facts and argument findings.
`--only` picks runs by name (`--only "warm pinned,incremental"`); `--code DIR` runs another
checkout's compat (the main branch, for a before/after). CPU is user + system time of the child and of the scan
workers it forks; peak RSS is the child's maximum resident set size.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EXPLICIT = ["0.23.0", "0.24.0", "0.27.1", "0.30.0", "0.33.0"]
TWO = ["0.23.0", "0.33.0"]
SHARED = ("sdists", "index", "trees", "facts", "replay", "arguments", "wheels", "hf-trees")
RUNS = (
    "warm pinned, judged",
    "arguments cold",
    "warm pinned",
    "incremental",
    "two-release, judged",
    "two-release",
    "explicit cold",
    "explicit warm",
    "cold pinned",
)


def run(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MiB) of one child process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    assert proc.stderr is not None
    err = proc.stderr.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{err.decode(errors='replace')[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def scratch_cache(root: Path, user: Path) -> Path:
    """A cache sharing the user cache's sources and facts, with its own (empty) results."""
    cache = root / "cache"
    cache.mkdir()
    for name in SHARED:
        (user / name).mkdir(parents=True, exist_ok=True)
        os.symlink(user / name, cache / name)
    return cache


def edited_copy(recipes: Path, target: Path, recipe: str) -> Path:
    """The checkout with one more base arg in `recipe` (a change its verdicts see)."""
    shutil.copytree(recipes, target)
    path = target / recipe
    text = path.read_text(encoding="utf-8")
    if "  base_args:\n" in text:
        text = text.replace(
            "  base_args:\n", '  base_args:\n    - "--max-num-seqs"\n    - "64"\n', 1
        )
    else:
        text += "\n# edited by bench_build.py\n"
    path.write_text(text, encoding="utf-8")
    return target


class Bench:
    """Runs builds in child processes against one scratch cache, and keeps their numbers."""

    def __init__(self, tmp: Path, user: Path, code: Path | None) -> None:
        self.tmp = tmp
        self.user = user
        self.env = dict(os.environ, COMPAT_CACHE=str(scratch_cache(tmp, user)))
        self.env.pop("COMPAT_REUSE", None)
        # `python -m` puts its working directory first on sys.path (before PYTHONPATH and an
        # installed compat): each build runs in the checkout whose code it measures.
        self.code = (code or Path(__file__).resolve().parents[1]).resolve()
        self.env["PYTHONPATH"] = str(self.code)
        self.results: list[tuple[str, float, float, float]] = []

    def build(self, name: str, recipes: Path, versions: list[str], **env: str) -> None:
        cmd = [sys.executable, "-m", "compat.cli", "build", "--recipes", str(recipes)]
        cmd += ["--db", str(self.tmp / f"{len(self.results)}.db")]
        for v in versions:
            cmd += ["--vllm", v]
        wall, cpu, rss = run(cmd, {**self.env, **env}, self.code)
        self.results.append((name, wall, cpu, rss))
        print(f"{name:22} {wall:7.1f} s wall {cpu:7.1f} s CPU {rss:6.0f} MiB", flush=True)

    def fresh_cache(self, name: str, shared: tuple[str, ...] = ()) -> str:
        """An empty cache dir (sharing only `shared` of the user cache)."""
        cache = self.tmp / name
        cache.mkdir()
        for part in shared:
            os.symlink(self.user / part, cache / part)
        return str(cache)


def runs(only: str) -> list[str]:
    """The run names of `--only`: comma-separated, where a run's own name may end in ", judged"."""
    out: list[str] = []
    for part in (p.strip() for p in only.split(",")):
        if part == "judged" and out:
            out[-1] += ", judged"
        elif part:
            out.append(part)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recipes", type=Path)
    ap.add_argument("versions", nargs="*", default=EXPLICIT)
    ap.add_argument("--only", default=",".join(RUNS))
    ap.add_argument("--code", type=Path, help="run compat from this checkout")
    ap.add_argument("--edit", default="models/zai-org/GLM-5.2.yaml")
    ap.add_argument("--prime", action="store_true")
    args = ap.parse_args()
    args.recipes = args.recipes.resolve()
    wanted = runs(args.only)
    if unknown := [r for r in wanted if r not in RUNS]:
        sys.exit(f"unknown runs {unknown}; choose from {', '.join(RUNS)}")
    from compat.sources.pypi import cache_dir, fetch_sdist

    with tempfile.TemporaryDirectory() as tmp:
        b = Bench(Path(tmp), cache_dir(), args.code)
        if args.prime:  # every release a pinned build visits gets facts; nothing is reused
            b.build("(prime)", args.recipes, [], COMPAT_REUSE="0")
        # The scratch cache starts without results: a first run judges every recipe.
        for name, versions in (("warm pinned", []), ("two-release", TWO)):
            after = {name, "incremental"} if name == "warm pinned" else {name}
            if f"{name}, judged" in wanted or after & set(wanted):
                b.build(f"{name}, judged", args.recipes, versions)
            if name in wanted:
                b.build(name, args.recipes, versions)
        if "arguments cold" in wanted:
            kept = tuple(p for p in SHARED if p != "arguments")
            cache = b.fresh_cache("no-arguments", kept)
            b.build("arguments cold", args.recipes, [], COMPAT_CACHE=cache)
        if "incremental" in wanted:
            b.build("incremental", edited_copy(args.recipes, b.tmp / "edited", args.edit), [])
        if {"explicit cold", "explicit warm"} & set(wanted):
            for v in args.versions:
                fetch_sdist(v)
            cache = b.fresh_cache("explicit", ("sdists", "index"))
            for name in ("explicit cold", "explicit warm"):
                b.build(name, args.recipes, args.versions, COMPAT_CACHE=cache)
        if "cold pinned" in wanted:
            b.build("cold pinned", args.recipes, [], COMPAT_CACHE=b.fresh_cache("empty"))
    print(f"\n{'run':22} {'wall s':>8} {'CPU s':>8} {'peak RSS MiB':>13}")
    for name, wall, cpu, rss in b.results:
        print(f"{name:22} {wall:8.1f} {cpu:8.1f} {rss:13.0f}")


if __name__ == "__main__":
    main()
