"""The `choices=` of a `vllm serve` option when they are computed, not written as a literal.

Releases before 0.12 build some choices when the parser is made: the registered reasoning or
tool parser names (`list(ReasoningParserManager.reasoning_parsers)`), an enum's values
(`[f.value for f in LoadFormat]`), a module list plus None (`[*QUANTIZATION_METHODS, None]`,
the list written out, a dict's keys, or a Literal alias's strings with `get_args`).
argparse then says "invalid choice" at parse time, before any later lookup. Each shape is
read from the release: a registry stands for the parser names the scan finds, in the order the
release registers them.
"""

from __future__ import annotations

import ast
from typing import Any, Protocol


class SymbolResolver(Protocol):
    """What this module asks of compat.vllm.cli_surface.SymbolResolver (which imports this
    module, so it is named by what it does)."""

    def resolve(self, rel: str, name: str) -> tuple[str, Any] | None: ...

    def resolve_class(self, rel: str, name: str) -> Any: ...


#: Manager attribute -> parser kind (compat.vllm.parsers).
REGISTRIES = {"reasoning_parsers": "reasoning", "tool_parsers": "tool"}


def choices_of(
    r: SymbolResolver, rel: str, node: ast.expr, fn: ast.FunctionDef | None = None
) -> tuple[list[Any] | None, str]:
    """(values, registry kind) of a computed `choices=`; (None, '') when not one of the shapes."""
    if isinstance(node, ast.Name) and fn is not None:
        assigned = _assigned(fn, node.id)
        if assigned is not None:
            return choices_of(r, rel, assigned, None)
    for n in ast.walk(node):
        if (
            isinstance(n, ast.Attribute)
            and n.attr in REGISTRIES
            and (_name(n.value) or "").endswith("ParserManager")
        ):
            return None, REGISTRIES[n.attr]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("list", "sorted", "tuple")
        and len(node.args) == 1
    ):
        values, registry = choices_of(r, rel, node.args[0], fn)
        if values is not None and node.func.id == "sorted":
            values = sorted(values, key=str)
        return values, registry
    if isinstance(node, ast.ListComp):
        return _enum_values(r, rel, node), ""
    if isinstance(node, (ast.List, ast.Tuple)):
        out: list[Any] = []
        for e in node.elts:
            if isinstance(e, ast.Starred) and isinstance(e.value, ast.Name):
                inner = _module_list(r, rel, e.value.id)
                if inner is None:
                    return None, ""
                out += inner
            else:
                try:
                    out.append(ast.literal_eval(e))
                except (ValueError, SyntaxError):
                    return None, ""
        return out, ""
    return None, ""


def _name(node: ast.expr) -> str | None:
    return node.id if isinstance(node, ast.Name) else None


def _assigned(fn: ast.FunctionDef, name: str) -> ast.expr | None:
    """The value last assigned to a local `name` in the function (one plain assignment)."""
    found = None
    for st in ast.walk(fn):
        if (
            isinstance(st, ast.Assign)
            and len(st.targets) == 1
            and isinstance(st.targets[0], ast.Name)
            and st.targets[0].id == name
        ):
            found = st.value
    return found


def _enum_values(r: SymbolResolver, rel: str, comp: ast.ListComp) -> list[Any] | None:
    """`[f.value for f in Enum]` -> the members' values, in definition order."""
    gen = comp.generators[0] if len(comp.generators) == 1 else None
    if (
        gen is None
        or gen.ifs
        or not isinstance(gen.target, ast.Name)
        or not isinstance(gen.iter, ast.Name)
    ):
        return None
    if not (
        isinstance(comp.elt, ast.Attribute)
        and comp.elt.attr == "value"
        and _name(comp.elt.value) == gen.target.id
    ):
        return None
    cls = r.resolve_class(rel, gen.iter.id)
    if cls is None:
        return None
    out = []
    for st in cls.node.body:
        if (
            isinstance(st, ast.Assign)
            and len(st.targets) == 1
            and isinstance(st.targets[0], ast.Name)
            and not st.targets[0].id.startswith("_")
        ):
            try:
                out.append(ast.literal_eval(st.value))
            except (ValueError, SyntaxError):
                return None
    return out


def _module_list(r: SymbolResolver, rel: str, name: str) -> list[Any] | None:
    """A module-level list or tuple literal, as seen from `rel`."""
    found = r.resolve(rel, name)
    if found is None:
        return None
    node = found[1]
    value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
    if value is None:
        return None
    if (  # `list(get_args(QuantizationMethods))`: the strings of a Literal alias, in order
        isinstance(value, ast.Call)
        and _name(value.func) in ("list", "tuple")
        and len(value.args) == 1
        and isinstance(value.args[0], ast.Call)
        and _name(value.args[0].func) == "get_args"
        and len(value.args[0].args) == 1
        and isinstance(value.args[0].args[0], ast.Name)
    ):
        return _literal_alias(r, found[0], value.args[0].args[0].id)
    if isinstance(value, ast.Dict) and all(isinstance(k, ast.Constant) for k in value.keys):
        return [k.value for k in value.keys if isinstance(k, ast.Constant)]  # `*d`: its keys
    try:
        got = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return None
    return list(got) if isinstance(got, (list, tuple)) else None


def _literal_alias(r: SymbolResolver, rel: str, name: str) -> list[Any] | None:
    """The values of `Name = Literal["a", "b", ...]`, as seen from `rel`."""
    found = r.resolve(rel, name)
    node = found[1] if found is not None else None
    value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
    if not (
        isinstance(value, ast.Subscript)
        and (_name(value.value) == "Literal" or ast.unparse(value.value).endswith(".Literal"))
    ):
        return None
    elts = value.slice.elts if isinstance(value.slice, ast.Tuple) else [value.slice]
    try:
        return [ast.literal_eval(e) for e in elts]
    except (ValueError, SyntaxError):
        return None
