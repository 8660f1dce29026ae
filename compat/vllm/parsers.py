"""Tool-call and reasoning parser names of one vLLM release (`--tool-call-parser`, `--reasoning-parser`).

Current layouts (research §5.2) register parsers lazily from literal dicts
`name -> (module_file, ClassName)`: `_TOOL_PARSERS_TO_REGISTER` in
`vllm/tool_parsers/__init__.py` and `_REASONING_PARSERS_TO_REGISTER` in
`vllm/reasoning/__init__.py`, read here with `ast.literal_eval` entry by entry.
Older layouts registered them eagerly with decorators
(`@ToolParserManager.register_module("hermes")` in
`vllm/entrypoints/openai/tool_parsers/*.py`); those are found by searching the
tree. When neither shape is present the set is `unknown`, never empty-and-ok.

`--tool-parser-plugin` / `--reasoning-parser-plugin` can add names at runtime; the
static sets describe in-tree parsers only.
"""

from __future__ import annotations

import ast
import posixpath
from dataclasses import dataclass, field
from typing import TypedDict, TypeGuard

from compat.sources.tree import VllmTree

TOOL = "tool"
REASONING = "reasoning"


class _ParserSpec(TypedDict):
    """Where one kind of parser is registered."""

    dict: str  # the lazy registry's variable
    manager: str  # the class whose register_module(...) registers eagerly
    files: tuple[str, ...]  # known homes of the lazy registry
    dirs: tuple[str, ...]  # where the eager registrations live


_SPEC: dict[str, _ParserSpec] = {
    TOOL: {
        "dict": "_TOOL_PARSERS_TO_REGISTER",
        "manager": "ToolParserManager",
        "files": (
            "vllm/tool_parsers/__init__.py",
            "vllm/entrypoints/openai/tool_parsers/__init__.py",
        ),
        "dirs": ("vllm/tool_parsers", "vllm/entrypoints/openai/tool_parsers"),
    },
    REASONING: {
        "dict": "_REASONING_PARSERS_TO_REGISTER",
        "manager": "ReasoningParserManager",
        "files": (
            "vllm/reasoning/__init__.py",
            "vllm/entrypoints/openai/reasoning_parsers/__init__.py",
        ),
        "dirs": ("vllm/reasoning", "vllm/entrypoints/openai/reasoning_parsers"),
    },
}


@dataclass
class ParserName:
    name: str
    kind: str  # "tool" | "reasoning"
    file: str  # where the name is written
    line: int
    how: str  # "lazy_registry" | "decorator" | "register_call"
    module: str | None = None  # file stem / module the class lives in
    class_name: str | None = None
    target_file: str | None = None
    target_exists: bool | None = None


@dataclass
class ParserSet:
    kind: str
    status: str  # "ok" | "unknown"
    reason: str | None = None
    names: list[ParserName] = field(default_factory=list)
    registry_file: str | None = None
    registry_line: int | None = None

    def name_set(self) -> set[str]:
        return {n.name for n in self.names}

    def check(self, name: str) -> tuple[str, str | None]:
        """ok | invalid | unknown for one `--*-parser` value."""
        if self.status != "ok":
            return "unknown", self.reason
        if name in self.name_set():
            return "ok", None
        return "invalid", f"{name!r} is not a built-in {self.kind} parser"


@dataclass
class Parsers:
    version: str
    tool: ParserSet
    reasoning: ParserSet


def extract_parsers(tree: VllmTree) -> Parsers:
    return Parsers(
        tree.version, extract_parser_set(tree, TOOL), extract_parser_set(tree, REASONING)
    )


def extract_parser_set(tree: VllmTree, kind: str) -> ParserSet:
    spec = _SPEC[kind]
    names: list[ParserName] = []
    registry_file = registry_line = None

    # 1. the lazy registry dict, in its known homes, else anywhere under vllm/
    found = None
    for rel in spec["files"]:
        found = _find_dict(tree, rel, spec["dict"])
        if found:
            break
    if found is None:
        for rel in tree.py_files("vllm"):
            text = tree.read(rel) or ""
            if spec["dict"] + " =" in text or spec["dict"] + ":" in text:
                found = _find_dict(tree, rel, spec["dict"])
                if found:
                    break
    if found is not None:
        rel, node = found
        registry_file, registry_line = rel, node.lineno
        base = posixpath.dirname(rel)
        for k, v in zip(node.keys, node.values):
            if k is None:  # **spread: not literal
                continue
            try:
                name = ast.literal_eval(k)
            except ValueError:
                continue
            if not isinstance(name, str):
                continue
            module = cls = None
            try:
                val = ast.literal_eval(v)
                if isinstance(val, (tuple, list)) and len(val) >= 2:
                    module, cls = str(val[0]), str(val[1])
            except ValueError:
                pass
            target = f"{base}/{module.replace('.', '/')}.py" if module else None
            names.append(
                ParserName(
                    name,
                    kind,
                    rel,
                    k.lineno,
                    "lazy_registry",
                    module,
                    cls,
                    target,
                    tree.exists(target) if target else None,
                )
            )

    # 2. eager registrations: decorators / direct register_module calls with literal names
    seen = {n.name for n in names}
    for n in _find_registrations(tree, spec, kind):
        if n.name not in seen:
            names.append(n)
            seen.add(n.name)

    if not names:
        return ParserSet(
            kind,
            "unknown",
            f"no {spec['dict']} dict and no {spec['manager']}.register_module(...) "
            f"registrations found",
        )
    return ParserSet(kind, "ok", None, names, registry_file, registry_line)


def _find_dict(tree: VllmTree, rel: str, var: str) -> tuple[str, ast.Dict] | None:
    mod = tree.parse(rel)
    if mod is None:
        return None
    for st in mod.body:
        value: ast.expr | None
        if isinstance(st, ast.Assign):
            targets, value = st.targets, st.value
        elif isinstance(st, ast.AnnAssign):
            targets, value = [st.target], st.value
        else:
            continue
        for t in targets:
            if isinstance(t, ast.Name) and t.id == var and isinstance(value, ast.Dict):
                return rel, value
    return None


def _find_registrations(tree: VllmTree, spec: _ParserSpec, kind: str) -> list[ParserName]:
    mgr = spec["manager"]
    out: list[ParserName] = []
    files: list[str] = []
    for folder in spec["dirs"]:
        files += tree.py_files(folder) if _isdir(tree, folder) else []
    for rel in sorted(files, key=lambda f: (_import_rank(tree, f), f)):
        text = tree.read(rel) or ""
        if f"{mgr}.register" not in text:
            continue
        mod = tree.parse(rel)
        if mod is None:
            continue
        for node in ast.walk(mod):
            if isinstance(node, ast.ClassDef):
                for d in reversed(node.decorator_list):  # stacked decorators apply bottom-up
                    if _is_register(d, mgr):
                        for name, line in _literal_names(d):
                            out.append(
                                ParserName(
                                    name,
                                    kind,
                                    rel,
                                    line,
                                    "decorator",
                                    rel.rsplit("/", 1)[-1][:-3],
                                    node.name,
                                    rel,
                                    True,
                                )
                            )
            elif (
                isinstance(node, ast.Expr)
                and isinstance(node.value, ast.Call)
                and _is_register(node.value, mgr)
            ):
                call = node.value
                cls_name = None
                for kw in call.keywords:
                    if kw.arg == "module" and isinstance(kw.value, ast.Name):
                        cls_name = kw.value.id
                for name, line in _literal_names(call):
                    out.append(
                        ParserName(
                            name, kind, rel, line, "register_call", None, cls_name, None, None
                        )
                    )
    return out


def _import_rank(tree: VllmTree, rel: str) -> int:
    """Where the package's __init__.py imports the module: eager registrations run in that
    order, so it is the order of the manager's dict (and of argparse's choices)."""
    pkg, _, stem = rel.rpartition("/")
    mod = tree.parse(f"{pkg}/__init__.py")
    order = 0
    for st in mod.body if mod is not None else []:
        if isinstance(st, ast.ImportFrom) and st.level == 1:
            order += 1
            if st.module == stem[:-3]:
                return order
    return 10_000


def _isdir(tree: VllmTree, rel: str) -> bool:
    return tree.is_dir(rel)


def _is_register(node: ast.AST, mgr: str) -> TypeGuard[ast.Call]:
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return False
    f = node.func
    return (
        f.attr in ("register_module", "register_lazy_module")
        and isinstance(f.value, ast.Name)
        and f.value.id == mgr
    )


def _literal_names(call: ast.Call) -> list[tuple[str, int]]:
    cands: list[ast.expr] = []
    if call.args:
        cands.append(call.args[0])
    for kw in call.keywords:
        if kw.arg in ("name", "names"):
            cands.append(kw.value)
    out = []
    for c in cands:
        if isinstance(c, ast.Constant) and isinstance(c.value, str):
            out.append((c.value, c.lineno))
        elif isinstance(c, (ast.List, ast.Tuple)):
            for e in c.elts:
                if isinstance(e, ast.Constant) and isinstance(e.value, str):
                    out.append((e.value, e.lineno))
    return out
