"""vLLM's argument handling of an argv, kept across builds.

What `check_arguments` finds for one argv at one release is a function of the release's
source (its option facts, argv rewrite and serve checks), this project's code, the Python
whose argparse runs the replay, the recipes' shell placeholders and the argv itself: nothing a
recipe, a model or another argv changes. A build judges about 70,000 (release, argv) pairs, and
argparse over them is the largest part of judging. Kept under `$COMPAT_CACHE/arguments`, one
gzipped JSON document per (release sdist, project hash, Python, placeholders), they are
replayed again only when one of those changes: a strategy edit or new model facts, which judge
many recipes again, reuse them. Only releases from the package index are kept (a local tree
has no content hash), and only inside a build's `session` (`compat lint --db` reads release
facts that an older version may have written).

Forked workers (compat.workers) hand what they found to the parent (`take_new` / `add_new`),
which writes each document once, merged with what is on disk, when the build is done.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

#: Bump when the shape of an entry changes.
VERSION = "1"

_active = False
_docs: dict[str, dict[str, list[Any]]] = {}  # document key -> argv key -> findings
_new: dict[str, dict[str, list[Any]]] = {}  # what this process added, per document
_shells: dict[int, tuple[Any, str]] = {}  # id(shell) -> (shell, its fingerprint)


@contextlib.contextmanager
def session() -> Iterator[None]:
    """Argument findings read from and kept in the cache while the block runs; what was found
    is written when it ends without an error."""
    global _active
    _active = True
    try:
        yield
        save()
    finally:
        _active = False
        _docs.clear()
        _new.clear()
        _shells.clear()
        _keys.clear()


def findings(k: Any, argv: list[str], shell: Any, check: Callable[[], list[Any]]) -> list[Any]:
    """`check()` (the ArgFindings of `argv` at `k`'s release), from the cache when kept."""
    doc_key = _doc_key(k, shell) if _active else None
    if doc_key is None:
        return check()
    doc = _docs.get(doc_key)
    if doc is None:
        doc = _docs[doc_key] = _read(doc_key)
    argv_key = hashlib.blake2b(json.dumps(argv).encode(), digest_size=16).hexdigest()
    hit = doc.get(argv_key)
    if hit is not None:
        return [_finding(row) for row in hit]
    found = check()
    doc[argv_key] = _new.setdefault(doc_key, {})[argv_key] = [_row(f) for f in found]
    return found


def take_new() -> dict[str, dict[str, list[Any]]]:
    """What this process found (a worker sends it to the parent), forgotten here."""
    out = dict(_new)
    _new.clear()
    return out


def add_new(found: dict[str, dict[str, list[Any]]]) -> None:
    """A worker's findings, written with this process's own."""
    for doc_key, entries in found.items():
        _new.setdefault(doc_key, {}).update(entries)


def save() -> None:
    """Each document this process added to, merged with what is on disk (a concurrent build's
    entries are kept unless both wrote at once: then one is found again next time)."""
    store = _store()
    for doc_key, entries in _new.items():
        on_disk = store.read(doc_key)
        doc = on_disk.get("entries") if isinstance(on_disk, dict) else None
        merged = {**(doc if isinstance(doc, dict) else {}), **entries}
        store.write(doc_key, {"version": VERSION, "entries": merged})
    _new.clear()


def release_id(k: Any) -> str | None:
    """The content hash of `k`'s release sdist; None for a local tree (not kept)."""
    return getattr(k.tree, "sha256", None) if k.tree is not None else None


_keys: dict[tuple[int, int], tuple[Any, Any, str | None]] = {}  # (id(k), id(shell)) -> key


def _doc_key(k: Any, shell: Any) -> str | None:
    """The document of `k`'s release and `shell` (one per pair, computed once a session)."""
    kept = _keys.get((id(k), id(shell)))
    if kept is None or kept[0] is not k or kept[1] is not shell:
        kept = _keys[(id(k), id(shell))] = (k, shell, _key_of(k, shell))
    return kept[2]


def _key_of(k: Any, shell: Any) -> str | None:
    from compat.jsoncache import project_hash

    sha = release_id(k)
    if not sha:
        return None
    kept = _shells.get(id(shell))
    if kept is None or kept[0] is not shell:
        rows = shell.rows() if shell is not None else []
        kept = _shells[id(shell)] = (shell, json.dumps(rows, sort_keys=True))
    text = f"arguments\0{VERSION}\0{sha}\0{project_hash()}\0{sys.version}\0{kept[1]}"
    return hashlib.sha256(text.encode()).hexdigest()


def _read(doc_key: str) -> dict[str, list[Any]]:
    doc = _store().read(doc_key)
    if isinstance(doc, dict) and doc.get("version") == VERSION:
        entries = doc.get("entries")
        if isinstance(entries, dict):
            return entries
    return {}


def _store() -> Any:
    from compat.jsoncache import JsonCache
    from compat.sources.pypi import cache_dir

    return JsonCache(cache_dir() / "arguments")


def _row(f: Any) -> list[Any]:
    return [f.stage, f.status, f.step, f.message, list(f.evidence), list(f.key), f.exception]


def _finding(row: list[Any]) -> Any:
    from compat.verdict.arguments import ArgFinding

    stage, status, step, message, evidence, key, exception = row
    return ArgFinding(stage, status, step, message, list(evidence), tuple(key), exception)
