"""Where vLLM source comes from: the package index, a local tree, or the installed package."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

from compat.errors import UserError
from compat.sources.pypi import tree_from_index
from compat.sources.tree import VllmTree, read_version

__all__ = ["VllmTree", "installed_tree", "open_trees", "tree_from_index", "tree_from_path"]


def tree_from_path(spec: str) -> VllmTree:
    """`PATH` or `PATH=LABEL`: a git checkout or unpacked tree containing `vllm/`."""
    path_s, _, label = spec.partition("=")
    root = Path(path_s).expanduser()
    if not root.is_dir():
        raise UserError(f"not a directory: {path_s}", where="--vllm-src")
    if not (root / "vllm").is_dir():
        if root.name == "vllm" and (root / "__init__.py").is_file():
            root = root.parent
        else:
            raise UserError(f"{path_s} has no vllm/ package", where="--vllm-src")
    version, commit = read_version(root)
    if label:
        version = label
    if not version:
        raise UserError(
            f"{path_s}: no vllm/_version.py or vllm/version.py to name the release; "
            "give a label as PATH=LABEL",
            where="--vllm-src",
        )
    return VllmTree(root=root.resolve(), version=version, origin="src", commit=commit)


def installed_tree() -> VllmTree | None:
    """The installed `vllm` package's files, located without importing it."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    pkg = Path(next(iter(spec.submodule_search_locations)))
    version, commit = read_version(pkg.parent)
    if not version:
        return None
    return VllmTree(root=pkg.parent, version=version, origin="installed", commit=commit)


def open_trees(
    versions: list[str],
    srcs: list[str],
    use_installed: bool = False,
    progress: Callable[[str], None] | None = None,
) -> list[VllmTree]:
    trees = [tree_from_index(v, progress=progress) for v in versions]
    trees += [tree_from_path(s) for s in srcs]
    if use_installed:
        t = installed_tree()
        if t is None:
            raise UserError("no installed vllm package found", where="--installed")
        trees.append(t)
    seen: set[str] = set()
    for t in trees:
        if t.version in seen:
            raise UserError(f"release {t.version} given twice", where="--vllm/--vllm-src")
        seen.add(t.version)
    return trees
