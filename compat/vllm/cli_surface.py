"""Every valid `vllm serve` flag of one vLLM release, read statically (AST, never imported).

How `vllm serve` builds its parser (research §5.1): `make_arg_parser` (0.23/0.24
`vllm/entrypoints/openai/cli_args.py`, 0.33 `vllm/entrypoints/common/cli_args.py`)
adds a few literal `parser.add_argument("--x", ...)` calls, then calls
`FrontendArgs.add_cli_args(parser)` (one `--field-name` per dataclass field of
`FrontendArgs` and its base `BaseFrontendArgs`, short `flags` added by
`_customize_cli_kwargs`) and `AsyncEngineArgs.add_cli_args(parser)`, which calls
`EngineArgs.add_cli_args` (literal `group.add_argument("--x", **xxx_kwargs["field"])`).

This module interprets those functions generically instead of hard-coding the
list: it finds `make_arg_parser` through the import in `vllm/entrypoints/cli/serve.py`
(or by searching), and follows every `Cls.add_cli_args(...)` call it meets. Each
flag's value type is derived from the backing config-dataclass field annotation the
way vLLM's `_compute_kwargs` does at runtime (dataclass -> JSON, bool ->
`BooleanOptionalAction` and a `--no-x` twin, `Literal` -> choices, ...), then
adjusted by explicit `type=` / `action=` keywords and by `kwargs["field"]["type"] = ...`
overrides in the same function.

Dotted sub-keys (`--speculative-config.method mtp`): for every JSON flag whose
backing type is a config dataclass, the AST fields of that dataclass (and its
dataclass bases), minus ClassVar, `_`-prefixed, `init=False` fields and the
documented internal fields of `SpeculativeConfig`; nested dataclass fields are
expanded one level (`pass_config.enable_sp`).

Plugins and `current_platform.pre_register_and_update(parser)` can add flags at
runtime; the static surface describes in-tree flags only.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TypeAlias, TypeGuard

from compat.sources.tree import VllmTree
from compat.vllm.cli_kwargs import (
    DELETED,
    ArgSpec,
    Hint,
    KwargsProfile,
    apply_kwargs,
    dotted,
    from_hints,
    kwargs_profile,
)

SERVE_CLI = "vllm/entrypoints/cli/serve.py"
SCRIPTS = "vllm/scripts.py"  # the `vllm` command before vllm/entrypoints/cli (0.5-0.7)
ARG_UTILS = "vllm/engine/arg_utils.py"
_MAKE_ARG_PARSER_CANDIDATES = (
    "vllm/entrypoints/common/cli_args.py",
    "vllm/entrypoints/openai/cli_args.py",
)

# Fields of a config dataclass that a user cannot set through the JSON flag:
# SpeculativeConfig fills these itself from the target/draft configs (research §5.1).
INTERNAL_FIELDS: dict[str, frozenset[str]] = {
    "SpeculativeConfig": frozenset(
        {
            "target_model_config",
            "target_parallel_config",
            "draft_model_config",
            "draft_parallel_config",
        }
    ),
}

_DATACLASS_DECORATORS = {
    "config",
    "dataclass",
    "dataclasses.dataclass",
    "pydantic.dataclasses.dataclass",
    "pydantic_dataclass",
}
_BUILTIN_TYPES = {
    "bool",
    "int",
    "float",
    "str",
    "bytes",
    "complex",
    "dict",
    "list",
    "tuple",
    "set",
    "frozenset",
    "type",
    "object",
}


# --------------------------------------------------------------------------- facts


@dataclass
class CliFlag:
    """One option string accepted by `vllm serve`."""

    flag: str  # "--pipeline-parallel-size", "-pp", "--no-enforce-eager"
    kind: str  # "long" | "short" | "negated"
    canonical: str  # the long form this option belongs to: "--pipeline-parallel-size"
    dest: str  # argparse dest: "pipeline_parallel_size"
    file: str  # where the option string is written (relative path)
    line: int
    value_type: str  # json|json_or_str|bool|bool_or_str|int|float|str|choice|list|none|unknown
    json_class: str | None = None  # config dataclass the JSON value is validated against
    choices: list[str] | None = None
    source: str = ""  # "make_arg_parser", "EngineArgs.add_cli_args", "FrontendArgs", ...
    config_class: str | None = None  # dataclass whose field backs the flag
    config_field: str | None = None
    conditional: str | None = None  # unparsed `if` test guarding the add_argument call
    spec: ArgSpec | None = None  # what argparse is told (action, nargs, type, choices, default)


@dataclass
class SourceStatus:
    """Whether one place that defines flags was found in this release."""

    name: str
    status: str  # "ok" | "unknown"
    file: str | None = None
    line: int | None = None
    reason: str | None = None


@dataclass
class SubkeySource:
    flag: str
    json_class: str
    file: str | None
    line: int | None
    status: str  # "ok" | "unknown"
    reason: str | None = None


@dataclass
class CliSurface:
    version: str
    status: str  # "ok" | "partial" | "unknown"
    reason: str | None
    flags: list[CliFlag] = field(default_factory=list)
    subkeys: dict[str, set[str]] = field(default_factory=dict)  # canonical flag -> dotted keys
    subkey_sources: dict[str, SubkeySource] = field(default_factory=dict)
    sources: list[SourceStatus] = field(default_factory=list)
    positionals: list[tuple[str, ArgSpec, str, int]] = field(
        default_factory=list
    )  # (dest, spec, file, line)

    def long_flags(self) -> set[str]:
        """Long option strings, without the `--no-*` twins."""
        return {f.flag for f in self.flags if f.kind == "long"}

    def by_flag(self) -> dict[str, CliFlag]:
        return {f.flag: f for f in self.flags}

    def lookup(self, flag: str) -> CliFlag | None:
        return self.by_flag().get(flag)

    def check_arg(self, arg: str) -> tuple[str, str | None]:
        """Is one command-line option valid? -> (status, reason); status ok|invalid|unknown.

        Handles `--x=v`, `--x_y` (vLLM normalises `_` to `-` before the first dot)
        and dotted JSON keys `--speculative-config.method`.
        """
        if self.status == "unknown":
            return "unknown", self.reason
        opt = arg.split("=", 1)[0]
        if not opt.startswith("-"):
            return "invalid", f"{arg!r} is not an option"
        index = self.by_flag()
        head, dot, rest = opt.partition(".")
        if head.startswith("--"):
            head = "--" + head[2:].replace("_", "-")
        flag = index.get(head)
        if flag is None:
            if self.status == "partial":
                return "unknown", f"{head} not found; flag extraction was partial: {self.reason}"
            return "invalid", f"{head} is not a `vllm serve` flag in vLLM {self.version}"
        if not dot:
            return "ok", None
        if flag.value_type not in ("json", "json_or_str"):
            return "invalid", f"{head} does not take a JSON object, so {opt} is not accepted"
        keys = self.subkeys.get(flag.canonical)
        if keys is None:
            return "unknown", f"{head} takes free-form JSON; sub-key {rest!r} not checked"
        key = rest.rstrip("+")
        if (
            key in keys
            or key.split(".")[0] in keys
            and not any(k.startswith(key.split(".")[0] + ".") for k in keys)
        ):
            return "ok", None
        return "invalid", f"{rest!r} is not a field of {flag.json_class} ({head})"


# --------------------------------------------------------------------------- resolver

FunctionNode: TypeAlias = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass
class ClassInfo:
    name: str
    file: str
    node: ast.ClassDef

    @property
    def line(self) -> int:
        return self.node.lineno


class SymbolResolver:
    """Resolve a name used in a module to its definition by following `from ... import`.

    Only module-level bindings are considered (including those under `if`/`try`,
    e.g. `TYPE_CHECKING` imports). Shared by the CLI, parser and gate extractors.
    """

    def __init__(self, tree: VllmTree) -> None:
        self.tree = tree
        self._bindings: dict[str, dict[str, list[ast.AST]]] = {}

    def module_file(self, modname: str) -> str | None:
        base = modname.replace(".", "/")
        for rel in (base + ".py", base + "/__init__.py"):
            if self.tree.exists(rel):
                return rel
        return None

    @staticmethod
    def _package_of(rel: str) -> str:
        parts = rel[:-3].split("/")
        if parts[-1] == "__init__":
            parts = parts[:-1]
        else:
            parts = parts[:-1]
        return ".".join(parts)

    def _abs_module(self, rel: str, node: ast.ImportFrom) -> str | None:
        if not node.level:
            return node.module
        pkg = self._package_of(rel).split(".")
        if node.level > 1:
            pkg = pkg[: len(pkg) - (node.level - 1)]
        return ".".join(pkg + ([node.module] if node.module else []))

    def bindings(self, rel: str) -> dict[str, list[ast.AST]]:
        if rel in self._bindings:
            return self._bindings[rel]
        out: dict[str, list[ast.AST]] = {}
        mod = self.tree.parse(rel)
        if mod is not None:
            self._collect(mod.body, out)
        self._bindings[rel] = out
        return out

    def _collect(self, body: list[ast.stmt], out: dict[str, list[ast.AST]]) -> None:
        for st in body:
            if isinstance(st, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                out.setdefault(st.name, []).append(st)
            elif isinstance(st, ast.ImportFrom):
                for a in st.names:
                    out.setdefault(a.asname or a.name, []).append(st)
            elif isinstance(st, ast.Assign):
                for t in st.targets:
                    if isinstance(t, ast.Name):
                        out.setdefault(t.id, []).append(st)
            elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                out.setdefault(st.target.id, []).append(st)
            elif isinstance(st, ast.If):
                self._collect(st.body, out)
                self._collect(st.orelse, out)
            elif isinstance(st, ast.Try):
                self._collect(st.body, out)
                for h in st.handlers:
                    self._collect(h.body, out)
                self._collect(st.orelse, out)
            elif (  # `type X = ...` (Python 3.12+)
                sys.version_info >= (3, 12)
                and isinstance(st, ast.TypeAlias)
                and isinstance(st.name, ast.Name)
            ):
                out.setdefault(st.name.id, []).append(st)

    def resolve(self, rel: str, name: str, depth: int = 0) -> tuple[str, ast.AST] | None:
        """(file, defining node) of `name` as seen from module `rel`; None if not found."""
        if depth > 12:
            return None
        cands = self.bindings(rel).get(name)
        if not cands:
            return None
        # prefer definitions over imports, first binding wins among equals
        for node in cands:
            if isinstance(
                node,
                (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef, ast.Assign, ast.AnnAssign),
            ) or (sys.version_info >= (3, 12) and isinstance(node, ast.TypeAlias)):
                return rel, node
        for node in cands:
            if isinstance(node, ast.ImportFrom):
                modname = self._abs_module(rel, node)
                if not modname:
                    continue
                orig = next((a.name for a in node.names if (a.asname or a.name) == name), name)
                target = self.module_file(modname)
                if target is not None:
                    got = self.resolve(target, orig, depth + 1)
                    if got is not None:
                        return got
                # `from pkg import module` -> not a symbol we track
        return None

    def resolve_class(self, rel: str, name: str) -> ClassInfo | None:
        if "." in name:  # module.Class forms are rare in the places we look
            name = name.rsplit(".", 1)[-1]
        got = self.resolve(rel, name)
        if got and isinstance(got[1], ast.ClassDef):
            return ClassInfo(got[1].name, got[0], got[1])
        return None

    def find_class_anywhere(self, name: str, under: str = "vllm/config") -> ClassInfo | None:
        for rel in self.tree.py_files(under):
            text = self.tree.read(rel) or ""
            if f"class {name}" not in text:
                continue
            mod = self.tree.parse(rel)
            if mod is None:
                continue
            for st in mod.body:
                if isinstance(st, ast.ClassDef) and st.name == name:
                    return ClassInfo(name, rel, st)
        return None

    # ---- class helpers

    def bases(self, cls: ClassInfo) -> list[ClassInfo]:
        out = []
        for b in cls.node.bases:
            nm = dotted(b.value if isinstance(b, ast.Subscript) else b)
            if nm is None:
                continue
            got = self.resolve_class(cls.file, nm)
            if got is not None:
                out.append(got)
        return out

    def mro(self, cls: ClassInfo, depth: int = 0) -> list[ClassInfo]:
        """Depth-first, left-to-right linearisation (enough for single-inheritance configs)."""
        seen: list[ClassInfo] = [cls]
        if depth > 20:
            return seen
        for b in self.bases(cls):
            for c in self.mro(b, depth + 1):
                if all(c.node is not s.node for s in seen):
                    seen.append(c)
        return seen

    def find_method(self, cls: ClassInfo, name: str) -> tuple[ClassInfo, FunctionNode] | None:
        for c in self.mro(cls):
            for st in c.node.body:
                if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)) and st.name == name:
                    return c, st
        return None

    def is_dataclass(self, cls: ClassInfo) -> bool:
        for c in self.mro(cls):
            for d in c.node.decorator_list:
                nm = dotted(d.func if isinstance(d, ast.Call) else d)
                if nm in _DATACLASS_DECORATORS or (nm or "").endswith(".dataclass"):
                    return True
        return False

    def is_dict(self, cls: ClassInfo) -> bool:
        """Derives from dict (`class X(dict[str, Y])`), directly or through resolved bases."""
        for c in self.mro(cls):
            for b in c.node.bases:
                nm = dotted(b.value if isinstance(b, ast.Subscript) else b) or ""
                if nm.split(".")[-1] == "dict":
                    return True
        return False

    def is_enum(self, cls: ClassInfo) -> bool:
        """Derives from enum.Enum (or IntEnum, StrEnum, ...), directly or through resolved bases."""
        for c in self.mro(cls):
            for b in c.node.bases:
                nm = dotted(b) or ""
                if nm.split(".")[-1] in ("Enum", "IntEnum", "StrEnum", "Flag", "IntFlag"):
                    return True
        return False

    def dataclass_fields(self, cls: ClassInfo) -> list[FieldInfo]:
        """Fields in definition order, base classes first (like `dataclasses.fields`)."""
        out: dict[str, FieldInfo] = {}
        for c in reversed(self.mro(cls)):
            if not self.is_dataclass(c) and c is not cls:
                continue
            for st in c.node.body:
                if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                    ann = ast.unparse(st.annotation)
                    out[st.target.id] = FieldInfo(
                        name=st.target.id,
                        owner=c.name,
                        file=c.file,
                        line=st.lineno,
                        annotation=st.annotation,
                        classvar="ClassVar" in ann,
                        init=_field_init(st.value),
                        value=st.value,
                    )
        return list(out.values())

    def field_default(self, cls: ClassInfo, name: str, depth: int = 0) -> tuple[Any, str]:
        """(default, kind) of a dataclass field: kind literal, factory:<Class> or unknown.

        Follows `= OtherConfig.field` and `get_field(OtherConfig, "field")`, the two ways
        EngineArgs borrows a config class's default.
        """
        fi = next((f for f in self.dataclass_fields(cls) if f.name == name), None)
        if fi is None or depth > 8:
            return None, "unknown"
        return self._default_of(fi.value, fi.file, depth)

    def _default_of(self, value: ast.expr | None, rel: str, depth: int) -> tuple[Any, str]:
        if value is None:
            return None, "unknown"  # no default: required
        if isinstance(value, ast.Call):
            fn = (dotted(value.func) or "").split(".")[-1]
            kw = {k.arg: k.value for k in value.keywords if k.arg}
            if fn in ("field", "Field"):
                if "default" in kw:
                    return self._default_of(kw["default"], rel, depth + 1)
                if value.args and fn == "Field":
                    return self._default_of(value.args[0], rel, depth + 1)
                factory = kw.get("default_factory")
                name = dotted(factory) if factory is not None else None
                if name in ("list", "dict", "set", "tuple"):
                    return {"list": [], "dict": {}, "set": [], "tuple": []}[name], "literal"
                if name:
                    return None, f"factory:{name.split('.')[-1]}"
                return None, "unknown"
            if (
                fn == "get_field"
                and len(value.args) == 2
                and isinstance(value.args[1], ast.Constant)
            ):
                owner = self.resolve_class(rel, dotted(value.args[0]) or "")
                if owner is not None:
                    return self.field_default(owner, str(value.args[1].value), depth + 1)
            return None, "unknown"
        if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name):
            owner = self.resolve_class(rel, value.value.id)
            if owner is not None and self.is_dataclass(owner):
                return self.field_default(owner, value.attr, depth + 1)
        if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not):
            # `default=not AsyncEngineArgs.enable_log_requests`
            inner, kind = self._default_of(value.operand, rel, depth + 1)
            return (not inner, "literal") if kind == "literal" else (None, "unknown")
        try:
            return ast.literal_eval(value), "literal"
        except (ValueError, SyntaxError, TypeError):
            return None, "unknown"


@dataclass
class FieldInfo:
    name: str
    owner: str
    file: str
    line: int
    annotation: ast.expr
    classvar: bool
    init: bool
    value: ast.expr | None = None  # the assigned default (`= 8`, `= field(...)`)


def _field_init(value: ast.expr | None) -> bool:
    if isinstance(value, ast.Call) and (dotted(value.func) or "").split(".")[-1] in (
        "field",
        "Field",
    ):
        for kw in value.keywords:
            if kw.arg == "init" and isinstance(kw.value, ast.Constant):
                return bool(kw.value.value)
    return True


# --------------------------------------------------------------------------- annotations


_Hint = Hint  # one member of an annotation's union (compat.vllm.cli_kwargs)


class AnnotationReader:
    """Flatten a field annotation into the set of type hints `_compute_kwargs` would see."""

    def __init__(self, resolver: SymbolResolver) -> None:
        self.r = resolver

    def hints(self, node: ast.expr | None, rel: str, depth: int = 0) -> list[_Hint]:
        if node is None or depth > 8:
            return [_Hint("other")]
        if isinstance(node, ast.Constant):
            if node.value is None:
                return [_Hint("None")]
            if isinstance(node.value, str):  # forward reference
                try:
                    return self.hints(ast.parse(node.value, mode="eval").body, rel, depth + 1)
                except SyntaxError:
                    return [_Hint("other")]
            return [_Hint("other")]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return self.hints(node.left, rel, depth + 1) + self.hints(node.right, rel, depth + 1)
        if isinstance(node, ast.Subscript):
            return self._subscript_hints(node, rel, depth)
        name = dotted(node)
        if name is None:
            return [_Hint("other")]
        return self._named_hints(name, rel, depth)

    def _subscript_hints(self, node: ast.Subscript, rel: str, depth: int) -> list[_Hint]:
        """`Origin[args]`: unions, wrappers, Literal values and the generic collections."""
        origin = (dotted(node.value) or "").split(".")[-1]
        sl = node.slice
        elts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        if origin == "Optional":
            return self.hints(elts[0], rel, depth + 1) + [_Hint("None")]
        if origin == "Union":
            return [h for e in elts for h in self.hints(e, rel, depth + 1)]
        if origin in ("Annotated", "SkipValidation", "ClassVar", "InitVar", "Final"):
            return self.hints(elts[0], rel, depth + 1)
        if origin == "Literal":
            return [
                _Hint(
                    "Literal",
                    values=self._literal_values(elts, rel, depth),
                    file=rel,
                    line=node.lineno,
                )
            ]
        low = origin.lower()
        if low in ("dict", "mapping", "mutablemapping"):
            return [_Hint("dict", elems=[self.hints(e, rel, depth + 1) for e in elts])]
        if low in ("list", "sequence", "tuple", "set", "frozenset"):
            ellipsis = any(isinstance(e, ast.Constant) and e.value is Ellipsis for e in elts)
            members = [
                self.hints(e, rel, depth + 1)
                for e in elts
                if not (isinstance(e, ast.Constant) and e.value is Ellipsis)
            ]
            kind = "tuple" if low == "tuple" else "set" if low in ("set", "frozenset") else "list"
            return [_Hint(kind, elems=members, ellipsis=ellipsis)]
        return [_Hint("other", name=origin)]

    def _literal_values(self, elts: list[ast.expr], rel: str, depth: int) -> list[Any]:
        vals: list[Any] = []
        for e in elts:
            try:
                vals.append(ast.literal_eval(e))
            except ValueError:
                # Literal[OtherAlias, "x"]: typing flattens a nested Literal alias
                nested = [h for h in self.hints(e, rel, depth + 1) if h.kind == "Literal"]
                if nested:
                    vals.extend(nested[0].values or [])
                else:
                    vals.append(ast.unparse(e))
        return vals

    def _named_hints(self, name: str, rel: str, depth: int) -> list[_Hint]:
        """A plain or dotted name: a builtin, or what the module binds it to (class, alias)."""
        short = name.split(".")[-1]
        if short in ("bool", "int", "float", "str"):
            return [_Hint(short)]
        if short in ("dict", "Mapping"):
            return [_Hint("dict")]
        if short in ("list", "tuple", "set", "frozenset"):
            return [_Hint("list")]
        if short in ("Any", "object"):
            return [_Hint("other", name=short)]
        got = self.r.resolve(rel, short) if "." not in name else None
        if got is not None:
            frel, defn = got
            if isinstance(defn, ast.ClassDef):
                return [self._class_hint(ClassInfo(defn.name, frel, defn))]
            alias_val = defn.value if isinstance(defn, (ast.Assign, ast.AnnAssign)) else None
            if sys.version_info >= (3, 12) and isinstance(defn, ast.TypeAlias):
                alias_val = defn.value
            if isinstance(alias_val, (ast.Subscript, ast.BinOp, ast.Name, ast.Attribute)):
                # `X = Literal[...]`, `X: TypeAlias = A | B`; `X = TypeVar(...)` is not an alias
                return self.hints(alias_val, frel, depth + 1)
        return [_Hint("other", name=short)]

    def _class_hint(self, info: ClassInfo) -> _Hint:
        if self.r.is_enum(info):
            return _Hint("enum", name=info.name, cls=info, file=info.file, line=info.line)
        return _Hint(
            "class",
            name=info.name,
            cls=info,
            file=info.file,
            line=info.line,
            is_dataclass=self.r.is_dataclass(info),
            dict_subclass=self.r.is_dict(info),
        )

    def classify(self, hints: list[_Hint]) -> tuple[str, str | None, list[str] | None]:
        """(value_type, json_class, choices), mirroring `_compute_kwargs`' branch order."""
        kinds = {h.kind for h in hints}
        for h in hints:
            if h.kind == "class" and h.cls is not None and self.r.is_dataclass(h.cls):
                return "json", h.cls.name, None
        if kinds == {"bool", "str", "None"}:
            return "bool_or_str", None, None
        if "bool" in kinds:
            return "bool", None, None
        if "Literal" in kinds:
            lit = next(h for h in hints if h.kind == "Literal")
            vals = [str(v) for v in (lit.values or [])]
            if "str" in kinds:
                return "str", None, None
            if "None" in kinds:
                vals.append("None")
            return "choice", None, vals
        if kinds & {"tuple", "list"}:
            return "list", None, None
        if "int" in kinds:
            return "int", None, None
        if "float" in kinds:
            return "float", None, None
        non_builtin = any(h.kind in ("class", "enum", "other") for h in hints)
        if "dict" in kinds and ("str" in kinds or non_builtin):
            return "json_or_str", None, None
        if "dict" in kinds:
            return "json", None, None
        if "str" in kinds or non_builtin:
            return "str", None, None
        return "unknown", None, None


# --------------------------------------------------------------------------- extraction


#: variable -> (config class, field) it holds `get_kwargs(Cls)` (field None) or one field's kwargs of
_KwargsVars: TypeAlias = dict[str, tuple[ClassInfo | None, str | None]]
#: (config class, field) -> argparse keyword -> the value assigned to it in the function
_Overrides: TypeAlias = dict[tuple[str, str], dict[str, ast.expr]]


@dataclass
class _Ctx:
    """What a function interpretation needs: where we are and which class it runs for."""

    file: str
    cls: ClassInfo | None  # class whose add_cli_args we are in (for `get_kwargs(cls)`)
    source: str


class _CliExtractor:
    def __init__(self, tree: VllmTree) -> None:
        self.tree = tree
        self.r = SymbolResolver(tree)
        self.ann = AnnotationReader(self.r)
        self.flags: list[CliFlag] = []
        self.positionals: list[tuple[str, ArgSpec, str, int]] = []
        self._profile: KwargsProfile | None = None
        self.sources: list[SourceStatus] = []
        self._visited: set[tuple[str, int]] = set()
        self._functions: dict[str, list[ast.FunctionDef]] = {}

    # ---- locate make_arg_parser

    def find_make_arg_parser(self) -> tuple[str, ast.FunctionDef] | None:
        # 1. follow the import in the `vllm serve` subcommand
        serve = self.tree.parse(SERVE_CLI)
        if serve is not None:
            got = self.r.resolve(SERVE_CLI, "make_arg_parser")
            if got is not None and isinstance(got[1], ast.FunctionDef):
                return got[0], got[1]
        # 2. known homes, then any cli_args.py defining it that calls AsyncEngineArgs
        cands = list(_MAKE_ARG_PARSER_CANDIDATES)
        cands += [
            p
            for p in self.tree.py_files("vllm/entrypoints")
            if p.endswith("cli_args.py") and p not in cands
        ]
        for rel in cands:
            text = self.tree.read(rel)
            if not text or "def make_arg_parser" not in text or "add_cli_args" not in text:
                continue
            mod = self.tree.parse(rel)
            for st in mod.body if mod else []:
                if isinstance(st, ast.FunctionDef) and st.name == "make_arg_parser":
                    return rel, st
        return None

    # ---- interpretation of a function that adds arguments

    def run(self) -> None:
        own = self._serve_subparser_arguments()
        self._run_make_arg_parser()
        if own is not None:
            self._prepend(*own)

    def _run_make_arg_parser(self) -> None:
        found = self.find_make_arg_parser()
        if found is None:
            self.sources.append(
                SourceStatus(
                    "make_arg_parser",
                    "unknown",
                    reason="no make_arg_parser found (looked at vllm/entrypoints/cli/serve.py imports "
                    "and vllm/entrypoints/**/cli_args.py)",
                )
            )
            # still try the engine flags directly: they are most of the surface
            engine = self.r.resolve_class(ARG_UTILS, "AsyncEngineArgs") or self.r.resolve_class(
                ARG_UTILS, "EngineArgs"
            )
            if engine is not None:
                self._interpret_add_cli_args(engine)
            else:
                self.sources.append(
                    SourceStatus(
                        "EngineArgs.add_cli_args",
                        "unknown",
                        reason=f"{ARG_UTILS} does not define EngineArgs / AsyncEngineArgs",
                    )
                )
            return
        rel, fn = found
        self.sources.append(SourceStatus("make_arg_parser", "ok", rel, fn.lineno))
        self._interpret(fn, _Ctx(rel, None, "make_arg_parser"))

    def _serve_subparser_arguments(
        self,
    ) -> tuple[list[CliFlag], list[tuple[str, ArgSpec, str, int]]] | None:
        """The arguments the `serve` subparser gets before `make_arg_parser(serve_parser)` is
        called on it: up to 0.9 the positional `model_tag` and `--config` are added there (0.5-0.7
        in `vllm/scripts.py` main, 0.8-0.9 in the serve subcommand's `subparser_init`); later
        releases add them in make_arg_parser itself. Interpreted into fresh lists, which `run`
        puts first, as argparse registers them first."""
        for rel in (SERVE_CLI, SCRIPTS):
            mod = self.tree.parse(rel)
            for fn in (n for n in ast.walk(mod) if isinstance(n, ast.FunctionDef)) if mod else ():
                target = _make_arg_parser_target(fn)
                if target is None:
                    continue
                name, line = target
                saved = self.flags, self.positionals
                self.flags, self.positionals = [], []
                try:
                    for call, cond in _calls_with_conditions(fn):
                        f = call.func
                        if (
                            call.lineno < line
                            and isinstance(f, ast.Attribute)
                            and f.attr == "add_argument"
                            and isinstance(f.value, ast.Name)
                            and f.value.id == name
                        ):
                            self._add_argument(call, cond, _Ctx(rel, None, fn.name), {}, {})
                    return self.flags, self.positionals
                finally:
                    self.flags, self.positionals = saved
        return None

    def _prepend(
        self, flags: list[CliFlag], positionals: list[tuple[str, ArgSpec, str, int]]
    ) -> None:
        have = {f.flag for f in self.flags}
        self.flags[:0] = [f for f in flags if f.flag not in have]
        dests = {p[0] for p in self.positionals}
        self.positionals[:0] = [p for p in positionals if p[0] not in dests]

    def _interpret_add_cli_args(self, cls: ClassInfo) -> None:
        got = self.r.find_method(cls, "add_cli_args")
        label = f"{cls.name}.add_cli_args"
        if got is None:
            self.sources.append(
                SourceStatus(
                    label,
                    "unknown",
                    cls.file,
                    cls.line,
                    reason=f"{cls.name} has no add_cli_args method",
                )
            )
            return
        owner, fn = got
        key = (owner.file, fn.lineno)
        if key in self._visited:
            return
        self._visited.add(key)
        self.sources.append(SourceStatus(label, "ok", owner.file, fn.lineno))
        self._interpret(fn, _Ctx(owner.file, cls, label))

    def _interpret(self, fn: FunctionNode, ctx: _Ctx) -> None:
        kwvars = self._kwargs_vars(fn, ctx)
        overrides = self._overrides(fn, kwvars)
        for call, cond in _calls_with_conditions(fn):
            f = call.func
            if isinstance(f, ast.Attribute) and f.attr == "add_argument":
                self._add_argument(call, cond, ctx, kwvars, overrides)
            elif isinstance(f, ast.Attribute) and f.attr == "add_cli_args":
                owner = dotted(f.value)
                if owner is None:
                    continue
                if owner == "cls" and ctx.cls is not None:
                    continue  # classmethod recursion on itself
                target = self.r.resolve_class(ctx.file, owner)
                if target is None:
                    self.sources.append(
                        SourceStatus(
                            f"{owner}.add_cli_args",
                            "unknown",
                            ctx.file,
                            call.lineno,
                            reason=f"cannot resolve class {owner} from {ctx.file}",
                        )
                    )
                    continue
                self._interpret_add_cli_args(target)

    def _kwargs_vars(self, fn: FunctionNode, ctx: _Ctx) -> _KwargsVars:
        """Variables bound to `get_kwargs(Cls)` (field None) or `get_kwargs(Cls)["f"]` / `x["f"]`."""
        out: _KwargsVars = {}
        for st in ast.walk(fn):
            if not (
                isinstance(st, ast.Assign)
                and len(st.targets) == 1
                and isinstance(st.targets[0], ast.Name)
            ):
                continue
            name, v = st.targets[0].id, st.value
            if _is_get_kwargs(v):
                out[name] = (self._get_kwargs_class(v, ctx), None)
            elif isinstance(v, ast.Subscript) and (key := _str_const(v.slice)) is not None:
                base = v.value
                if _is_get_kwargs(base):
                    out[name] = (self._get_kwargs_class(base, ctx), key)
                elif isinstance(base, ast.Name) and base.id in out and out[base.id][1] is None:
                    out[name] = (out[base.id][0], key)
        return out

    def _get_kwargs_class(self, call: ast.Call, ctx: _Ctx) -> ClassInfo | None:
        if not call.args:
            return None
        nm = dotted(call.args[0])
        if nm == "cls":
            return ctx.cls
        return self.r.resolve_class(ctx.file, nm) if nm else None

    def _choices_resolver(self, rel: str, line: int) -> Any:
        """compat.vllm.cli_choices.choices_of for a `choices=` written at rel:line (a local name
        resolved in the function around it)."""
        from compat.vllm.cli_choices import choices_of

        fn = None
        for node in self._functions_of(rel):
            if node.lineno <= line <= (node.end_lineno or node.lineno):
                if fn is None or node.lineno >= fn.lineno:
                    fn = node  # the innermost
        return lambda node: choices_of(self.r, rel, node, fn)

    def _functions_of(self, rel: str) -> list[ast.FunctionDef]:
        """The module's function definitions in walk order, listed once per file: the
        argument parser's module has hundreds of `choices=`, and walking it again for each
        was 40% of a release's scan at 0.34.0."""
        if rel not in self._functions:
            mod = self.r.tree.parse(rel)
            walked = ast.walk(mod) if mod is not None else ()
            self._functions[rel] = [n for n in walked if isinstance(n, ast.FunctionDef)]
        return self._functions[rel]

    def _overrides(self, fn: FunctionNode, kwvars: _KwargsVars) -> _Overrides:
        """`xxx_kwargs["field"]["type"] = ...` and `alias["type"] = ...` in the function."""
        out: _Overrides = {}
        for st in ast.walk(fn):
            if not isinstance(st, (ast.Assign, ast.Delete)):
                continue
            for t in st.targets:
                key = _override_target(t, kwvars)
                if key is not None:
                    (owner, fld), attr = key
                    out.setdefault((owner, fld), {})[attr] = (
                        st.value if isinstance(st, ast.Assign) else DELETED
                    )
        return out

    def _field_type(
        self, cls: ClassInfo | None, fld: str
    ) -> tuple[str, str | None, list[str] | None, FieldInfo | None]:
        if cls is None:
            return "unknown", None, None, None
        for fi in self.r.dataclass_fields(cls):
            if fi.name == fld:
                vt, jc, ch = self.ann.classify(self.ann.hints(fi.annotation, fi.file))
                return vt, jc, ch, fi
        return "unknown", None, None, None

    def _add_argument(
        self,
        call: ast.Call,
        cond: str | None,
        ctx: _Ctx,
        kwvars: _KwargsVars,
        overrides: _Overrides,
    ) -> None:
        """One `add_argument(...)` call: its option strings, value type and argparse spec."""
        lits = [(s, a.lineno) for a in call.args if (s := _str_const(a)) is not None]
        if ctx.cls is not None and any(isinstance(a, ast.JoinedStr) for a in call.args):
            self._fields_expansion(ctx, call)
            return
        opts = [(s, line) for s, line in lits if s.startswith("-")]
        kw: dict[str, ast.expr] = {k.arg: k.value for k in call.keywords if k.arg}
        if not opts:
            if lits:  # the positional `model_tag`
                dest, line = lits[0]
                spec = apply_kwargs(ArgSpec(dest=dest), kw, ctx.file, call.lineno)
                self.positionals.append((dest, spec, ctx.file, line))
            return
        backing_cls, backing_field = _backing_field(_unfold_spreads(call, kw), kwvars)
        owner = backing_cls.name if backing_cls else None
        ov = overrides.get((owner or "?", backing_field or ""), {})
        value_type, json_class, choices = "none", None, None
        if backing_field is not None:
            value_type, json_class, choices, _fi = self._field_type(backing_cls, backing_field)
            value_type, choices = _apply_overrides(value_type, choices, _live(ov))
        value_type, choices = _apply_explicit(
            value_type, choices, kw, explicit_only=backing_field is None
        )
        spec = self._argument_spec(call, ctx, kw, (backing_cls, backing_field), ov)
        choices, value_type = self._literal_choices(spec, kw, ctx, choices, value_type)
        longs = [s for s, _line in opts if s.startswith("--")]
        canonical = longs[0] if longs else opts[0][0]
        dest = kw_dest(kw) or canonical.lstrip("-").replace("-", "_")
        spec.dest = dest
        common: dict[str, Any] = {
            "canonical": canonical,
            "dest": dest,
            "file": ctx.file,
            "source": ctx.source,
            "config_class": owner,
            "config_field": backing_field,
            "conditional": cond,
        }
        for flag, line in opts:
            kind = "long" if flag.startswith("--") else "short"
            self.flags.append(
                CliFlag(
                    flag=flag,
                    kind=kind,
                    line=line,
                    value_type=value_type,
                    json_class=json_class,
                    choices=choices,
                    spec=spec,
                    **common,
                )
            )
        if value_type == "bool" and _negates(kw, backing_field is not None, _live(ov)):
            for flag, line in opts:
                if flag.startswith("--"):
                    self.flags.append(
                        CliFlag(
                            flag="--no-" + flag[2:],
                            kind="negated",
                            line=line,
                            value_type="bool",
                            **common,
                        )
                    )

    def _argument_spec(
        self,
        call: ast.Call,
        ctx: _Ctx,
        kw: dict[str, ast.expr],
        backing: tuple[ClassInfo | None, str | None],
        ov: dict[str, ast.expr],
    ) -> ArgSpec:
        """What argparse is told: the backing field's `_compute_kwargs`, its overrides, then the
        call's own keywords (but `choices=get_args(Alias)`, which `_literal_choices` reads)."""
        backing_cls, backing_field = backing
        if backing_field is None:
            spec = ArgSpec()
        else:
            spec = self._field_spec(backing_cls, backing_field)
            apply_kwargs(
                spec,
                ov,
                ctx.file,
                call.lineno,
                resolve_choices=self._choices_resolver(ctx.file, call.lineno),
            )
        get_args = _get_args_alias(kw) is not None
        apply_kwargs(
            spec,
            {k: v for k, v in kw.items() if not (k == "choices" and get_args)},
            ctx.file,
            call.lineno,
            lambda node: self.r._default_of(node, ctx.file, 0),
            self._choices_resolver(ctx.file, call.lineno),
        )
        return spec

    def _literal_choices(
        self,
        spec: ArgSpec,
        kw: dict[str, ast.expr],
        ctx: _Ctx,
        choices: list[str] | None,
        value_type: str,
    ) -> tuple[list[str] | None, str]:
        """`choices=get_args(Alias)`: the Literal alias's values become the choices."""
        alias = _get_args_alias(kw)
        if alias is None:
            return choices, value_type
        lits = [h for h in self.ann.hints(alias, ctx.file) if h.kind == "Literal"]
        if lits:
            if choices is None:
                choices, value_type = [str(v) for v in lits[0].values or []], "choice"
            spec.choices, spec.metavar_only = list(lits[0].values or []), False
            spec.choices_file, spec.choices_line = lits[0].file, lits[0].line
        else:
            spec.unknown = f"choices={ast.unparse(kw['choices'])} is not a Literal alias"
        return choices, value_type

    def _fields_expansion(self, ctx: _Ctx, call: ast.Call) -> None:
        """`add_argument(*extra_flags, f"--{key.replace('_', '-')}", **value)` over get_kwargs(cls)."""
        cls = ctx.cls
        assert cls is not None
        customs = self._customizations(cls)
        for fi in self.r.dataclass_fields(cls):
            if fi.classvar or not fi.init:
                continue
            vt, jc, ch = self.ann.classify(self.ann.hints(fi.annotation, fi.file))
            cust = customs.get(fi.name, {})
            vt, ch = _apply_overrides(
                vt, ch, {k: v for k, (v, _f, _l) in cust.items() if v is not DELETED}
            )
            spec = self._field_spec(cls, fi.name)
            for key, (node, cfile, cline) in cust.items():
                if key != "flags":
                    apply_kwargs(
                        spec,
                        {key: node},
                        cfile,
                        cline,
                        resolve_choices=self._choices_resolver(cfile, cline),
                    )
            long = "--" + fi.name.replace("_", "-")
            common: dict[str, Any] = {
                "canonical": long,
                "dest": fi.name,
                "value_type": vt,
                "json_class": jc,
                "choices": ch,
                "source": fi.owner,
                "config_class": fi.owner,
                "config_field": fi.name,
                "spec": spec,
            }
            self.flags.append(CliFlag(flag=long, kind="long", file=fi.file, line=fi.line, **common))
            if "flags" in cust:
                node, ffile, fline = cust["flags"]
                try:
                    extra = ast.literal_eval(node)
                except ValueError:
                    extra = []
                for x in extra if isinstance(extra, (list, tuple)) else []:
                    if isinstance(x, str):
                        kind = "long" if x.startswith("--") else "short"
                        self.flags.append(
                            CliFlag(flag=x, kind=kind, file=ffile, line=fline, **common)
                        )
            if vt == "bool" and "action" not in cust and "type" not in cust:
                self.flags.append(
                    CliFlag(
                        flag="--no-" + long[2:],
                        kind="negated",
                        file=fi.file,
                        line=fi.line,
                        **{**common, "value_type": "bool"},
                    )
                )

    def _field_spec(self, cls: ClassInfo | None, name: str) -> ArgSpec:
        """ArgSpec `_compute_kwargs` gives a config field, with the field's default."""
        if cls is None:
            return ArgSpec(dest=name, unknown="backing config class not resolved")
        fi = next((f for f in self.r.dataclass_fields(cls) if f.name == name), None)
        if fi is None:
            return ArgSpec(dest=name, unknown=f"{cls.name} has no field {name}")
        if self._profile is None:
            fn = self.r.resolve(ARG_UTILS, "_compute_kwargs")
            self._profile = kwargs_profile(
                fn[1] if fn and isinstance(fn[1], ast.FunctionDef) else None
            )
        spec = from_hints(self.ann.hints(fi.annotation, fi.file), name, self._profile)
        spec.default, spec.default_kind = self.r.field_default(cls, name)
        return spec

    def _customizations(self, cls: ClassInfo) -> dict[str, dict[str, tuple[ast.expr, str, int]]]:
        """`kwargs["field"]["attr"] = value` in `_customize_cli_kwargs` / `add_cli_args` along the MRO."""
        out: dict[str, dict[str, tuple[ast.expr, str, int]]] = {}
        for c in reversed(self.r.mro(cls)):
            for st in c.node.body:
                if not (
                    isinstance(st, ast.FunctionDef)
                    and ("customize" in st.name or st.name == "add_cli_args")
                ):
                    continue
                for node in ast.walk(st):
                    if not isinstance(node, (ast.Assign, ast.Delete)):
                        continue
                    for t in node.targets:
                        if (
                            isinstance(t, ast.Subscript)
                            and isinstance(t.slice, ast.Constant)
                            and isinstance(t.value, ast.Subscript)
                            and isinstance(t.value.slice, ast.Constant)
                            and isinstance(t.value.slice.value, str)
                        ):
                            value = node.value if isinstance(node, ast.Assign) else DELETED
                            out.setdefault(t.value.slice.value, {})[str(t.slice.value)] = (
                                value,
                                c.file,
                                node.lineno,
                            )
        return out


def _live(ov: dict[str, Any]) -> dict[str, Any]:
    """Customisations without the `del`eted keys."""
    return {k: v for k, v in ov.items() if v is not DELETED}


def _is_get_kwargs(node: ast.AST) -> TypeGuard[ast.Call]:
    return isinstance(node, ast.Call) and (dotted(node.func) or "").split(".")[-1] == "get_kwargs"


def _str_const(node: ast.AST) -> str | None:
    """The value of a string literal, else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _unfold_spreads(call: ast.Call, kw: dict[str, ast.expr]) -> list[ast.expr]:
    """The call's `**spread` expressions, with dict literals unfolded into further spreads and
    keywords (`**{**cache_kwargs["x"], "default": None}`); the keywords land in `kw`."""
    spreads: list[ast.expr] = []
    pending = [k.value for k in call.keywords if k.arg is None]
    while pending:
        v = pending.pop(0)
        if isinstance(v, ast.Dict):
            for dk, dv in zip(v.keys, v.values):
                if dk is None:
                    pending.append(dv)
                elif (key := _str_const(dk)) is not None:
                    kw[key] = dv
        else:
            spreads.append(v)
    return spreads


def _backing_field(
    spreads: list[ast.expr], kwvars: _KwargsVars
) -> tuple[ClassInfo | None, str | None]:
    """(config class, field) behind `**xxx_kwargs["field"]` or `**alias`; the last spread wins."""
    backing_cls: ClassInfo | None = None
    backing_field: str | None = None
    for v in spreads:
        if (
            isinstance(v, ast.Subscript)
            and isinstance(v.value, ast.Name)
            and v.value.id in kwvars
            and (key := _str_const(v.slice)) is not None
        ):
            backing_cls, backing_field = kwvars[v.value.id][0], key
        elif isinstance(v, ast.Name) and v.id in kwvars and kwvars[v.id][1] is not None:
            backing_cls, backing_field = kwvars[v.id]
    return backing_cls, backing_field


def _get_args_alias(kw: dict[str, ast.expr]) -> ast.expr | None:
    """`Alias` of a `choices=get_args(Alias)` keyword, else None."""
    ch = kw.get("choices")
    if isinstance(ch, ast.Call) and dotted(ch.func) in ("get_args", "typing.get_args") and ch.args:
        return ch.args[0]
    return None


def _override_target(t: ast.expr, kwvars: _KwargsVars) -> tuple[tuple[str, str], str] | None:
    if not (isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant)):
        return None
    attr = t.slice.value
    inner = t.value
    if (
        isinstance(inner, ast.Subscript)
        and isinstance(inner.slice, ast.Constant)
        and isinstance(inner.value, ast.Name)
        and inner.value.id in kwvars
        and kwvars[inner.value.id][1] is None
    ):
        cls = kwvars[inner.value.id][0]
        return ((cls.name if cls else "?", str(inner.slice.value)), str(attr))
    if isinstance(inner, ast.Name) and inner.id in kwvars and kwvars[inner.id][1] is not None:
        cls, fld = kwvars[inner.id]
        return ((cls.name if cls else "?", str(fld)), str(attr))
    return None


def _type_of_callable(node: ast.expr) -> str | None:
    """Value type from a `type=` expression."""
    src = ast.unparse(node)
    if "json.loads" in src or "validate_json" in src:
        return "json"
    if "union_dict_and_str" in src:
        return "json_or_str"
    nm = dotted(node)
    if nm in ("int", "float", "str"):
        return nm
    if isinstance(node, ast.Call):  # optional_type(int), parse_type(...)
        for a in node.args:
            inner = _type_of_callable(a)
            if inner:
                return inner
    if nm and "human_readable_int" in nm:
        return "int"
    if isinstance(node, ast.Lambda):
        return "str"
    return None


def _apply_overrides(vt: str, choices, ov: dict[str, ast.expr]):
    if "type" in ov:
        t = _type_of_callable(ov["type"])
        if t and not (vt == "list" and t in ("str", "int", "float") and "nargs" not in ov):
            vt = t  # a scalar element type on a `nargs="+"` field keeps it a list
    if "action" in ov:
        a = ast.unparse(ov["action"])
        if "append" in a:
            vt = "list" if vt not in ("json",) else vt
        elif "store_true" in a or "BooleanOptionalAction" in a:
            vt = "bool"
    if "choices" in ov:
        try:
            choices = [str(x) for x in ast.literal_eval(ov["choices"])]
        except ValueError:
            pass
    return vt, choices


def _apply_explicit(vt: str, choices, kw: dict[str, ast.expr], explicit_only: bool):
    if "action" in kw:
        a = ast.unparse(kw["action"])
        if "store_true" in a or "store_false" in a or "BooleanOptionalAction" in a:
            vt = "bool"
        elif "append" in a:
            vt = "list"
        elif "count" in a:
            vt = "int"
    if "type" in kw:
        t = _type_of_callable(kw["type"])
        if t:
            vt = t
        elif explicit_only:
            vt = "str"
    if "choices" in kw:
        try:
            choices = [str(x) for x in ast.literal_eval(kw["choices"])]
            vt = "choice"
        except ValueError:
            pass
    if explicit_only and vt == "none":
        a = ast.unparse(kw["action"]) if "action" in kw else ""
        vt = "bool" if "const" in a else "str"  # argparse default/custom actions: one value
    if (
        "nargs" in kw
        and vt in ("str", "int", "float")
        and ast.unparse(kw["nargs"]) in ("'+'", "'*'")
    ):
        vt = "list"
    return vt, choices


def _negates(kw: dict[str, ast.expr], from_field: bool, ov: dict[str, ast.expr]) -> bool:
    """Does argparse add `--no-x`? Only for BooleanOptionalAction."""
    if "action" in kw:
        return "BooleanOptionalAction" in ast.unparse(kw["action"])
    if "action" in ov:
        return "BooleanOptionalAction" in ast.unparse(ov["action"])
    return from_field and "type" not in ov  # _compute_kwargs: bool -> BooleanOptionalAction


def kw_dest(kw: dict[str, ast.expr]) -> str | None:
    d = kw.get("dest")
    return d.value if isinstance(d, ast.Constant) and isinstance(d.value, str) else None


def _make_arg_parser_target(fn: ast.FunctionDef) -> tuple[str, int] | None:
    """(the parser variable, line) of a `make_arg_parser(<name>)` call in `fn`, if any."""
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "make_arg_parser"
            and node.args
            and isinstance(node.args[0], ast.Name)
        ):
            return node.args[0].id, node.lineno
    return None


def _calls_with_conditions(fn: FunctionNode) -> Iterable[tuple[ast.Call, str | None]]:
    """Calls in source order, each with the innermost enclosing `if` test (negated in `else`)."""
    out: list[tuple[ast.Call, str | None]] = []

    def visit(node: ast.AST, cond: str | None) -> None:
        if isinstance(node, ast.If):
            test = ast.unparse(node.test)
            for ch in node.body:
                visit(ch, test)
            for ch in node.orelse:
                visit(ch, f"not ({test})")
            return
        if isinstance(node, ast.Call):
            out.append((node, cond))
        for child in ast.iter_child_nodes(node):
            visit(child, cond)

    for st in fn.body:
        visit(st, None)
    out.sort(key=lambda p: (p[0].lineno, p[0].col_offset))
    return out


# --------------------------------------------------------------------------- sub-keys


def config_subkeys(resolver: SymbolResolver, cls: ClassInfo, nested: bool = True) -> set[str]:
    """Dotted keys a JSON flag of type `cls` accepts (one level of nesting)."""
    ann = AnnotationReader(resolver)
    skip = INTERNAL_FIELDS.get(cls.name, frozenset())
    out: set[str] = set()
    for fi in resolver.dataclass_fields(cls):
        if fi.classvar or not fi.init or fi.name.startswith("_") or fi.name in skip:
            continue
        out.add(fi.name)
        if not nested:
            continue
        for h in ann.hints(fi.annotation, fi.file):
            if (
                h.kind == "class"
                and h.cls is not None
                and h.cls.name != cls.name
                and resolver.is_dataclass(h.cls)
            ):
                for sub in config_subkeys(resolver, h.cls, nested=False):
                    out.add(f"{fi.name}.{sub}")
    return out


def dataclass_field_names(
    tree: VllmTree, class_name: str, module: str | None = None
) -> list[str] | None:
    """All AST fields (ClassVar excluded) of a config dataclass, or None when not found."""
    r = SymbolResolver(tree)
    cls = r.resolve_class(module, class_name) if module else None
    if cls is None:
        cls = r.find_class_anywhere(class_name)
    if cls is None:
        return None
    return [f.name for f in r.dataclass_fields(cls) if not f.classvar]


# --------------------------------------------------------------------------- entry point


def extract_cli(tree: VllmTree) -> CliSurface:
    """Every `vllm serve` option string of this release, with evidence and JSON sub-keys."""
    ex = _CliExtractor(tree)
    try:
        ex.run()
    except RecursionError as e:  # pathological trees: report, never crash
        return CliSurface(
            tree.version, "unknown", f"CLI extraction failed: {e}", sources=ex.sources
        )

    # de-duplicate (an option added twice keeps its first definition, like argparse would fail)
    seen: dict[str, CliFlag] = {}
    for f in ex.flags:
        seen.setdefault(f.flag, f)
    flags = list(seen.values())
    subkeys, sub_src = _json_subkeys(ex, flags)

    if not any(
        s.name == "EngineArgs.add_cli_args" and s.status == "ok" for s in ex.sources
    ) and not any(s.name == "EngineArgs.add_cli_args" for s in ex.sources):
        ex.sources.append(
            SourceStatus(
                "EngineArgs.add_cli_args",
                "unknown",
                reason="make_arg_parser never reaches EngineArgs.add_cli_args (layout changed?)",
            )
        )
    flags += _inverse_twins(tree, flags)
    bad = [s for s in ex.sources if s.status != "ok"]
    longs = [f for f in flags if f.kind == "long"]
    if not longs:
        status, reason = "unknown", "; ".join(s.reason or s.name for s in bad) or "no flags found"
    elif bad:
        status, reason = "partial", "; ".join(f"{s.name}: {s.reason}" for s in bad)
    else:
        status, reason = "ok", None
    return CliSurface(
        tree.version, status, reason, flags, subkeys, sub_src, ex.sources, ex.positionals
    )


def _json_subkeys(
    ex: _CliExtractor, flags: list[CliFlag]
) -> tuple[dict[str, set[str]], dict[str, SubkeySource]]:
    """Dotted sub-keys of each JSON flag whose value is a config dataclass, with where the
    class was found (or why not)."""
    subkeys: dict[str, set[str]] = {}
    sub_src: dict[str, SubkeySource] = {}
    for f in flags:
        if f.kind != "long" or f.json_class is None or f.canonical in sub_src:
            continue
        cls = None
        # resolve json_class from the file where the backing field lives
        for fi_file in _candidate_files(ex, f):
            cls = ex.r.resolve_class(fi_file, f.json_class)
            if cls is not None:
                break
        if cls is None:
            cls = ex.r.find_class_anywhere(f.json_class)
        if cls is None:
            sub_src[f.canonical] = SubkeySource(
                f.canonical, f.json_class, None, None, "unknown", f"class {f.json_class} not found"
            )
            continue
        subkeys[f.canonical] = config_subkeys(ex.r, cls)
        sub_src[f.canonical] = SubkeySource(f.canonical, cls.name, cls.file, cls.line, "ok")
    return subkeys, sub_src


def _inverse_twins(tree: VllmTree, flags: list[CliFlag]) -> list[CliFlag]:
    """--enable-x also answers to --disable-x (EnableDisableAction): the twins of the
    `--no-*` flags that the release's parser adds and the extracted flags lack."""
    inverse = inverse_prefixes(tree)
    if inverse is None:
        return []
    have = {f.flag for f in flags}
    out: list[CliFlag] = []
    for f in [f for f in flags if f.kind == "negated"]:
        base = "--" + f.flag[len("--no-") :]
        for prefix, other in inverse["prefixes"].items():
            twin = other + base[len(prefix) :]
            if base.startswith(prefix) and twin not in have:
                out.append(
                    CliFlag(
                        twin,
                        "negated",
                        f.canonical,
                        f.dest,
                        inverse["file"],
                        inverse["line"],
                        "bool",
                        source=f.source,
                        config_class=f.config_class,
                        config_field=f.config_field,
                        conditional=f.conditional,
                        spec=f.spec,
                    )
                )
                have.add(twin)
    return out


ARGPARSE_UTILS = "vllm/utils/argparse_utils.py"


def inverse_prefixes(tree: VllmTree) -> dict[str, Any] | None:
    """`{"prefixes": {"--enable-": "--disable-", ...}, file, line}` when the release's
    FlexibleArgumentParser registers a BooleanOptionalAction subclass pairing `--enable-x`
    with `--disable-x` (vLLM's EnableDisableAction, 0.33), else None."""
    mod = tree.parse(ARGPARSE_UTILS)
    if mod is None:
        return None
    classes = {st.name: st for st in mod.body if isinstance(st, ast.ClassDef)}
    registered = set()
    for node in ast.walk(mod):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "register"
            and len(node.args) == 3
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value == "action"
            and (dotted(node.args[1]) or "").endswith("BooleanOptionalAction")
        ):
            registered.add(dotted(node.args[2]) or "")
    for name in registered:
        cls = classes.get(name)
        if cls is None:
            continue
        for st in cls.body:
            if (
                isinstance(st, ast.Assign)
                and len(st.targets) == 1
                and isinstance(st.targets[0], ast.Name)
                and st.targets[0].id == "_inverse_prefixes"
            ):
                try:
                    prefixes = ast.literal_eval(st.value)
                except (ValueError, SyntaxError, TypeError):
                    return None
                if isinstance(prefixes, dict):
                    return {
                        "prefixes": prefixes,
                        "class": name,
                        "file": ARGPARSE_UTILS,
                        "line": st.lineno,
                    }
    return None


_PARSER_HOMES = (ARGPARSE_UTILS, "vllm/utils/__init__.py", "vllm/utils.py")


def argv_rewrite_shape(tree: VllmTree) -> dict[str, Any] | None:
    """`{"sha", "file", "line"}` of the release's `FlexibleArgumentParser.parse_args` (the argv
    rewrite before argparse): sha256 of its unparsed AST, 16 hex digits, so releases sharing the
    code share the value. None when the class or method is not found."""
    import hashlib

    for rel in _PARSER_HOMES:
        mod = tree.parse(rel)
        for st in mod.body if mod else []:
            if isinstance(st, ast.ClassDef) and st.name == "FlexibleArgumentParser":
                for fn in st.body:
                    if isinstance(fn, ast.FunctionDef) and fn.name == "parse_args":
                        sha = hashlib.sha256(ast.unparse(fn).encode()).hexdigest()[:16]
                        return {"sha": sha, "file": rel, "line": fn.lineno}
    return None


def _candidate_files(ex: _CliExtractor, f: CliFlag) -> list[str]:
    out = []
    if f.config_class:
        c = ex.r.resolve_class(f.file, f.config_class) or ex.r.resolve_class(
            ARG_UTILS, f.config_class
        )
        if c is not None:
            out.append(c.file)
    out.append(f.file)
    return out
