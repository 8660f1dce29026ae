"""Where in a recipe file a cause lives: the YAML path and line a fix or an annotation points at."""

from __future__ import annotations

from typing import Any

import yaml

from compat.recipes.synthesis import STRATEGY


def cause_path(cause: dict[str, Any]) -> tuple[str, ...]:
    """The recipe path that introduces a cause's culprit."""
    kind, element, mode = cause["kind"], cause["element"], cause["mode"]
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


def line_of(text: str, path: tuple[str, ...]) -> int:
    """1-based line of the deepest key of `path` found in `text` (1 when none is)."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return 1
    line = 1
    for part in path:
        if not isinstance(node, yaml.MappingNode):
            break
        hit = next(((k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == part), None)
        if hit is None:
            break
        line = hit[0].start_mark.line + 1
        node = hit[1]
    return line
