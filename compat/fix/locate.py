"""Where in a recipe file a cause lives: the YAML path and line a fix or an annotation points at."""

from __future__ import annotations

from typing import Any

import yaml

from compat.recipes.synthesis import STRATEGY


def cause_path(cause: dict[str, Any]) -> tuple[str, ...]:
    """The recipe path that introduces a cause's culprit."""
    kind, element, mode = cause["kind"], cause["element"], cause["mode"]
    if kind == "gate":  # an ungate proposal: the gate's own list
        return tuple(cause["label"].removeprefix("gate ").split("."))
    if kind == "feature":
        base = tuple(element.split("."))
        return (*base, "modes", mode) if mode else base
    if kind == "pin":
        return ("model", "min_vllm_version")
    if kind == "omni":
        return ("meta", "tasks")
    if kind in ("fact", "") or not element:
        return ("model", "model_id")
    if element == STRATEGY:
        return ("compatible_strategies",)
    return tuple(element.split("."))


#: libyaml's loader where PyYAML has it (the same nodes and marks, several times faster).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def key_lines(text: str) -> dict[tuple[str, ...], int]:
    """1-based line of every mapping key path in a recipe file (one parse per file)."""
    try:
        root = yaml.compose(text, Loader=_LOADER)
    except yaml.YAMLError:
        return {}
    out: dict[tuple[str, ...], int] = {}

    def walk(node: Any, path: tuple[str, ...]) -> None:
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode):
                    here = (*path, k.value)
                    out[here] = k.start_mark.line + 1
                    walk(v, here)

    walk(root, ())
    return out


def line_of(lines: dict[tuple[str, ...], int], path: tuple[str, ...]) -> int:
    """The line of the deepest key of `path` that exists (1 when none does)."""
    for n in range(len(path), 0, -1):
        if path[:n] in lines:
            return lines[path[:n]]
    return 1
