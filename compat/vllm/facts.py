"""All static facts of one release, as rows for the database (see compat.db tables)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from compat.errors import LayoutError
from compat.sources.tree import VllmTree
from compat.vllm.capabilities import FLAGS, analyze_release
from compat.vllm.registry import read_registry
from compat.vllm.scope import ModuleIndex


def _b(v: bool | None) -> int | None:
    return None if v is None else int(bool(v))


def capability_rows(tree: VllmTree, platforms: tuple[str, ...], index: ModuleIndex) -> tuple[list[dict], Any]:
    entries = read_registry(tree)
    caps, rules = analyze_release(tree, entries, platforms, index)
    rows = []
    for c in caps:
        row = {
            "platform": c.platform, "arch": c.arch, "category": c.category,
            "registry_module": c.registry_module, "registry_class": c.registry_class,
            "class_path": c.class_path, "file": c.file, "line": c.line, "status": c.status,
            "reason": c.reason, "evidence": json.dumps(c.evidence, sort_keys=True),
            "mro_path": json.dumps(c.mro),
        }
        row.update({f: _b(c.flags.get(f)) for f in FLAGS})
        rows.append(row)
    return rows, rules


def compute(tree: VllmTree, platforms: tuple[str, ...],
            progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    from compat.scan import release_row

    say = progress or (lambda _m: None)
    index = ModuleIndex(tree)
    say(f"{tree.version}: registry and capabilities")
    caps, rules = capability_rows(tree, platforms, index)
    notes = list(rules.notes)
    facts: dict[str, Any] = {"arch_capability": caps}
    for name, fn in _EXTRA_STAGES:
        say(f"{tree.version}: {name}")
        try:
            rows, stage_notes = fn(tree, platforms, index)
        except LayoutError as exc:
            rows, stage_notes = {}, [f"{name}: {exc.line()}"]
        facts.update(rows)
        notes += stage_notes
    facts["release"] = release_row(tree, rules.pp_rule, notes)
    return facts


# (name, fn(tree, platforms, index) -> ({table: rows}, notes)); filled as stages land.
_EXTRA_STAGES: list[tuple[str, Callable[..., tuple[dict[str, list[dict]], list[str]]]]] = []
