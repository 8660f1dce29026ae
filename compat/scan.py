"""`compat scan`: facts of each vLLM release, computed once per source hash and cached.

A release's facts depend only on its source and on this analyzer, so they are
cached under (tree fingerprint, analyzer hash): a re-scan of a cached release only
loads JSON and writes rows. Changing any analyzer module or curated rule file
changes the analyzer hash and invalidates the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path
from typing import Any

from compat.resources import data_dir
from compat.sources.pypi import cache_dir
from compat.sources.tree import VllmTree

VERDICT_PLATFORMS = ("cuda", "rocm")
Progress = Callable[[str], None]


@lru_cache(maxsize=1)
def analyzer_hash() -> str:
    """Hash of the code and curated data that turn source into facts (the scan reads only the
    gate rules of data/: a change to any other data file leaves cached facts valid)."""
    h = hashlib.sha256()
    pkg = Path(__file__).resolve().parent
    files = sorted((pkg / "vllm").glob("*.py")) + [pkg / "scan.py"]
    files += [pkg / "sources" / "tree.py", pkg / "sources" / "pack.py"]
    files += [data_dir() / "gates.yaml"]
    for f in files:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def compute_facts(tree: VllmTree, progress: Progress | None = None) -> dict[str, Any]:
    """Every fact table for one release, as plain rows."""
    from compat.vllm import facts as vfacts
    from compat.vllm.raises import no_gc

    # Hundreds of parsed modules are millions of acyclic objects: the cycle collector
    # re-traversing them would triple the scan time (see raises.no_gc).
    with no_gc():
        return vfacts.compute(tree, VERDICT_PLATFORMS, progress)


def facts_path(tree: VllmTree) -> Path:
    """Where the facts of `tree` by this analyzer are cached."""
    return cache_dir() / "facts" / f"{tree.fingerprint()}-{analyzer_hash()}.json"


#: In a judging worker: asks the build's process to compute and cache a release's facts, and
#: returns once it has (compat.workers). A daemonic worker cannot fork share workers of its own,
#: and the parent's are kept (compat.vllm.facts.share_workers). None elsewhere.
remote: Callable[[str], None] | None = None


def scan_ahead(progress: Progress | None = None) -> Callable[[VllmTree], None]:
    """A `ready` for trees_from_index: each arriving tree's facts computed and cached while
    the other releases download (the build then reads them from the cache). A tree that cannot
    be analysed is left for the build to report."""
    from compat.errors import UserError

    def scan(tree: VllmTree) -> None:
        if not facts_path(tree).is_file():
            try:
                release_facts(tree, progress)
            except UserError:
                pass  # _write_release_facts meets it again and says why

    return scan


def release_facts(
    tree: VllmTree, progress: Progress | None = None, use_cache: bool = True
) -> tuple[dict[str, Any], bool]:
    """(facts, cached?) for a tree; computes and caches on a miss."""
    path = facts_path(tree)
    if use_cache and path.is_file():
        try:
            facts = json.loads(path.read_text())
            facts["release"]["version"] = tree.version
            return facts, True
        except (OSError, ValueError, KeyError):
            pass
    t0 = time.perf_counter()
    facts = compute_facts(tree, progress)
    facts["release"]["analyzer"] = analyzer_hash()
    tree.drop_parsed()
    facts["release"]["seconds"] = round(time.perf_counter() - t0, 3)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".facts-", dir=path.parent)
    with os.fdopen(fd, "w") as fh:
        json.dump(facts, fh)
    os.replace(tmp, path)
    return facts, False


def rows_of(items: list[Any]) -> list[dict[str, Any]]:
    return [asdict(i) if not isinstance(i, dict) else i for i in items]
