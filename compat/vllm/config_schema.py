"""The config classes behind JSON-valued `vllm serve` flags, as pydantic will validate them.

A dataclass-typed flag (`--compilation-config`, `--attention-config`,
`--kv-transfer-config`, ...) is parsed by `TypeAdapter(cls).validate_json(val)`
(vLLM `engine/arg_utils.py` `parse_dataclass`), so a key that is not a field, or a
value of the wrong type, fails at parse time. Before 0.10 such flags take
`type=Cls.from_cli` and the class is a pydantic BaseModel, which ignores unknown keys
unless its `model_config` says otherwise. vLLM's `@config` decorator makes
each class a pydantic dataclass with `extra="forbid"` (`vllm/config/utils.py`);
a plain dataclass nested inside one is validated with pydantic's default, which
ignores unknown keys.

For every class reachable from such a flag (and `SpeculativeConfig`, whose JSON is
validated later, when the engine config is built) this records each init field:
its type as a small JSON type language (`type_spec`), its default, the numeric
bounds of `Field(ge=..)`, and the field validators that change what the field
accepts. Validators are matched against the shapes vLLM writes (`validator_kind`);
any other validator is recorded as `opaque`, and a value reaching it is unchecked.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from typing import Any

from compat.vllm.cli_kwargs import Hint, dotted, str_chain
from compat.vllm.cli_surface import AnnotationReader, ClassInfo, SymbolResolver
from compat.vllm.post_init import post_init_checks

ROOT_ALSO = ("SpeculativeConfig",)  # JSON validated when the engine config is built
_BOUNDS = ("ge", "gt", "le", "lt")


@dataclass
class ConfigField:
    class_name: str
    field: str  # '' for the class row itself
    type: str  # JSON type spec ('' for the class row)
    default: str  # JSON
    default_kind: str  # literal | factory:<Class> | unknown | required
    validators: str  # JSON list of {"mode", "kind", "file", "line", ...}
    extra: str  # class row: forbid | ignore | allow | unknown
    file: str
    line: int


class _Schema:
    def __init__(self, resolver: SymbolResolver) -> None:
        self.r = resolver
        self.ann = AnnotationReader(resolver)
        self.rows: list[ConfigField] = []
        self.seen: set[str] = set()

    def visit(self, cls: ClassInfo) -> None:
        if cls.name in self.seen:
            return
        self.seen.add(cls.name)
        validators = self._validators(cls)
        self.rows.append(
            ConfigField(
                cls.name,
                "",
                "",
                "null",
                "",
                json.dumps(validators.get("", [])),
                self._extra(cls),
                cls.file,
                cls.line,
            )
        )
        nested: list[ClassInfo] = []
        for fi in self.r.dataclass_fields(cls):
            if fi.classvar or not fi.init:
                continue
            hints = self.ann.hints(fi.annotation, fi.file)
            spec = self.type_spec(hints, nested)
            bounds = _bounds(fi.value) | _annotated_bounds(fi.annotation)
            if bounds:
                spec = {"t": "bounded", "of": spec, **bounds}
            default, kind = self.r.field_default(cls, fi.name)
            if fi.value is None:
                kind = "required"
            self.rows.append(
                ConfigField(
                    cls.name,
                    fi.name,
                    json.dumps(spec, sort_keys=True),
                    json.dumps(_jsonable(default)),
                    kind,
                    json.dumps(validators.get(fi.name, [])),
                    "",
                    fi.file,
                    fi.line,
                )
            )
        for n in nested:
            self.visit(n)

    # ---- types

    def type_spec(self, hints: list[Hint], nested: list[ClassInfo]) -> dict[str, Any]:
        specs = [self._one(h, nested) for h in hints]
        return specs[0] if len(specs) == 1 else {"t": "union", "of": specs}

    def _one(self, h: Hint, nested: list[ClassInfo]) -> dict[str, Any]:
        if h.kind in ("None", "bool", "int", "float", "str"):
            return {"t": h.kind.lower()}
        if h.kind == "Literal":
            return {
                "t": "literal",
                "values": _jsonable(h.values or []),
                "file": h.file,
                "line": h.line,
            }
        if h.kind == "enum" and h.cls is not None:
            return {
                "t": "enum",
                "name": h.name,
                "members": self._members(h.cls),
                "file": h.file,
                "line": h.line,
            }
        if h.kind == "class" and h.cls is not None:
            if h.is_dataclass:
                nested.append(h.cls)
                return {"t": "class", "name": h.name}
            return {"t": "opaque", "name": h.name}
        if h.kind in ("list", "set", "tuple"):
            elems = [self.type_spec(e, nested) for e in h.elems]
            if h.kind == "tuple" and not h.ellipsis and elems:
                return {"t": "tuple", "items": elems}
            return {"t": "list", "of": elems[0] if elems else {"t": "any"}}
        if h.kind == "dict":
            kv = [self.type_spec(e, nested) for e in h.elems] or [{"t": "any"}, {"t": "any"}]
            return {"t": "dict", "key": kv[0], "value": kv[-1]}
        if h.kind == "other" and h.name in ("Any", "object"):
            return {"t": "any"}
        return {"t": "opaque", "name": h.name or "?"}

    def _members(self, cls: ClassInfo) -> dict[str, Any]:
        """Enum member name -> value (tuples of other members resolved); `enum.auto()` as None."""
        out: dict[str, Any] = {}
        for st in cls.node.body:
            if (
                isinstance(st, ast.Assign)
                and len(st.targets) == 1
                and isinstance(st.targets[0], ast.Name)
            ):
                name = st.targets[0].id
                if name.startswith("_"):
                    continue
                out[name] = _member_value(st.value, out)
        return out

    # ---- class facts

    def _extra(self, cls: ClassInfo) -> str:
        """pydantic's `extra` for the class: from its decorator (vLLM's `config` forbids)."""
        for c in self.r.mro(cls):
            for d in c.node.decorator_list:
                call = d if isinstance(d, ast.Call) else None
                name = dotted(call.func if call else d) or ""
                explicit = _extra_kw(call) if call is not None else None
                if explicit:
                    return explicit
                if name.split(".")[-1] == "config":
                    got = self.r.resolve(c.file, "config")
                    if got is None:
                        return "unknown"
                    # the implementation, not its @overload stubs
                    mod = self.r.tree.parse(got[0])
                    impls = [
                        st
                        for st in (mod.body if mod else [])
                        if isinstance(st, ast.FunctionDef) and st.name == "config"
                    ]
                    extra = next((e for e in map(_extra_in, impls) if e), None)
                    if extra is not None:
                        return extra
                    if impls and all(_passes_through(fn) for fn in impls):
                        continue  # a no-op marker (0.11-0.14): the next decorator decides
                    return "unknown"
                if name.split(".")[-1] == "dataclass":
                    return "ignore"
        for c in self.r.mro(cls):  # a pydantic BaseModel: its model_config, else "ignore"
            for st in c.node.body:
                if (
                    isinstance(st, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == "model_config" for t in st.targets)
                    and isinstance(st.value, ast.Call)
                ):
                    kws = {k.arg: k.value for k in st.value.keywords}
                    if "extra" not in kws:
                        return "ignore"  # pydantic's default
                    v = kws["extra"]
                    return str(v.value) if isinstance(v, ast.Constant) else "unknown"
            if any((dotted(b) or "").split(".")[-1] == "BaseModel" for b in c.node.bases):
                return "ignore"
        return "unknown"

    def _validators(self, cls: ClassInfo) -> dict[str, list[dict[str, Any]]]:
        """Field validators by field name ('' = model validators), base classes first."""
        out: dict[str, list[dict[str, Any]]] = {}
        for c in reversed(self.r.mro(cls)):
            for st in c.node.body:
                if not isinstance(st, ast.FunctionDef):
                    continue
                for d in st.decorator_list:
                    if not isinstance(d, ast.Call):
                        continue
                    kind = (dotted(d.func) or "").split(".")[-1]
                    mode = next(
                        (
                            k.value.value
                            for k in d.keywords
                            if k.arg == "mode"
                            and isinstance(k.value, ast.Constant)
                            and isinstance(k.value.value, str)
                        ),
                        "after",
                    )
                    entry = {"mode": mode, "func": st.name, "file": c.file, "line": st.lineno}
                    if kind == "field_validator":
                        entry.update(validator_kind(st, mode, self.r, c.file))
                        for a in d.args:
                            if isinstance(a, ast.Constant) and isinstance(a.value, str):
                                out.setdefault(a.value, []).append(entry)
                    elif kind == "model_validator":
                        out.setdefault("", []).append({**entry, "kind": "opaque"})
        # The nearest `__post_init__` of the MRO, which pydantic runs after the fields.
        owner = next(
            (
                c
                for c in self.r.mro(cls)
                if any(
                    isinstance(st, ast.FunctionDef) and st.name == "__post_init__"
                    for st in c.node.body
                )
            ),
            None,
        )
        if owner is not None:
            out.setdefault("", []).extend(post_init_checks(self.r, owner))
        return out


def validator_kind(fn: ast.FunctionDef, mode: str, r: SymbolResolver, rel: str) -> dict[str, Any]:
    """What a field validator does, for the shapes vLLM writes; else `{"kind": "opaque"}`.

    - `skip_none` (wrap): `if value is None: return value; return handler(value)`;
    - `enum_name` (before): `if isinstance(value, str): return E[value.upper()]`, optionally after
      `if name not in E.__members__: raise ValueError(msg)` (`message` keeps the f-string);
    - `construct` (before): `if isinstance(value, dict): return Cls(**value)`: plain validation;
    - `allowed` (after): `if value not in (...): raise ValueError(msg)`.
    """
    body = [
        st
        for st in fn.body
        if not (isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant))
    ]
    args = [a.arg for a in fn.args.args]
    value = args[1] if len(args) > 1 else "value"
    src = "\n".join(ast.unparse(st) for st in body)
    if (
        mode == "wrap"
        and len(body) == 2
        and src.startswith(f"if {value} is None:\n    return {value}")
        and isinstance(body[1], ast.Return)
        and isinstance(body[1].value, ast.Call)
    ):
        return {"kind": "skip_none"}
    if (
        mode == "before"
        and len(body) == 2
        and isinstance(body[0], ast.If)
        and isinstance(body[1], ast.Return)
        and ast.unparse(body[1]) == f"return {value}"
    ):
        test = ast.unparse(body[0].test)
        inner = body[0].body
        if (
            test == f"isinstance({value}, dict)"
            and len(inner) == 1
            and isinstance(inner[0], ast.Return)
            and isinstance(inner[0].value, ast.Call)
            and inner[0].value.keywords
            and inner[0].value.keywords[0].arg is None
        ):
            return {"kind": "construct", "class": dotted(inner[0].value.func) or ""}
        if test == f"isinstance({value}, str)":
            if (
                len(inner) == 1
                and isinstance(inner[0], ast.Return)
                and inner[0].value is not None
                and str_chain(inner[0].value, value) is not None
            ):
                return {"kind": "transform", "expr": ast.unparse(inner[0].value), "arg": value}
            return _enum_name(inner, value, r, rel)
    if (
        mode == "after"
        and body
        and isinstance(body[0], ast.If)
        and isinstance(body[-1], ast.Return)
    ):
        t = body[0].test
        if (
            isinstance(t, ast.Compare)
            and len(t.ops) == 1
            and isinstance(t.ops[0], ast.NotIn)
            and ast.unparse(t.left) == value
            and len(body[0].body) == 1
            and isinstance(body[0].body[0], ast.Raise)
        ):
            try:
                allowed = list(ast.literal_eval(t.comparators[0]))
            except (ValueError, SyntaxError, TypeError):
                return {"kind": "opaque"}
            exc = body[0].body[0].exc
            return {"kind": "allowed", "values": allowed, **_raise_parts(exc)}
    return {"kind": "opaque"}


def _enum_name(inner: list[ast.stmt], value: str, r: SymbolResolver, rel: str) -> dict[str, Any]:
    names = {value: value}
    out: dict[str, Any] = {"kind": "enum_name", "upper": False}
    for st in inner:
        if (
            isinstance(st, ast.Assign)
            and len(st.targets) == 1
            and isinstance(st.targets[0], ast.Name)
        ):
            text = ast.unparse(st.value)
            if text == f"{value}.upper()":
                names[st.targets[0].id], out["upper"] = value, True
                continue
            return {"kind": "opaque"}
        if (
            isinstance(st, ast.If)
            and isinstance(st.test, ast.Compare)
            and len(st.body) == 1
            and isinstance(st.body[0], ast.Raise)
            and isinstance(st.test.ops[0], ast.NotIn)
        ):
            out.update(_raise_parts(st.body[0].exc))
            continue
        if (
            isinstance(st, ast.If)
            and not st.orelse
            and len(st.body) == 1
            and ast.unparse(st.body[0]) == "return None"
            and isinstance(st.test, ast.Compare)
            and ast.unparse(st.test.left) == f"{value}.lower()"
            and isinstance(st.test.ops[0], ast.Eq)
            and isinstance(st.test.comparators[0], ast.Constant)
        ):
            out.setdefault("none_names", []).append(st.test.comparators[0].value)  # "auto" -> None
            continue
        if isinstance(st, ast.Return) and isinstance(st.value, ast.Subscript):
            key = ast.unparse(st.value.slice)
            if key == f"{value}.upper()":
                out["upper"] = True
            elif key not in names:
                return {"kind": "opaque"}
            enum = r.resolve_class(rel, dotted(st.value.value) or "")
            if enum is None:
                return {"kind": "opaque"}
            out["enum"] = enum.name
            return out
        else:
            return {"kind": "opaque"}
    return {"kind": "opaque"}


def _raise_parts(exc: ast.expr | None) -> dict[str, Any]:
    if isinstance(exc, ast.Call) and exc.args:
        return {"exception": dotted(exc.func) or "", "message": ast.unparse(exc.args[0])}
    return {}


def _extra_kw(call: ast.Call) -> str | None:
    for k in call.keywords:
        if k.arg == "config" and isinstance(k.value, ast.Call):
            for kk in k.value.keywords:
                if kk.arg == "extra" and isinstance(kk.value, ast.Constant):
                    return str(kk.value.value)
    return None


def _passes_through(fn: ast.FunctionDef) -> bool:
    """Is `fn` a decorator that returns the class it is given unchanged (`return cls`), and
    nothing else (no pydantic ConfigDict, no call wrapping it)?"""
    if not fn.args.args:
        return False
    param = fn.args.args[0].arg
    returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return)]
    calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call)]
    return (
        bool(returns)
        and all(isinstance(r.value, ast.Name) and r.value.id == param for r in returns)
        and not calls
    )


def _extra_in(fn: ast.FunctionDef) -> str | None:
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and (dotted(node.func) or "").endswith("ConfigDict"):
            for k in node.keywords:
                if k.arg == "extra" and isinstance(k.value, ast.Constant):
                    return str(k.value.value)
    return None


def _bounds(value: ast.expr | None) -> dict[str, Any]:
    if isinstance(value, ast.Call) and (dotted(value.func) or "").split(".")[-1] == "Field":
        return _bound_kws(value)
    return {}


def _annotated_bounds(ann: ast.expr) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for node in ast.walk(ann):
        if isinstance(node, ast.Call) and (dotted(node.func) or "").split(".")[-1] == "Field":
            out.update(_bound_kws(node))
    return out


def _bound_kws(call: ast.Call) -> dict[str, Any]:
    out = {}
    for k in call.keywords:
        if k.arg in _BOUNDS:
            try:
                out[k.arg] = ast.literal_eval(k.value)
            except (ValueError, SyntaxError, TypeError):
                out[k.arg] = None
    return out


def _member_value(node: ast.expr, known: dict[str, Any]) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        pass
    if isinstance(node, ast.Name) and node.id in known:
        return known[node.id]
    if isinstance(node, ast.Tuple):
        return [_member_value(e, known) for e in node.elts]
    return None  # enum.auto() and other computed values


def _jsonable(value: Any) -> Any:
    if isinstance(value, (set, frozenset, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def extract_config_schema(resolver: SymbolResolver, roots: list[ClassInfo]) -> list[ConfigField]:
    """Rows for every class reachable from `roots` through dataclass-typed fields."""
    s = _Schema(resolver)
    for cls in roots:
        s.visit(cls)
    return s.rows
