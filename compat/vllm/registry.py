"""vLLM's model registry (`_VLLM_MODELS`), evaluated from the AST of registry.py.

The registry is a handful of dict literals merged with `**` spreads, plus one dict
comprehension. We evaluate exactly those constructs with a tiny interpreter and
refuse anything else (a new construct must fail loudly, not drop entries).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from compat.errors import LayoutError
from compat.sources.tree import REGISTRY, VllmTree

MERGED = "_VLLM_MODELS"


@dataclass(frozen=True)
class RegistryEntry:
    arch: str
    module: str  # fully qualified, as `_resolve_module_name` makes it
    class_name: str
    categories: tuple[str, ...]  # every category dict that lists the arch, in merge order
    file: str
    line: int


class _Unsupported(Exception):
    pass


def _resolve_module_name(rel: str) -> str:
    return rel if rel.startswith("vllm.") else f"vllm.model_executor.models.{rel}"


class _Evaluator:
    """Evaluates dict literals, spreads and a simple dict comprehension."""

    def __init__(self) -> None:
        self.env: dict[str, dict[str, tuple[str, str, int]]] = {}

    def value(self, node: ast.expr, local: dict[str, object]) -> Any:
        """The Python value the expression evaluates to (whatever the source computes)."""
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in local:
                return local[node.id]
            if node.id in self.env:
                return self.env[node.id]
            raise _Unsupported(f"unknown name {node.id}")
        if isinstance(node, ast.Tuple):
            return tuple(self.value(e, local) for e in node.elts)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            left = self.value(node.left, local)
            right = self.value(node.comparators[0], local)
            op = node.ops[0]
            if isinstance(op, ast.Eq):
                return left == right
            if isinstance(op, ast.NotEq):
                return left != right
            if isinstance(op, ast.In):
                return left in right
            if isinstance(op, ast.NotIn):
                return left not in right
        if isinstance(node, ast.BoolOp):
            vals = [self.value(v, local) for v in node.values]
            return all(vals) if isinstance(node.op, ast.And) else any(vals)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return not self.value(node.operand, local)
        raise _Unsupported(f"unsupported expression {ast.unparse(node)}")

    def registry_dict(self, node: ast.expr) -> dict[str, tuple[str, str, int]]:
        out: dict[str, tuple[str, str, int]] = {}
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if k is None:
                    out.update(self.registry_dict(v))
                    continue
                key = self.value(k, {})
                val = self.value(v, {})
                if not (isinstance(key, str) and isinstance(val, tuple) and len(val) == 2):
                    raise _Unsupported(f"entry {ast.unparse(k)} is not 'arch': (module, class)")
                out[key] = (str(val[0]), str(val[1]), v.lineno)
            return out
        if isinstance(node, ast.Name):
            if node.id not in self.env:
                raise _Unsupported(f"spread of unknown dict {node.id}")
            return dict(self.env[node.id])
        if isinstance(node, ast.DictComp) and len(node.generators) == 1:
            gen = node.generators[0]
            it = gen.iter
            if not (
                isinstance(it, ast.Call)
                and isinstance(it.func, ast.Attribute)
                and it.func.attr == "items"
                and not it.args
            ):
                raise _Unsupported(f"comprehension over {ast.unparse(it)}")
            source = self.registry_dict(it.func.value)
            for arch, (mod, cls, line) in source.items():
                local: dict[str, object] = {}
                _bind(gen.target, (arch, (mod, cls)), local)
                if all(self.value(c, local) for c in gen.ifs):
                    key = self.value(node.key, local)
                    val = self.value(node.value, local)
                    if not (isinstance(key, str) and isinstance(val, tuple) and len(val) == 2):
                        raise _Unsupported("comprehension does not yield 'arch': (module, class)")
                    out[key] = (str(val[0]), str(val[1]), line)
            return out
        raise _Unsupported(f"unsupported registry construct {type(node).__name__}")


def _bind(target: ast.expr, value: object, local: dict[str, object]) -> None:
    if isinstance(target, ast.Name):
        local[target.id] = value
    elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, tuple):
        if len(target.elts) != len(value):
            raise _Unsupported("unpacking arity")
        for t, v in zip(target.elts, value):
            _bind(t, v, local)
    else:
        raise _Unsupported(f"unsupported target {ast.unparse(target)}")


#: Where releases keep the registry, newest layout first: (file, merged dict). Before 0.6.3 the
#: dicts live in the models package's __init__.py and merge into `_MODELS`.
LAYOUTS = ((REGISTRY, MERGED), ("vllm/model_executor/models/__init__.py", "_MODELS"))


def read_registry(tree: VllmTree) -> list[RegistryEntry]:
    """Every arch of the merged registry dict in merge order; LayoutError if it cannot be read."""
    for rel, merged in LAYOUTS:
        if tree.exists(rel) and rel != REGISTRY:
            text = tree.read(rel) or ""
            if f"\n{merged} = " not in text and f"\n{merged}: " not in text:
                continue
        elif not tree.exists(rel):
            continue
        return _read_registry(tree, rel, merged)
    tree.require(REGISTRY, "model registry")  # raises the LayoutError naming what is missing
    return []


def _read_registry(tree: VllmTree, rel: str, MERGED: str) -> list[RegistryEntry]:
    REGISTRY = rel
    mod = tree.require(rel, "model registry")
    ev = _Evaluator()
    categories: list[str] = []
    merged_node: ast.expr | None = None
    for st in mod.body:
        target, value = None, None
        if (
            isinstance(st, ast.Assign)
            and len(st.targets) == 1
            and isinstance(st.targets[0], ast.Name)
        ):
            target, value = st.targets[0].id, st.value
        elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value:
            target, value = st.target.id, st.value
        if target is None or not isinstance(value, (ast.Dict, ast.DictComp)):
            continue  # every module-level dict may be spread into the merge (0.8: _FALLBACK_MODEL)
        if target == MERGED:
            merged_node = value
            continue
        try:
            ev.env[target] = ev.registry_dict(value)
            categories.append(target)
        except _Unsupported:
            continue  # e.g. _PREVIOUSLY_SUPPORTED_MODELS maps arch -> version string
    if merged_node is None:
        raise LayoutError(f"{REGISTRY} has no {MERGED} dict", where=f"vllm {tree.version}")
    try:
        merged = ev.registry_dict(merged_node)
    except _Unsupported as exc:
        raise LayoutError(
            f"cannot evaluate {MERGED} in {REGISTRY}: {exc}", where=f"vllm {tree.version}"
        ) from None
    spread_order = (
        [
            v.id
            for k, v in zip(merged_node.keys, merged_node.values)
            if k is None and isinstance(v, ast.Name)
        ]
        if isinstance(merged_node, ast.Dict)
        else []
    )
    out = []
    for arch, (m, c, line) in merged.items():
        cats = tuple(name for name in spread_order if arch in ev.env.get(name, {}))
        out.append(RegistryEntry(arch, _resolve_module_name(m), c, cats, REGISTRY, line))
    if not out:
        raise LayoutError(f"{MERGED} in {REGISTRY} is empty", where=f"vllm {tree.version}")
    return out
