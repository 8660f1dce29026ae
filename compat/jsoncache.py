"""Small JSON documents cached by key under the cache dir, and the hash of this project's code.

The results cache (compat.reuse) and the argument replay's cache (compat.verdict.replay_cache)
both store gzipped JSON, written atomically, and key it on `project_hash`: the code and
curated data every result is computed with. A leaf module, so either can use it; the
argument findings (compat.verdict.arg_memo) key on `project_hash` too, and `cache_lock` lets
one process fill a cache entry that others wait for.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any


def _hash_files(h: Any, root: Path, files: Iterable[Path]) -> None:
    for f in files:
        h.update(f.relative_to(root).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(f.read_bytes()).digest())


@lru_cache(maxsize=1)
def project_hash() -> str:
    """The code and curated data every result is computed with."""
    from compat.resources import data_dir, schema_dir

    h = hashlib.sha256()
    package = Path(__file__).resolve().parent
    _hash_files(h, package, sorted(package.rglob("*.py")))
    for d in (data_dir(), schema_dir()):
        _hash_files(h, d, sorted(p for p in d.rglob("*") if p.is_file() and _kept(p, d)))
    return h.hexdigest()


def _kept(path: Path, root: Path) -> bool:
    parts = path.relative_to(root).parts
    return not any(p.startswith(".") or p == "__pycache__" for p in parts)


@contextlib.contextmanager
def cache_lock(name: str) -> Iterator[None]:
    """An exclusive lock named `name` under `$COMPAT_CACHE/locks`, held across processes while
    the block runs (work that fills a cache entry, done once while others wait for it). Where
    no lock can be taken (no fcntl, a read-only cache) the block runs unlocked: the caches'
    atomic writes keep the result right, only the work may be done twice."""
    from compat.sources.pypi import cache_dir

    try:
        import fcntl
    except ImportError:  # not POSIX
        yield
        return
    fh = None
    try:
        folder = cache_dir() / "locks"
        folder.mkdir(parents=True, exist_ok=True)
        fh = open(folder / f"{name}.lock", "a")  # noqa: SIM115 (held until the block ends)
        fcntl.flock(fh, fcntl.LOCK_EX)
    except OSError:
        if fh is not None:
            fh.close()
        fh = None
    try:
        yield
    finally:
        if fh is not None:
            fh.close()  # releases the lock


class JsonCache:
    """JSON documents by key under `root`; `enabled=False` reads nothing and writes nothing."""

    def __init__(self, root: Path, enabled: bool = True) -> None:
        self.root = root
        self.enabled = enabled

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json.gz"

    def _read(self, key: str) -> Any:
        if not self.enabled:
            return None
        try:
            return json.loads(gzip.decompress(self._path(key).read_bytes()))
        except (OSError, ValueError, EOFError):
            return None  # absent, or unreadable: computed again (and rewritten)

    def _write(self, key: str, doc: Any) -> None:
        self._write_text(key, json.dumps(doc))

    def _write_text(self, key: str, text: str) -> None:
        """`_write` of a document already in JSON text."""
        if not self.enabled:
            return
        path = self._path(key)
        data = gzip.compress(text.encode(), compresslevel=1)
        tmp = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".entry-", dir=path.parent)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except OSError:
            pass  # a cache that cannot be written costs the next build time, nothing else
        finally:
            if tmp is not None and os.path.exists(tmp):
                os.unlink(tmp)

    def read(self, key: str) -> Any:
        """The JSON document stored under `key`, or None (absent, unreadable, or disabled)."""
        return self._read(key)

    def write(self, key: str, doc: Any) -> None:
        """Store `doc` under `key` (atomically; a cache that cannot be written is skipped)."""
        self._write(key, doc)
