"""The pre-commit hook (.pre-commit-hooks.yaml runs `python -m compat.hook FILES...`).

pre-commit passes the staged files that match the hook's pattern, from the repository root.
The hook finds their recipes checkout (the folder holding taxonomy.yaml and models/), builds
in pinned mode with the warm sdist/fact cache (`$COMPAT_CACHE`, else the user cache dir,
shared with every other `compat` run on the machine) and the checkout's facts lock when it
has one, and prints `compat check`'s lines for the staged recipes only. Exit 1 when one of
them emits a blocked, ungated command.

`compat build` judges everything again on each run, so when only recipe files are staged the
hook builds a view of the checkout holding just those recipes (seconds, not minutes); a
staged strategy, taxonomy or synthesizer file affects every recipe, so then the whole
checkout is built. See VIEW_OF_STAGED for why the view stays with incremental builds.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from compat.errors import UserError

#: Build a view holding only the staged recipes. `compat build` is incremental (it reuses every
#: recipe whose inputs are unchanged), but the first whole-checkout build on a machine judges
#: everything (about 40 s on 2 cores); a view costs seconds from the first commit. False makes
#: the hook build the whole checkout into its persistent database and lets reuse narrow it.
VIEW_OF_STAGED = True
LOCK_NAME = "model-facts.lock.json"


def recipes_root(path: Path) -> Path | None:
    """The recipes checkout a file belongs to: the nearest folder with taxonomy.yaml and models/."""
    for parent in [path.parent, *path.parent.parents] if path.is_file() else [path, *path.parents]:
        if (parent / "taxonomy.yaml").is_file() and (parent / "models").is_dir():
            return parent
    return None


def _view(root: Path, recipes: list[str], into: Path) -> Path:
    """A checkout of `root` whose models/ holds only `recipes` (the rest linked, not copied)."""
    for entry in root.iterdir():
        if entry.name in ("models", ".git"):
            continue
        (into / entry.name).symlink_to(entry.resolve(), target_is_directory=entry.is_dir())
    for rel in recipes:
        target = into / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, target)
    return into


def _db_for(root: Path) -> Path:
    from compat.sources.pypi import cache_dir

    key = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]
    path = cache_dir() / "pre-commit" / f"{key}.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _restrict(findings: dict[str, Any], recipes: set[str] | None) -> dict[str, Any]:
    """The findings of `recipes` only (all when None), counts made again."""
    if recipes is None:
        return findings
    causes = [c for c in findings["causes"] if c["recipe"] in recipes]
    groups = {k: v for k, v in findings["recipes"].items() if k in recipes}
    return findings | {
        "causes": causes,
        "recipes": groups,
        "blocked": sum(len(v) for v in groups.values()),
        "reviews": [r for r in findings.get("reviews", []) if r["recipe"] in recipes],
    }


def check_root(root: Path, staged: list[str], opts: argparse.Namespace) -> int:
    """Build and check one recipes checkout for its staged files; the exit status."""
    from compat import api

    recipes = sorted(f for f in staged if f.startswith("models/") and (root / f).is_file())
    whole = not VIEW_OF_STAGED or any(not f.startswith("models/") for f in staged)
    lock = opts.facts_lock or (root / LOCK_NAME if (root / LOCK_NAME).is_file() else None)
    if not whole and not recipes:
        return 0  # only deleted recipes staged
    with tempfile.TemporaryDirectory(prefix="vllm-compat-hook-") as tmp:
        tree = root if whole else _view(root, recipes, Path(tmp))
        db = _db_for(root)
        api.build(
            tree,
            opts.vllm or [],
            opts.vllm_src or [],
            db,
            opts.hf_config_dir,
            progress=None if not opts.verbose else lambda m: print(m, file=sys.stderr),
            facts_lock=lock,
        )
    findings = _restrict(api.check(db), None if whole else set(recipes))
    sys.stdout.write(api.render_check(findings, api.CheckFormat.TEXT))
    return 1 if findings["blocked"] else 0


def parse(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="vllm-compat pre-commit hook")
    p.add_argument("files", nargs="*")
    p.add_argument("--facts-lock", type=Path, default=None)
    p.add_argument("--hf-config-dir", type=Path, default=None)
    p.add_argument("--vllm", action="append", help="judge at these releases, not the pins")
    p.add_argument("--vllm-src", action="append", help="a local vLLM tree, PATH[=LABEL]")
    p.add_argument("-v", "--verbose", action="store_true")
    return p.parse_args(list(argv))


def run(argv: Sequence[str]) -> int:
    opts = parse(argv)
    by_root: dict[Path, list[str]] = {}
    for name in opts.files:
        path = Path(name)
        root = (
            recipes_root(path.resolve()) if path.exists() else recipes_root(path.resolve().parent)
        )
        if root is None:
            continue
        by_root.setdefault(root, []).append(path.resolve().relative_to(root).as_posix())
    status = 0
    for root, staged in sorted(by_root.items()):
        status = max(status, check_root(root, staged, opts))
    return status


def main() -> None:
    try:
        sys.exit(run(sys.argv[1:]))
    except UserError as exc:
        sys.stderr.write(f"error: {exc.line()}\n")
        sys.exit(2)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
