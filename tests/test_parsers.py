"""Tool-call / reasoning parser names (compat.vllm.parsers)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from compat.sources.tree import VllmTree
from compat.vllm.parsers import extract_parser_set, extract_parsers

MINI = Path(__file__).parent / "fixtures" / "minitrees"


def mini(name: str = "mini_current", root: Path | None = None) -> VllmTree:
    return VllmTree(root or MINI / name, "0.0.1", "src")


def test_lazy_registry_names_with_evidence() -> None:
    t = mini()
    p = extract_parsers(t)
    assert p.tool.status == "ok" and p.reasoning.status == "ok"
    assert p.tool.name_set() == {"hermes", "mistral"}
    assert p.reasoning.name_set() == {"qwen3", "deepseek_r1", "glm45"}
    hermes = next(n for n in p.tool.names if n.name == "hermes")
    assert (hermes.file, hermes.how) == ("vllm/tool_parsers/__init__.py", "lazy_registry")
    assert '"hermes"' in t.read(hermes.file).splitlines()[hermes.line - 1]
    assert (hermes.module, hermes.class_name) == ("hermes_tool_parser", "Hermes2ProToolParser")
    assert hermes.target_file == "vllm/tool_parsers/hermes_tool_parser.py" and hermes.target_exists
    mistral = next(n for n in p.tool.names if n.name == "mistral")
    assert mistral.target_exists is False  # registry names a file this tree lacks
    assert p.tool.registry_file == "vllm/tool_parsers/__init__.py"
    assert p.tool.check("hermes") == ("ok", None)
    assert p.tool.check("nope")[0] == "invalid"


def test_decorator_registrations_in_old_layout() -> None:
    p = extract_parsers(mini("mini_legacy"))
    assert p.tool.status == "ok"
    assert p.tool.name_set() == {"hermes", "hermes2", "granite-20b-fc", "late"}  # not the docstring
    dec = {n.name: n for n in p.tool.names}
    assert dec["hermes"].how == "decorator" and dec["hermes"].class_name == "Hermes2ProToolParser"
    assert dec["hermes"].file == "vllm/entrypoints/openai/tool_parsers/hermes_tool_parser.py"
    assert dec["late"].how == "register_call" and dec["late"].class_name == "Other"
    # no reasoning registry at all: unknown with a reason, never an empty "ok"
    assert p.reasoning.status == "unknown" and "_REASONING_PARSERS_TO_REGISTER" in p.reasoning.reason
    assert p.reasoning.check("qwen3")[0] == "unknown"


def test_registry_found_outside_known_home(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    shutil.copytree(MINI / "mini_current", root)
    (root / "vllm/parsing").mkdir()
    shutil.move(root / "vllm/reasoning/__init__.py", root / "vllm/parsing/reasoning_registry.py")
    s = extract_parser_set(mini(root=root), "reasoning")
    assert s.status == "ok" and s.registry_file == "vllm/parsing/reasoning_registry.py"
    assert s.name_set() == {"qwen3", "deepseek_r1", "glm45"}


@pytest.mark.slow
@pytest.mark.parametrize("version,n_tool,n_reasoning", [("0.23.0", 43, 25), ("0.24.0", 43, 27),
                                                         ("0.33.0", 58, 42)])
def test_real_counts(vllm_tree, version: str, n_tool: int, n_reasoning: int) -> None:
    t = vllm_tree(version)
    p = extract_parsers(t)
    assert (p.tool.status, p.reasoning.status) == ("ok", "ok")
    assert len(p.tool.names) == n_tool
    assert len(p.reasoning.names) == n_reasoning
    assert all(n.target_exists for n in p.tool.names + p.reasoning.names)
    for n in p.tool.names[:3] + p.reasoning.names[:3]:
        assert f'"{n.name}"' in t.read(n.file).splitlines()[n.line - 1]


@pytest.mark.slow
def test_real_name_changes(vllm_tree) -> None:
    # research §5.2: 0.24 drops `minimax` and adds `minimax_m3`; reasoning adds glm47, minimax_m3
    a, b = extract_parsers(vllm_tree("0.23.0")), extract_parsers(vllm_tree("0.24.0"))
    assert b.tool.name_set() - a.tool.name_set() == {"minimax_m3"}
    assert a.tool.name_set() - b.tool.name_set() == {"minimax"}
    assert b.reasoning.name_set() - a.reasoning.name_set() == {"glm47", "minimax_m3"}
    assert {"hermes", "qwen3_coder", "glm47", "deepseek_v32"} <= a.tool.name_set()
