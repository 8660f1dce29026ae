"""A release's extracted files kept as one file: a JSON index, then the contents end to end.

An sdist's wanted members (about 3.5k) used to be written as a directory tree, and creating
those files was half the CPU of unpacking one. A pack is written once, atomically (a reader
sees the whole pack or none), and read through a shared read-only mapping, which the scan's
forked workers inherit.

Layout: the line `MAGIC`, one line of JSON {"marker": ..., "files": {path: [offset, size]}}
(offsets from the end of that line), then the data.
"""

from __future__ import annotations

import json
import mmap
import os
import tempfile
from pathlib import Path

MAGIC = b"vllm-compat pack 1\n"


class PackError(Exception):
    """Not a complete pack (written by another version, damaged, or cut short)."""


def write_pack(dest: Path, files: dict[str, bytes], marker: str) -> None:
    """Writes `files` (path -> content) to `dest` atomically."""
    index: dict[str, list[int]] = {}
    offset = 0
    for rel in sorted(files):
        index[rel] = [offset, len(files[rel])]
        offset += len(files[rel])
    head = json.dumps({"marker": marker, "files": index}, separators=(",", ":")).encode()
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}-", dir=dest.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(MAGIC + head + b"\n")
            for rel in index:
                f.write(files[rel])
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class Pack:
    """A pack opened for reading. `names` are its file paths, sorted."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with path.open("rb") as f:
            if f.read(len(MAGIC)) != MAGIC:
                raise PackError(f"{path} is not a pack")
            try:
                head = json.loads(f.readline())
                self.marker: str = head["marker"]
                self._index: dict[str, list[int]] = head["files"]
            except (ValueError, KeyError, TypeError):
                raise PackError(f"{path} has a damaged index") from None
            self._start = f.tell()
            size = os.fstat(f.fileno()).st_size
            if size != self._start + sum(n for _, n in self._index.values()):
                raise PackError(f"{path} is cut short")
            self._data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self.names = sorted(self._index)  # written sorted: a linear pass
        self._dirs: set[str] | None = None  # on first use (a warm build opens dozens of packs)

    def __reduce__(self) -> tuple:
        """Sent between processes (the download child's trees) by path: a mapping is not."""
        return (Pack, (self.path,))

    def read(self, rel: str) -> bytes | None:
        at = self._index.get(rel)
        if at is None:
            return None
        start = self._start + at[0]
        return bytes(self._data[start : start + at[1]])

    def is_file(self, rel: str) -> bool:
        return rel in self._index

    def is_dir(self, rel: str) -> bool:
        if self._dirs is None:
            self._dirs = {
                rel.rsplit("/", i)[0] for rel in self.names for i in range(1, rel.count("/") + 1)
            }
        return rel.rstrip("/") in self._dirs


def walk_order(paths: list[str]) -> list[str]:
    """`paths` in the order a sorted top-down os.walk yields them: in each directory its files
    (sorted), then each subdirectory's (sorted)."""
    return sorted(
        paths, key=lambda p: [(1, c) for c in p.split("/")[:-1]] + [(0, p.rsplit("/", 1)[-1])]
    )
