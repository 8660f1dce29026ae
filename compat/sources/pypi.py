"""vLLM source distributions from the package index, hash-checked and cached by hash.

The index's JSON simple API (PEP 691) names each sdist with its sha256. We download
to a temporary file, verify the hash, and only then move it into the cache under its
hash, so a corrupted or truncated download never lands. Only the parts the analysis
reads are extracted (`vllm/**/*.py`, `tests/models/registry.py`, a few docs, the chat
templates under `vllm/` and `examples/`).
Works offline once a release is cached: the index answer is cached too.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tarfile
import tempfile
import threading
import zlib
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any

from compat.errors import UserError
from compat.sources.pack import Pack, PackError, write_pack
from compat.sources.tarstream import wanted_files
from compat.sources.tree import VllmTree, read_version
from compat.vocab import release_key

INDEX_URL = os.environ.get("COMPAT_INDEX_URL", "https://pypi.org/simple")
_ACCEPT = "application/vnd.pypi.simple.v1+json"
_TIMEOUT = 60

# What the static analysis reads from an sdist; everything else stays in the archive.
_EXTRACT_PREFIXES = ("vllm/",)
_EXTRACT_FILES = (
    "tests/models/registry.py",
    "tests/config/base_model_arch_groundtruth.json",
    "docs/models/supported_models.md",
    "docs/features/README.md",
    "docs/features/nixl_connector_compatibility.md",
)

Opener = Callable[[str, dict[str, str]], bytes]
# Bump when the set of extracted members changes: older extractions are redone.
EXTRACT_VERSION = "3"
_HEX64 = re.compile(r"[0-9a-f]{64}")


def cache_dir() -> Path:
    """`COMPAT_CACHE` if set, else the user cache dir (platformdirs)."""
    env = os.environ.get("COMPAT_CACHE")
    if env:
        return Path(env)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("vllm-compat"))


def _default_open(url: str, headers: dict[str, str]) -> bytes:
    import urllib.request  # here: a scan of a local tree never goes online (~25 ms of imports)

    req = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(req, timeout=_TIMEOUT) as resp:
        return resp.read()


#: Index answers while `one_index_answer` is active: (package, opener, cache) -> the answer
#: or the UserError it gave.
_SESSION: dict[tuple[str, Opener, Path], dict | UserError] | None = None
_SESSION_LOCK = threading.Lock()


@contextlib.contextmanager
def one_index_answer() -> Iterator[None]:
    """Within the block, ask the index once per package (a build opens dozens of releases and
    lists them several times: each ask was a round trip, or a timeout offline)."""
    global _SESSION
    outer = _SESSION
    if outer is None:
        _SESSION = {}
    try:
        yield
    finally:
        if outer is None:
            _SESSION = None


def _index(package: str, opener: Opener, cache: Path) -> dict:
    """The index's file list for a package (once per `one_index_answer` session)."""
    session = _SESSION
    if session is None:
        return _ask_index(package, opener, cache)
    key = (package, opener, cache)
    with _SESSION_LOCK:
        if key not in session:
            try:
                session[key] = _ask_index(package, opener, cache)
            except UserError as exc:
                session[key] = exc
        found = session[key]
    if isinstance(found, UserError):
        raise found
    return found


def _ask_index(package: str, opener: Opener, cache: Path) -> dict:
    """The index's file list for a package; cached so offline re-runs work."""
    import http.client
    import urllib.error

    cached = cache / "index" / f"{package}.json"
    try:
        data = opener(f"{INDEX_URL}/{package}/", {"Accept": _ACCEPT})
        doc = json.loads(data)
        if not isinstance(doc, dict) or not isinstance(doc.get("files"), list):
            raise ValueError("the index answer is not a PEP 691 project page")
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, cached)
        return doc
    except (
        urllib.error.URLError,
        OSError,
        TimeoutError,
        ValueError,
        http.client.HTTPException,
    ) as exc:
        if cached.is_file():
            try:
                doc = json.loads(cached.read_text())
            except (OSError, ValueError):
                doc = None
            if isinstance(doc, dict) and isinstance(doc.get("files"), list):
                return doc
            exc = ValueError(f"and the cached index {cached} is unreadable ({exc})")
        raise UserError(
            f"cannot reach the package index ({INDEX_URL}) and no cached index: {exc}",
            where="--vllm",
        ) from None


def sdist_entry(version: str, opener: Opener | None = None, cache: Path | None = None) -> dict:
    """The index record of `vllm-<version>.tar.gz`: url, hashes, size."""
    cache = cache or cache_dir()
    doc = _index("vllm", opener or _default_open, cache)
    want = f"vllm-{version}.tar.gz"
    for f in doc.get("files", []):
        if isinstance(f, dict) and f.get("filename") == want:
            sha = (
                (f.get("hashes") or {}).get("sha256") if isinstance(f.get("hashes"), dict) else None
            )
            if not isinstance(sha, str) or not sha:
                raise UserError(f"the index lists {want} without a sha256", where="--vllm")
            if not _HEX64.fullmatch(sha.lower()):
                # It names the cache file: a value like '../x' must not reach the file system.
                raise UserError(
                    f"the index lists {want} with a malformed sha256 {sha[:80]!r}", where="--vllm"
                )
            return f
    raise UserError(f"vllm {version} is not on the package index (no {want})", where="--vllm")


def versions_on_index(opener: Opener | None = None, cache: Path | None = None) -> list[str]:
    """Releases with an sdist on the index, oldest first (PEP 440-ish numeric order)."""
    cache = cache or cache_dir()
    doc = _index("vllm", opener or _default_open, cache)
    out = []
    for f in doc.get("files", []):
        fn = f.get("filename", "") if isinstance(f, dict) else ""
        fn = fn if isinstance(fn, str) else ""
        if fn.startswith("vllm-") and fn.endswith(".tar.gz") and not f.get("yanked"):
            out.append(fn[len("vllm-") : -len(".tar.gz")])
    return sorted(set(out), key=release_key)


def sdist_hashes(opener: Opener | None = None, cache: Path | None = None) -> dict[str, str]:
    """Release -> sha256 of its sdist, for every release `versions_on_index` lists: what
    results that searched the index depend on (compat.reuse)."""
    doc = _index("vllm", opener or _default_open, cache or cache_dir())
    out = {}
    for f in doc.get("files", []):
        fn = f.get("filename", "") if isinstance(f, dict) else ""
        fn = fn if isinstance(fn, str) else ""
        hashes = f.get("hashes") if isinstance(f, dict) else None
        sha = hashes.get("sha256") if isinstance(hashes, dict) else None
        if fn.startswith("vllm-") and fn.endswith(".tar.gz") and not f.get("yanked"):
            out[fn[len("vllm-") : -len(".tar.gz")]] = str(sha or "")
    return dict(sorted(out.items()))


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch_sdist(
    version: str,
    opener: Opener | None = None,
    cache: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[Path, str]:
    """Path of the verified sdist in the cache, and its sha256. Re-fetches a corrupted cache."""
    cache = cache or cache_dir()
    opener = opener or _default_open
    entry = sdist_entry(version, opener, cache)
    sha = entry["hashes"]["sha256"].lower()
    dest = cache / "sdists" / f"{sha}.tar.gz"
    if dest.is_file():
        if _sha256(dest) == sha:
            return dest, sha
        dest.unlink()  # corrupted or truncated: refuse it and fetch again
    if progress:
        progress(f"downloading vllm {version} sdist ({entry.get('size', '?')} bytes)")
    _download_verified(entry["url"], sha, dest, f"vllm-{version}.tar.gz", "--vllm", opener)
    return dest, sha


def _download_verified(
    url: str, sha: str, dest: Path, name: str, where: str, opener: Opener
) -> None:
    """Download to a temporary file, check the sha256, then move it to `dest` (nothing else lands)."""
    import http.client
    import urllib.error

    try:
        data = opener(url, {})
    except (urllib.error.URLError, OSError, TimeoutError, http.client.HTTPException) as exc:
        what = name.removesuffix(".tar.gz").replace("-", " ", 1) + (
            " sdist" if name.endswith(".tar.gz") else ""
        )
        raise UserError(
            f"cannot download {what}: {type(exc).__name__}: {exc}", where=where
        ) from None
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmpname = tempfile.mkstemp(prefix=".download-", dir=dest.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        got = _sha256(Path(tmpname))
        if got != sha:
            raise UserError(
                f"sha256 mismatch for {name}: index says {sha}, download is {got}; "
                "refusing it (nothing cached)",
                where=where,
            )
        os.replace(tmpname, dest)
    finally:
        if os.path.exists(tmpname):
            os.unlink(tmpname)


_STABLE = re.compile(r"\d+(\.\d+)*")


def fetch_wheel(
    package: str,
    version: str | None = None,
    opener: Opener | None = None,
    cache: Path | None = None,
) -> tuple[Path, str, str]:
    """(path, sha256, version) of a pure-Python wheel, the newest stable release unless
    `version` is given; sha-checked and cached by hash like the sdists (offline: the
    cached index answer and the cached wheel)."""
    cache = cache or cache_dir()
    opener = opener or _default_open
    doc = _index(package, opener, cache)
    prefix = package.replace("-", "_") + "-"
    found: dict[str, dict] = {}
    for f in doc.get("files", []):
        fn = f.get("filename", "") if isinstance(f, dict) else ""
        if not (isinstance(fn, str) and fn.startswith(prefix) and fn.endswith("-py3-none-any.whl")):
            continue
        ver = fn[len(prefix) :].split("-", 1)[0]
        sha = (f.get("hashes") or {}).get("sha256") if isinstance(f.get("hashes"), dict) else None
        if f.get("yanked") or not isinstance(sha, str) or not _HEX64.fullmatch(sha.lower()):
            continue
        if (version is None and _STABLE.fullmatch(ver)) or ver == version:
            found[ver] = f
    if not found:
        raise UserError(
            f"no {package} wheel {version or '(stable)'} on the package index", where=package
        )
    ver = version if version in found else max(found, key=release_key)
    entry = found[ver]
    sha = entry["hashes"]["sha256"].lower()
    dest = cache / "wheels" / f"{sha}.whl"
    if not (dest.is_file() and _sha256(dest) == sha):
        _download_verified(entry["url"], sha, dest, entry["filename"], package, opener)
    return dest, sha, ver


def _wanted(name: str) -> bool:
    return (
        name.endswith(".py")
        and name.startswith(_EXTRACT_PREFIXES)
        or name in _EXTRACT_FILES
        or name.startswith("requirements/")
        and name.endswith(".txt")
        or _template(name)
    )


def _template(name: str) -> bool:
    """Chat templates a `--chat-template` path can name (examples/ is in vLLM's image)."""
    return name.endswith(".jinja") and name.startswith(("vllm/", "examples/"))


def _marker(sha: str) -> str:
    return f"{sha} v{EXTRACT_VERSION}"


def _pack_path(cache: Path, sha: str) -> Path:
    return cache / "trees" / f"{sha}.pack"


def _opened(path: Path, sha: str) -> Pack | None:
    """The release's pack if it is complete and of this extraction version, else None."""
    try:
        pack = Pack(path)
    except (OSError, PackError):
        return None
    return pack if pack.marker == _marker(sha) else None


def extract(sdist: Path, sha: str, cache: Path | None = None) -> Pack:
    """Unpacks the wanted members once per hash, into one pack file (compat.sources.pack)."""
    cache = cache or cache_dir()
    dest = _pack_path(cache, sha)
    pack = _opened(dest, sha)
    if pack is not None:
        return pack
    try:
        files = wanted_files(sdist, _wanted)
        dest.parent.mkdir(parents=True, exist_ok=True)
        write_pack(dest, files, _marker(sha))
    except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
        raise UserError(f"cannot unpack {sdist.name}: {exc}", where="--vllm") from None
    # A directory tree extracted by an earlier version of this tool is not read any more.
    shutil.rmtree(cache / "trees" / sha, ignore_errors=True)
    return Pack(dest)


def on_disk(
    version: str, cache: Path | None = None, opener: Opener | None = None, sdist: bool = False
) -> bool:
    """Is the release's pack on disk (nothing to download)? With `sdist`, its downloaded sdist
    counts too (unpacked when first opened). False when unsure. A stat: a damaged or outdated
    pack or sdist is found when the tree is opened, and unpacked or fetched again then."""
    cache = cache or cache_dir()
    try:
        sha = sdist_entry(version, opener, cache)["hashes"]["sha256"].lower()
    except UserError:
        return False
    if _pack_path(cache, sha).is_file():
        return True
    return sdist and (cache / "sdists" / f"{sha}.tar.gz").is_file()


def tree_from_index(
    version: str,
    opener: Opener | None = None,
    cache: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> VllmTree:
    cache = cache or cache_dir()
    sha = sdist_entry(version, opener, cache)["hashes"]["sha256"].lower()
    pack = _opened(_pack_path(cache, sha), sha)
    if pack is None:
        # The tree is what is read, extracted only from a verified sdist: once it is complete,
        # the sdist (tens of MB) is not hashed again.
        sdist, sha = fetch_sdist(version, opener, cache, progress)
        pack = extract(sdist, sha, cache)
    _, commit = read_version(pack)
    return VllmTree(
        root=pack.path, version=version, origin="pypi", sha256=sha, commit=commit, pack=pack
    )


def trees_from_index(
    versions: list[str],
    progress: Callable[[str], None] | None = None,
    cache: Path | None = None,
    workers: int = 4,
    opener: Opener | None = None,
    ready: Callable[[VllmTree], None] | None = None,
    sdist_only: Collection[str] = (),
) -> dict[str, VllmTree | UserError]:
    """Each release's tree (or the UserError opening it gave), downloaded and extracted
    concurrently: a cold build fetches dozens of sdists, each a transfer at a fraction of the
    link's speed. The releases in `sdist_only` are downloaded and verified, not unpacked (that
    waits until one is opened) and not in the result: works_from's search scans fewer than
    half of those it may visit.

    With `ready`, the downloads run in a forked child and `ready(tree)` is called here for each
    tree as soon as it is on disk, so a caller scans the releases that arrived while the rest
    download (a cold pinned build waited about 40 s for all of them before scanning one). This
    process keeps no thread, so the scan's own forked workers never start in a multi-threaded
    process. Whatever the child did not deliver (no fork, or it died) is opened here after."""
    found: dict[str, VllmTree | UserError | None] = {}
    only = frozenset(sdist_only)
    if ready is not None and len(versions) > 1 and _can_fork():
        if not all(on_disk(v, cache, opener, v in only) for v in versions):  # warm: no fork
            found = _streamed(versions, progress, cache, workers, opener, ready, only)
    rest = [v for v in versions if v not in found]
    if rest:
        found.update(_on_threads(rest, progress, cache, workers, opener, only=only))
    return {v: t for v in versions if (t := found[v]) is not None}


def _on_threads(
    versions: list[str],
    progress: Callable[[str], None] | None,
    cache: Path | None,
    workers: int,
    opener: Opener | None,
    send: Callable[[tuple], None] | None = None,
    only: frozenset[str] = frozenset(),
) -> dict[str, VllmTree | UserError | None]:
    """trees_from_index on a pool of threads, joined before this returns; `send` is told of each
    tree or error as it is ready (the download child's pipe). A release in `only` is fetched,
    not opened: None (a failed download is left for the search to meet, if it asks)."""
    # Imported before the threads start: two threads importing a module at once, or a module
    # lock held by one of them when a later scan forks, is how a fork deadlocks.
    import http.client  # noqa: F401
    import ssl  # noqa: F401
    import tarfile  # noqa: F401
    import urllib.request  # noqa: F401
    from concurrent.futures import ThreadPoolExecutor

    def opened(version: str) -> VllmTree | UserError | None:
        if version in only:
            try:
                if not on_disk(version, cache, opener, sdist=True):
                    fetch_sdist(version, opener, cache, progress)
            except UserError:
                pass
            if send is not None:
                send(("fetched", version))
            return None
        try:
            tree: VllmTree | UserError = tree_from_index(version, opener, cache, progress)
        except UserError as exc:
            tree = exc
        if send is not None:
            send(
                ("tree", version, tree)
                if isinstance(tree, VllmTree)
                else ("error", version, tree.message, tree.where)
            )
        return tree

    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(versions)))) as pool:
        return dict(zip(versions, pool.map(opened, versions), strict=True))


def _can_fork() -> bool:
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods()


def _streamed(
    versions: list[str],
    progress: Callable[[str], None] | None,
    cache: Path | None,
    workers: int,
    opener: Opener | None,
    ready: Callable[[VllmTree], None],
    only: frozenset[str],
) -> dict[str, VllmTree | UserError | None]:
    """The trees a forked download child delivers, `ready` called on each as it arrives; stops
    early (the caller opens the rest) if the child dies."""
    import multiprocessing

    from compat.forking import reap, signals_held

    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    args = (versions, cache, workers, opener, send, only)
    proc = ctx.Process(target=_download_child, args=args, daemon=True)
    found: dict[str, VllmTree | UserError | None] = {}
    try:
        with signals_held():
            proc.start()
        send.close()
        while len(found) < len(versions):
            try:
                message = recv.recv()
            except (EOFError, OSError):
                break  # the child died: the caller opens what is left
            if message[0] == "say":
                if progress:
                    progress(message[1])
            elif message[0] == "tree":
                found[message[1]] = message[2]
                ready(message[2])
            elif message[0] == "error":
                found[message[1]] = UserError(message[2], where=message[3])
            elif message[0] == "fetched":
                found[message[1]] = None
    finally:
        recv.close()
        reap(proc)
    return found


def _download_child(
    versions: list[str],
    cache: Path | None,
    workers: int,
    opener: Opener | None,
    conn: Any,
    only: frozenset[str] = frozenset(),
) -> None:
    """_streamed's child: the downloads on threads, each tree, error and progress line sent
    through `conn` as it happens."""
    from compat.forking import child_signals

    child_signals()
    lock = threading.Lock()

    def send(message: tuple) -> None:
        with lock:
            conn.send(message)

    code = 0
    try:
        _on_threads(versions, lambda line: send(("say", line)), cache, workers, opener, send, only)
    except BaseException:  # noqa: BLE001 (the parent opens what was not sent)
        code = 1
    finally:
        conn.close()
        os._exit(code)
