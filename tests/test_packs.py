"""Releases from the index are kept as packs (compat.sources.pack), read from the sdist in one
pass (compat.sources.tarstream): the same files as tarfile extracts, and a tree over a pack
that every stage reads exactly as the directory of the same files."""

from __future__ import annotations

import gzip
import io
import pickle
import tarfile
from pathlib import Path

import pytest

from compat.sources import tarstream
from compat.sources.pack import Pack, PackError, walk_order, write_pack
from compat.sources.tree import VllmTree

DISPATCH = Path(__file__).resolve().parent / "fixtures" / "minitrees" / "dispatch"
LONG = "vllm/" + "/".join(["deeply_nested_directory_name"] * 6) + "/module_with_a_long_name.py"


def _wanted(name: str) -> bool:
    return name.startswith("vllm/") or name.startswith("docs/")


def _tarball(path: Path, fmt: int, members: list[tuple[str, bytes | None]]) -> Path:
    """A .tar.gz of `members` (None: a directory) in tarfile format `fmt`, plus a symlink."""
    with tarfile.open(path, "w:gz", format=fmt) as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                tf.addfile(info)
            else:
                info.size = len(data)
                info.mtime = 1_700_000_000.5 if fmt == tarfile.PAX_FORMAT else 1_700_000_000
                tf.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("top/vllm/link.py")
        link.type, link.linkname = tarfile.SYMTYPE, "a.py"
        tf.addfile(link)
    return path


MEMBERS: list[tuple[str, bytes | None]] = [
    ("top", None),
    ("top/vllm", None),
    ("top/vllm/a.py", b"x = 1\n"),
    ("top/vllm/empty.py", b""),
    ("top/vllm/block.py", b"y" * 512),
    ("top/vllm/odd.py", b"z" * 1025),
    (f"top/{LONG}", b"long = True\n"),
    ("top/vllm/ünïcode.py", "s = 'é'\n".encode()),
    ("top/csrc/kernel.cu", b"__global__ void k() {}\n" * 100),
    ("top/docs/x.md", b"# doc\n"),
    ("top/vllm/a.py", b"x = 2  # a later member of the same name wins\n"),
]


@pytest.mark.parametrize("fmt", [tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT])
def test_one_pass_reader_gives_what_tarfile_gives_without_falling_back(tmp_path, monkeypatch, fmt):
    members = [m for m in MEMBERS if fmt != tarfile.USTAR_FORMAT or "ü" not in m[0]]
    sdist = _tarball(tmp_path / "s.tar.gz", fmt, members)
    expected = tarstream._with_tarfile(sdist, _wanted)
    assert expected[LONG] == b"long = True\n" and expected["vllm/a.py"].startswith(b"x = 2")
    assert "csrc/kernel.cu" not in expected and "vllm/link.py" not in expected

    def no_fallback(*_a):
        raise AssertionError("the one-pass reader should decode this archive itself")

    monkeypatch.setattr(tarstream, "_with_tarfile", no_fallback)
    assert tarstream.wanted_files(sdist, _wanted) == expected


def test_concatenated_gzip_members_are_one_stream(tmp_path):
    sdist = _tarball(tmp_path / "s.tar.gz", tarfile.PAX_FORMAT, MEMBERS)
    raw = gzip.decompress(sdist.read_bytes())
    cut = 512 * 7
    two = tmp_path / "two.tar.gz"
    two.write_bytes(gzip.compress(raw[:cut]) + gzip.compress(raw[cut:]))
    assert tarstream.wanted_files(two, _wanted) == tarstream._with_tarfile(sdist, _wanted)


def test_what_the_reader_does_not_decode_goes_to_tarfile(tmp_path):
    sdist = _tarball(tmp_path / "s.tar.gz", tarfile.GNU_FORMAT, MEMBERS)
    raw = bytearray(gzip.decompress(sdist.read_bytes()))
    raw[124] |= 0x80  # the first header's size in base-256, which only tarfile reads
    odd = tmp_path / "odd.tar.gz"
    odd.write_bytes(gzip.compress(bytes(raw)))
    with pytest.raises(tarfile.TarError):  # tarfile's own verdict on the archive
        tarstream.wanted_files(odd, _wanted)
    no_end = tmp_path / "no-end.tar.gz"  # no end-of-archive blocks: tarfile accepts it
    no_end.write_bytes(gzip.compress(gzip.decompress(sdist.read_bytes()).rstrip(b"\0")))
    assert tarstream.wanted_files(no_end, _wanted)["vllm/a.py"].startswith(b"x = 2")


@pytest.mark.parametrize("blob", [b"not a gzip file", b""])
def test_not_a_tarball_raises_for_the_caller(tmp_path, blob):
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(blob)
    with pytest.raises((tarfile.TarError, EOFError, OSError)):
        tarstream.wanted_files(bad, _wanted)


def test_a_member_that_would_leave_the_tree_is_refused(tmp_path):
    sdist = _tarball(tmp_path / "s.tar.gz", tarfile.PAX_FORMAT, [("top/vllm/../../x.py", b"1")])
    with pytest.raises(tarstream.UnsafeMember, match="outside the destination"):
        tarstream.wanted_files(sdist, _wanted)


def test_pack_round_trip_listing_and_damage(tmp_path):
    files = {"vllm/b.py": b"b", "vllm/a/x.py": b"", "docs/r.md": "é".encode()}
    write_pack(tmp_path / "t.pack", files, "m1")
    pack = Pack(tmp_path / "t.pack")
    assert pack.marker == "m1" and pack.names == sorted(files)
    assert {n: pack.read(n) for n in pack.names} == files and pack.read("vllm/c.py") is None
    assert pack.is_dir("vllm") and pack.is_dir("vllm/a") and not pack.is_dir("vllm/b.py")
    assert pickle.loads(pickle.dumps(pack)).read("vllm/b.py") == b"b"
    (tmp_path / "cut.pack").write_bytes((tmp_path / "t.pack").read_bytes()[:-1])
    (tmp_path / "junk.pack").write_bytes(b"junk")
    for name in ("cut.pack", "junk.pack"):
        with pytest.raises(PackError):
            Pack(tmp_path / name)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.pack", "junk.pack", "t.pack"]


def _packed(root: Path, dest: Path) -> VllmTree:
    files = {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    write_pack(dest, files, "m")
    return VllmTree(root=dest, version="0.0.1", origin="pypi", sha256="f" * 64, pack=Pack(dest))


def test_a_tree_over_a_pack_reads_as_the_directory(tmp_path):
    root = tmp_path / "tree"
    for rel in (
        "vllm/a.py",
        "vllm/z/b.py",
        "vllm/z/c.jinja",
        "vllm/m.jinja",
        "examples/t.jinja",
        "vllm/__pycache__/x.py",
        "vllm/bad.py",
    ):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b"\xff\xfe" if rel == "vllm/bad.py" else rel.encode())
    (root / "vllm" / "crlf.py").write_bytes(b"x = 1\r\ny = 2\rz = 3\n")
    on_disk = VllmTree(root=root, version="0.0.1", origin="src")
    packed = _packed(root, tmp_path / "t.pack")
    for under in ("vllm", "vllm/z", "examples", "missing"):
        assert packed.py_files(under) == on_disk.py_files(under)
        assert packed.files(under) == on_disk.files(under)
    assert walk_order(packed.files("vllm")) == on_disk.files("vllm")
    assert packed.read("vllm/crlf.py") == on_disk.read("vllm/crlf.py") == "x = 1\ny = 2\nz = 3\n"
    for rel in ("vllm/a.py", "vllm/bad.py", "vllm/none.py", "vllm", "vllm/z", "examples"):
        assert packed.read(rel) == on_disk.read(rel)
        assert packed.exists(rel) == on_disk.exists(rel)
        assert packed.is_dir(rel) == on_disk.is_dir(rel)


def test_a_release_scanned_from_a_pack_has_the_facts_of_its_directory(tmp_path, isolated_cache):
    from compat.scan import compute_facts

    on_disk = compute_facts(VllmTree(root=DISPATCH, version="0.0.1", origin="src"))
    packed = compute_facts(_packed(DISPATCH, tmp_path / "d.pack"))
    for facts in (on_disk, packed):
        facts["release"].pop("fingerprint", None)
        facts["release"].pop("origin", None)
        facts["release"].pop("sha256", None)
    assert packed == on_disk
