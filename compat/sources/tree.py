"""A vLLM source tree on disk, read (never imported) by every introspection stage.

Every stage asks the tree for files by their path relative to the source root
(`vllm/config/speculative.py`), so evidence recorded anywhere is a path that also
works in a GitHub URL for that release. Parsed modules are cached per tree: the
registry, class resolution, flags and gates share one parse of each file.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from compat.errors import LayoutError

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

    root: Path
    version: str
    origin: str  # "pypi", "src", "installed"
    sha256: str | None = None  # of the sdist, when it came from the index
    commit: str | None = None
    _ast: dict[str, ast.Module | None] = field(default_factory=dict, repr=False)
    _text: dict[str, str | None] = field(default_factory=dict, repr=False)
    _lines: dict[str, list[str]] = field(default_factory=dict, repr=False)
    _fingerprint: str | None = field(default=None, repr=False)
    _py_files: dict[str, list[str]] = field(default_factory=dict, repr=False)

    def path(self, rel: str) -> Path:
        return self.root / rel

    def exists(self, rel: str) -> bool:
        return (self.root / rel).is_file()

    def read(self, rel: str) -> str | None:
        """Text of a file, or None when the release does not have it."""
        if rel not in self._text:
            try:
                self._text[rel] = (self.root / rel).read_text(encoding="utf-8")
            except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
                self._text[rel] = None
            except UnicodeDecodeError:
                self._text[rel] = (self.root / rel).read_text(encoding="utf-8", errors="replace")
        return self._text[rel]

    def drop_parsed(self) -> None:
        """Forget parsed modules, file texts, listings and the fingerprint (facts computed; the
        ASTs are hundreds of MB)."""
        self._ast.clear()
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
            if text is not None:
                try:
                    tree = ast.parse(text, filename=rel)
                except SyntaxError:
                    tree = None
            self._ast[rel] = tree
        return self._ast[rel]

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


def read_version(root: Path) -> tuple[str | None, str | None]:
    """(version, commit) from `vllm/_version.py` or `vllm/version.py`, without importing."""
    for rel in ("vllm/_version.py", "vllm/version.py"):
        p = root / rel
        if p.is_file():
            text = p.read_text(encoding="utf-8", errors="replace")
            m = _VERSION_RE.search(text)
            c = _COMMIT_RE.search(text)
            if m:
                return m.group(1), (c.group(1) if c else None)
    return None, None
