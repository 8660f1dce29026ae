"""The library behind the CLI: each command is one call here, reachable from tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from compat import db as dbm
from compat.scan import release_facts, write_facts
from compat.sources import open_trees

Progress = Callable[[str], None]


def scan(versions: list[str], srcs: list[str], installed: bool, db_path: Path,
         use_cache: bool = True, progress: Progress | None = None) -> list[dict[str, Any]]:
    """Scan releases into `db_path` (atomically); returns a summary row per release."""
    trees = open_trees(versions, srcs, installed, progress)
    summary = []
    facts_all = []
    for tree in trees:
        facts, cached = release_facts(tree, progress, use_cache)
        facts_all.append(facts)
        caps = [r for r in facts["arch_capability"] if r["platform"] == "cuda"]
        summary.append({
            "version": tree.version, "origin": tree.origin, "archs": len(caps),
            "pp": sum(1 for r in caps if r["supports_pp"]), "cached": cached,
            "seconds": facts["release"].get("seconds", 0.0),
        })
    with dbm.writing(db_path) as engine:
        for facts in facts_all:
            write_facts(engine, facts)
    return summary
