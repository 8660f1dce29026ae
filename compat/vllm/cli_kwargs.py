"""What argparse is told about each `vllm serve` option: action, nargs, type, choices.

`cli_surface` finds the option strings; this module works out the keyword
arguments argparse receives for each, the way vLLM computes them at runtime
(`vllm/engine/arg_utils.py` `_compute_kwargs`, 0.23 L286-395): from the backing
config-dataclass field's annotation, then any `kwargs["field"]["type"] = ...`
customisation, then the keywords written in the `add_argument(...)` call itself.
The result (`ArgSpec`) is enough to rebuild an equivalent argparse parser
(`compat.verdict.arguments`), so values are checked by argparse's own rules.

Type callables are named by what they do (`TYPE_NAMES`), with the two vLLM wrappers
kept as flags because they change the error text: `parse_type(f)` raises
`Value {val} cannot be converted to {f}.`, and `optional_type(f)` also maps `''` and
`'None'` to None. A callable this module does not recognise keeps its source text
(`callable`) and its values are reported as unchecked, never as valid.
"""

from __future__ import annotations

import ast
from dataclasses import asdict, dataclass, field
from typing import Any

#: How the callables vLLM passes as `type=` are named in ArgSpec.type.
TYPE_NAMES = {
    "int": "int",
    "float": "float",
    "str": "str",
    "json.loads": "json",
    "loads": "json",
    "human_readable_int": "human_readable_int",
    "human_readable_int_or_auto": "human_readable_int_or_auto",
    "union_dict_and_str": "json_or_str",
    "parse_dataclass": "dataclass",
}


class _Deleted(ast.expr):
    """Stands where `del kwargs["field"]["key"]` removed a keyword; compared by identity."""


DELETED: ast.expr = _Deleted()


@dataclass
class ArgSpec:
    """The argparse keywords of one option (or the positional `model_tag`)."""

    action: str = (
        "store"  # store|store_true|store_false|store_const|boolean_optional|append|count|custom
    )
    nargs: str | int | None = None  # None = one value; '?', '*', '+' or a count
    const: Any = None
    type: str | None = None  # a TYPE_NAMES value, 'callable', 'transform', or None (no conversion)
    parse: bool = (
        False  # wrapped in parse_type: ArgumentTypeError "Value v cannot be converted to f."
    )
    optional: bool = False  # wrapped in optional_type: '' and 'None' -> None
    callable_src: str = ""  # source of an unrecognised or lambda type callable
    json_class: str | None = None  # dataclass validated by `TypeAdapter(cls).validate_json`
    choices: list[Any] | None = None
    choices_file: str = ""  # where the choices come from (Literal alias, field, or choices=)
    choices_line: int = 0
    metavar_only: bool = False  # Literal together with str: shown as metavar, not enforced
    default: Any = None
    default_kind: str = "literal"  # literal | factory:<Class> | unknown
    dest: str = ""
    unknown: str = ""  # why argparse's behaviour for this option could not be determined
    # choices computed from a registry when the parser is built ("tool", "reasoning"):
    # the parser names the scan finds, in the order the release registers them
    choices_registry: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Hint:
    """One member of a field annotation's union, as `_compute_kwargs` sees it."""

    kind: str  # None|bool|int|float|str|dict|list|tuple|set|Literal|class|enum|other
    name: str = ""
    values: list[Any] | None = None  # Literal values
    elems: list[list[Hint]] = field(default_factory=list)  # element hints of list/tuple/set/dict
    ellipsis: bool = False  # tuple[X, ...]
    file: str = ""
    line: int = 0
    is_dataclass: bool = False
    cls: Any = None  # compat.vllm.cli_surface.ClassInfo of a class or enum hint
    dict_subclass: bool = False  # a class deriving from dict


def from_hints(
    hints: list[Hint], field_name: str, profile: KwargsProfile | dict[str, str]
) -> ArgSpec:
    """`_compute_kwargs` for one field: the branch order of vLLM's own function."""
    if isinstance(profile, dict):
        profile = KwargsProfile(name_types=profile)
    name_types = profile.name_types
    if profile.dict_subclass_as_dict:
        hints = [Hint("dict") if h.kind == "class" and h.dict_subclass else h for h in hints]
    kinds = {h.kind for h in hints}
    spec = ArgSpec(dest=field_name)
    dataclass_hint = next((h for h in hints if h.kind == "class" and h.is_dataclass), None)
    if dataclass_hint is not None:
        spec.type, spec.json_class = "dataclass", dataclass_hint.name
    elif kinds == {"bool", "str", "None"}:
        spec.type, spec.nargs, spec.const = "str", "?", True
    elif "bool" in kinds:
        spec.action = "boolean_optional"
    elif "Literal" in kinds:
        _literal(spec, next(h for h in hints if h.kind == "Literal"), metavar="str" in kinds)
    elif kinds & {"tuple", "list", "set"}:
        coll = next(
            h
            for h in hints
            if h.kind in ("tuple", "list", "set")
            and h.kind == ("tuple" if "tuple" in kinds else "list" if "list" in kinds else "set")
        )
        _collection(spec, coll)
    elif "int" in kinds:
        spec.type = name_types.get(field_name, "int")
    elif "float" in kinds:
        spec.type = "float"
    elif "dict" in kinds and (
        "str" in kinds or any(h.kind in ("class", "enum", "other") for h in hints)
    ):
        spec.type = "json_or_str"
    elif "dict" in kinds:
        spec.type, spec.parse = "json", True
    elif "str" in kinds or any(h.kind in ("class", "enum", "other") for h in hints):
        spec.type = "str"
    else:
        spec.unknown = f"vLLM rejects this annotation ({sorted(kinds)}) when building its parser"
    if "None" in kinds and "bool" not in kinds:
        spec.optional = spec.parse = True
        if spec.choices is not None and not spec.metavar_only:
            spec.choices = [*spec.choices, profile.none_choice]
    return spec


def _literal(spec: ArgSpec, lit: Hint, metavar: bool) -> None:
    """`literal_to_kwargs`: type of the first option, options sorted; metavar when str is allowed."""
    values = list(lit.values or [])
    spec.type = (
        "int"
        if values and isinstance(values[0], int) and not isinstance(values[0], bool)
        else "str"
    )
    try:
        spec.choices = sorted(values)
    except TypeError:  # mixed types: vLLM raises "All options must be of the same type"
        spec.choices = values
        spec.unknown = "Literal options of different types"
    spec.metavar_only = metavar
    spec.choices_file, spec.choices_line = lit.file, lit.line


def _collection(spec: ArgSpec, coll: Hint) -> None:
    """`collection_to_kwargs`: element type, nargs '+' (a fixed tuple: its length)."""
    elems = coll.elems[0] if coll.elems else [Hint("str")]
    kinds = {h.kind for h in elems}
    if len(kinds) > 1 and "str" in kinds:
        spec.type = "str"
    elif kinds == {"Literal"}:
        _literal(spec, elems[0], metavar=False)
    elif len(kinds) == 1 and next(iter(kinds)) in ("int", "float", "str"):
        spec.type = next(iter(kinds))
    else:
        spec.type = "str"
        spec.unknown = f"collection of {sorted(kinds)}"
    if coll.kind == "tuple" and not coll.ellipsis and coll.elems:
        spec.nargs = len(coll.elems)
    else:
        spec.nargs = "+"


def type_of(node: ast.expr) -> tuple[str | None, bool, bool, str]:
    """(type name, parse-wrapped, optional-wrapped, source) of a `type=` expression."""
    src = ast.unparse(node)
    if isinstance(node, ast.Call):
        fn = dotted(node.func) or ""
        short = fn.split(".")[-1]
        if short in ("optional_type", "parse_type") and node.args:
            inner, _p, opt, _s = type_of(node.args[0])
            return inner, True, opt or short == "optional_type", src
        return "callable", False, False, src
    if isinstance(node, ast.Lambda):
        return "transform", False, False, src
    name = dotted(node) or ""
    if name in TYPE_NAMES or name.split(".")[-1] in TYPE_NAMES and name.split(".")[-1] != "loads":
        return TYPE_NAMES.get(name) or TYPE_NAMES[name.split(".")[-1]], False, False, src
    if name.split(".")[-1] == "check_port":
        return "port", False, False, src
    return "callable", False, False, src


def apply_kwargs(
    spec: ArgSpec,
    kw: dict[str, Any],
    file: str,
    line: int,
    resolve_default: Any = None,
    resolve_choices: Any = None,
) -> ArgSpec:
    """Overlay keyword arguments (customisations or the call's own), as argparse would receive them.

    `resolve_default(node) -> (value, kind)` reads a `default=Config.field` reference;
    `resolve_choices(node) -> (values, registry)` a computed `choices=` (compat.vllm.cli_choices)."""
    for key, node in kw.items():
        if node is DELETED:
            if key == "type":
                spec.type, spec.parse, spec.optional, spec.callable_src = None, False, False, ""
            elif key == "choices":
                spec.choices = None
            elif key == "nargs":
                spec.nargs = None
            continue
        if key == "action":
            spec.action = _action(node)
            if spec.action in (
                "store_true",
                "store_false",
                "boolean_optional",
                "count",
                "store_const",
            ):
                spec.nargs = None
        elif key == "type":
            t, parse, opt, src = type_of(node)
            if t == "dataclass" and spec.json_class is None:
                t = "callable"
            spec.type, spec.parse, spec.optional = t, parse, opt
            spec.callable_src = src if t in ("callable", "transform") else ""
            if t != "dataclass":
                spec.json_class = None
        elif key == "nargs":
            spec.nargs = _literal_or(node, "?")
        elif key == "const":
            spec.const = _literal_or(node, None)
        elif key == "choices":
            try:
                spec.choices = list(ast.literal_eval(node))
                spec.metavar_only = False
                spec.choices_file, spec.choices_line = file, line
            except (ValueError, SyntaxError, TypeError):
                values, registry = (
                    resolve_choices(node) if resolve_choices is not None else (None, "")
                )
                if values is None and not registry:
                    spec.unknown = f"choices={ast.unparse(node)} is not a literal"
                else:
                    spec.choices, spec.choices_registry = values, registry
                    spec.metavar_only = False
                    spec.choices_file, spec.choices_line = file, line
        elif key == "default":
            try:
                spec.default, spec.default_kind = ast.literal_eval(node), "literal"
            except (ValueError, SyntaxError, TypeError):
                spec.default, spec.default_kind = (
                    resolve_default(node) if resolve_default is not None else (None, "unknown")
                )
        elif key == "dest":
            value = _literal_or(node, None)
            if isinstance(value, str):
                spec.dest = value
        elif key == "metavar" and spec.choices is not None and not spec.metavar_only:
            pass  # a metavar does not lift choices
    return spec


def _action(node: ast.expr) -> str:
    src = ast.unparse(node)
    for needle, name in (
        ("BooleanOptionalAction", "boolean_optional"),
        ("store_true", "store_true"),
        ("store_false", "store_false"),
        ("store_const", "store_const"),
        ("append", "append"),
        ("count", "count"),
    ):
        if needle in src:
            return name
    if isinstance(node, ast.Constant) and node.value == "store":
        return "store"
    return "custom"


def _literal_or(node: ast.expr, fallback: Any) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return fallback


@dataclass
class KwargsProfile:
    """What varies between releases' `_compute_kwargs`, read from its AST."""

    name_types: dict[str, str] = field(
        default_factory=dict
    )  # field name -> type (max_model_len, ...)
    dict_subclass_as_dict: bool = False  # 0.33: `{dict if is_dict_subclass(th) else th ...}`
    none_choice: Any = (
        "None"  # what an Optional Literal appends to its choices ("None" 0.23, None 0.33)
    )


def kwargs_profile(compute_kwargs: ast.FunctionDef | None) -> KwargsProfile:
    """Name-typed fields (`if name == "max_model_len": ...["type"] = human_readable_int_or_auto`,
    also `name in <set bound in the function>`), dict subclasses, the None choice."""
    prof = KwargsProfile()
    if compute_kwargs is None:
        return prof
    sets: dict[str, list[str]] = {}
    for node in ast.walk(compute_kwargs):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            try:
                value = ast.literal_eval(node.value)
            except (ValueError, SyntaxError, TypeError):
                continue
            if isinstance(value, (set, frozenset, list, tuple)):
                sets[node.targets[0].id] = [v for v in value if isinstance(v, str)]
        elif isinstance(node, ast.Name) and node.id == "is_dict_subclass":
            prof.dict_subclass_as_dict = True
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "append"
            and isinstance(node.func.value, ast.Call) is False
            and "choices" in ast.unparse(node.func.value)
            and len(node.args) == 1
            and isinstance(node.args[0], ast.Constant)
        ):
            prof.none_choice = node.args[0].value
    for node in ast.walk(compute_kwargs):
        if not isinstance(node, ast.If):
            continue
        names = _name_test(node.test, sets)
        if not names:
            continue
        for st in node.body:
            if isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Subscript):
                t = st.targets[0]
                if isinstance(t.slice, ast.Constant) and t.slice.value == "type":
                    tname = TYPE_NAMES.get(dotted(st.value) or "", None)
                    if tname:
                        for n in names:
                            prof.name_types.setdefault(n, tname)
    return prof


def name_types(compute_kwargs: ast.FunctionDef | None) -> dict[str, str]:
    return kwargs_profile(compute_kwargs).name_types


def _name_test(test: ast.expr, sets: dict[str, list[str]] | None = None) -> list[str]:
    if (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "name"
        and len(test.ops) == 1
    ):
        right = test.comparators[0]
        if (
            isinstance(test.ops[0], ast.Eq)
            and isinstance(right, ast.Constant)
            and isinstance(right.value, str)
        ):
            return [right.value]
        if isinstance(test.ops[0], ast.In) and isinstance(right, ast.Name):
            return list((sets or {}).get(right.id, []))
        if isinstance(test.ops[0], ast.In):
            try:
                return [v for v in ast.literal_eval(right) if isinstance(v, str)]
            except (ValueError, SyntaxError, TypeError):
                return []
    return []


_STR_METHODS = {
    "lower": 0,
    "upper": 0,
    "strip": 0,
    "lstrip": 0,
    "rstrip": 0,
    "casefold": 0,
    "replace": 2,
}


def str_chain(expr: ast.expr, arg: str) -> list[tuple[str, tuple[str, ...]]] | None:
    """`arg.lower().replace("-", "_")` -> [("lower", ()), ("replace", ("-", "_"))]; None if the
    expression is anything but a chain of pure str methods with constant arguments on `arg`."""
    steps: list[tuple[str, tuple[str, ...]]] = []
    node = expr
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        name = node.func.attr
        args = [
            a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
        ]
        if (
            name not in _STR_METHODS
            or node.keywords
            or len(node.args) != _STR_METHODS[name]
            or len(args) != len(node.args)
        ):
            return None
        steps.append((name, tuple(args)))
        node = node.func.value
    if not (isinstance(node, ast.Name) and node.id == arg):
        return None
    return list(reversed(steps))


def lambda_chain(src: str) -> list[tuple[str, tuple[str, ...]]] | None:
    """The str-method chain of a one-argument `lambda s: s....` type callable, else None."""
    try:
        node = ast.parse(src, mode="eval").body
    except SyntaxError:
        return None
    if not (isinstance(node, ast.Lambda) and len(node.args.args) == 1):
        return None
    return str_chain(node.body, node.args.args[0].arg)


def apply_chain(chain: list[tuple[str, tuple[str, ...]]], value: str) -> str:
    for name, args in chain:
        value = getattr(value, name)(*args)
    return value


def dotted(node: ast.AST | None) -> str | None:
    """`a.b.c` of a Name or an Attribute chain over a Name, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = dotted(node.value)
        return f"{inner}.{node.attr}" if inner else None
    return None
