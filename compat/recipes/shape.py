"""Shape checks for recipe YAML, split by how much damage a defect does.

A defect that leaves a recipe with no meaning (no model id, variants that are
not a mapping, a section of the wrong container type) stops the load with a
`UserError` naming the file and field: no later stage could say anything true
about that recipe. A defect that only spoils some command lines (a feature whose
args are not strings, an unknown strategy or mode id) becomes a `Problem`, so the
rest of the recipe is still judged and the defect itself becomes a finding.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from compat.errors import UserError
from compat.recipes.repo import Problem

#: Top-level sections the synthesizer reads as mappings (absent or null = empty).
MAPPING_SECTIONS = (
    "features",
    "strategy_overrides",
    "hardware_overrides",
    "strategy_hardware",
    "hardware_opt_in_features",
)
#: Top-level sections read as lists (absent or null = empty).
LIST_SECTIONS = ("compatible_strategies", "opt_in_features")


def type_name(value: Any) -> str:
    """YAML-flavoured type name for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, dict):
        return "mapping"
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (int, float)):
        return "number"
    return type(value).__name__


def arg_list(value: Any, recipe: str, field: str) -> tuple[tuple[str, ...], tuple[Problem, ...]]:
    """Read an args list the way the synthesizer would use it, reporting what it cannot.

    Numbers become their decimal text (js pushes them and they print the same);
    anything else that is not a string is dropped, since the synthesizer would
    either crash on it or spread it character by character.
    """
    if value is None:
        return (), ()
    if isinstance(value, list) and all(type(item) is str for item in value):
        return tuple(value), ()
    if not isinstance(value, list):
        return (), (Problem(recipe, field, f"must be a list of strings, not a {type_name(value)}"),)
    out: list[str] = []
    problems: list[Problem] = []
    for index, item in enumerate(value):
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, (int, float)) and not isinstance(item, bool):
            text = str(item)
            out.append(text)
            problems.append(
                Problem(
                    recipe, f"{field}[{index}]", f"is a number, not a string (rendered as {text!r})"
                )
            )
        else:
            problems.append(
                Problem(
                    recipe,
                    f"{field}[{index}]",
                    f"must be a string, not a {type_name(item)}; dropped",
                )
            )
    return tuple(out), tuple(problems)


def _member(value: Any, container: Any) -> bool:
    """`value in container`, False for an unhashable value (a list or mapping where an id belongs)."""
    try:
        return value in container
    except TypeError:
        return False


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _require(condition: bool, message: str, path: str, field: str) -> None:
    if not condition:
        raise UserError(message, where=f"{path}: {field}" if field else path)


def check_recipe(path: str, data: Any, strategy_ids: Iterable[str]) -> list[Problem]:
    """Raise UserError for a recipe nothing can be said about; return its confined problems."""
    _require(
        isinstance(data, dict),
        f"the top level must be a mapping, not a {type_name(data)}",
        path,
        "",
    )
    model = data.get("model")
    _require(isinstance(model, dict), f"must be a mapping, not a {type_name(model)}", path, "model")
    model_id = model.get("model_id")
    _require(
        isinstance(model_id, str) and model_id.strip() != "",
        "is required and must be a non-empty string"
        if model_id is None
        else f"must be a non-empty string, not a {type_name(model_id)}",
        path,
        "model.model_id",
    )
    variants = data.get("variants")
    _require(
        isinstance(variants, dict),
        f"must be a mapping, not a {type_name(variants)}",
        path,
        "variants",
    )
    _require(len(variants) > 0, "must declare at least one variant", path, "variants")
    for key, variant in variants.items():
        _require(
            isinstance(variant, dict),
            f"must be a mapping, not a {type_name(variant)}",
            path,
            f"variants.{key}",
        )
        vmodel = variant.get("model_id")
        _require(
            vmodel is None or (isinstance(vmodel, str) and vmodel.strip() != ""),
            f"must be a non-empty string, not a {type_name(vmodel)}",
            path,
            f"variants.{key}.model_id",
        )
    meta = data.get("meta")
    _require(
        meta is None or isinstance(meta, dict),
        f"must be a mapping, not a {type_name(meta)}",
        path,
        "meta",
    )
    tasks = (meta or {}).get("tasks")
    _require(
        tasks is None or isinstance(tasks, list),
        f"must be a list, not a {type_name(tasks)}",
        path,
        "meta.tasks",
    )
    for section in MAPPING_SECTIONS:
        value = data.get(section)
        _require(
            value is None or isinstance(value, dict),
            f"must be a mapping, not a {type_name(value)}",
            path,
            section,
        )
    for section in LIST_SECTIONS:
        value = data.get(section)
        _require(
            value is None or isinstance(value, list),
            f"must be a list, not a {type_name(value)}",
            path,
            section,
        )
    return _confined_problems(path, data, set(strategy_ids))


def _confined_problems(path: str, data: dict[str, Any], known: set[str]) -> list[Problem]:
    problems: list[Problem] = []
    model = data["model"]
    variants: dict[str, Any] = data["variants"]
    features = data.get("features") or {}

    if not isinstance(model.get("min_vllm_version"), (str, int, float)):
        problems.append(
            Problem(path, "model.min_vllm_version", "is missing; the recipe pins no release")
        )
    problems.extend(arg_list(model.get("base_args"), path, "model.base_args")[1])

    for index, sid in enumerate(data.get("compatible_strategies") or []):
        if not _member(sid, known):
            problems.append(
                Problem(
                    path, f"compatible_strategies[{index}]", f"unknown strategy id {sid!r}; skipped"
                )
            )
    for sid in data.get("strategy_hardware") or {}:
        if sid not in known:
            problems.append(
                Problem(path, f"strategy_hardware.{sid}", f"unknown strategy id {sid!r}")
            )

    for key, variant in variants.items():
        problems.extend(arg_list(variant.get("extra_args"), path, f"variants.{key}.extra_args")[1])
        modes = variant.get("default_modes")
        if modes is None:
            continue
        if not isinstance(modes, dict):
            problems.append(
                Problem(
                    path,
                    f"variants.{key}.default_modes",
                    f"must be a mapping, not a {type_name(modes)}",
                )
            )
            continue
        for fkey, mkey in modes.items():
            feature = features.get(fkey)
            field = f"variants.{key}.default_modes.{fkey}"
            if not isinstance(feature, dict):
                problems.append(Problem(path, field, f"references unknown feature {fkey!r}"))
            elif not isinstance(feature.get("modes"), dict):
                problems.append(Problem(path, field, f"references non-modal feature {fkey!r}"))
            elif not _member(mkey, feature["modes"]):
                problems.append(Problem(path, field, f"references unknown mode {mkey!r}"))

    for fkey, feature in features.items():
        field = f"features.{fkey}"
        if not isinstance(feature, dict):
            problems.append(
                Problem(path, field, f"must be a mapping, not a {type_name(feature)}; ignored")
            )
            continue
        problems.extend(_feature_problems(path, field, feature, variants, known))
    return problems


def _feature_problems(
    path: str, field: str, feature: dict[str, Any], variants: dict[str, Any], known: set[str]
) -> list[Problem]:
    problems: list[Problem] = []
    gate = feature.get("strategies")
    if gate is not None and not isinstance(gate, list):
        problems.append(
            Problem(
                path,
                f"{field}.strategies",
                f"is a {type_name(gate)}; the synthesizer only honours a list, "
                "so this gate is ignored",
            )
        )
    for index, sid in enumerate(gate if isinstance(gate, list) else []):
        if not _member(sid, known):
            problems.append(
                Problem(path, f"{field}.strategies[{index}]", f"unknown strategy id {sid!r}")
            )
    modes = feature.get("modes")
    if modes is None:
        problems.extend(arg_list(feature.get("args"), path, f"{field}.args")[1])
    elif not isinstance(modes, dict) or not modes:
        problems.append(Problem(path, f"{field}.modes", "must be a non-empty mapping"))
    else:
        if "args" in feature:
            problems.append(Problem(path, field, "declares both args and modes; args are ignored"))
        default_mode = feature.get("default_mode")
        if default_mode is not None and not _member(default_mode, modes):
            problems.append(
                Problem(path, f"{field}.default_mode", f"references unknown mode {default_mode!r}")
            )
        for mkey, mode in modes.items():
            mfield = f"{field}.modes.{mkey}"
            if not isinstance(mode, dict):
                problems.append(
                    Problem(path, mfield, f"must be a mapping, not a {type_name(mode)}")
                )
                continue
            problems.extend(arg_list(mode.get("args"), path, f"{mfield}.args")[1])
            allowed = mode.get("variants")
            if allowed is not None and not isinstance(allowed, list):
                problems.append(
                    Problem(
                        path, f"{mfield}.variants", f"must be a list, not a {type_name(allowed)}"
                    )
                )
            for vkey in allowed if isinstance(allowed, list) else []:
                if not _member(vkey, variants):
                    problems.append(
                        Problem(path, f"{mfield}.variants", f"references unknown variant {vkey!r}")
                    )
            for hkey, override in _mapping(mode.get("hardware_overrides")).items():
                if isinstance(override, dict):
                    problems.extend(
                        arg_list(
                            override.get("args"), path, f"{mfield}.hardware_overrides.{hkey}.args"
                        )[1]
                    )
    for hkey, override in _mapping(feature.get("hardware_overrides")).items():
        if isinstance(override, dict):
            problems.extend(
                arg_list(override.get("args"), path, f"{field}.hardware_overrides.{hkey}.args")[1]
            )
    return problems
