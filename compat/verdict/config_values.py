"""A JSON value checked against a release's config class, the way pydantic validates it.

vLLM parses a dataclass-typed flag with `TypeAdapter(cls).validate_json(text)` in
lax mode; the checks here follow pydantic's JSON-mode rules for the types vLLM
config fields use (int, float, bool, str, None, Literal, Enum, list, dict, nested
config classes, `Field(ge=..)` bounds) and the field validators recorded by
`compat.vllm.config_schema`. Errors carry pydantic's own wording and locations, so
the text matches what `vllm serve` prints (`ValidationError`'s `str`, without the
"For further information" links).

Anything outside that set (an `opaque` type or validator, a union of several
non-None members) is `unchecked`: it can neither pass nor fail a value, and the
caller reports it as unknown.
"""

from __future__ import annotations

import copy
import json
import operator
import re
from dataclasses import dataclass, field
from typing import Any

from compat.vllm.cli_kwargs import apply_chain, str_chain

_TRUE = {"1", "on", "t", "true", "y", "yes"}
_FALSE = {"0", "off", "f", "false", "n", "no"}
#: pydantic's number constraints: (keyword, error type, message words, does a value break it)
_BOUNDS = (
    ("ge", "greater_than_equal", "greater than or equal to", operator.lt),
    ("gt", "greater_than", "greater than", operator.le),
    ("le", "less_than_equal", "less than or equal to", operator.gt),
    ("lt", "less_than", "less than", operator.ge),
)


@dataclass
class ClassSchema:
    name: str
    extra: str  # forbid | ignore | allow | unknown
    fields: dict[str, dict[str, Any]] = field(
        default_factory=dict
    )  # name -> {type, default, validators, file, line}
    model_validators: list[dict[str, Any]] = field(default_factory=list)
    file: str = ""
    line: int = 0


@dataclass
class PydanticError:
    loc: tuple[str, ...]
    type: str
    msg: str
    input: Any


@dataclass
class Outcome:
    errors: list[PydanticError] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)  # why parts could not be checked
    raised: str = ""  # an exception pydantic lets through (a validator's KeyError): "KeyError: 'X'"
    evidence: list[str] = field(default_factory=list)


def schemas_from_rows(rows: list[dict[str, Any]]) -> dict[str, ClassSchema]:
    out: dict[str, ClassSchema] = {}
    for r in rows:
        cls = out.setdefault(r["class_name"], ClassSchema(r["class_name"], "unknown"))
        if r["field"] == "":
            cls.extra, cls.file, cls.line = r["extra"], r["file"], r["line"]
            cls.model_validators = json.loads(r["validators"] or "[]")
            continue
        cls.fields[r["field"]] = {
            "type": json.loads(r["type"]),
            "default": json.loads(r["default"]),
            "default_kind": r["default_kind"],
            "validators": json.loads(r["validators"] or "[]"),
            "file": r["file"],
            "line": r["line"],
        }
    return out


class Validator:
    def __init__(self, schemas: dict[str, ClassSchema]) -> None:
        self.schemas = schemas
        self._memo: dict[tuple[str, str], Outcome] = {}

    def config_object(self, cls_name: str, data: dict[str, Any]) -> Any:
        """The parsed value as vLLM's namespace holds it: attribute access with field defaults."""
        from compat.verdict.serve_rules import ConfigObject

        schema = self.schemas.get(cls_name)
        defaults = {
            n: (f["default"], f["default_kind"])
            for n, f in (schema.fields.items() if schema else [])
        }
        return ConfigObject(cls_name, data, defaults)

    def validate(self, cls_name: str, value: Any) -> Outcome:
        """The checks of `cls_name` on a JSON value, memoised on its JSON text (key order kept:
        it orders the errors); the outcome is shared, so callers only read it."""
        try:
            key = (cls_name, json.dumps(value))
        except (TypeError, ValueError):
            return self._validate(cls_name, value)
        found = self._memo.get(key)
        if found is None:
            # a private copy: the errors keep the input, which the caller may change later
            found = self._memo[key] = self._validate(cls_name, copy.deepcopy(value))
        return found

    def _validate(self, cls_name: str, value: Any) -> Outcome:
        out = Outcome()
        self._class(cls_name, value, (), out)
        return out

    # ---- classes

    def _class(self, name: str, value: Any, loc: tuple[str, ...], out: Outcome) -> None:
        schema = self.schemas.get(name)
        if schema is None:
            out.unchecked.append(f"{name}: fields unknown in this release")
            return
        if schema.file:
            out.evidence.append(f"{schema.file}:{schema.line}")
        if not isinstance(value, dict):
            out.errors.append(
                PydanticError(
                    loc,
                    "dataclass_type",
                    f"Input should be a dictionary or an instance of {name}",
                    value,
                )
            )
            return
        for fname, f in schema.fields.items():
            if fname in value:
                self._field(f, value[fname], (*loc, fname), out)
            elif f["default_kind"] == "required":
                out.errors.append(
                    PydanticError(
                        (*loc, fname), "missing_argument", "Missing required argument", value
                    )
                )
        for key, item in value.items():
            if key in schema.fields:
                continue
            if schema.extra == "forbid":
                out.errors.append(
                    PydanticError(
                        (*loc, key),
                        "unexpected_keyword_argument",
                        "Unexpected keyword argument",
                        item,
                    )
                )
            elif schema.extra == "unknown":
                out.unchecked.append(f"{name}: whether unknown keys such as {key!r} are allowed")
        opaque = [v for v in schema.model_validators if v.get("kind") != "post_init"]
        if opaque:
            out.unchecked.append(
                f"{name}: model validator {opaque[0]['func']} "
                f"({opaque[0]['file']}:{opaque[0]['line']})"
            )
        if not out.errors:
            self._post_init(schema, value, loc, out)

    def _post_init(
        self, schema: ClassSchema, value: dict[str, Any], loc: tuple[str, ...], out: Outcome
    ) -> None:
        """The class's `__post_init__` checks (compat.vllm.post_init) on the value over the defaults:
        one that holds is pydantic's "Value error", a TypeError vLLM itself meets while testing
        one goes through; one left undecided leaves the value unchecked when it reads a field the
        value sets (one reading only defaults does not fire: vLLM builds every config with its
        defaults). Fields vLLM fills itself (INTERNAL_FIELDS) are not known here."""
        from compat.vllm.cli_surface import INTERNAL_FIELDS
        from compat.vllm.post_init import evaluate_detail, render

        internal = INTERNAL_FIELDS.get(schema.name, frozenset())
        fields = {
            n: f["default"]
            for n, f in schema.fields.items()
            if f["default_kind"] == "literal" and n not in internal
        }
        fields.update(value)
        for check in schema.model_validators:
            if check.get("kind") != "post_init":
                continue
            where = f"{check['file']}:{check['line']}"
            holds, raised = evaluate_detail(check, fields, check.get("torch"))
            if raised:
                out.evidence.append(where)
                out.raised = out.raised or raised
                return
            if holds:
                out.evidence.append(where)
                out.errors.append(
                    PydanticError(
                        loc, "value_error", f"Value error, {render(check, fields)}", value
                    )
                )
                return
            if holds is None and set(check.get("reads", [])) & set(value):
                out.unchecked.append(f"{schema.name}.__post_init__ check at {where}")

    def _field(self, f: dict[str, Any], value: Any, loc: tuple[str, ...], out: Outcome) -> None:
        out.evidence.append(f"{f['file']}:{f['line']}")
        spec = f["type"]
        skip_none = False
        for v in f["validators"]:
            kind = v.get("kind")
            if kind == "skip_none":
                skip_none = True
            elif kind == "transform" and v["mode"] == "before":
                chain = _chain(v)
                if chain is None:
                    out.unchecked.append(f"validator {v['func']}")
                    return
                if isinstance(value, str):
                    value = apply_chain(chain, value)
            elif kind == "enum_name" and v["mode"] == "before" and isinstance(value, str):
                if value.lower() in [n.lower() for n in v.get("none_names", [])]:
                    return  # the validator maps it to None
                members = _enum_members(spec)
                if members is None:
                    out.unchecked.append(f"validator {v['func']}: enum {v.get('enum')} unknown")
                    return
                key = value.upper() if v.get("upper") else value
                if key in members:
                    return
                if v.get("message"):
                    msg = _render(v["message"], {"value": value}, members)
                    out.errors.append(
                        PydanticError(loc, "value_error", f"Value error, {msg}", value)
                    )
                else:
                    out.raised = (
                        out.raised or f"KeyError: {key!r}"
                    )  # E[name] outside pydantic's errors
                return
            elif kind in ("enum_name", "transform") and v["mode"] == "before":
                pass  # a value that is not a str passes through unchanged
            elif kind == "construct":
                pass  # the same validation as the field's class
            elif kind == "allowed" and v["mode"] == "after":
                pass  # applied after the type check below
            else:
                out.unchecked.append(f"validator {v['func']} ({v['file']}:{v['line']})")
                return
        if value is None and skip_none:
            return
        before = len(out.errors)
        self._value(spec, value, loc, out)
        if len(out.errors) == before:
            for v in f["validators"]:
                if v.get("kind") == "allowed" and value not in v["values"]:
                    msg = _render(v.get("message", ""), {"value": value}, {})
                    out.errors.append(
                        PydanticError(loc, "value_error", f"Value error, {msg}", value)
                    )

    # ---- values

    def _value(self, spec: dict[str, Any], value: Any, loc: tuple[str, ...], out: Outcome) -> None:
        t = spec.get("t")
        if t == "any":
            return
        if t == "union":
            self._union(spec["of"], value, loc, out)
        elif t == "none":
            if value is not None:
                out.errors.append(
                    PydanticError(loc, "none_required", "Input should be None", value)
                )
        elif t == "bool":
            self._bool(value, loc, out)
        elif t == "int":
            self._int(value, loc, out)
        elif t == "float":
            self._float(value, loc, out)
        elif t == "str":
            if not isinstance(value, str):
                out.errors.append(
                    PydanticError(loc, "string_type", "Input should be a valid string", value)
                )
        elif t == "literal":
            values = spec["values"]
            if not any(value == v and type(value) is type(v) for v in values):
                out.errors.append(
                    PydanticError(
                        loc, "literal_error", f"Input should be {_expected(values)}", value
                    )
                )
        elif t == "enum":
            self._enum(spec, value, loc, out)
        elif t == "class":
            self._class(spec["name"], value, loc, out)
        elif t in ("list", "tuple", "dict"):
            self._container(spec, value, loc, out)
        elif t == "bounded":
            self._bounded(spec, value, loc, out)
        else:
            out.unchecked.append(f"{'.'.join(loc)}: type {spec.get('name') or t} not modelled")

    def _union(
        self, members: list[dict[str, Any]], value: Any, loc: tuple[str, ...], out: Outcome
    ) -> None:
        """Accepted when one member accepts it; pydantic's union error text is not modelled."""
        non_none = [m for m in members if m.get("t") != "none"]
        if value is None and len(non_none) < len(members):
            return
        if len(non_none) == 1:  # Optional[X]: pydantic's nullable schema, errors as for X
            self._value(non_none[0], value, loc, out)
            return
        results = []
        for m in non_none:
            trial = Outcome()
            self._value(m, value, loc, trial)
            if not trial.errors and not trial.unchecked and not trial.raised:
                return
            results.append(trial)
        if any(r.unchecked or r.raised for r in results):
            out.unchecked.append(f"{'.'.join(loc)}: union of {len(non_none)} types")
            return
        out.unchecked.append(
            f"{'.'.join(loc)}: no member of a {len(non_none)}-type union accepts "
            f"{value!r} (pydantic's union error text not modelled)"
        )

    def _enum(self, spec: dict[str, Any], value: Any, loc: tuple[str, ...], out: Outcome) -> None:
        members = spec.get("members") or {}
        values = [v for v in members.values()]
        if value not in values or isinstance(value, (list, dict)):
            if any(v is None for v in values):
                out.unchecked.append(
                    f"{'.'.join(loc)}: enum {spec.get('name')} has computed values"
                )
                return
            out.errors.append(
                PydanticError(loc, "enum", f"Input should be {_expected(values)}", value)
            )

    def _container(
        self, spec: dict[str, Any], value: Any, loc: tuple[str, ...], out: Outcome
    ) -> None:
        """A list, tuple or dict: its own type, then each item at its index or key."""
        t = spec["t"]
        if t == "dict":
            if not isinstance(value, dict):
                out.errors.append(
                    PydanticError(loc, "dict_type", "Input should be a valid dictionary", value)
                )
                return
            for k, item in value.items():
                self._value(spec["value"], item, (*loc, str(k)), out)
            return
        if not isinstance(value, list):
            out.errors.append(
                PydanticError(loc, f"{t}_type", f"Input should be a valid {t}", value)
            )
            return
        if t == "list":
            for i, item in enumerate(value):
                self._value(spec["of"], item, (*loc, str(i)), out)
            return
        if len(value) != len(spec["items"]):
            out.unchecked.append(f"{'.'.join(loc)}: fixed-length tuple of another length")
            return
        for i, (item_spec, item) in enumerate(zip(spec["items"], value)):
            self._value(item_spec, item, (*loc, str(i)), out)

    def _bounded(
        self, spec: dict[str, Any], value: Any, loc: tuple[str, ...], out: Outcome
    ) -> None:
        """The inner type, then the first `ge`/`gt`/`le`/`lt` bound a number breaks."""
        before = len(out.errors)
        self._value(spec["of"], value, loc, out)
        if (
            len(out.errors) != before
            or not isinstance(value, (int, float))
            or isinstance(value, bool)
        ):
            return
        for op, kind, word, fails in _BOUNDS:
            bound = spec.get(op)
            if bound is not None and fails(value, bound):
                out.errors.append(
                    PydanticError(loc, kind, f"Input should be {word} {bound}", value)
                )
                break

    def _bool(self, value: Any, loc: tuple[str, ...], out: Outcome) -> None:
        if isinstance(value, bool):
            return
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return
        if isinstance(value, (int, float)) and value in (0, 1):
            return
        if isinstance(value, (str, int, float)):
            out.errors.append(
                PydanticError(
                    loc,
                    "bool_parsing",
                    "Input should be a valid boolean, unable to interpret input",
                    value,
                )
            )
        else:
            out.errors.append(
                PydanticError(loc, "bool_type", "Input should be a valid boolean", value)
            )

    def _int(self, value: Any, loc: tuple[str, ...], out: Outcome) -> None:
        if isinstance(value, bool) or isinstance(value, int):
            return
        if isinstance(value, float):
            if value != int(value):
                out.errors.append(
                    PydanticError(
                        loc,
                        "int_from_float",
                        "Input should be a valid integer, got a number with a fractional part",
                        value,
                    )
                )
            return
        if isinstance(value, str):
            if not re.fullmatch(r"\s*[+-]?\d+(_\d+)*\s*", value):
                out.errors.append(
                    PydanticError(
                        loc,
                        "int_parsing",
                        "Input should be a valid integer, unable to parse string as an integer",
                        value,
                    )
                )
            return
        out.errors.append(PydanticError(loc, "int_type", "Input should be a valid integer", value))

    def _float(self, value: Any, loc: tuple[str, ...], out: Outcome) -> None:
        if isinstance(value, (int, float)):
            return
        if isinstance(value, str):
            try:
                float(value)
            except ValueError:
                out.errors.append(
                    PydanticError(
                        loc,
                        "float_parsing",
                        "Input should be a valid number, unable to parse string as a number",
                        value,
                    )
                )
            return
        out.errors.append(PydanticError(loc, "float_type", "Input should be a valid number", value))


def _chain(v: dict[str, Any]) -> Any:
    import ast

    try:
        return str_chain(ast.parse(v["expr"], mode="eval").body, v["arg"])
    except SyntaxError:
        return None


def _enum_members(spec: dict[str, Any]) -> dict[str, Any] | None:
    if spec.get("t") == "enum":
        return spec.get("members")
    if spec.get("t") == "union":
        for m in spec["of"]:
            if m.get("t") == "enum":
                return m.get("members")
    return None


def _expected(values: list[Any]) -> str:
    """pydantic's "'a', 'b' or 'c'"."""
    reprs = [_py_repr(v) for v in values]
    if len(reprs) <= 1:
        return "".join(reprs)
    return ", ".join(reprs[:-1]) + " or " + reprs[-1]


def _py_repr(v: Any) -> str:
    return repr(tuple(v)) if isinstance(v, list) else repr(v)


def _render(template: str, env: dict[str, Any], members: dict[str, Any]) -> str:
    """An f-string template from the release's source, for `{value}` and `'sep'.join(E.__members__...)`."""
    import ast

    try:
        node = ast.parse(template, mode="eval").body
    except SyntaxError:
        return template
    if isinstance(node, ast.Constant):
        return str(node.value)
    if not isinstance(node, ast.JoinedStr):
        return template
    parts = []
    for v in node.values:
        if isinstance(v, ast.Constant):
            parts.append(str(v.value))
        elif isinstance(v, ast.FormattedValue):
            src = ast.unparse(v.value)
            if isinstance(v.value, ast.Name) and v.value.id in env:
                parts.append(str(env[v.value.id]))
            elif (
                ".join(" in src
                and "__members__" in src
                and isinstance(v.value, ast.Call)
                and isinstance(v.value.func, ast.Attribute)
                and isinstance(v.value.func.value, ast.Constant)
                and isinstance(v.value.func.value.value, str)
            ):
                parts.append(v.value.func.value.value.join(members))
            else:
                parts.append("{" + src + "}")
    return "".join(parts)


def input_repr(value: Any) -> str:
    """pydantic's `input_value=` text: the Python repr, long ones cut in the middle."""
    text = repr(value)
    if len(text) > 50:
        text = text[:24] + "..." + text[-24:]
    return text


def format_errors(title: str, errors: list[PydanticError]) -> str:
    """`str(ValidationError)` without the documentation links."""
    n = len(errors)
    lines = [f"{n} validation error{'s' if n != 1 else ''} for {title}"]
    for e in errors:
        lines.append(".".join(e.loc) if e.loc else title)
        lines.append(
            f"  {e.msg} [type={e.type}, input_value={input_repr(e.input)}, "
            f"input_type={type(e.input).__name__}]"
        )
    return "\n".join(lines)
