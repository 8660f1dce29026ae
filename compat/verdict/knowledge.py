"""What the verdict engine knows about one release, loaded from the fact rows.

Everything here comes from the database (written by `scan`), plus the release's
tree for the two things that must run vLLM's own code on a recipe's model config
(`hf_config_override` and the EAGLE rewrite).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Engine

from compat.db import dict_rows

from compat.sources.tree import VllmTree
from compat.vllm.speculative import OverrideRunner


@dataclass
class Knowledge:
    version: str
    tree: VllmTree | None
    caps: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (platform, arch)
    methods: dict[str, str] = field(default_factory=dict)  # method -> canonical
    mtp_types: set[str] = field(default_factory=set)  # MTPModelTypes literal values
    draft_pc: dict[str, dict[str, Any]] = field(default_factory=dict)  # canonical method -> row
    flags: dict[str, dict[str, Any]] = field(default_factory=dict)  # flag -> row
    subkeys: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    parsers: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    gates: dict[str, dict[str, Any]] = field(default_factory=dict)  # rule id -> row
    raises: list[dict[str, Any]] = field(default_factory=list)
    class_attrs: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    release_facts: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    _runner: OverrideRunner | None = None

    @property
    def runner(self) -> OverrideRunner | None:
        if self._runner is None and self.tree is not None:
            self._runner = OverrideRunner(self.tree)
        return self._runner

    def raise_at(self, needle: str) -> str:
        """file:line of the first raise whose template contains `needle`, else ''."""
        for r in self.raises:
            if needle in r["template"]:
                return f"{r['file']}:{r['line']}"
        return ""

    def gate(self, rule_id: str) -> dict[str, Any] | None:
        g = self.gates.get(rule_id)
        return g if g and g["status"] == "verified" else None


#: Fact tables the engine reads, by table name.
_TABLES = ("arch_capability", "spec_method", "draft_parallel", "cli_flag", "parser_name", "gate_status",
           "raise_message", "class_attr_fact", "release_fact")


def load_knowledge(engine: Engine, version: str, tree: VllmTree | None) -> Knowledge:
    """Knowledge of `version` from the fact rows in a database."""
    with engine.connect() as conn:
        tables = {t: dict_rows(conn, f"select * from {t} where vllm_version = ?", (version,)) for t in _TABLES}
        rel = dict_rows(conn, "select notes from release where version = ?", (version,))
    return knowledge_from_facts(version, tree, tables, json.loads(rel[0]["notes"] or "[]") if rel else [])


def knowledge_from_facts(version: str, tree: VllmTree | None, tables: dict[str, list[dict[str, Any]]],
                         notes: list[str] | None = None) -> Knowledge:
    """Knowledge of `version` from fact rows keyed by table name (a scan's facts, or a database's)."""
    k = Knowledge(version=version, tree=tree, notes=list(notes or []))
    for r in tables.get("arch_capability", []):
        k.caps[(r["platform"], r["arch"])] = r
    for r in tables.get("spec_method", []):
        k.methods[r["method"]] = r["canonical"]
        if r["canonical"] == "mtp":
            k.mtp_types.add(r["method"])
    for r in tables.get("draft_parallel", []):
        k.draft_pc[r["method"]] = r
    for r in tables.get("cli_flag", []):
        if r["kind"] == "subkey":
            flag, _, key = r["flag"].partition(".")
            k.subkeys[flag].add(key)
        else:
            k.flags[r["flag"]] = r
    for r in tables.get("parser_name", []):
        k.parsers[r["kind"]].add(r["name"])
    for r in tables.get("gate_status", []):
        k.gates[r["rule_id"]] = r
    k.raises = [{"file": r["file"], "line": r["line"], "template": r["template"]}
                for r in tables.get("raise_message", [])]
    for r in tables.get("class_attr_fact", []):
        k.class_attrs[r["attr"]].append(r)
    for r in tables.get("release_fact", []):
        k.release_facts[r["key"]] = dict(json.loads(r["value"]), file=r["file"], line=r["line"]) \
            if r["value"].startswith("{") else json.loads(r["value"])
    return k
