"""tools/recipes_site/compare.py loaded as a module (it is a script, not part of the package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

TOOL = Path(__file__).resolve().parents[1] / "tools" / "recipes_site" / "compare.py"


def load_compare() -> ModuleType:
    name = "recipes_site_compare"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


def js_yaml_or_skip(cache: Path) -> tuple[ModuleType, Path]:
    """The tool and its js-yaml modules; the test skips, saying why, without node or npm."""
    tool = load_compare()
    try:
        tool.node_binary()
        return tool, tool.js_yaml_modules(cache)
    except tool.Unavailable as exc:
        pytest.skip(f"the recipes site's JavaScript cannot run here: {exc}")
