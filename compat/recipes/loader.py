"""Read a recipes checkout (models/, strategies/, kv_store/, taxonomy.yaml).

Only the structure the synthesizer depends on is checked here (see `shape`);
everything else stays as the YAML gave it, because the recipes site itself reads
the files leniently and a checker that rejected what the site accepts would
disagree with the site about what exists.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml

from compat.errors import UserError
from compat.recipes.repo import HardwareProfile, Problem, Recipe, RecipesRepo, Strategy
from compat.recipes.shape import check_recipe, type_name

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _read_yaml(root: Path, path: Path) -> Any:
    rel = path.relative_to(root).as_posix()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read file: {exc}", where=rel) from exc
    try:
        data = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or getattr(exc, "reason", None) or str(exc)
        problem = str(problem).splitlines()[0] if str(problem).strip() else type(exc).__name__
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        position = getattr(exc, "position", None)  # a ReaderError's (a character yaml refuses)
        if mark is None and position is not None:
            at = f" at character {position}"
        raise UserError(f"YAML syntax error{at}: {problem}", where=rel) from exc
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        # A scalar the safe constructors reject (`!!int abc`, `2001-02-30`, a 5000-digit int).
        msg = str(exc).splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"invalid YAML value: {msg[:200]}", where=rel) from None
    _check_values(data, rel)
    return data


# Python refuses to print ints of more than 4300 digits (sys.int_info.str_digits_check_threshold
# and the default limit); every message naming such a value would fail, so refuse it here.
_MAX_INT_BITS = 4000 * 3


def _check_values(data: Any, rel: str) -> None:
    """Refuse what no later stage can handle: recursive aliases (`&a [*a]`), unprintable ints,
    and `.inf` / `.nan`, which no field of these files takes (sizes, GPU counts and tp are
    converted to whole numbers, which neither has)."""
    stack: list[tuple[Any, str, frozenset[int]]] = [(data, "", frozenset())]
    while stack:
        value, field, above = stack.pop()
        if (
            isinstance(value, int)
            and not isinstance(value, bool)
            and value.bit_length() > _MAX_INT_BITS
        ):
            raise UserError("integer too large", where=f"{rel}: {field or '(top)'}")
        if isinstance(value, float) and not math.isfinite(value):
            raise UserError(
                f"must be a finite number, not {value!r}", where=f"{rel}: {field or '(top)'}"
            )
        if isinstance(value, (dict, list)):
            if id(value) in above:
                raise UserError(
                    "recursive YAML alias (the value contains itself)",
                    where=f"{rel}: {field or '(top)'}",
                )
            inner = above | {id(value)}
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for k, v in items:
                if (
                    isinstance(k, int)
                    and not isinstance(k, bool)
                    and k.bit_length() > _MAX_INT_BITS
                ):
                    raise UserError(
                        "integer too large (as a key)", where=f"{rel}: {field or '(top)'}"
                    )
                sub = (
                    f"{field}[{k}]"
                    if isinstance(value, list)
                    else (f"{field}.{k}" if field else str(k))
                )
                stack.append((v, sub, inner))


def _yaml_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())


def _load_taxonomy(root: Path) -> tuple[dict[str, Any], dict[str, HardwareProfile]]:
    path = root / "taxonomy.yaml"
    if not path.is_file():
        raise UserError("missing: this is not a recipes checkout", where="taxonomy.yaml")
    data = _read_yaml(root, path)
    if not isinstance(data, dict):
        raise UserError(
            f"the top level must be a mapping, not a {type_name(data)}", where="taxonomy.yaml"
        )
    profiles = data.get("hardware_profiles")
    if not isinstance(profiles, dict):
        raise UserError(
            f"must be a mapping, not a {type_name(profiles)}",
            where="taxonomy.yaml: hardware_profiles",
        )
    hardware: dict[str, HardwareProfile] = {}
    for hid, raw in profiles.items():
        where = f"taxonomy.yaml: hardware_profiles.{hid}"
        if not isinstance(raw, dict):
            raise UserError(f"must be a mapping, not a {type_name(raw)}", where=where)
        brand = raw.get("brand")
        if not isinstance(brand, str):
            raise UserError(f"must be a string, not a {type_name(brand)}", where=f"{where}.brand")
        generation = raw.get("generation", raw.get("gpu_generation"))
        if isinstance(
            generation, list
        ):  # consumer cards list several; the synthesizer takes the first
            generation = generation[0] if generation else None
        gpu_count = raw.get("gpu_count")
        vram = raw.get("vram_gb")
        hardware[str(hid)] = HardwareProfile(
            id=str(hid),
            brand=brand,
            generation=generation if isinstance(generation, str) else None,
            gpu_count=gpu_count
            if isinstance(gpu_count, int) and not isinstance(gpu_count, bool)
            else 1,
            vram_gb=float(vram)
            if isinstance(vram, (int, float)) and not isinstance(vram, bool)
            else None,
            scalable=raw.get("scalable") is not False,
            restricted=bool(raw.get("restricted")),
        )
    return data, hardware


def _load_strategies(root: Path, folder: str) -> dict[str, Strategy]:
    directory = root / folder
    out: dict[str, Strategy] = {}
    if not directory.is_dir():
        if folder == "strategies":
            raise UserError("missing: this is not a recipes checkout", where=f"{folder}/")
        return out
    for path in sorted(directory.glob("*.yaml")):
        rel = path.relative_to(root).as_posix()
        data = _read_yaml(root, path)
        if not isinstance(data, dict):
            raise UserError(f"the top level must be a mapping, not a {type_name(data)}", where=rel)
        name = data.get("name")
        if not isinstance(name, str) or not name:
            raise UserError("is required and must be a non-empty string", where=f"{rel}: name")
        deploy_type = data.get("deploy_type", "single_node")
        if not isinstance(deploy_type, str):
            raise UserError(
                f"must be a string, not a {type_name(deploy_type)}", where=f"{rel}: deploy_type"
            )
        if name in out:
            raise UserError(
                f"duplicate strategy name {name!r} (also in {out[name].path})", where=f"{rel}: name"
            )
        out[name] = Strategy(name=name, path=rel, deploy_type=deploy_type, data=data)
    return out


def load_repo(root: Path) -> RecipesRepo:
    """Load a recipes checkout, raising UserError for input nothing can be said about."""
    root = Path(root)
    if not root.is_dir():
        raise UserError("recipes directory does not exist", where=f"--recipes {root}")
    if not (root / "models").is_dir():
        raise UserError(
            "no models/ folder: this is not a recipes checkout", where=f"--recipes {root}"
        )
    taxonomy, hardware = _load_taxonomy(root)
    strategies = _load_strategies(root, "strategies")
    kv_stores = _load_strategies(root, "kv_store")
    known = set(strategies)
    recipes: dict[str, Recipe] = {}
    problems: list[Problem] = []
    for path in _yaml_files(root / "models"):
        rel = path.relative_to(root).as_posix()
        data = _read_yaml(root, path)
        problems.extend(check_recipe(rel, data, known))
        recipes[rel] = Recipe(path=rel, data=data)
    return RecipesRepo(
        root=root,
        recipes=recipes,
        strategies=strategies,
        kv_stores=kv_stores,
        hardware=hardware,
        taxonomy=taxonomy,
        problems=problems,
    )
