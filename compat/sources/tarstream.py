"""The wanted regular files of a .tar.gz sdist, read in one pass into memory.

A cold build unpacks dozens of sdists of 10k members each. tarfile read each one twice (its
member list, then a seek back to the start to extract) and wrote ~3.5k files to disk: about a
second of CPU per release, half of it the kernel creating files. Here the archive is inflated
once, and each 512-byte header is decoded directly: ustar names with their prefix, PAX `path`
and `size` records, and GNU long names, which is what sdists are made of. Anything else (a
sparse member, a base-256 size, a bad checksum, a truncated or non-gzip stream) is handed to
tarfile, which reads the archive again and so keeps its own handling and its own errors.

Member names lose their first component (`vllm-0.34.0/`); a wanted name that would leave the
tree (`..`, absolute) is refused, as tarfile's "data" filter refused it when extracting.
"""

from __future__ import annotations

import posixpath
import tarfile
import zlib
from pathlib import Path
from typing import BinaryIO, Callable

_BLOCK = 512
_REGULAR = (b"0", b"\0", b"7")
_READ = 1 << 20


class _Unsupported(Exception):
    """Something this reader does not decode: tarfile reads the archive instead."""


class UnsafeMember(tarfile.TarError):
    """A wanted member whose name would leave the tree."""


def wanted_files(sdist: Path, wanted: Callable[[str], bool]) -> dict[str, bytes]:
    """{path below the top directory: content} of the regular members `wanted` accepts (a
    later member of the same name wins, as when extracting). Raises tarfile.TarError, EOFError,
    zlib.error or OSError for an archive that cannot be read."""
    try:
        with sdist.open("rb") as f:
            return _read(_Inflated(f), wanted)
    except (_Unsupported, zlib.error):
        return _with_tarfile(sdist, wanted)


def _with_tarfile(sdist: Path, wanted: Callable[[str], bool]) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    with tarfile.open(sdist, "r|gz") as tf:
        for m in tf:
            rel = _wanted_name(m.name, wanted) if m.isfile() else None
            if rel is not None:
                data = tf.extractfile(m)
                out[rel] = data.read() if data is not None else b""
    return out


def _wanted_name(name: str, wanted: Callable[[str], bool]) -> str | None:
    """The member's path below the top directory if wanted (None if not); UnsafeMember if it
    would land outside the tree."""
    parts = name.split("/", 1)
    if len(parts) != 2 or not wanted(parts[1]):
        return None
    rel = posixpath.normpath(parts[1])
    if rel.startswith("/") or rel == ".." or rel.startswith("../"):
        raise UnsafeMember(f"{name!r} would be extracted outside the destination")
    return rel


class _Inflated:
    """The decompressed stream of a gzip file (members concatenated), read in blocks."""

    def __init__(self, f: BinaryIO) -> None:
        self.f = f
        self.inflate = zlib.decompressobj(31)
        self.buf = bytearray()
        self.pos = 0
        self.eof = False

    def _fill(self, n: int) -> None:
        while len(self.buf) - self.pos < n and not self.eof:
            raw = self.f.read(_READ)
            if not raw:
                if not self.inflate.eof:
                    raise _Unsupported("truncated gzip stream")
                self.eof = True
                break
            out = self.inflate.decompress(raw)
            while self.inflate.eof and self.inflate.unused_data:
                rest = self.inflate.unused_data
                self.inflate = zlib.decompressobj(31)
                out += self.inflate.decompress(rest)
            if self.pos > _READ:
                del self.buf[: self.pos]
                self.pos = 0
            self.buf += out

    def read(self, n: int) -> bytes:
        self._fill(n)
        if len(self.buf) - self.pos < n:
            raise _Unsupported("truncated tar stream")
        out = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return out

    def skip(self, n: int) -> None:
        self._fill(n)
        self.pos += n


def _read(src: _Inflated, wanted: Callable[[str], bool]) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    pending: dict[str, str] = {}  # the next member's PAX records or GNU long name
    while True:
        header = src.read(_BLOCK)
        if header == bytes(_BLOCK):
            return out  # the end-of-archive block
        name, size, kind = _header(header)
        padded = -(-size // _BLOCK) * _BLOCK
        if kind in (b"x", b"g", b"L", b"K"):
            _extension(kind, src.read(padded)[:size], pending)
            continue
        name = pending.get("path", name)
        if "size" in pending:
            size = int(pending["size"])
            padded = -(-size // _BLOCK) * _BLOCK
        pending = {}
        if kind == b"S":
            raise _Unsupported("a sparse member")
        rel = _wanted_name(name, wanted) if kind in _REGULAR else None
        if rel is None:
            src.skip(padded)
        else:
            out[rel] = src.read(padded)[:size]


def _header(block: bytes) -> tuple[str, int, bytes]:
    """(name, size, type) of a ustar/GNU header block; _Unsupported when it does not check."""
    if _number(block[148:156]) != sum(block[:148]) + 256 + sum(block[156:]):
        raise _Unsupported("header checksum")
    name = _text(block[0:100])
    if block[257:263] == b"ustar\0":  # POSIX ustar: a prefix holds the leading directories
        prefix = _text(block[345:500])
        name = f"{prefix}/{name}" if prefix else name
    return name, _number(block[124:136]), block[156:157]


def _extension(kind: bytes, data: bytes, pending: dict[str, str]) -> None:
    """Records what an extension header says of the next member (or refuses a global one
    that renames or resizes)."""
    if kind == b"L":
        pending["path"] = _text(data)
    elif kind in (b"x", b"g"):
        records = _pax(data)
        if kind == b"g" and ("path" in records or "size" in records):
            raise _Unsupported("a global PAX header with path or size")
        if kind == b"x":
            pending.update({k: v for k, v in records.items() if k in ("path", "size")})


def _pax(data: bytes) -> dict[str, str]:
    """PAX records: `<length> <key>=<value>\\n`, the length counting the whole record."""
    records: dict[str, str] = {}
    pos = 0
    try:
        while pos < len(data) and data[pos] != 0:
            space = data.index(b" ", pos)
            length = int(data[pos:space])
            key, _, value = data[space + 1 : pos + length - 1].partition(b"=")
            records[key.decode("utf-8")] = value.decode("utf-8", "surrogateescape")
            pos += length
    except (ValueError, UnicodeDecodeError):
        raise _Unsupported("a PAX header") from None
    if records.get("hdrcharset") == "BINARY":
        raise _Unsupported("binary PAX names")
    return records


def _text(field: bytes) -> str:
    end = field.find(b"\0")
    return (field if end < 0 else field[:end]).decode("utf-8", "surrogateescape")


def _number(field: bytes) -> int:
    if field[:1] and field[0] & 0x80:
        raise _Unsupported("a base-256 number")
    digits = field.split(b"\0", 1)[0].strip(b" ")
    try:
        return int(digits, 8) if digits else 0
    except ValueError:
        raise _Unsupported("a header number") from None
