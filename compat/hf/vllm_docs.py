"""Architecture rows of vLLM's `docs/models/supported_models.md`, as a low-confidence source.

Each table row names one or more architectures, the model family names
("GLM-5, GLM-5.1, GLM-5.2") and example HF ids. The docs are hand-written and
drift from the code (research notes §6.1), so a hit here is always marked
inferred, and matching is deliberately narrow:

1. **Exact id**: the id (case-insensitive) is one of a row's example ids.
2. **Org + family name**: the id's name equals one of the row's family names,
   compared case-insensitively with spaces/underscores read as hyphens, *and* the
   id's org is the org of at least one of that row's example ids. So
   `zai-org/GLM-5.2` matches the row "`GlmMoeDsaForCausalLM` | GLM-5, GLM-5.1,
   GLM-5.2 | `zai-org/GLM-5`", but `zai-org/GLM-4.6V` does not match the
   "GLM-4.5V" row, `Qwen/Qwen3-30B-A3B` does not match the "Qwen3" row (a
   prefix is not a family: it is the MoE sibling), and a third party's
   `someone/GLM-5.2` matches nothing. Quantized names (`GLM-5.2-FP8`) are left to
   the resolver's derived-id rule, which strips the suffix and retries.

A match counts only if it is unambiguous: all matching rows (within one
release, at the first rule that matches) name the same single architecture. Rows
whose architecture carries the `^` footnote ("set the architecture name via
`--hf-overrides`") are skipped, because there the checkpoint's config names a
different class. Releases are consulted newest first; the first with a match decides.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from compat.hf.ids import norm_name, split_id
from compat.sources.tree import VllmTree

DOC = "docs/models/supported_models.md"

_TICKS = re.compile(r"`([^`]+)`")
_TAGS = re.compile(r"<[^>]+>")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_PAREN = re.compile(r"\s*\([^)]*\)")
_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.+-]+$")


@dataclass(frozen=True)
class DocRow:
    archs: tuple[str, ...]
    families: tuple[str, ...]
    example_ids: tuple[str, ...]
    section: str
    version: str
    line: int
    needs_override: bool  # `^` footnote: the config's architecture differs

    @property
    def where(self) -> str:
        return f"vllm-{self.version}/{DOC}:{self.line}"

    @property
    def orgs(self) -> set[str]:
        return {split_id(i)[0].casefold() for i in self.example_ids}


def _cells(line: str) -> list[str]:
    body = line.strip()
    body = body.removeprefix("|")
    body = body.removesuffix("|")
    return [c.strip() for c in body.split("|")]


def parse_docs(tree: VllmTree) -> list[DocRow]:
    text = tree.read(DOC)
    if text is None:
        return []
    rows: list[DocRow] = []
    cols: dict[str, int] | None = None
    section = ""
    for n, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("#"):
            section = stripped.lstrip("#").strip()
        if not stripped.startswith("|"):
            cols = None
            continue
        cells = _cells(stripped)
        if cols is None:
            heads = [_LINK.sub(r"\1", c).strip().casefold() for c in cells]
            if "architecture" in heads and "example hf models" in heads and "models" in heads:
                cols = {
                    "arch": heads.index("architecture"),
                    "models": heads.index("models"),
                    "examples": heads.index("example hf models"),
                }
            continue
        if set(stripped) <= set("|-: "):
            continue  # the separator row
        if len(cells) <= max(cols.values()):
            continue
        arch_cell = cells[cols["arch"]]
        archs = tuple(a.strip() for a in _TICKS.findall(_TAGS.sub("", arch_cell)))
        needs_override = "^" in arch_cell
        ids = tuple(
            i.strip() for i in _TICKS.findall(cells[cols["examples"]]) if _ID.match(i.strip())
        )
        fam_text = _LINK.sub(r"\1", _TAGS.sub("", cells[cols["models"]]))
        families: list[str] = []
        for part in fam_text.split(","):
            part = part.strip().strip("*").strip()
            if not part or part.casefold() in ("etc.", "etc"):
                continue
            families.append(part)
            bare = _PAREN.sub("", part).strip()
            if bare and bare != part:
                families.append(bare)
        if archs:
            rows.append(
                DocRow(archs, tuple(families), ids, section, tree.version, n, needs_override)
            )
    return rows


@dataclass(frozen=True)
class DocMatch:
    arch: str | None  # None when the matching rows disagree
    rule: str  # "exact id" | "org + family name"
    rows: tuple[DocRow, ...]

    @property
    def where(self) -> str:
        return ", ".join(r.where for r in self.rows)


class VllmDocsIndex:
    def __init__(self, trees: Sequence[VllmTree]) -> None:
        self.versions = [t.version for t in trees]
        self.rows: dict[str, list[DocRow]] = {t.version: parse_docs(t) for t in trees}
        # per release: lower-cased id -> rows; (org, normalized family) -> rows
        self._by_id: dict[str, dict[str, list[DocRow]]] = {}
        self._by_family: dict[str, dict[tuple[str, str], list[DocRow]]] = {}
        for version, rows in self.rows.items():
            by_id: dict[str, list[DocRow]] = {}
            by_family: dict[tuple[str, str], list[DocRow]] = {}
            for r in rows:
                for i in {i.casefold() for i in r.example_ids}:
                    by_id.setdefault(i, []).append(r)
                for org in r.orgs:
                    for fam in {norm_name(f) for f in r.families}:
                        by_family.setdefault((org, fam), []).append(r)
            self._by_id[version] = by_id
            self._by_family[version] = by_family

    def match(
        self,
        model_id: str,
        rules: Sequence[str] = ("exact id", "org + family name"),
    ) -> tuple[DocMatch | None, list[str]]:
        """The first release (newest first) where a rule matches, and notes on skipped rows."""
        org, name = split_id(model_id)
        key, org_key, name_key = model_id.casefold(), org.casefold(), norm_name(name)
        notes: list[str] = []
        for version in self.versions:
            exact = self._by_id[version].get(key, [])
            family = self._by_family[version].get((org_key, name_key), []) if org_key else []
            for rule, hits in (("exact id", exact), ("org + family name", family)):
                if not hits or rule not in rules:
                    continue
                usable = [r for r in hits if not r.needs_override]
                for r in hits:
                    if r.needs_override:
                        notes.append(
                            f"{r.where}: {', '.join(r.archs)} needs --hf-overrides; not used"
                        )
                if not usable:
                    continue
                archs = {a for r in usable for a in r.archs}
                arch = next(iter(archs)) if len(archs) == 1 else None
                return DocMatch(arch, rule, tuple(usable)), notes
        return None, notes
