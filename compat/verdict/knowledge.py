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

from compat.sources.tree import VllmTree
from compat.store import Store
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
    # the same names, in the order the release registers them (the scan's row order)
    parser_order: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    gates: dict[str, dict[str, Any]] = field(default_factory=dict)  # rule id -> row
    raises: list[dict[str, Any]] = field(default_factory=list)
    class_attrs: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    release_facts: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    values: list[dict[str, Any]] = field(
        default_factory=list
    )  # cli_value rows, in registration order
    config_rows: list[dict[str, Any]] = field(default_factory=list)  # config_field rows
    _runner: OverrideRunner | None = None
    _serve_parser: Any = None
    _serve_rules: Any = None

    @property
    def runner(self) -> OverrideRunner | None:
        if self._runner is None and self.tree is not None:
            self._runner = _runner(self.tree)
        return self._runner

    @property
    def serve_parser(self) -> Any:
        """The release's `vllm serve` parser rebuilt from its facts (compat.verdict.arguments)."""
        if self._serve_parser is None and self.values:
            from compat.verdict.arguments import ServeParser
            from compat.verdict.config_values import Validator, schemas_from_rows

            self._serve_parser = ServeParser(
                self.values,
                Validator(schemas_from_rows(self.config_rows)),
                self.version,
                self.tree,
                self.release_facts.get("boolean_inverse_prefixes"),
            )
        return self._serve_parser

    @property
    def serve_rules(self) -> Any:
        """validate_parsed_serve_args / validate_api_server_args of the release (compat.verdict.serve_rules)."""
        if self._serve_rules is None:
            from compat.verdict.serve_rules import ServeRules

            files = (self.release_facts.get("chat_template_files") or {}).get("files")
            order = {
                kind: self.parser_order.get(kind) or sorted(names)
                for kind, names in self.parsers.items()
            }
            self._serve_rules = ServeRules(self.tree, order, files, self.version)
        return self._serve_rules

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
_TABLES = (
    "arch_capability",
    "spec_method",
    "draft_parallel",
    "cli_flag",
    "parser_name",
    "gate_status",
    "raise_message",
    "class_attr_fact",
    "release_fact",
    "cli_value",
    "config_field",
)


def load_knowledge(db: Store, version: str, tree: VllmTree | None) -> Knowledge:
    """Knowledge of `version` from the fact rows in a database."""
    # in insertion order: the order options were registered in is argparse's order
    tables = {
        t: db.dicts(f"select * from {t} where vllm_version = ? order by id", (version,))
        for t in _TABLES
    }
    rel = db.dicts("select notes from release where version = ?", (version,))
    return knowledge_from_facts(
        version, tree, tables, json.loads(rel[0]["notes"] or "[]") if rel else []
    )


def knowledge_from_facts(
    version: str,
    tree: VllmTree | None,
    tables: dict[str, list[dict[str, Any]]],
    notes: list[str] | None = None,
) -> Knowledge:
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
    k.values = list(tables.get("cli_value", []))
    k.config_rows = list(tables.get("config_field", []))
    for r in tables.get("parser_name", []):
        k.parsers[r["kind"]].add(r["name"])
        if r["name"] not in k.parser_order[r["kind"]]:
            k.parser_order[r["kind"]].append(r["name"])
    for r in tables.get("gate_status", []):
        k.gates[r["rule_id"]] = r
    k.raises = [
        {"file": r["file"], "line": r["line"], "template": r["template"]}
        for r in tables.get("raise_message", [])
    ]
    for r in tables.get("class_attr_fact", []):
        k.class_attrs[r["attr"]].append(r)
    for r in tables.get("release_fact", []):
        k.release_facts[r["key"]] = (
            dict(json.loads(r["value"]), file=r["file"], line=r["line"])
            if r["value"].startswith("{")
            else json.loads(r["value"])
        )
    return k


class _FoundRunner(OverrideRunner):
    """An OverrideRunner of what a fresh one found in the release (`file`, `fn`), without
    parsing the release's speculative config module again."""

    def __init__(self, tree: VllmTree, file: str, fn: Any) -> None:
        self.tree, self.file, self.fn = tree, file, fn
        self.line = fn.lineno if fn is not None else 0
        self._code = None


def _runner(tree: VllmTree) -> OverrideRunner:
    """The release's hf_config_override runner, its function found once per release and
    machine (compat.verdict.replay_cache): finding it parses a module of a few thousand lines."""
    from compat.verdict.replay_cache import cached

    def find() -> dict[str, Any]:
        fresh = OverrideRunner(tree)
        return {"file": fresh.file, "fn": fresh.fn}

    found = cached(tree, f"override_runner {tree.version}", find)
    return _FoundRunner(tree, found["file"], found["fn"])
