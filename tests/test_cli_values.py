"""What argparse is told about each option (compat.vllm.cli_kwargs) and the config schema
(compat.vllm.config_schema): input/output tables, then the mini tree end to end."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from compat.sources.tree import VllmTree
from compat.vllm.cli_kwargs import (
    ArgSpec, Hint, KwargsProfile, apply_kwargs, from_hints, kwargs_profile, lambda_chain, apply_chain, type_of,
)
from compat.vllm.cli_surface import SymbolResolver, extract_cli, inverse_prefixes
from compat.vllm.config_schema import extract_config_schema, validator_kind

MINI = Path(__file__).parent / "fixtures" / "minitrees" / "mini_current"

H = Hint
LIT = H("Literal", values=["b", "a"], file="f.py", line=3)

# (annotation hints, field name, profile) -> (action, type, nargs, choices, parse, optional)
FROM_HINTS = [
    ([H("int")], "x", KwargsProfile(), ("store", "int", None, None, False, False)),
    ([H("int"), H("None")], "x", KwargsProfile(), ("store", "int", None, None, True, True)),
    ([H("float")], "x", KwargsProfile(), ("store", "float", None, None, False, False)),
    ([H("bool")], "x", KwargsProfile(), ("boolean_optional", None, None, None, False, False)),
    ([H("bool"), H("None")], "x", KwargsProfile(), ("boolean_optional", None, None, None, False, False)),
    ([H("bool"), H("str"), H("None")], "x", KwargsProfile(), ("store", "str", "?", None, False, False)),
    ([LIT], "x", KwargsProfile(), ("store", "str", None, ["a", "b"], False, False)),  # sorted, as vLLM
    ([LIT, H("None")], "x", KwargsProfile(), ("store", "str", None, ["a", "b", "None"], True, True)),
    ([LIT, H("None")], "x", KwargsProfile(none_choice=None), ("store", "str", None, ["a", "b", None], True, True)),
    ([LIT, H("str")], "x", KwargsProfile(), ("store", "str", None, ["a", "b"], False, False)),  # metavar only
    ([H("Literal", values=[2, 1])], "x", KwargsProfile(), ("store", "int", None, [1, 2], False, False)),
    ([H("list", elems=[[H("int")]])], "x", KwargsProfile(), ("store", "int", "+", None, False, False)),
    ([H("tuple", elems=[[H("int")], [H("int")]])], "x", KwargsProfile(), ("store", "int", 2, None, False, False)),
    ([H("tuple", elems=[[H("str")]], ellipsis=True)], "x", KwargsProfile(), ("store", "str", "+", None, False, False)),
    ([H("list", elems=[[LIT]])], "x", KwargsProfile(), ("store", "str", "+", ["a", "b"], False, False)),
    ([H("dict")], "x", KwargsProfile(), ("store", "json", None, None, True, False)),
    ([H("dict"), H("str")], "x", KwargsProfile(), ("store", "json_or_str", None, None, False, False)),
    ([H("class", name="C", is_dataclass=True)], "x", KwargsProfile(), ("store", "dataclass", None, None, False, False)),
    ([H("class", name="C", is_dataclass=True), H("None")], "x", KwargsProfile(),
     ("store", "dataclass", None, None, True, True)),
    ([H("class", name="D", dict_subclass=True)], "x", KwargsProfile(), ("store", "str", None, None, False, False)),
    ([H("class", name="D", dict_subclass=True)], "x", KwargsProfile(dict_subclass_as_dict=True),
     ("store", "json", None, None, True, False)),
    ([H("enum", name="E")], "x", KwargsProfile(), ("store", "str", None, None, False, False)),
    ([H("int")], "max_model_len", KwargsProfile(name_types={"max_model_len": "human_readable_int_or_auto"}),
     ("store", "human_readable_int_or_auto", None, None, False, False)),
]


@pytest.mark.parametrize("hints,name,profile,want", FROM_HINTS)
def test_from_hints_mirrors_compute_kwargs(hints, name, profile, want) -> None:
    s = from_hints(hints, name, profile)
    assert (s.action, s.type, s.nargs, s.choices, s.parse, s.optional) == want
    if want[3] == ["a", "b"] and len(hints) == 1:
        assert (s.choices_file, s.choices_line) == ("f.py", 3)  # evidence of the choices


def test_literal_with_str_is_metavar_only() -> None:
    assert from_hints([LIT, H("str")], "x", KwargsProfile()).metavar_only


# `type=` expression -> (type, parse-wrapped, optional-wrapped)
TYPE_OF = [
    ("int", ("int", False, False)),
    ("json.loads", ("json", False, False)),
    ("optional_type(json.loads)", ("json", True, True)),
    ("parse_type(json.loads)", ("json", True, False)),
    ("optional_type(int)", ("int", True, True)),
    ("human_readable_int", ("human_readable_int", False, False)),
    ("union_dict_and_str", ("json_or_str", False, False)),
    ("lambda s: s.lower()", ("transform", False, False)),
    ("parser.check_port", ("port", False, False)),
    ("parse_reasoning_parser", ("callable", False, False)),
]


@pytest.mark.parametrize("src,want", TYPE_OF)
def test_type_of(src: str, want) -> None:
    assert type_of(ast.parse(src, mode="eval").body)[:3] == want


def test_explicit_keywords_override_the_field() -> None:
    spec = from_hints([H("int")], "x", KwargsProfile())
    kw = {k.arg: k.value for k in ast.parse("f(action='store_true', default=True)", mode="eval").body.keywords}
    apply_kwargs(spec, kw, "a.py", 7)
    assert (spec.action, spec.nargs, spec.default) == ("store_true", None, True)
    spec = apply_kwargs(ArgSpec(), {k.arg: k.value for k in ast.parse(
        "f(choices=['x', 'y'], nargs='+')", mode="eval").body.keywords}, "b.py", 9)
    assert (spec.choices, spec.nargs, spec.choices_file, spec.choices_line) == (["x", "y"], "+", "b.py", 9)


def test_lambda_type_is_a_str_chain() -> None:
    chain = lambda_chain("lambda s: s.lower().replace('-', '_')")
    assert apply_chain(chain, "Flash-Infer") == "flash_infer"
    assert lambda_chain("lambda s: int(s)") is None  # not a pure str chain: unchecked


def test_kwargs_profile_reads_the_release_function() -> None:
    fn = ast.parse('''
def _compute_kwargs(cls):
    for field in fields(cls):
        type_hints = {dict if is_dict_subclass(th) else th for th in type_hints}
        special = {"max_num_batched_tokens", "kv_cache_memory_bytes"}
        if name == "max_model_len":
            kwargs[name]["type"] = human_readable_int_or_auto
        elif name in special:
            kwargs[name]["type"] = human_readable_int
        if kwargs[name].get("choices"):
            kwargs[name]["choices"].append(None)
''').body[0]
    p = kwargs_profile(fn)
    assert p.name_types == {"max_model_len": "human_readable_int_or_auto",
                            "max_num_batched_tokens": "human_readable_int",
                            "kv_cache_memory_bytes": "human_readable_int"}
    assert p.dict_subclass_as_dict and p.none_choice is None


# field validator source -> what it does
VALIDATORS = [
    ("""
def v(cls, value, handler):
    if value is None:
        return value
    return handler(value)""", "wrap", {"kind": "skip_none"}),
    ("""
def v(cls, value):
    if isinstance(value, str):
        return Mode[value.upper()]
    return value""", "before", {"kind": "enum_name", "upper": True, "enum": "Mode"}),
    ("""
def v(cls, value):
    if isinstance(value, str):
        if value.lower() == "auto":
            return None
        return Mode[value.upper()]
    return value""", "before", {"kind": "enum_name", "upper": True, "enum": "Mode", "none_names": ["auto"]}),
    ("""
def v(cls, value):
    if isinstance(value, dict):
        return Pass(**value)
    return value""", "before", {"kind": "construct", "class": "Pass"}),
    ("""
def v(cls, value):
    if isinstance(value, str):
        return value.lower().replace("-", "_")
    return value""", "before", {"kind": "transform", "expr": "value.lower().replace('-', '_')", "arg": "value"}),
    ("""
def v(cls, value):
    if value not in ("binary", "unpacked"):
        raise ValueError(f"bad: {value}")
    return value""", "after", {"kind": "allowed", "values": ["binary", "unpacked"], "exception": "ValueError",
                               "message": "f'bad: {value}'"}),
    ("""
def v(cls, value):
    return do_something(value)""", "before", {"kind": "opaque"}),
]


@pytest.mark.parametrize("src,mode,want", VALIDATORS)
def test_validator_kinds(tmp_path: Path, src: str, mode: str, want: dict) -> None:
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "m.py").write_text("import enum\nclass Mode(enum.Enum):\n    A = 1\n" + src + "\n")
    tree = VllmTree(tmp_path, "0.0.1", "src")
    fn = next(st for st in tree.parse("vllm/m.py").body if isinstance(st, ast.FunctionDef))
    assert validator_kind(fn, mode, SymbolResolver(tree), "vllm/m.py") == want


CONFIG_SRC = '''
import enum
from typing import Literal
from pydantic import Field, field_validator
from pydantic.dataclasses import dataclass as pdc
from dataclasses import dataclass


def config(cls=None, *, config=None):
    merged = ConfigDict(extra="forbid")
    return cls


class Mode(enum.Enum):
    NONE = 0
    FULL = 2
    BOTH = (FULL, NONE)


@dataclass
class Plain:
    a: int = 1


@config
class Inner:
    flag: bool = False


@config
class Outer:
    mode: Mode | None = None
    kind: Literal["x", "y"] = "x"
    n: int = Field(default=1, ge=1)
    inner: Inner = Field(default_factory=Inner)
    plain: Plain | None = None
    _private: int = 0

    @field_validator("mode", mode="before")
    @classmethod
    def _mode(cls, value):
        if isinstance(value, str):
            return Mode[value.upper()]
        return value
'''


def test_config_schema_rows(tmp_path: Path) -> None:
    (tmp_path / "vllm" / "config").mkdir(parents=True)
    (tmp_path / "vllm" / "config" / "c.py").write_text(CONFIG_SRC)
    tree = VllmTree(tmp_path, "0.0.1", "src")
    r = SymbolResolver(tree)
    rows = {(c.class_name, c.field): c for c in extract_config_schema(r, [r.resolve_class("vllm/config/c.py", "Outer")])}
    assert {k for k in rows if k[1] == ""} == {("Outer", ""), ("Inner", ""), ("Plain", "")}
    assert (rows["Outer", ""].extra, rows["Inner", ""].extra, rows["Plain", ""].extra) == ("forbid", "forbid", "ignore")
    import json

    mode = json.loads(rows["Outer", "mode"].type)["of"][0]
    assert mode["t"] == "enum" and mode["members"] == {"NONE": 0, "FULL": 2, "BOTH": [2, 0]}
    assert json.loads(rows["Outer", "mode"].validators)[0]["kind"] == "enum_name"
    assert json.loads(rows["Outer", "kind"].type)["values"] == ["x", "y"]
    assert json.loads(rows["Outer", "n"].type) == {"t": "bounded", "of": {"t": "int"}, "ge": 1}
    assert json.loads(rows["Outer", "inner"].type) == {"t": "class", "name": "Inner"}
    assert rows["Outer", "inner"].default_kind == "factory:Inner"
    assert ("Outer", "_private") in rows  # a dataclass field, whatever its name


def test_inverse_prefixes(tmp_path: Path) -> None:
    (tmp_path / "vllm" / "utils").mkdir(parents=True)
    (tmp_path / "vllm" / "utils" / "argparse_utils.py").write_text('''
from argparse import ArgumentParser, BooleanOptionalAction
class EnableDisableAction(BooleanOptionalAction):
    _inverse_prefixes = {"--enable-": "--disable-", "--disable-": "--enable-"}
class FlexibleArgumentParser(ArgumentParser):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.register("action", BooleanOptionalAction, EnableDisableAction)
''')
    got = inverse_prefixes(VllmTree(tmp_path, "0.0.1", "src"))
    assert got["prefixes"] == {"--enable-": "--disable-", "--disable-": "--enable-"}
    assert inverse_prefixes(VllmTree(MINI, "0.0.1", "src")) is None


def test_minitree_specs_and_positional() -> None:
    s = extract_cli(VllmTree(MINI, "0.0.1", "src"))
    f = s.by_flag()
    deb = f["--distributed-executor-backend"].spec
    assert (deb.type, deb.choices, deb.optional) == ("str", ["external_launcher", "mp", "ray", "uni", "None"], True)
    assert deb.choices_file == "vllm/config/parallel.py"
    pp = f["--pipeline-parallel-size"].spec
    assert (pp.type, pp.default, pp.default_kind) == ("int", 1, "literal")
    assert f["--enable-expert-parallel"].spec.action == "boolean_optional"
    assert f["--headless"].spec.action == "store_true"
    cc = f["--compilation-config"].spec
    assert (cc.type, cc.json_class) == ("dataclass", "CompilationConfig")
    assert f["--speculative-config"].spec.type == "json"  # type override: plain JSON at parse time
    assert [p[0] for p in s.positionals] == ["model_tag"] and s.positionals[0][1].nargs == "?"


BASEMODEL_SRC = '''
from pydantic import BaseModel, ConfigDict


class Loose(BaseModel):
    level: int = 0


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")
    level: int = 0
'''


def test_config_schema_extra_of_a_basemodel(tmp_path: Path) -> None:
    """Before 0.10 the config classes are pydantic BaseModels: unknown keys ignored unless the
    class's model_config forbids them."""
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "config.py").write_text(BASEMODEL_SRC)
    r = SymbolResolver(VllmTree(tmp_path, "0.0.1", "src"))
    rows = extract_config_schema(r, [r.resolve_class("vllm/config.py", n) for n in ("Loose", "Strict")])
    assert {c.class_name: c.extra for c in rows if c.field == ""} == {"Loose": "ignore", "Strict": "forbid"}


CHOICES_SRC = '''
from typing import Literal, get_args

Methods = Literal["awq", "fp8", "gptq"]
FROM_ALIAS: list[str] = list(get_args(Methods))
AS_LIST = ["awq", "fp8"]
AS_DICT = {"awq": AWQConfig, "fp8": Fp8Config}
'''


@pytest.mark.parametrize("expr,want", [
    ("[*FROM_ALIAS, None]", ["awq", "fp8", "gptq", None]),   # 0.8: list(get_args(Literal[...]))
    ("[*AS_LIST, None]", ["awq", "fp8", None]),
    ("[*AS_DICT, None]", ["awq", "fp8", None]),              # 0.6: a dict of config classes
    ("[*UNDEFINED, None]", None),
])
def test_computed_choices(tmp_path: Path, expr: str, want) -> None:
    from compat.vllm.cli_choices import choices_of

    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "q.py").write_text(CHOICES_SRC)
    r = SymbolResolver(VllmTree(tmp_path, "0.0.1", "src"))
    assert choices_of(r, "vllm/q.py", ast.parse(expr, mode="eval").body) == (want, "")
