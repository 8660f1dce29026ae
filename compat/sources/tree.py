"""A vLLM source tree on disk, read (never imported) by every introspection stage.

Every stage asks the tree for files by their path relative to the source root
(`vllm/config/speculative.py`), so evidence recorded anywhere is a path that also
works in a GitHub URL for that release. Parsed modules are cached per tree: the
registry, class resolution, flags and gates share one parse of each file.

A tree is a directory (a checkout, an installed package) or, for a release from the
index, a pack (compat.sources.pack): stages ask the tree, never the filesystem.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compat.errors import LayoutError
from compat.sources.pack import Pack, walk_order

REGISTRY = "vllm/model_executor/models/registry.py"
INTERFACES = "vllm/model_executor/models/interfaces.py"
SPECULATIVE = "vllm/config/speculative.py"
#: Where SpeculativeConfig lived before vllm/config became a package of modules (0.10.1 and
#: older: the package's __init__, before that vllm/config.py).
SPECULATIVE_HOMES = (SPECULATIVE, "vllm/config/__init__.py", "vllm/config.py")


def speculative_file(tree: "VllmTree") -> str:
    """The file that defines `class SpeculativeConfig` in this release (SPECULATIVE if none)."""
    for rel in SPECULATIVE_HOMES:
        text = tree.read(rel)
        if text is not None and "\nclass SpeculativeConfig" in text:
            return rel
    return SPECULATIVE


_VERSION_RE = re.compile(
    r"""^__version__\s*=\s*(?:version\s*=\s*)?['"]([^'"]+)['"]""", re.MULTILINE
)
_COMMIT_RE = re.compile(
    r"""^__commit_id__\s*=\s*(?:commit_id\s*=\s*)?['"]([^'"]+)['"]""", re.MULTILINE
)


@dataclass
class VllmTree:
    """Source of one vLLM release: `root` holds the `vllm/` package (and maybe tests/, docs/)."""

    root: Path  # the directory, or a pack's file
    version: str
    origin: str  # "pypi", "src", "installed"
    sha256: str | None = None  # of the sdist, when it came from the index
    commit: str | None = None
    pack: Pack | None = field(default=None, repr=False)  # the files, when not a directory
    #: Modules parsed for another release, by source text: parse() takes a module from here
    #: (once) instead of parsing the same text again (compat.vllm.facts.share_workers).
    reuse: dict[str, ast.Module | None] | None = field(default=None, repr=False)
    #: What stages derive from the parsed modules and keep for this tree (the sandbox's
    #: compiled functions), forgotten with them: a module-level cache would keep every
    #: release's modules alive in a process that scans many.
    derived: dict[str, Any] = field(default_factory=dict, repr=False)
    _ast: dict[str, ast.Module | None] = field(default_factory=dict, repr=False)
    _text: dict[str, str | None] = field(default_factory=dict, repr=False)
    _lines: dict[str, list[str]] = field(default_factory=dict, repr=False)
    _fingerprint: str | None = field(default=None, repr=False)
    _py_files: dict[str, list[str]] = field(default_factory=dict, repr=False)

    def bare(self) -> VllmTree:
        """The same release, without what was read, parsed or derived (sent to a worker)."""
        return VllmTree(self.root, self.version, self.origin, self.sha256, self.commit, self.pack)

    def exists(self, rel: str) -> bool:
        """Is `rel` a file of the release?"""
        return self.pack.is_file(rel) if self.pack else (self.root / rel).is_file()

    def is_dir(self, rel: str) -> bool:
        return self.pack.is_dir(rel) if self.pack else (self.root / rel).is_dir()

    def read(self, rel: str) -> str | None:
        """Text of a file, or None when the release does not have it."""
        if rel not in self._text:
            data = self._bytes(rel)
            text = None
            if data is not None:
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError:
                    text = data.decode("utf-8", errors="replace")
                if "\r" in text:  # newlines as a file opened in text mode reads them
                    text = text.replace("\r\n", "\n").replace("\r", "\n")
            self._text[rel] = text
        return self._text[rel]

    def _bytes(self, rel: str) -> bytes | None:
        if self.pack is not None:
            return self.pack.read(rel)
        try:
            return (self.root / rel).read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    def drop_parsed(self) -> None:
        """Forget parsed modules, file texts, listings and the fingerprint (facts computed; the
        ASTs are hundreds of MB)."""
        self._ast.clear()
        self.derived.clear()
        self.reuse = None
        self._text.clear()
        self._lines.clear()
        self._fingerprint = None
        self._py_files.clear()

    def lines(self, rel: str) -> list[str]:
        """Source lines of a file ([] when missing), for slicing by AST line numbers."""
        if rel not in self._lines:
            self._lines[rel] = (self.read(rel) or "").splitlines()
        return self._lines[rel]

    def parse(self, rel: str) -> ast.Module | None:
        """Parsed module, or None when missing or not valid Python for this interpreter."""
        if rel not in self._ast:
            text = self.read(rel)
            tree = None
            if text is not None and self.reuse is not None and text in self.reuse:
                tree = self.reuse.pop(text)
            elif text is not None:
                try:
                    tree = ast.parse(text, filename=rel)
                except SyntaxError:
                    tree = None
            self._ast[rel] = tree
        return self._ast[rel]

    def parsed_by_text(self) -> dict[str, ast.Module | None]:
        """The modules parsed so far, by source text (for the next release's `reuse`)."""
        return {
            text: self._ast[rel] for rel in self._ast if (text := self._text.get(rel)) is not None
        }

    def require(self, rel: str, what: str) -> ast.Module:
        tree = self.parse(rel)
        if tree is None:
            raise LayoutError(
                f"not a recognisable vLLM tree: {rel} ({what}) is missing or unparsable",
                where=f"vllm {self.version}",
            )
        return tree

    def py_files(self, under: str = "vllm") -> list[str]:
        """Relative paths of every .py file below `under`, sorted for determinism (kept, like
        the parsed modules: the fingerprint, the scan and several stages list `vllm/`)."""
        if under not in self._py_files and self.pack is not None:
            prefix = under.rstrip("/") + "/"
            self._py_files[under] = [
                rel
                for rel in self.pack.names  # sorted
                if rel.startswith(prefix) and rel.endswith(".py") and "/__pycache__/" not in rel
            ]
        if under not in self._py_files:
            base = self.root / under
            out = []
            for dirpath, dirnames, filenames in os.walk(base):
                dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
                for fn in filenames:
                    if fn.endswith(".py"):
                        out.append(
                            os.path.relpath(os.path.join(dirpath, fn), self.root).replace(
                                os.sep, "/"
                            )
                        )
            self._py_files[under] = sorted(out)
        return list(self._py_files[under])

    def files(self, under: str) -> list[str]:
        """Every file below the directory `under`, in the order of a sorted top-down walk."""
        if self.pack is not None:
            prefix = under.rstrip("/") + "/"
            return walk_order([rel for rel in self.pack.names if rel.startswith(prefix)])
        out = []
        for dirpath, dirnames, filenames in os.walk(self.root / under):
            dirnames.sort()
            for fn in sorted(filenames):
                out.append(
                    os.path.relpath(os.path.join(dirpath, fn), self.root).replace(os.sep, "/")
                )
        return out

    def fingerprint(self) -> str:
        """Identity of the analysed content: the sdist hash, else a hash of file stats.

        Kept with the parsed modules (the cache key and the release row both ask; a stat of
        every file is ~50 ms) and forgotten with them.
        """
        if self.sha256:
            return self.sha256
        if self._fingerprint is None:
            h = hashlib.sha256()
            for rel in self.py_files("vllm"):
                st = (self.root / rel).stat()
                h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
            self._fingerprint = "tree-" + h.hexdigest()[:40]
        return self._fingerprint


def read_version(root: Path | Pack) -> tuple[str | None, str | None]:
    """(version, commit) from `vllm/_version.py` or `vllm/version.py`, without importing."""
    for rel in ("vllm/_version.py", "vllm/version.py"):
        if isinstance(root, Pack):
            data = root.read(rel)
        else:
            data = (root / rel).read_bytes() if (root / rel).is_file() else None
        if data is not None:
            text = data.decode("utf-8", errors="replace")
            m = _VERSION_RE.search(text)
            c = _COMMIT_RE.search(text)
            if m:
                return m.group(1), (c.group(1) if c else None)
    return None, None
