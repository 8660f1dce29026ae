"""vLLM's argument handling of an argv, kept across builds.

What `check_arguments` finds for one argv at one release is a function of the release's
source (its option facts, argv rewrite and serve checks), this project's code, the Python
whose argparse runs the replay, the recipes' shell placeholders and the argv itself: nothing a
recipe, a model or another argv changes. A build judges about 70,000 (release, argv) pairs, and
argparse over them is the largest part of judging. Kept in `$COMPAT_CACHE/arguments/
findings.sqlite3`, one row per (document, argv) where a document is a (release sdist, project
hash, Python, placeholders), they are replayed again only when one of those changes: a strategy
edit or new model facts, which judge many recipes again, reuse them.

An argv is looked up by its own key (nothing is loaded in bulk, so memory does not grow with
the cache), and rows written by another version of the code are dropped when a build saves
(the cache holds one version's findings, not every version's). Only releases from the package
index are kept (a local tree has no content hash), and only inside a build's `session`
(`compat lint --db` reads release facts that an older version may have written).

Forked workers (compat.workers) hand what they found to the parent (`take_new` / `add_new`),
which writes it in one transaction when the build is done. A cache that cannot be read or
written costs time, never a verdict: it is then skipped.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import sys
from collections.abc import Callable, Iterator
from typing import Any

#: Bump when the shape of a row changes.
VERSION = "2"

_active = False
_new: dict[tuple[str, str], list[Any]] = {}  # (document, argv key) -> rows, found here
_keys: dict[tuple[int, int], tuple[Any, Any, str | None]] = {}  # (id(k), id(shell)) -> key
_db: dict[int, sqlite3.Connection | None] = {}  # pid -> this process's connection


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
        _new.clear()
        _keys.clear()
        _close()


def findings(k: Any, argv: list[str], shell: Any, check: Callable[[], list[Any]]) -> list[Any]:
    """`check()` (the ArgFindings of `argv` at `k`'s release), from the cache when kept."""
    doc = _doc_key(k, shell) if _active else None
    if doc is None:
        return check()
    key = (doc, hashlib.blake2b(json.dumps(argv).encode(), digest_size=16).hexdigest())
    hit = _new.get(key)
    if hit is None:
        hit = _lookup(key)
    if hit is not None:
        return [_finding(row) for row in hit]
    found = check()
    _new[key] = [_row(f) for f in found]
    return found


def take_new() -> dict[tuple[str, str], list[Any]]:
    """What this process found (a worker sends it to the parent), forgotten here."""
    out = dict(_new)
    _new.clear()
    return out


def add_new(found: dict[tuple[str, str], list[Any]]) -> None:
    """A worker's findings, written with this process's own."""
    _new.update(found)


def save() -> None:
    """What this process found, in one transaction; rows of other code versions dropped."""
    from compat.jsoncache import project_hash

    con = _connection() if _new else None
    if con is None:
        _new.clear()
        return
    project = project_hash()
    rows = [(d, a, project, json.dumps(r)) for (d, a), r in _new.items()]
    _new.clear()
    try:
        con.execute("BEGIN IMMEDIATE")
        con.execute("DELETE FROM finding WHERE project != ?", (project,))
        con.executemany("INSERT OR REPLACE INTO finding VALUES (?, ?, ?, ?)", rows)
        con.execute("COMMIT")
    except sqlite3.Error:  # written next time
        with contextlib.suppress(sqlite3.Error):
            con.execute("ROLLBACK")


def release_id(k: Any) -> str | None:
    """The content hash of `k`'s release sdist; None for a local tree (not kept)."""
    return getattr(k.tree, "sha256", None) if k.tree is not None else None


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
    rows = json.dumps(shell.rows() if shell is not None else [], sort_keys=True)
    text = f"arguments\0{VERSION}\0{sha}\0{project_hash()}\0{sys.version}\0{rows}"
    return hashlib.sha256(text.encode()).hexdigest()


def _lookup(key: tuple[str, str]) -> list[Any] | None:
    con = _connection()
    if con is None:
        return None
    try:
        got = con.execute("SELECT found FROM finding WHERE doc = ? AND argv = ?", key).fetchone()
        return json.loads(got[0]) if got is not None else None
    except (sqlite3.Error, ValueError):
        _db[os.getpid()] = None  # unreadable: replayed for the rest of this build
        return None


def _connection() -> sqlite3.Connection | None:
    """This process's connection (a forked worker opens its own), None when unusable."""
    pid = os.getpid()
    if pid not in _db:
        _db[pid] = _open()
    return _db[pid]


def _open() -> sqlite3.Connection | None:
    from compat.sources.pypi import cache_dir

    path = cache_dir() / "arguments" / "findings.sqlite3"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        con = sqlite3.connect(path, timeout=30, isolation_level=None)
        con.execute("PRAGMA journal_mode=WAL")  # a build reads while another one writes
        con.execute(
            "CREATE TABLE IF NOT EXISTS finding (doc TEXT, argv TEXT, project TEXT, found TEXT, "
            "PRIMARY KEY (doc, argv)) WITHOUT ROWID"
        )
        return con
    except (sqlite3.Error, OSError):
        return None


def _close() -> None:
    con = _db.pop(os.getpid(), None)
    if con is not None:
        con.close()
    _db.clear()  # a fork's inherited entries are not this process's to close


def _row(f: Any) -> list[Any]:
    return [f.stage, f.status, f.step, f.message, list(f.evidence), list(f.key), f.exception]


def _finding(row: list[Any]) -> Any:
    from compat.verdict.arguments import ArgFinding

    stage, status, step, message, evidence, key, exception = row
    return ArgFinding(stage, status, step, message, list(evidence), tuple(key), exception)
