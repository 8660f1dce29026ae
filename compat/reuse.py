"""Reused results: each recipe's block (compat.blocks), cached under the hash of its inputs.

A recipe's verdicts, causes and fixes are a function of, and keyed on:

- the recipe file (its path and content);
- the rest of the checkout the synthesis replay reads (every file outside `models/`, hidden
  folders and `node_modules/`: strategies, kv_store, taxonomy, platforms, the synthesizer)
  and the list of recipe files (the JSON API publishes a variant under its own model id only
  when no recipe file is named for it);
- the releases judged (label, source fingerprint), how pins resolved, which could not be
  analysed, and the releases on the package index with their sdist hashes (works_from and
  pin bumps search them; None offline);
- this project's own version: every file of compat/, data/ and schema/ (so the analyzer's
  facts too);
- the model facts of every id its judging read (served models and draft checkpoints): kept
  in the block and compared on reuse, since they come from the Hub, an HF cache or a lock.

The cache lives in `$COMPAT_CACHE/results` (gzipped JSON, written atomically), so a build
into a fresh database reuses it too (CI restores the cache, not the database).
`COMPAT_REUSE=0` judges everything again (and writes nothing to the cache).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from compat.blocks import Block, Outline
from compat.jsoncache import JsonCache, _hash_files, _kept, project_hash

#: Bump when a block's shape changes: older entries are then never read.
CACHE_VERSION = "3"  # 3: a block keeps its ungate proposals (gates)
_SKIPPED_DIRS = frozenset({"models", "node_modules"})


def checkout_hash(root: Path, recipe_paths: Iterable[str]) -> str:
    """Every file of the checkout a recipe's results may read besides its own, and the list
    of recipe files."""
    root = Path(root)
    h = hashlib.sha256()
    h.update(json.dumps(sorted(recipe_paths)).encode())
    files = sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and _kept(p, root) and p.relative_to(root).parts[0] not in _SKIPPED_DIRS
    )
    _hash_files(h, root, files)
    return h.hexdigest()


def model_hasher(resolve: Callable[[str], Any]) -> Callable[[str], str]:
    """Hash of a model id's facts as the resolver gives them (memoised per id)."""
    memo: dict[str, str] = {}

    def digest(model_id: str) -> str:
        if model_id not in memo:
            facts = dataclasses.asdict(resolve(model_id))
            text = json.dumps(facts, sort_keys=True, default=repr)
            memo[model_id] = hashlib.sha256(text.encode()).hexdigest()
        return memo[model_id]

    return digest


class ResultCache(JsonCache):
    """Outlines and blocks by key under `root` (default `$COMPAT_CACHE/results`)."""

    def __init__(self, root: Path | None = None, enabled: bool | None = None) -> None:
        from compat.sources.pypi import cache_dir

        super().__init__(
            root if root is not None else cache_dir() / "results",
            os.environ.get("COMPAT_REUSE", "1") != "0" if enabled is None else enabled,
        )

    def outline(self, key: str) -> Outline | None:
        doc = self._read(key)
        try:
            return Outline(**doc) if isinstance(doc, dict) else None
        except TypeError:
            return None

    def put_outline(self, key: str, outline: Outline) -> None:
        self._write(key, dataclasses.asdict(outline))

    def block(self, key: str, model_hash: Callable[[str], str]) -> Block | None:
        """The block stored under `key`, if the model facts it read are still the same."""
        doc = self._read(key)
        try:
            block = Block.from_json(doc) if isinstance(doc, dict) else None
        except (KeyError, TypeError):
            return None
        if block is None or any(model_hash(m) != h for m, h in block.models.items()):
            return None
        return block

    def put_block(self, key: str, block: Block) -> None:
        self._write_text(key, block.text())


class RecipeCache:
    """A checkout's recipes in the cache: each one's outline, keyed on its file, the rest of the
    checkout and the project; and its block, keyed on those and the inputs every recipe shares."""

    def __init__(self, root: Path, paths: Iterable[str], cache: ResultCache | None = None) -> None:
        paths = list(paths)
        self.cache = cache or ResultCache()
        self.checkout = checkout_hash(root, paths)
        self._content = {
            p: hashlib.sha256((Path(root) / p).read_bytes()).hexdigest() for p in paths
        }
        self._shared = ""

    def _key(self, kind: str, path: str) -> str:
        parts = (kind, CACHE_VERSION, project_hash(), self.checkout, self._shared, path)
        return hashlib.sha256("\0".join((*parts, self._content[path])).encode()).hexdigest()

    def outline(self, path: str) -> Outline | None:
        return self.cache.outline(self._key("outline", path))

    def put_outline(self, path: str, outline: Outline) -> None:
        self.cache.put_outline(self._key("outline", path), outline)

    def share(self, inputs: dict[str, Any]) -> None:
        """What every recipe's block depends on besides its own file and the model facts it read."""
        self._shared = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()

    def block(self, path: str, model_hash: Callable[[str], str]) -> Block | None:
        assert self._shared, "share() the inputs every recipe's block depends on first"
        return self.cache.block(self._key("block", path), model_hash)

    def put_block(self, path: str, block: Block) -> None:
        self.cache.put_block(self._key("block", path), block)
