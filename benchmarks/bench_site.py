"""Benchmark: `compat site` as a user runs it, a whole process, and the bytes it writes.

Usage: python benchmarks/bench_site.py DB [RUNS]
       (DB from e.g. `compat build --recipes RECIPES --vllm 0.23.0 --vllm 0.33.0 --db DB`;
       RUNS whole-process runs, default 3, the median and the fastest reported)

Sizes are those the budget bounds (compat.emit.site.BUDGET_*): every .html and .json file
together and the largest page, with the index pages, and compat.db.gz, next to everything
written.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    db, runs = Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 3
    from compat.emit.site import BUDGET_PAGE, BUDGET_PAGES_AND_JSON

    times = []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "site"
        for _ in range(runs):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "compat.cli", "site", "--db", str(db), "-o",
                            str(out)], check=True, capture_output=True)
            times.append(time.perf_counter() - t0)
        files = {p.relative_to(out).as_posix(): p.stat().st_size
                 for p in out.rglob("*") if p.is_file()}
    pages_and_json = sum(n for p, n in files.items() if p.endswith((".html", ".json")))
    indexes = {p: n for p, n in files.items() if "/" not in p and p.startswith("index")}
    recipe_pages = sum(n for p, n in files.items() if p.startswith("recipes/"))
    largest = max((n, p) for p, n in files.items() if p.endswith(".html"))
    print(f"compat site on {db.name} ({db.stat().st_size / 1e6:.1f} MB), {runs} runs: "
          f"median {statistics.median(times):.2f} s, fastest {min(times):.2f} s (whole process)")
    n_recipes = sum(p.startswith("recipes/") for p in files)
    print(f"  HTML + JSON {pages_and_json / 1e6:.2f} MB (budget {BUDGET_PAGES_AND_JSON / 1e6:.1f}): "
          f"recipe pages {recipe_pages / 1e6:.2f} MB in {n_recipes} files, verdicts.json "
          f"{files.get('verdicts.json', 0) / 1e6:.2f} MB, {len(indexes)} index pages "
          f"{sum(indexes.values()) / 1e6:.2f} MB (index.html {files.get('index.html', 0) / 1e3:.0f}"
          f" kB)")
    print(f"  largest page {largest[1]} {largest[0] / 1e3:.0f} kB "
          f"(budget {BUDGET_PAGE / 1e3:.0f} kB each)")
    print(f"  compat.db.gz {files.get('compat.db.gz', 0) / 1e6:.2f} MB; "
          f"{sum(files.values()) / 1e6:.2f} MB written in all")


if __name__ == "__main__":
    main()
