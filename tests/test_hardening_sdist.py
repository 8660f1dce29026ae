"""Hardening: downloads are verified, the sdist cache heals itself, offline works once cached.

Everything runs against a fake package index: a tiny vLLM tree (the dispatch minitree)
packed as `vllm-9.9.9.tar.gz` in tmp, an index JSON naming its sha256, and an opener
(compat.sources.pypi takes `opener` and `cache`) that serves both from memory and counts
requests. No network is touched.
"""

from __future__ import annotations

import hashlib
import http.client
import io
import json
import tarfile
import urllib.error
from pathlib import Path

import pytest

from compat.errors import UserError
from tests.cli_kit import run
from compat.sources import pypi
from compat.sources.pypi import (
    INDEX_URL,
    fetch_sdist,
    sdist_entry,
    tree_from_index,
    versions_on_index,
)

HERE = Path(__file__).resolve().parent
MINITREE = HERE / "fixtures" / "minitrees" / "dispatch"
VERSION = "9.9.9"
SDIST_URL = f"https://files.example.invalid/packages/vllm-{VERSION}.tar.gz"


def make_sdist(extra: dict[str, bytes] | None = None) -> bytes:
    """vllm-9.9.9.tar.gz: the dispatch minitree under vllm-9.9.9/, plus `extra` members."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for p in sorted(MINITREE.rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts:
                rel = p.relative_to(MINITREE).as_posix()
                data = p.read_bytes()
                if rel == "vllm/_version.py":
                    data = f"__version__ = version = '{VERSION}'\n".encode()
                info = tarfile.TarInfo(f"vllm-{VERSION}/{rel}")
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
        for name, data in (extra or {}).items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def index_doc(sdist: bytes, sha: str | None = None) -> dict:
    return {"meta": {"api-version": "1.1"}, "name": "vllm", "files": [
        {"filename": "vllm-0.1.0-py3-none-any.whl", "url": "https://x.invalid/w.whl", "hashes": {"sha256": "0" * 64}},
        {"filename": f"vllm-{VERSION}.tar.gz", "url": SDIST_URL, "size": len(sdist),
         "hashes": {"sha256": sha or hashlib.sha256(sdist).hexdigest()}},
    ]}


class FakeIndex:
    """opener(url, headers) -> bytes, serving the index JSON and the sdist; offline = URLError."""

    def __init__(self, sdist: bytes, doc: dict | bytes | None = None) -> None:
        self.sdist = sdist
        self.index = doc if isinstance(doc, bytes) else json.dumps(doc or index_doc(sdist)).encode()
        self.offline = False
        self.download_error: BaseException | None = None
        self.downloads = 0
        self.index_requests = 0

    def __call__(self, url: str, headers: dict[str, str]) -> bytes:
        if self.offline:
            raise urllib.error.URLError("offline (test)")
        if url == f"{INDEX_URL}/vllm/":
            self.index_requests += 1
            return self.index
        if url == SDIST_URL:
            self.downloads += 1
            if self.download_error is not None:
                raise self.download_error
            return self.sdist
        raise AssertionError(f"unexpected URL {url}")


@pytest.fixture()
def sdist() -> bytes:
    return make_sdist()


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An isolated cache; the default opener is replaced so nothing can reach the network."""
    def refuse(url: str, headers: dict[str, str]) -> bytes:
        raise AssertionError(f"the test reached the real network opener: {url}")

    monkeypatch.setattr(pypi, "_default_open", refuse)
    monkeypatch.setenv("COMPAT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _cached_sdists(cache: Path) -> list[str]:
    d = cache / "sdists"
    return sorted(p.name for p in d.iterdir()) if d.is_dir() else []


def _one_line(exc: UserError) -> str:
    line = exc.line()
    assert "\n" not in line, line
    return line


def test_fetch_verifies_and_caches_by_hash(sdist, cache):
    idx = FakeIndex(sdist)
    path, sha = fetch_sdist(VERSION, opener=idx, cache=cache)
    assert sha == hashlib.sha256(sdist).hexdigest()
    assert path == cache / "sdists" / f"{sha}.tar.gz" and path.read_bytes() == sdist
    assert _cached_sdists(cache) == [f"{sha}.tar.gz"]  # no .download- leftovers
    tree = tree_from_index(VERSION, opener=idx, cache=cache)
    assert tree.version == VERSION and tree.sha256 == sha and tree.exists("vllm/config/speculative.py")
    assert idx.downloads == 1  # the second call used the cache
    assert versions_on_index(opener=idx, cache=cache) == [VERSION]  # the wheel is not an sdist


@pytest.mark.parametrize("damage", ["truncate", "flip_byte", "empty", "append", "replace_with_other_tarball"])
def test_corrupted_cached_sdist_is_detected_and_refetched(sdist, cache, damage):
    idx = FakeIndex(sdist)
    path, sha = fetch_sdist(VERSION, opener=idx, cache=cache)
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "flip_byte":
        path.write_bytes(data[:100] + bytes([data[100] ^ 0xFF]) + data[101:])
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "append":
        path.write_bytes(data + b"\0")
    else:
        path.write_bytes(make_sdist({"vllm-9.9.9/vllm/evil.py": b"x = 1\n"}))
    again, sha2 = fetch_sdist(VERSION, opener=idx, cache=cache)
    assert (again, sha2) == (path, sha)
    assert idx.downloads == 2, "the damaged file was not re-downloaded"
    assert hashlib.sha256(again.read_bytes()).hexdigest() == sha
    assert _cached_sdists(cache) == [f"{sha}.tar.gz"]


def test_corrupted_sdist_before_extraction_is_refetched_by_tree_from_index(sdist, cache):
    idx = FakeIndex(sdist)
    path, _sha = fetch_sdist(VERSION, opener=idx, cache=cache)
    path.write_bytes(path.read_bytes()[:200])
    tree = tree_from_index(VERSION, opener=idx, cache=cache)
    assert tree.exists("vllm/model_executor/models/registry.py") and idx.downloads == 2


@pytest.mark.parametrize("damage", ["cut short", "older extraction", "not a pack"])
def test_damaged_or_outdated_extraction_is_redone(sdist, cache, damage):
    idx = FakeIndex(sdist)
    tree = tree_from_index(VERSION, opener=idx, cache=cache)
    data = tree.root.read_bytes()
    tree.root.write_bytes(
        {"cut short": data[:-10], "older extraction": data.replace(b" v3", b" v2", 1),
         "not a pack": b"junk"}[damage]
    )
    again = tree_from_index(VERSION, opener=idx, cache=cache)
    assert again.exists("vllm/config/speculative.py") and again.root.read_bytes() == data


def test_a_directory_extracted_by_an_earlier_version_is_replaced_by_the_pack(sdist, cache):
    idx = FakeIndex(sdist)
    tree = tree_from_index(VERSION, opener=idx, cache=cache)
    old = cache / "trees" / tree.sha256  # where version 2 extracted the tree
    (old / "vllm").mkdir(parents=True)
    (old / "vllm" / "registry.py").write_text("# stale")
    tree.root.unlink()
    tree_from_index(VERSION, opener=idx, cache=cache)
    assert sorted(p.name for p in (cache / "trees").iterdir()) == [tree.root.name]


@pytest.mark.parametrize("bad", ["other_bytes", "truncated", "empty"])
def test_download_with_wrong_hash_is_refused_and_nothing_cached(sdist, cache, bad):
    idx = FakeIndex(sdist)
    idx.sdist = {"other_bytes": make_sdist({"vllm-9.9.9/x.txt": b"tampered"}),
                 "truncated": sdist[: len(sdist) // 3], "empty": b""}[bad]
    with pytest.raises(UserError) as ei:
        fetch_sdist(VERSION, opener=idx, cache=cache)
    line = _one_line(ei.value)
    assert "sha256 mismatch" in line and line.startswith("--vllm: ")
    assert _cached_sdists(cache) == []
    assert not (cache / "trees").exists()


@pytest.mark.parametrize("error", [
    urllib.error.URLError("connection refused"), ConnectionResetError("reset by peer"), TimeoutError("timed out"),
    http.client.IncompleteRead(b"partial"), http.client.RemoteDisconnected("closed"),
])
def test_failed_download_is_one_user_error_and_leaves_nothing(sdist, cache, error):
    idx = FakeIndex(sdist)
    idx.download_error = error
    with pytest.raises(UserError) as ei:
        fetch_sdist(VERSION, opener=idx, cache=cache)
    assert "cannot download" in _one_line(ei.value)
    assert _cached_sdists(cache) == []


def test_offline_with_index_and_sdist_cached_works(sdist, cache):
    idx = FakeIndex(sdist)
    tree_from_index(VERSION, opener=idx, cache=cache)
    idx.offline = True
    tree = tree_from_index(VERSION, opener=idx, cache=cache)
    assert tree.version == VERSION and tree.exists("vllm/config/speculative.py")
    assert VERSION in versions_on_index(opener=idx, cache=cache)


def test_offline_with_index_cached_but_sdist_damaged_is_a_user_error(sdist, cache):
    idx = FakeIndex(sdist)
    path, _ = fetch_sdist(VERSION, opener=idx, cache=cache)
    path.write_bytes(b"garbage")
    idx.offline = True
    with pytest.raises(UserError) as ei:
        fetch_sdist(VERSION, opener=idx, cache=cache)
    assert "cannot download" in _one_line(ei.value)
    assert _cached_sdists(cache) == []  # the damaged file was dropped, not kept


def test_offline_with_nothing_cached_is_one_line_user_error(sdist, cache):
    idx = FakeIndex(sdist)
    idx.offline = True
    with pytest.raises(UserError) as ei:
        tree_from_index(VERSION, opener=idx, cache=cache)
    line = _one_line(ei.value)
    assert line.startswith("--vllm: ") and "no cached index" in line


def test_offline_with_nothing_cached_through_the_cli(tmp_path, monkeypatch):
    """The same through `compat scan`: exit 2, one line, no traceback."""
    import os

    for name in [k for k in os.environ if k.lower().endswith("_proxy")]:
        monkeypatch.delenv(name)  # the unreachable index is asked directly, as with no proxy set
    monkeypatch.setenv("COMPAT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(pypi, "INDEX_URL", "http://127.0.0.1:9/simple")
    r = run("scan", "--vllm", VERSION, "--db", str(tmp_path / "c.db"))
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --vllm: cannot reach the package index"), r.stderr
    assert not (tmp_path / "c.db").exists()


def test_corrupted_cached_index_offline_is_a_user_error(sdist, cache):
    idx = FakeIndex(sdist)
    fetch_sdist(VERSION, opener=idx, cache=cache)
    (cache / "index" / "vllm.json").write_text('{"files": [')
    idx.offline = True
    with pytest.raises(UserError) as ei:
        fetch_sdist(VERSION, opener=idx, cache=cache)
    _one_line(ei.value)


@pytest.mark.parametrize("body", [b"<html>not json</html>", b"[]", b"3", b"{\"files\": 7}",
                                  b"{\"files\": [1, \"x\", null]}", b""])
def test_malformed_index_answer_is_a_user_error(sdist, cache, body):
    idx = FakeIndex(sdist, body)
    with pytest.raises(UserError) as ei:
        fetch_sdist(VERSION, opener=idx, cache=cache)
    _one_line(ei.value)
    assert _cached_sdists(cache) == []


@pytest.mark.parametrize("sha", ["../../escape", "", "zz" * 32, None, 5])
def test_index_with_a_malformed_hash_is_refused(sdist, cache, sha):
    doc = index_doc(sdist)
    doc["files"][1]["hashes"]["sha256"] = sha
    idx = FakeIndex(sdist, doc)
    with pytest.raises(UserError) as ei:
        fetch_sdist(VERSION, opener=idx, cache=cache)
    _one_line(ei.value)
    assert idx.downloads == 0 or _cached_sdists(cache) == []
    assert not (cache.parent / "escape.tar.gz").exists()


def test_index_hash_cannot_name_a_file_outside_the_cache(sdist, cache, tmp_path):
    """Before the fix, sha256 '../../victim' made fetch_sdist hash and *delete* tmp/victim.tar.gz."""
    victim = tmp_path / "victim.tar.gz"
    victim.write_bytes(b"precious")
    doc = index_doc(sdist)
    doc["files"][1]["hashes"]["sha256"] = "../../victim"
    with pytest.raises(UserError) as ei:
        fetch_sdist(VERSION, opener=FakeIndex(sdist, doc), cache=cache)
    assert "malformed sha256" in _one_line(ei.value)
    assert victim.read_bytes() == b"precious"


def test_sdist_matching_the_index_but_not_a_tarball_is_a_user_error(cache):
    junk = b"this is not a gzip file"
    idx = FakeIndex(junk)
    with pytest.raises(UserError) as ei:
        tree_from_index(VERSION, opener=idx, cache=cache)
    assert "cannot unpack" in _one_line(ei.value)
    trees = cache / "trees"
    assert not trees.exists() or not any(trees.iterdir())


def test_sdist_with_path_traversal_member_is_refused(tmp_path, cache):
    evil = make_sdist({f"vllm-{VERSION}/vllm/../../../../outside.py": b"import os\n"})
    idx = FakeIndex(evil)
    with pytest.raises(UserError) as ei:  # tarfile's "data" filter refuses the member
        tree_from_index(VERSION, opener=idx, cache=cache)
    assert "cannot unpack" in _one_line(ei.value) and "outside the destination" in ei.value.line()
    assert not list(tmp_path.parent.rglob("outside.py"))
    assert not (cache / "trees").exists() or not [p for p in (cache / "trees").iterdir() if p.name.startswith(".")]


def test_sdist_entry_requires_a_sha256(sdist, cache):
    doc = index_doc(sdist)
    del doc["files"][1]["hashes"]["sha256"]
    with pytest.raises(UserError) as ei:
        sdist_entry(VERSION, opener=FakeIndex(sdist, doc), cache=cache)
    assert "without a sha256" in _one_line(ei.value)
