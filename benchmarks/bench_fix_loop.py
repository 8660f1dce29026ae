"""The fix loop on a recipes checkout, as a maintainer runs it, with its numbers.

Usage: python benchmarks/bench_fix_loop.py RECIPES_DIR [--vllm V ...]

1. `compat build` (pinned mode unless --vllm is given) into a scratch database;
2. `compat check`: lines printed, blocked ungated rows, causes by fix kind;
3. `compat fix --apply` on a copy of the checkout;
4. `compat build` of the copy, and `compat check` again: what is left, by cause kind.

Every step is a whole `compat` process, timed by wall clock. Nothing is written outside a
temporary directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

COMPAT = os.path.join(os.path.dirname(sys.executable), "compat")


def step(*args: str) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.perf_counter()
    r = subprocess.run([COMPAT, *args], capture_output=True, text=True)
    return r, time.perf_counter() - t0


def numbers(db: Path) -> dict:
    r, _ = step("check", "--db", str(db), "--format", "json")
    report = json.loads(r.stdout)
    text, _ = step("check", "--db", str(db))
    rows = json.loads(step("sql", "SELECT cause_kind, count(*) AS n FROM verdict WHERE judged = 1 AND "
                                  "status = 'blocked' AND gated = 0 GROUP BY cause_kind", "--db", str(db),
                           "--format", "json")[0].stdout)
    return {"blocked": report["blocked"], "lines": len(text.stdout.splitlines()),
            "causes": len(report["causes"]),
            "fixes": dict(Counter(c["fix_kind"] or "none" for c in report["causes"])),
            "by_cause_kind": {r["cause_kind"]: r["n"] for r in rows}}


def main(argv: list[str]) -> None:
    recipes = Path(argv[0])
    versions = [a for i, a in enumerate(argv[1:]) if argv[i] == "--vllm"]
    pins = [x for v in versions for x in ("--vllm", v)]
    with tempfile.TemporaryDirectory() as tmp:
        before, after, copy = Path(tmp, "before.db"), Path(tmp, "after.db"), Path(tmp, "recipes")
        r, t_build = step("build", "--recipes", str(recipes), *pins, "--db", str(before))
        assert r.returncode == 0, r.stderr
        n0 = numbers(before)
        shutil.copytree(recipes, copy)
        r, t_apply = step("fix", "--db", str(before), "--apply", str(copy))
        assert r.returncode == 0, r.stderr
        r, t_rebuild = step("build", "--recipes", str(copy), *pins, "--db", str(after))
        assert r.returncode == 0, r.stderr
        n1 = numbers(after)
    print(f"build {t_build:.1f} s, apply {t_apply:.1f} s, rebuild {t_rebuild:.1f} s (wall, whole processes)")
    print(f"before: {n0['blocked']} blocked ungated rows, {n0['causes']} causes, check prints {n0['lines']} lines; "
          f"fixes {n0['fixes']}; rows by cause kind {n0['by_cause_kind']}")
    share = 100 * n1["blocked"] / n0["blocked"] if n0["blocked"] else 0.0
    print(f"after apply + rebuild: {n1['blocked']} blocked ungated rows ({share:.2f}% of before), "
          f"{n1['causes']} causes, fixes {n1['fixes']}; rows by cause kind {n1['by_cause_kind']}")


if __name__ == "__main__":
    main(sys.argv[1:])
