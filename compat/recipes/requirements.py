"""The curated strategy rules in data/strategy_requirements.yaml, schema-checked on load.

The synthesizer renders its parallel-size flags from these rules rather than
from code of its own, so the data file, with its line-level provenance, is the
one statement of how a strategy becomes flags.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from compat.errors import UserError
from compat.resources import data_dir, schema_dir

DEFAULT_PATH = data_dir() / "strategy_requirements.yaml"
SCHEMA_PATH = schema_dir() / "strategy_requirements.schema.json"

_MULTI_NODE = frozenset({"G", "N", "NG", "node_rank"})
_PD_POOL = frozenset({"G", "node_rank", "pool_nodes"})

#: Branches the synthesizer dispatches to (the data file must define each one),
#: with the symbols and flag placeholders it computes for their rules (head and followers).
BRANCH_INPUTS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "single_node": (_MULTI_NODE | {"single_node_tp"}, frozenset({"@parallel_flag"})),
    "multi_node_dep": (_MULTI_NODE | {"worker_dp_start_rank"}, frozenset({"@parallel_flag"})),
    "multi_node_tp_pp": (_MULTI_NODE, frozenset({"@parallel_flag"})),
    "multi_node_tp_dp": (_MULTI_NODE, frozenset({"@parallel_flag"})),
    "multi_node_tp": (_MULTI_NODE, frozenset({"@parallel_flag"})),
    "pd_pool_dep": (
        _PD_POOL | {"role_tp", "dp_local", "dp_size", "start_rank"},
        frozenset({"@parallel_flag", "@role_parallel_flag"}),
    ),
    "pd_pool_tp": (
        _PD_POOL | {"pool_gpus"},
        frozenset({"@parallel_flag", "@role_parallel_flag"}),
    ),
}
REQUIRED_BRANCHES = tuple(BRANCH_INPUTS)


@dataclass(frozen=True)
class FlagRule:
    flag: str
    value: str | None  # a symbol name
    literal: str | None
    when: str | None


@dataclass(frozen=True)
class StrategyRequirements:
    source: Mapping[str, str]
    branches: Mapping[str, tuple[FlagRule, ...]]
    strategies: Mapping[str, Mapping[str, Any]]
    raw: Mapping[str, Any]

    def render(
        self,
        branch: str,
        symbols: Mapping[str, int | str],
        conditions: frozenset[str],
        flags: Mapping[str, str],
        role: str = "",
    ) -> list[str]:
        """Argv tokens of one branch for one node (`worker` in `conditions` past node 0).

        `flags` resolves @parallel_flag / @role_parallel_flag; `role` fills <ROLE>.
        """
        out: list[str] = []
        for rule in self.branches[branch]:
            if rule.when is not None and rule.when not in conditions:
                continue
            out.append(flags[rule.flag] if rule.flag.startswith("@") else rule.flag)
            if rule.value is not None:
                out.append(str(symbols[rule.value]))
            elif rule.literal is not None:
                out.append(rule.literal.replace("<ROLE>", role.upper()))
        return out


def _where(path: Path, error: jsonschema.ValidationError) -> str:
    dotted = ".".join(str(p) for p in error.absolute_path)
    return f"{path.name}: {dotted}" if dotted else path.name


def load_requirements(path: Path | None = None) -> StrategyRequirements:
    """Read and schema-check a strategy requirements file (the project's own by default)."""
    path = Path(path) if path is not None else DEFAULT_PATH
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"cannot read strategy requirements: {exc}", where=path.name) from exc
    except yaml.YAMLError as exc:
        raise UserError(f"YAML syntax error: {exc}", where=path.name) from exc
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(schema).iter_errors(data)
    )
    if error is not None:
        raise UserError(error.message, where=_where(path, error))
    branches = {
        name: tuple(
            FlagRule(rule["flag"], rule.get("value"), rule.get("literal"), rule.get("when"))
            for rule in spec["flags"]
        )
        for name, spec in data["branches"].items()
    }
    for name, (symbols, placeholders) in BRANCH_INPUTS.items():
        for index, rule in enumerate(branches.get(name, ())):
            where = f"{path.name}: branches.{name}.flags.{index}"
            if rule.value is not None and rule.value not in symbols:
                raise UserError(
                    f"symbol {rule.value!r} is not computed for this branch", where=where
                )
            if rule.flag.startswith("@") and rule.flag not in placeholders:
                raise UserError(f"{rule.flag} is not defined for this branch", where=where)
    missing = [b for b in REQUIRED_BRANCHES if b not in branches]
    if missing:
        raise UserError(
            f"missing branches the synthesizer needs: {', '.join(missing)}",
            where=f"{path.name}: branches",
        )
    for sid, spec in data["strategies"].items():
        targets = [spec["branch"]] + [pool["branch"] for pool in spec.get("pools", {}).values()]
        for target in targets:
            if target != "pd_cluster" and target not in branches:
                raise UserError(
                    f"names unknown branch {target!r}", where=f"{path.name}: strategies.{sid}"
                )
    return StrategyRequirements(
        source=data["source"], branches=branches, strategies=data["strategies"], raw=data
    )


@lru_cache(maxsize=1)
def default_requirements() -> StrategyRequirements:
    """The project's own rules, read once per process."""
    return load_requirements(DEFAULT_PATH)
