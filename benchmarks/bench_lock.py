"""Benchmark: `compat models lock` on every model id of a recipes checkout against a local Hub,
and the unknown share of verdict rows offline vs. with that Hub.

Usage: python benchmarks/bench_lock.py RECIPES_DIR [VERSION ...]   (default: 0.23.0 0.33.0)

The local Hub is tests/fake_hub.py on 127.0.0.1 (the same module the tests use), reached by
the real huggingface_hub client through HF_ENDPOINT. It serves one generic config.json per
id: it measures the pipeline (every id fetched, locked, read back), not model truth, and
its configs are never facts. Times are whole-process wall times of the CLI.

Prints: lock wall time (cold HF cache, then warm), and for an offline build, a build with
--allow-hub against the local Hub, and a build from the lock with the Hub gone, the share
of `unknown` rows by reason; then how many verdict rows of the lock build differ from the
--allow-hub build (0: the lock reproduces it).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.fake_hub import FakeHub  # noqa: E402

GENERIC = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_attention_heads": 32,
           "num_key_value_heads": 8, "num_hidden_layers": 32}
# Reason families of unknown rows (first match wins), for the share table.
REASONS = (
    ("model config unresolved", "%model config of % unresolved%"),
    ("draft checkpoint unresolved", "%draft checkpoint%unresolved%"),
    ("architecture not in the registry", "%is not in vLLM%registry%"),
    ("served by vLLM-Omni", "%served by vLLM-Omni%"),
    ("parser from a plugin", "%parser-plugin may register it%"),
    ("expert count unknown", "%expert count of%unknown%"),
)


def run(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "compat.cli", *cmd], env=env, check=True, capture_output=True)
    return time.perf_counter() - t0


def shares(db: Path) -> list[tuple[str, int, float]]:
    case = " ".join(f"WHEN reason LIKE '{pat}' THEN '{name}'" for name, pat in REASONS)
    with sqlite3.connect(db) as con:
        total = con.execute("SELECT count(*) FROM v_verdict").fetchone()[0]
        rows = con.execute(f"SELECT CASE {case} ELSE 'other' END AS why, count(*) FROM v_verdict "
                           "WHERE status='unknown' GROUP BY why ORDER BY 2 DESC").fetchall()
    unknown = sum(n for _w, n in rows)
    return [("all unknown", unknown, 100 * unknown / total)] + [(w, n, 100 * n / total) for w, n in rows]


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    recipes, versions = sys.argv[1], sys.argv[2:] or ["0.23.0", "0.33.0"]
    from compat.api import recipe_model_ids
    from compat.recipes import enumerate_repo, load_repo

    ids = recipe_model_ids(enumerate_repo(load_repo(Path(recipes))).combinations)
    vflags = [x for v in versions for x in ("--vllm", v)]
    with tempfile.TemporaryDirectory() as tmp, FakeHub() as hub:
        for mid in ids:
            hub.add(mid, GENERIC)
        base = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
        env = dict(base, HF_ENDPOINT=hub.endpoint, HF_HUB_CACHE=f"{tmp}/hf", HF_HOME=f"{tmp}/home")
        lock = Path(tmp) / "model-facts.lock.json"
        run(["build", "--recipes", recipes, *vflags, "--db", f"{tmp}/warmup.db"], base)  # sdists, wheel cached
        cold = run(["models", "lock", "--recipes", recipes, *vflags, "-o", str(lock)], env)
        requests = len(hub.requests)
        warm = run(["models", "lock", "--recipes", recipes, *vflags, "-o", str(lock)], env)
        locked = json.loads(lock.read_text())["models"]
        print(f"compat models lock: {len(ids)} ids ({sum(e['source'] == 'hub' for e in locked.values())} "
              f"from the local Hub) in {cold:.1f} s cold HF cache ({requests} requests), {warm:.1f} s warm")
        builds = {
            "offline": (["--db", f"{tmp}/offline.db"], base),
            "local Hub (--allow-hub)": (["--allow-hub", "--db", f"{tmp}/hub.db"], env),
            "from the lock, Hub gone": (["--facts-lock", str(lock), "--db", f"{tmp}/lock.db"],
                                        dict(base, HF_HUB_OFFLINE="1", HF_ENDPOINT="http://127.0.0.1:9")),
        }
        for name, (extra, e) in builds.items():
            took = run(["build", "--recipes", recipes, *vflags, *extra], e)
            print(f"\n{name}: build {took:.1f} s; unknown rows by reason (share of all verdict rows)")
            for why, n, pct in shares(Path(extra[-1])):
                print(f"  {pct:5.1f}%  {n:6d}  {why}")
        print(f"\nverdict rows from the lock differing from the --allow-hub build: "
              f"{differing(Path(tmp) / 'hub.db', Path(tmp) / 'lock.db')}")


def differing(a: Path, b: Path) -> int:
    """Verdict rows of `a` with no identical row (key, status, message, reason, chain) in `b`."""
    cols = ("vllm_version, platform, hardware, recipe, variant, strategy, feature, mode, status, message, "
            "reason, chain")
    with sqlite3.connect(a) as con:
        con.execute("ATTACH ? AS other", (str(b),))
        return con.execute(f"SELECT count(*) FROM (SELECT {cols} FROM main.verdict EXCEPT "
                           f"SELECT {cols} FROM other.verdict)").fetchone()[0]


if __name__ == "__main__":
    main()
