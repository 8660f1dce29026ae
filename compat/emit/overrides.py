"""`compat overrides`: the fix stage's plans as YAML keyed by recipe file, with the shape the
recipes bug report asks for beside them, for information.

This module renders; it never decides. Per recipe file with a blocked, ungated command at
the release it is judged at:

- `fixes`: every fix the fix stage planned and judged again (compat.fix), with its causes and
  its edits, exactly as `compat overrides --apply` and `compat fix --apply` write them;
- `no_fix`: each cause no fixer could fix, with every fixer's reason;
- `proposals`: gates whose hidden commands start at the pin (kind `ungate`), written only by
  `compat fix --apply DIR --only ungate`, since a gate may exist for reasons other than startup;
- `strategy_overrides.<strategy>.unsupported_features.<feature>`: what cannot start, per
  strategy and feature (the modes when only some fail), the shape the recipes bug report
  proposes; no synthesizer reads it yet.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

from compat.errors import UserError
from compat.fix import OPT_IN
from compat.fix.edits import Edit
from compat.resources import schema_dir
from compat.store import open_store
from compat.tables import CauseRow, VerdictRow
from compat.vocab import release_key

SCHEMA_FILE = "overrides.schema.json"

_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_YAML_WORDS = {"y", "yes", "n", "no", "true", "false", "on", "off", "null", "~"}


@dataclass(frozen=True)
class Unsupported:
    """Blocked rows of one (strategy, feature) of a recipe, folded over everything else."""

    strategy: str
    feature: str
    modes: tuple[str, ...]  # the blocked modes when only some of those offered fail; () = all
    reason: str
    vllm: tuple[str, ...]
    works_from: str | None  # the latest first-working release of its rows; None when one has none


@dataclass(frozen=True)
class Fix:
    """One planned fix: its kind, what it does, the causes it fixes and its edits."""

    kind: str
    summary: str
    causes: tuple[str, ...]
    edits: tuple[Edit, ...]
    works_from: str


@dataclass
class RecipeOverrides:
    recipe: str
    model_id: str
    unsupported: list[Unsupported] = field(default_factory=list)
    fixes: list[Fix] = field(default_factory=list)
    no_fix: dict[str, str] = field(default_factory=dict)  # cause label -> why
    proposals: list[Fix] = field(default_factory=list)  # opt-in kinds (ungate)


@dataclass
class OverridesDoc:
    recipes: dict[str, RecipeOverrides]
    source: str  # the database file name (never a machine path)

    def to_dict(self) -> dict[str, Any]:
        """The document as plain data: exactly what `render_yaml` emits, comments aside."""
        return {name: _recipe_dict(ro) for name, ro in self.recipes.items()}


# --------------------------------------------------------------------------- building


def generate_overrides(db_path: Path | str) -> OverridesDoc:
    """The overrides document of a build database (see the module doc)."""
    with open_store(Path(db_path)) as store:
        rows = [r for r in store.verdicts() if r.judged]
        causes = store.causes()
    by_recipe: dict[str, list[VerdictRow]] = {}
    for r in rows:
        by_recipe.setdefault(r.recipe, []).append(r)
    causes_of: dict[str, list[CauseRow]] = {}
    for c in causes:
        causes_of.setdefault(c.recipe, []).append(c)
    doc = OverridesDoc(recipes={}, source=Path(db_path).name)
    for recipe in sorted(by_recipe):
        ro = _recipe(recipe, by_recipe[recipe], causes_of.get(recipe, []))
        if ro.unsupported or ro.fixes or ro.no_fix or ro.proposals:
            doc.recipes[recipe] = ro
    return doc


def _recipe(recipe: str, rows: list[VerdictRow], causes: list[CauseRow]) -> RecipeOverrides:
    model_id = next((r.model_id for r in rows if r.model_id), "")
    ro = RecipeOverrides(recipe, model_id, unsupported=_unsupported(rows))
    fixes: dict[tuple[str, str, str], Fix] = {}
    for c in causes:
        if c.fix_kind in ("", "none"):
            if c.fix_kind == "none":
                ro.no_fix[c.label] = c.fix_why
            continue
        key = (c.fix_kind, c.fix, c.fix_edits)
        f = fixes.get(key)
        fixes[key] = Fix(
            c.fix_kind, c.fix, (*(f.causes if f else ()), c.label), tuple(c.edits()), c.works_from
        )
    ro.fixes = [f for f in fixes.values() if f.edits and f.kind not in OPT_IN]
    ro.proposals = [f for f in fixes.values() if f.edits and f.kind in OPT_IN]
    return ro


def _unsupported(rows: Sequence[VerdictRow]) -> list[Unsupported]:
    """(strategy, feature) pairs with blocked, ungated feature rows whose base command is not blocked
    at the same release, platform, hardware and variant (that is the base command's finding)."""
    base_blocked = {
        (r.vllm_version, r.platform, r.hardware, r.variant, r.strategy)
        for r in rows
        if not r.feature and r.status == "blocked"
    }
    groups: dict[tuple[str, str], list[VerdictRow]] = {}
    for r in rows:
        if (
            not r.feature
            or r.gated
            or (r.vllm_version, r.platform, r.hardware, r.variant, r.strategy) in base_blocked
            or (r.vllm_version, r.platform, "", r.variant, r.strategy) in base_blocked
        ):
            continue
        groups.setdefault((r.strategy, r.feature), []).append(r)
    out = []
    for (strategy, feature), grows in groups.items():
        blocked = [r for r in grows if r.status == "blocked"]
        if not blocked:
            continue
        offered = _distinct(r.mode for r in grows)
        modes = _distinct(r.mode for r in blocked)
        fixes = {r.works_from for r in blocked}
        out.append(
            Unsupported(
                strategy,
                feature,
                () if set(modes) == set(offered) else modes,
                reason="; ".join(sorted(_distinct(_one_line(r.reason) for r in blocked)))
                or "blocked",
                vllm=tuple(sorted(_distinct(r.vllm_version for r in blocked), key=release_key)),
                works_from=None if "" in fixes else max(fixes, key=release_key),
            )
        )
    return out


def _distinct(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(v for v in values if v))


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


# --------------------------------------------------------------------------- plain data


def _edit_dict(e: Edit) -> dict[str, Any]:
    out: dict[str, Any] = {"op": e.op, "path": e.where}
    if e.op != "delete":
        out["value"] = e.value
    if e.op == "replace_item":
        out["old"] = e.old
    if e.after:
        out["after"] = e.after  # a new key goes after this sibling
    if e.comment:
        out["comment"] = e.comment  # written above the edited key
    return out


def _recipe_dict(ro: RecipeOverrides) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if ro.model_id:
        out["model_id"] = ro.model_id
    if ro.unsupported:
        so: dict[str, Any] = {}
        for u in ro.unsupported:
            entry: dict[str, Any] = {"modes": list(u.modes)} if u.modes else {}
            entry.update(reason=u.reason, vllm=_versions(u.vllm), works_from=u.works_from)
            so.setdefault(u.strategy, {"unsupported_features": {}})["unsupported_features"][
                u.feature
            ] = entry
        out["strategy_overrides"] = so
    if ro.fixes:
        out["fixes"] = [_fix_dict(f) for f in ro.fixes]
    if ro.no_fix:
        out["no_fix"] = dict(ro.no_fix)
    if ro.proposals:
        out["proposals"] = [_fix_dict(f) for f in ro.proposals]
    return out


def _fix_dict(f: Fix) -> dict[str, Any]:
    return {
        "kind": f.kind,
        "fix": f.summary,
        "causes": list(f.causes),
        "works_from": f.works_from or None,
        "edits": [_edit_dict(e) for e in f.edits],
    }


def edits_of(entry: dict[str, Any]) -> list[Edit]:
    """The edits of one recipe entry of a parsed overrides document (what --apply writes)."""
    out = []
    for f in entry.get("fixes", []):
        for e in f["edits"]:
            out.append(
                Edit(
                    e["op"],
                    tuple(e["path"].split(".")),
                    e.get("value"),
                    old=e.get("old"),
                    after=e.get("after"),
                    comment=e.get("comment", ""),
                )
            )
    return out


def _versions(vs: Sequence[str]) -> str | list[str]:
    return vs[0] if len(vs) == 1 else list(vs)


def load_schema() -> dict[str, Any]:
    return json.loads((schema_dir() / SCHEMA_FILE).read_text(encoding="utf-8"))


def validate(data: Any) -> None:
    """Raise UserError when `data` (a parsed overrides document) breaks the schema."""
    validator = jsonschema.Draft202012Validator(load_schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path)
        raise UserError(error.message, where=f"overrides: {where}" if where else "overrides")


# --------------------------------------------------------------------------- YAML text


def _s(value: Any) -> str:
    """A YAML scalar: plain for identifiers, JSON-quoted (valid YAML) for anything else."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False)
    text = str(value)
    if _PLAIN.match(text) and text.lower() not in _YAML_WORDS and not text[:1].isdigit():
        return text
    return json.dumps(text, ensure_ascii=False)


def _flow(values: Sequence[str]) -> str:
    return "[" + ", ".join(_s(v) for v in values) + "]"


HEADER = """\
# vllm-compat overrides for vllm-project/recipes, from {source}, per recipe file:
#   fixes: what the fix stage planned and judged again; `compat overrides --apply DIR` (or
#     `compat fix --apply DIR`) writes exactly these edits into the recipe files.
#   no_fix: causes no fixer could fix, with each fixer's reason.
#   proposals: gates whose hidden commands start at the pin (ungate); a gate may exist for
#     reasons other than startup, so only `compat fix --apply DIR --only ungate` writes them.
#   strategy_overrides.<strategy>.unsupported_features: what cannot start (the shape proposed
#     in the recipes bug report; today's synthesizer does not read it), for information."""


def render_yaml(doc: OverridesDoc) -> str:
    """The document as YAML (the same data as `to_dict`, in a readable layout)."""
    out = HEADER.format(source=doc.source).splitlines()
    if not doc.recipes:
        return "\n".join([*out, "{}"]) + "\n"
    for name, ro in doc.recipes.items():
        out += ["", f"{_s(name)}:"]
        d = _recipe_dict(ro)
        if "model_id" in d:
            out.append(f"  model_id: {_s(d['model_id'])}")
        if "strategy_overrides" in d:
            out.append("  strategy_overrides:")
            for strategy, entry in d["strategy_overrides"].items():
                out += [f"    {_s(strategy)}:", "      unsupported_features:"]
                for feature, u in entry["unsupported_features"].items():
                    out.append(f"        {_s(feature)}:")
                    out += [
                        f"          {k}: {_flow(v) if k == 'modes' else _s(v)}"
                        for k, v in u.items()
                    ]
        out += _fix_lines("fixes", d)
        if "no_fix" in d:
            out.append("  no_fix:")
            out += [f"    {_s(label)}: {_s(why)}" for label, why in d["no_fix"].items()]
        out += _fix_lines("proposals", d)
    return "\n".join(out) + "\n"


def _fix_lines(key: str, d: dict[str, Any]) -> list[str]:
    if key not in d:
        return []
    out = [f"  {key}:"]
    for f in d[key]:
        out += [
            f"    - kind: {_s(f['kind'])}",
            f"      fix: {_s(f['fix'])}",
            f"      causes: {_flow(f['causes'])}",
            f"      works_from: {_s(f['works_from'])}",
            "      edits:",
        ]
        out += [f"        - {json.dumps(e, ensure_ascii=False)}" for e in f["edits"]]
    return out
