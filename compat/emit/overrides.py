"""`compat overrides`: blocked verdicts as YAML for the recipes repository, and the gate applied.

Today's recipes synthesizer honours exactly one strategy x feature gate: a
non-empty list `features.<feature>.strategies` (`isFeatureAllowedForStrategy`,
command-synthesis.js L375-378). A per-mode `modes.<m>.strategies` key and a
map-shaped `strategies: {s: unsupported}` are accepted and silently ignored, and
`strategies: []` means "no gate" (research notes §2.7, §3). So:

- the only thing ever written into a recipe is a non-empty feature allowlist;
- a feature is gated off a strategy only when *every* mode the site offers there
  is blocked (a mode-only conflict is reported under `mode_conflicts`, not
  silently widened into a whole-feature gate, unless asked to);
- a gate that would need an empty allowlist is reported under `ungateable`;
- a failing base command (feature '') cannot be fixed by a feature gate and is
  listed under `strategy_findings`, for information.

The document also carries the shape the recipes bug report asks for,
`strategy_overrides.<strategy>.unsupported_features.<feature>`, which no
synthesizer reads yet but which says per mode what is broken and from which
release it works.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import sqlite3
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import jsonschema
import yaml

from compat.fix.yaml_edit import AllowlistEdit, EditError, edit_allowlists, load_data
from compat.errors import UserError
from compat.recipes.offering import effective_compatible_strategies
from compat.recipes.repo import Recipe
from compat.resources import schema_dir
from compat.vocab import release_key

SCHEMA_FILE = "overrides.schema.json"

#: Columns of the `verdict` table this module reads (compat/db.py `Verdict`).
VERDICT_COLUMNS = (
    "vllm_version",
    "platform",
    "hardware",
    "recipe",
    "model_id",
    "variant",
    "strategy",
    "feature",
    "mode",
    "status",
    "message",
    "reason",
    "evidence",
    "gated",
    "pinned",
    "works_from",
)

_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_YAML_WORDS = {"y", "yes", "n", "no", "true", "false", "on", "off", "null", "~"}


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Row:
    order: int  # rowid: the order the verdict stage enumerated combinations in
    vllm_version: str
    platform: str
    hardware: str
    recipe: str
    model_id: str
    variant: str
    strategy: str
    feature: str
    mode: str
    status: str
    message: str
    reason: str
    evidence: str
    gated: int
    pinned: int
    works_from: str


@dataclass(frozen=True)
class Finding:
    """Blocked rows of one (feature, strategy) of a recipe, aggregated over every other key.

    `modes` are the blocked modes, `offered_modes` every mode the verdict table
    holds (ungated) rows for on this strategy; `whole` is true when they are the
    same set, i.e. the feature cannot start on this strategy whichever mode is
    picked (always true for a feature without modes, and for the base command).
    """

    feature: str  # '' = base command
    strategy: str
    modes: tuple[str, ...]
    offered_modes: tuple[str, ...]
    whole: bool
    reason: str
    messages: tuple[str, ...]
    evidence: tuple[str, ...]
    vllm: tuple[str, ...]
    works_from: str | None  # None: no scanned release makes every blocked row ok
    variants: tuple[str, ...]
    hardware: tuple[str, ...]
    platforms: tuple[str, ...]

    @property
    def other_modes(self) -> tuple[str, ...]:
        return tuple(m for m in self.offered_modes if m not in self.modes)


@dataclass(frozen=True)
class Gate:
    """The honoured gate for one feature: `features.<feature>.strategies: [strategies]`."""

    feature: str
    blocked: tuple[str, ...]  # strategies the gate takes the feature off
    strategies: tuple[str, ...]  # the allowlist
    existing: tuple[str, ...] | None  # the allowlist already in the recipe, if any
    findings: tuple[Finding, ...]  # one per blocked strategy
    widened: tuple[str, ...] = ()  # blocked strategies gated whole although only some modes fail


@dataclass(frozen=True)
class Ungateable:
    feature: str
    strategies: tuple[str, ...]
    why: str


@dataclass
class RecipeOverrides:
    recipe: str  # path relative to the recipes root
    model_id: str
    strategy_order: tuple[str, ...]
    unsupported: tuple[Finding, ...] = ()  # every feature finding, whole or per mode
    gates: tuple[Gate, ...] = ()
    mode_conflicts: tuple[Finding, ...] = ()
    strategy_findings: tuple[Finding, ...] = ()
    ungateable: tuple[Ungateable, ...] = ()


@dataclass
class OverridesDoc:
    recipes: dict[str, RecipeOverrides]
    source: str  # the database file name (never a machine path)
    pinned_only: bool = True
    gate_mode_conflicts: bool = False
    allowlists_from: str = "recipe files"  # or "verdict rows" when no recipes root was given

    def to_dict(self) -> dict[str, Any]:
        """The document as plain data: exactly what `render_yaml` emits, comments aside."""
        return {
            name: _recipe_dict(ro, self.gate_mode_conflicts) for name, ro in self.recipes.items()
        }


@dataclass
class ApplyResult:
    changed_files: list[str] = field(default_factory=list)  # recipe paths (relative)
    diffs: dict[str, str] = field(default_factory=dict)  # recipe path -> unified diff
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (recipe path, why)
    methods: dict[str, str] = field(default_factory=dict)  # recipe path -> "ruamel" | "lines"
    notes: dict[str, list[str]] = field(default_factory=dict)  # why an editor fell back
    dry_run: bool = False


# --------------------------------------------------------------------------- reading



def read_verdicts(db_path: Path | str) -> list[Row]:
    """Every `verdict` row, in rowid order. UserError when the file is no verdict database."""
    path = Path(db_path)
    where = path.name
    if not path.is_file():
        raise UserError("no such database (run `compat build` first)", where=where)
    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise UserError(f"cannot open database: {exc}", where=where) from None
    try:
        try:
            has = con.execute(
                "SELECT 1 FROM sqlite_master WHERE type IN ('table','view') AND name='verdict'"
            ).fetchone()
        except sqlite3.DatabaseError as exc:
            raise UserError(f"not a vllm-compat database: {exc}", where=where) from None
        if not has:
            raise UserError("no `verdict` table (run `compat build` first)", where=where)
        cols = {r[1] for r in con.execute("PRAGMA table_info(verdict)")}
        missing = [c for c in VERDICT_COLUMNS if c not in cols]
        if missing:
            raise UserError(f"the verdict table lacks columns: {', '.join(missing)}", where=where)
        # `judged` (rows at the releases the build was asked to judge) supersedes `pinned`
        # when present: with explicit --vllm releases every given release is judged.
        select = [("judged AS pinned" if c == "pinned" and "judged" in cols else c) for c in VERDICT_COLUMNS]
        sql = f"SELECT rowid, {', '.join(select)} FROM verdict ORDER BY rowid"
        out = []
        for r in con.execute(sql):
            vals = ["" if v is None else v for v in r]
            out.append(
                Row(
                    int(vals[0]),
                    *(str(v) for v in vals[1:14]),
                    int(vals[14] or 0),
                    int(vals[15] or 0),
                    str(vals[16]),
                )
            )
        return out
    finally:
        con.close()


def _safe_relpath(recipe: str) -> PurePosixPath:
    rel = PurePosixPath(recipe)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        raise UserError("recipe path must be relative to the recipes root", where=recipe)
    return rel


def _load_recipe(root: Path, recipe: str) -> tuple[str, Any]:
    path = root.joinpath(*_safe_relpath(recipe).parts)
    if not path.is_file():
        raise UserError(
            "the verdict table names this recipe, but the recipes root has no such file",
            where=recipe,
        )
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read recipe: {exc}", where=recipe) from None
    try:
        data = load_data(text)
    except (yaml.YAMLError, ValueError, TypeError, OverflowError, RecursionError) as exc:
        # One line (the contract for exit 2); constructors raise ValueError for `!!int abc` etc.
        raise UserError(f"YAML syntax error: {' '.join(str(exc).split())[:300]}", where=recipe) from None
    if not isinstance(data, dict):
        raise UserError("the top level is not a mapping", where=recipe)
    return text, data


def _check_root(recipes_root: Path | str) -> Path:
    root = Path(recipes_root)
    if not root.is_dir():
        raise UserError("recipes root is not a directory", where=root.name or str(root))
    return root


# --------------------------------------------------------------------------- aggregation


def _distinct(values: Iterable[str]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for v in values:
        if v:
            seen.setdefault(v, None)
    return tuple(seen)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _finding(
    feature: str,
    strategy: str,
    rows: Sequence[Row],
    offered: Sequence[str],
    mode_order: Sequence[str],
) -> Finding:
    blocked = [r for r in rows if r.status == "blocked"]

    def ordered_modes(ms: Iterable[str]) -> tuple[str, ...]:
        ms = set(ms)
        rank = {m: i for i, m in enumerate(mode_order)}
        return tuple(sorted(ms, key=lambda m: (rank.get(m, len(rank)), m)))

    modes = ordered_modes(r.mode for r in blocked)
    offered_modes = ordered_modes(offered)
    fixes = {r.works_from for r in blocked}
    works_from = None if "" in fixes or not fixes else max(fixes, key=release_key)
    evidence: list[str] = []
    for r in blocked:
        evidence.extend(e.strip() for e in r.evidence.split(";"))
    return Finding(
        feature=feature,
        strategy=strategy,
        modes=tuple(m for m in modes if m),
        offered_modes=tuple(m for m in offered_modes if m),
        whole=set(modes) == set(offered_modes),
        reason=(
            "; ".join(sorted(_distinct(_one_line(r.reason) for r in blocked)))
            or "; ".join(sorted(_distinct(_one_line(r.message) for r in blocked)))
            or "blocked (no reason recorded)"
        ),
        messages=tuple(sorted(_distinct(_one_line(r.message) for r in blocked))),
        evidence=tuple(sorted(_distinct(evidence))),
        vllm=tuple(sorted(_distinct(r.vllm_version for r in blocked), key=release_key)),
        works_from=works_from,
        variants=tuple(sorted(_distinct(r.variant for r in blocked))),
        hardware=tuple(sorted(_distinct(r.hardware for r in blocked))),
        platforms=tuple(sorted(_distinct(r.platform for r in blocked))),
    )


def allowlist_for(
    recipe: str, data: dict[str, Any], feature: str, blocked: Iterable[str]
) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None, str]:
    """(allowlist, existing allowlist, why-not) for gating `feature` off `blocked` in a recipe.

    The allowlist is the recipe's effective strategies (`compatible_strategies`
    plus `strategy_hardware` grants, in that order) minus `blocked`, kept to the
    existing allowlist when there is one. None with a reason when the recipe
    cannot take it.
    """
    blocked = set(blocked)
    features = data.get("features")
    feat = features.get(feature) if isinstance(features, dict) else None
    if not isinstance(feat, dict):
        return (
            None,
            None,
            f"features.{feature}: not in the recipe file (verdicts older than the recipe?)",
        )
    current = feat.get("strategies")
    if "strategies" in feat and not isinstance(current, list):
        return (
            None,
            None,
            (
                f"features.{feature}.strategies is a {type(current).__name__}, which the "
                "synthesizer ignores; replace it by hand"
            ),
        )
    existing = tuple(str(s) for s in current) if isinstance(current, list) and current else None
    effective = effective_compatible_strategies(Recipe(recipe, data))
    allow = tuple(s for s in effective if s not in blocked and (existing is None or s in existing))
    if not allow:
        return (
            None,
            existing,
            (
                f"features.{feature} is blocked on every strategy it is offered on "
                f"({', '.join(sorted(blocked))}); an empty `strategies` list means no gate "
                "to the synthesizer, so remove the feature or fix it by hand"
            ),
        )
    return allow, existing, ""


def generate_overrides(
    db_path: Path | str,
    recipes_root: Path | str | None = None,
    *,
    pinned_only: bool = True,
    gate_mode_conflicts: bool = False,
) -> OverridesDoc:
    """Turn the verdict table into an overrides document.

    Rows considered: those with `pinned = 1` (the release each recipe pins)
    unless `pinned_only` is False, in which case every scanned release counts.

    Aggregation. A verdict row is one (release, platform, hardware profile,
    variant, strategy, feature, mode). The honoured gate is per feature and per
    strategy only, so every other key is folded:

    - a mode is *blocked on a strategy* when at least one considered, ungated row
      of it is blocked there, on any release, platform (cuda / rocm), hardware
      profile or variant. The allowlist cannot be per variant or per hardware,
      so blocked anywhere the site offers it means gated everywhere;
    - the *offered modes* of a feature on a strategy are the modes the verdict
      table holds ungated rows for there (any status): the modes the site can
      actually render on that strategy for some variant and hardware;
    - a feature is blocked on a strategy when all its offered modes there are
      blocked (a feature without modes: its own rows, mode '');
    - when only some offered modes are blocked it is a *mode conflict*: the fix
      needs a per-mode gate that today's synthesizer ignores. It is reported and
      the feature stays ungated, unless `gate_mode_conflicts`, which gates the
      whole feature off that strategy (taking working modes with it) and says so;
    - rows with `gated = 1` (the recipe already keeps the feature off that
      strategy) are no findings, and neither are feature rows whose base command
      is blocked at the same release, platform, hardware and variant: that is a
      `strategy_findings` entry, which no feature gate can fix;
    - `works_from` of a finding is the latest `works_from` among its blocked rows
      (the gate can go once all of them start), or null if one has none.

    With `recipes_root`, allowlists are computed from each recipe file (effective
    strategies minus blocked, intersected with any existing allowlist; see
    `allowlist_for`), and a recipe with findings that is missing there is a
    UserError. Without it they come from the verdict rows: the strategies the
    table holds rows for, in enumeration order, less those the recipe already
    gates. `apply_overrides` always recomputes them from the file it edits.
    """
    rows = read_verdicts(db_path)
    root = _check_root(recipes_root) if recipes_root is not None else None
    considered = [r for r in rows if r.pinned or not pinned_only]
    all_by_recipe: dict[str, list[Row]] = {}
    for r in rows:
        all_by_recipe.setdefault(r.recipe, []).append(r)
    by_recipe: dict[str, list[Row]] = {}
    for r in considered:
        by_recipe.setdefault(r.recipe, []).append(r)
    doc = OverridesDoc(
        recipes={},
        source=Path(db_path).name,
        pinned_only=pinned_only,
        gate_mode_conflicts=gate_mode_conflicts,
        allowlists_from="recipe files" if root is not None else "verdict rows",
    )
    for recipe in sorted(by_recipe):
        rrows = by_recipe[recipe]
        if not any(r.status == "blocked" and (r.feature == "" or not r.gated) for r in rrows):
            continue
        ro = _recipe_overrides(recipe, rrows, all_by_recipe[recipe], root, gate_mode_conflicts)
        if ro is not None:
            doc.recipes[recipe] = ro
    return doc


def _recipe_overrides(
    recipe: str, rows: list[Row], all_rows: list[Row], root: Path | None, gate_mode_conflicts: bool
) -> RecipeOverrides | None:
    data: dict[str, Any] | None = None
    if root is not None:
        _, data = _load_recipe(root, recipe)
    seen_order = _distinct(r.strategy for r in all_rows)
    if data is not None:
        effective = effective_compatible_strategies(Recipe(recipe, data))
        strategy_order = tuple(effective) + tuple(s for s in seen_order if s not in effective)
        features = data.get("features") if isinstance(data.get("features"), dict) else {}
    else:
        strategy_order = seen_order
        features = {}
    srank = {s: i for i, s in enumerate(strategy_order)}

    def mode_order(feature: str) -> list[str]:
        feat = features.get(feature)
        modes = feat.get("modes") if isinstance(feat, dict) else None
        order = list(modes) if isinstance(modes, dict) else []
        return order + [
            m for m in _distinct(r.mode for r in rows if r.feature == feature) if m not in order
        ]

    # A feature cannot start where its base command cannot: those rows belong to
    # the base-command finding, and a feature gate there would fix nothing. A base
    # row with hardware '' (args independent of the profile) covers every profile.
    base_blocked = {
        (r.vllm_version, r.platform, r.hardware, r.variant, r.strategy)
        for r in rows
        if not r.feature and r.status == "blocked"
    }
    groups: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        if r.feature and (
            r.gated
            or (r.vllm_version, r.platform, r.hardware, r.variant, r.strategy) in base_blocked
            or (r.vllm_version, r.platform, "", r.variant, r.strategy) in base_blocked
        ):
            continue
        groups.setdefault((r.feature, r.strategy), []).append(r)

    findings: list[Finding] = []
    base: list[Finding] = []
    for (feature, strategy), grows in groups.items():
        blocked = [r for r in grows if r.status == "blocked"]
        if not blocked:
            continue
        if feature == "":
            base.append(_finding("", strategy, blocked, [""], []))
            continue
        offered = _distinct(r.mode for r in grows) or ("",)
        if "" in {r.mode for r in grows}:
            offered = tuple(dict.fromkeys(list(offered) + [""]))
        findings.append(_finding(feature, strategy, grows, offered, mode_order(feature)))

    feature_order = list(features) + sorted({f.feature for f in findings} - set(features))
    frank = {f: i for i, f in enumerate(feature_order)}
    findings.sort(key=lambda f: (srank.get(f.strategy, len(srank)), frank.get(f.feature, 0)))
    base.sort(key=lambda f: srank.get(f.strategy, len(srank)))

    gates: list[Gate] = []
    ungateable: list[Ungateable] = []
    for feature in sorted({f.feature for f in findings}, key=lambda f: frank.get(f, 0)):
        mine = [f for f in findings if f.feature == feature and (f.whole or gate_mode_conflicts)]
        if not mine:
            continue
        blocked = tuple(f.strategy for f in mine)
        widened = tuple(f.strategy for f in mine if not f.whole)
        if data is not None:
            allow, existing, why = allowlist_for(recipe, data, feature, blocked)
        else:
            gated_off = {r.strategy for r in all_rows if r.feature == feature and r.gated}
            allow = tuple(s for s in seen_order if s not in blocked and s not in gated_off)
            existing = None
            why = (
                ""
                if allow
                else (
                    f"features.{feature} is blocked on every strategy it is offered on; "
                    "an empty allowlist means no gate"
                )
            )
        if allow is None or not allow:
            ungateable.append(Ungateable(feature, blocked, why))
            continue
        gates.append(Gate(feature, blocked, allow, existing, tuple(mine), widened))

    model_id = next((r.model_id for r in rows if r.model_id), "")
    if not model_id and data is not None and isinstance(data.get("model"), dict):
        model_id = str(data["model"].get("model_id") or "")
    ro = RecipeOverrides(
        recipe=recipe,
        model_id=model_id,
        strategy_order=strategy_order,
        unsupported=tuple(findings),
        gates=tuple(gates),
        mode_conflicts=tuple(f for f in findings if not f.whole),
        strategy_findings=tuple(base),
        ungateable=tuple(ungateable),
    )
    if not (ro.unsupported or ro.strategy_findings):
        return None
    return ro


# --------------------------------------------------------------------------- plain data


def _needs(feature: str) -> str:
    return f"features.{feature}.modes.<mode>.strategies (not honoured by the synthesizer)"


def _versions(vs: Sequence[str]) -> str | list[str]:
    return vs[0] if len(vs) == 1 else list(vs)


def _recipe_dict(ro: RecipeOverrides, gate_mode_conflicts: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if ro.model_id:
        out["model_id"] = ro.model_id
    if ro.unsupported:
        so: dict[str, Any] = {}
        for f in ro.unsupported:
            entry: dict[str, Any] = {}
            if not f.whole:
                entry["modes"] = list(f.modes)
            entry.update(reason=f.reason, vllm=_versions(f.vllm), works_from=f.works_from)
            so.setdefault(f.strategy, {"unsupported_features": {}})["unsupported_features"][
                f.feature
            ] = entry
        out["strategy_overrides"] = so
    if ro.gates:
        out["features"] = {g.feature: {"strategies": list(g.strategies)} for g in ro.gates}
    if ro.mode_conflicts:
        mc: dict[str, Any] = {}
        for f in ro.mode_conflicts:
            mc.setdefault(f.feature, {})[f.strategy] = {
                "blocked_modes": list(f.modes),
                "other_modes": list(f.other_modes),
                "reason": f.reason,
                "vllm": _versions(f.vllm),
                "works_from": f.works_from,
                "needs": _needs(f.feature),
                "gated": gate_mode_conflicts,
            }
        out["mode_conflicts"] = mc
    if ro.strategy_findings:
        out["strategy_findings"] = {
            f.strategy: {
                "reason": f.reason,
                "vllm": _versions(f.vllm),
                "works_from": f.works_from,
                "variants": list(f.variants),
            }
            for f in ro.strategy_findings
        }
    if ro.ungateable:
        out["ungateable"] = {
            u.feature: {"strategies": list(u.strategies), "why": u.why} for u in ro.ungateable
        }
    return out


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
    text = str(value)
    if _PLAIN.match(text) and text.lower() not in _YAML_WORDS and not text[:1].isdigit():
        return text
    return json.dumps(text, ensure_ascii=False)


def _flow(values: Sequence[str]) -> str:
    return "[" + ", ".join(_s(v) for v in values) + "]"


def _v(vs: Sequence[str]) -> str:
    return _s(vs[0]) if len(vs) == 1 else _flow(vs)


def _comments(f: Finding, pad: str, *, modes: bool = True) -> list[str]:
    """Comment lines above an entry: the vLLM error, file:line evidence, where seen, when to lift."""
    out = [f"vLLM {', '.join(f.vllm)}: {m}" for m in f.messages]
    out += [f"evidence: {e}" for e in f.evidence]
    seen = []
    if modes and f.modes:
        seen.append(f"modes {', '.join(f.modes)}")
    if f.variants:
        seen.append(f"variants {', '.join(f.variants)}")
    if f.hardware:
        seen.append(f"hardware {', '.join(f.hardware)}")
    if f.platforms:
        seen.append(f"platforms {', '.join(f.platforms)}")
    if seen:
        out.append(f"seen on: {'; '.join(seen)}")
    out.append(
        f"works from vLLM {f.works_from}"
        if f.works_from
        else "no scanned vLLM release makes it work yet"
    )
    return [f"{pad}# {_one_line(c)}" for c in out]


def render_yaml(doc: OverridesDoc) -> str:
    """The document as YAML, keyed by recipe file, with the evidence as comments."""
    out = [
        "# Strategy x feature overrides for vllm-project/recipes, generated by vllm-compat",
        f"# from {doc.source} ({'the release each recipe pins' if doc.pinned_only else 'every scanned release'}).",
        "# Per recipe file:",
        "#   strategy_overrides.<strategy>.unsupported_features.<feature>: what vLLM cannot start",
        "#     (the shape proposed in the recipes bug report; today's synthesizer does not read it).",
        "#   features.<feature>.strategies: the allowlist today's synthesizer honours;",
        "#     `compat overrides --apply DIR` writes exactly this into the recipe files.",
        f"#     Allowlists computed from: {doc.allowlists_from}.",
        "#   mode_conflicts: only some modes fail; needs a per-mode gate the synthesizer ignores"
        + (" (gated whole here, as asked)." if doc.gate_mode_conflicts else " (left ungated)."),
        "#   strategy_findings: the base command fails; no feature gate can help (informational).",
        "#   ungateable: a gate the allowlist cannot express (it would be empty).",
    ]
    if not doc.recipes:
        out.append("{}")
        return "\n".join(out) + "\n"
    for name, ro in doc.recipes.items():
        out.append("")
        out.append(f"{_s(name)}:")
        if ro.model_id:
            out.append(f"  model_id: {_s(ro.model_id)}")
        if ro.unsupported:
            out.append("  strategy_overrides:")
            current = None
            for f in ro.unsupported:
                if f.strategy != current:
                    current = f.strategy
                    out.append(f"    {_s(f.strategy)}:")
                    out.append("      unsupported_features:")
                out += _comments(f, " " * 8)
                out.append(f"        {_s(f.feature)}:")
                if not f.whole:
                    out.append(f"          modes: {_flow(f.modes)}")
                out.append(f"          reason: {_s(f.reason)}")
                out.append(f"          vllm: {_v(f.vllm)}")
                out.append(f"          works_from: {_s(f.works_from)}")
        if ro.gates:
            out.append("  features:")
            for g in ro.gates:
                for line in gate_comment(g):
                    out.append(f"    # {line}")
                out.append(f"    {_s(g.feature)}:")
                out.append(f"      strategies: {_flow(g.strategies)}")
        if ro.mode_conflicts:
            out.append("  mode_conflicts:")
            by_feature: dict[str, list[Finding]] = {}
            for f in ro.mode_conflicts:
                by_feature.setdefault(f.feature, []).append(f)
            for feature, fs in by_feature.items():
                out.append(f"    {_s(feature)}:")
                for f in fs:
                    out += _comments(f, " " * 6, modes=False)
                    out.append(f"      {_s(f.strategy)}:")
                    out.append(f"        blocked_modes: {_flow(f.modes)}")
                    out.append(f"        other_modes: {_flow(f.other_modes)}")
                    out.append(f"        reason: {_s(f.reason)}")
                    out.append(f"        vllm: {_v(f.vllm)}")
                    out.append(f"        works_from: {_s(f.works_from)}")
                    out.append(f"        needs: {_s(_needs(feature))}")
                    out.append(f"        gated: {_s(doc.gate_mode_conflicts)}")
        if ro.strategy_findings:
            out.append("  strategy_findings:")
            for f in ro.strategy_findings:
                out += _comments(f, " " * 4)
                out.append(f"    {_s(f.strategy)}:")
                out.append(f"      reason: {_s(f.reason)}")
                out.append(f"      vllm: {_v(f.vllm)}")
                out.append(f"      works_from: {_s(f.works_from)}")
                out.append(f"      variants: {_flow(f.variants)}")
        if ro.ungateable:
            out.append("  ungateable:")
            for u in ro.ungateable:
                out.append(f"    {_s(u.feature)}:")
                out.append(f"      strategies: {_flow(u.strategies)}")
                out.append(f"      why: {_s(u.why)}")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- apply


def gate_comment(gate: Gate) -> list[str]:
    """The comment lines (without `#`) written above a gate: reason, release, evidence, when to lift."""
    lines = []
    for f in gate.findings:
        vs = ", ".join(f.vllm)
        widened = "" if f.whole else f" (whole feature; only modes {', '.join(f.modes)} fail)"
        lines.append(f"vllm-compat: gated off {f.strategy}{widened}: {f.reason}")
        ev = list(f.evidence[:3]) + (
            [f"+{len(f.evidence) - 3} more"] if len(f.evidence) > 3 else []
        )
        lift = f"works from {f.works_from}" if f.works_from else "no scanned release starts it yet"
        lines.append(f"vLLM {vs}: {'; '.join(ev) if ev else 'no evidence recorded'} ({lift}).")
    return [_one_line(line) for line in lines]


def _write_atomic(path: Path, text: str) -> None:
    mode = path.stat().st_mode & 0o7777
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def apply_overrides(
    doc: OverridesDoc, recipes_root: Path | str, *, dry_run: bool = False
) -> ApplyResult:
    """Write each honoured gate (`features.<feature>.strategies`) into its recipe file.

    Allowlists are recomputed from the file being edited (so a file changed since
    the document was generated is still gated correctly); one already equal to its
    target is left alone, so a second run changes nothing. Only gates are
    written: mode conflicts that were not gated, `ungateable` entries and
    anything the editor cannot do safely land in `skipped` with the reason.
    Writes are atomic (a temporary file in the same directory, then os.replace);
    with `dry_run` nothing is written and `diffs` shows what would change.
    """
    root = _check_root(recipes_root)
    result = ApplyResult(dry_run=dry_run)
    for recipe, ro in doc.recipes.items():
        gated = {(g.feature, s) for g in ro.gates for s in g.blocked}
        for f in ro.mode_conflicts:
            if (f.feature, f.strategy) not in gated:
                result.skipped.append(
                    (
                        recipe,
                        (
                            f"mode conflict: features.{f.feature} modes {', '.join(f.modes)} are blocked on "
                            f"{f.strategy} but {', '.join(f.other_modes) or 'other modes'} work; needs a "
                            "per-mode gate the synthesizer does not honour (left ungated)"
                        ),
                    )
                )
        for u in ro.ungateable:
            result.skipped.append((recipe, u.why))
        if not ro.gates:
            continue
        text, data = _load_recipe(root, recipe)
        edits = []
        for g in ro.gates:
            allow, _, why = allowlist_for(recipe, data, g.feature, g.blocked)
            if allow is None:
                result.skipped.append((recipe, why))
                continue
            edits.append(AllowlistEdit(g.feature, allow, tuple(gate_comment(g))))
        if not edits:
            continue
        try:
            outcome = edit_allowlists(text, edits)
        except EditError as exc:
            result.skipped.append((recipe, f"cannot edit safely: {exc}"))
            continue
        if outcome.method is None:
            continue
        result.diffs[recipe] = "".join(
            difflib.unified_diff(
                text.splitlines(keepends=True),
                outcome.text.splitlines(keepends=True),
                fromfile=f"a/{recipe}",
                tofile=f"b/{recipe}",
            )
        )
        result.changed_files.append(recipe)
        result.methods[recipe] = outcome.method
        if outcome.notes:
            result.notes[recipe] = outcome.notes
        if not dry_run:
            try:
                _write_atomic(root.joinpath(*_safe_relpath(recipe).parts), outcome.text)
            except OSError as exc:
                raise UserError(
                    f"cannot write recipe: {exc.strerror or exc}", where=recipe
                ) from None
    return result
