"""A config class's `__post_init__` checks (compat.vllm.post_init), read and answered three-valued.

Fast rows use a synthetic class; the slow rows read real releases: KVTransferConfig rejecting a
connector without a role (issue 16, mechanism 4; a field case, vllm#19448), CompilationConfig's
checks answered from the values and the release's torch pin (vLLM accepts what the recipes
write, tests/golden/serve-args-*), and the `extra` policy behind a stacked no-op `@config`
(mechanism 6).
"""

from __future__ import annotations

import ast
import textwrap

import pytest

from compat.verdict.config_values import ClassSchema, Validator
from compat.vllm.post_init import _guards, evaluate, evaluate_detail, render, torch_pin

SOURCE = textwrap.dedent("""\
    def __post_init__(self):
        if self.engine_id is None:
            self.engine_id = "x"
        if self.role is not None and self.role not in get_args(Role):
            raise ValueError(f"Unsupported role: {self.role}. Supported roles are {get_args(Role)}")
        if self.connector is not None and self.role is None:
            raise ValueError(f"Please specify role when connector is set")
        for op in self.ops:
            if op[0] not in {"+", "-"} and op not in {"all", "none"}:
                raise ValueError(f"Invalid syntax '{op}'")
        if self.partition and not is_torch_equal_or_newer("2.9.0.dev"):
            raise ValueError("needs torch 2.9")
        if self.mode == Mode.X and self.backend not in ["", "eager"]:
            raise ValueError("bad backend")
    """)


def checks() -> list[dict]:
    fn = ast.parse(SOURCE).body[0]
    out = []
    for st in fn.body:  # the statements post_init_checks reads, without a release to resolve aliases
        raises = {id(n): n for n in ast.walk(st) if isinstance(n, ast.Raise)}
        for rid, cond, _pre, _path in _guards(st):
            out.append({"cond": ast.unparse(cond), "aliases": {"Role": ["a", "b"]},
                        "message": ast.unparse(raises[rid].exc.args[0]),
                        "reads": sorted({n.attr for n in ast.walk(cond) if isinstance(n, ast.Attribute)
                                         and getattr(n.value, "id", "") == "self"})})
    return out


@pytest.mark.parametrize(("index", "fields", "torch", "holds"), [
    (0, {"role": "c"}, None, True),            # a role outside the Literal
    (0, {"role": "a"}, None, False),
    (1, {"connector": "Nixl", "role": None}, None, True),  # a connector without a role
    (1, {"connector": "Nixl", "role": "a"}, None, False),
    (2, {"ops": ["all", "+rms_norm"]}, None, False),     # a for-loop raise, as any()
    (2, {"ops": ["rms_norm"]}, None, True),
    (3, {"partition": True}, "2.11.0", False),            # against the release's torch pin
    (3, {"partition": True}, "2.8.0", True),
    (3, {"partition": True}, None, None),                 # no pin known: undecided
    (3, {"partition": False}, None, False),               # a false conjunct decides without it
    (4, {"mode": 3, "backend": "x"}, None, None),         # an enum member the release defines
])
def test_conditions_are_answered_three_valued(index: int, fields: dict, torch: str | None,
                                              holds: bool | None) -> None:
    assert evaluate(checks()[index], fields, torch) is holds


CHAIN = textwrap.dedent("""\
    def __post_init__(self):
        if self.model is None and self.n is not None:
            if self.method == "mtp":
                self.model = "target"
            elif self.method == "ngram":
                self.model = "ngram"
            else:
                raise ValueError("n was provided but without a model.")
        if self.n > 1:
            raise ValueError("more than one")
    """)


@pytest.mark.parametrize(("fields", "first", "raised"), [
    ({"model": None, "n": 3, "method": "eagle3"}, True, None),   # the else of an elif chain
    ({"model": None, "n": 3, "method": "mtp"}, False, None),
    ({"model": None, "n": None, "method": "mtp"}, False, "TypeError"),  # `None > 1`, as in vLLM
])
def test_raises_under_if_elif_else_and_a_type_error_vllm_meets_too(fields: dict, first: bool,
                                                                  raised: str | None) -> None:
    fn = ast.parse(CHAIN).body[0]
    guards = [cond for st in fn.body for _rid, cond, _pre, _path in _guards(st)]
    assert len(guards) == 2
    assert evaluate({"cond": ast.unparse(guards[0])}, fields) is first
    _holds, error = evaluate_detail({"cond": ast.unparse(guards[1])}, fields)
    assert (error or "").startswith(raised or "") and (error is None) == (raised is None)


def test_messages_are_rendered_as_vllm_formats_them() -> None:
    c = checks()[0]
    assert render(c, {"role": "c"}) == "Unsupported role: c. Supported roles are ('a', 'b')"


def test_the_validator_reports_a_check_that_holds_and_leaves_an_undecided_one_unchecked() -> None:
    schema = ClassSchema("Cfg", "forbid", fields={
        n: {"type": {"t": "any"}, "default": None, "default_kind": "literal", "validators": [], "file": "f",
            "line": 1} for n in ("connector", "role", "mode", "backend")})
    schema.model_validators = [dict(c, kind="post_init", file="vllm/config/x.py", line=9) for c in checks()
                               if set(c["reads"]) <= {"connector", "role", "mode", "backend"}]
    v = Validator({"Cfg": schema})
    fails = v.validate("Cfg", {"connector": "Nixl"})
    assert [e.msg for e in fails.errors] == ["Value error, Please specify role when connector is set"]
    assert not v.validate("Cfg", {"connector": "Nixl", "role": "a"}).errors
    undecided = v.validate("Cfg", {"mode": 3, "backend": "x"})
    assert not undecided.errors and undecided.unchecked  # unknown, never ok by default
    assert not v.validate("Cfg", {"role": "b"}).unchecked  # the undecided check reads only defaults


def test_torch_pin() -> None:
    assert torch_pin("numpy\ntorch==2.9.0\n") == "2.9.0"
    assert torch_pin("torch>=2.4\n") is None


# ------------------------------------------------------------------------ real releases


@pytest.mark.slow
@pytest.mark.parametrize(("version", "cls", "extra"), [
    ("0.13.0", "PassConfig", "forbid"),          # @config (a no-op marker) above a forbidding dataclass
    ("0.13.0", "CompilationConfig", "forbid"),
    ("0.12.0", "KVTransferConfig", "ignore"),    # a plain pydantic dataclass drops unknown keys
])
def test_extra_behind_a_stacked_marker_decorator(vllm_tree, tmp_path, version: str, cls: str, extra: str) -> None:
    from compat import api
    from compat.store import open_store

    vllm_tree(version)  # downloaded (once) into the cache the scan reads
    db = tmp_path / "c.db"
    api.scan([version], [], False, db)
    with open_store(db) as s:
        rows = s.dicts("SELECT extra FROM config_field WHERE class_name = ? AND field = ''", (cls,))
    assert rows and rows[0]["extra"] == extra


@pytest.mark.slow
@pytest.mark.parametrize("version", ["0.9.0.1", "0.12.0", "0.23.0"])
def test_kv_transfer_config_without_a_role_is_rejected(vllm_tree, tmp_path, version: str) -> None:
    from compat.scan import release_facts
    from compat.verdict.config_values import Validator, schemas_from_rows

    facts, _ = release_facts(vllm_tree(version))
    v = Validator(schemas_from_rows(facts["config_field"]))
    fails = v.validate("KVTransferConfig", {"kv_connector": "NixlConnector"})
    assert fails.errors and "when kv_connector is set" in fails.errors[0].msg, fails
    assert not v.validate("KVTransferConfig", {"kv_connector": "NixlConnector", "kv_role": "kv_both"}).errors


@pytest.mark.slow
@pytest.mark.parametrize("version", ["0.12.0", "0.23.0", "0.33.0"])
@pytest.mark.parametrize(("spec", "error"), [
    ({"method": "eagle3", "num_speculative_tokens": 3}, "num_speculative_tokens was provided but without"),
    ({"method": "eagle3", "model": "acme/draft", "num_speculative_tokens": 3}, None),
    ({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 5, "prompt_lookup_max": 2},
     "prompt_lookup_min=5 must be <= prompt_lookup_max=2"),
    ({"method": "ngram", "num_speculative_tokens": 3}, None),  # the defaults vLLM fills first
])
def test_speculative_config_post_init_on_the_json(vllm_tree, version: str, spec: dict, error: str | None) -> None:
    from compat.scan import release_facts
    from compat.verdict.config_values import Validator, schemas_from_rows

    facts, _ = release_facts(vllm_tree(version))
    got = Validator(schemas_from_rows(facts["config_field"])).validate("SpeculativeConfig", spec)
    messages = [e.msg for e in got.errors]
    if error is None:
        assert not messages and not got.raised, messages
    else:
        assert any(error in m for m in messages), messages


@pytest.mark.slow
@pytest.mark.parametrize("version", ["0.14.1", "0.23.0", "0.33.0"])
@pytest.mark.parametrize(("value", "known"), [
    ("B12X_MLA_SPARSE", False),  # a custom image's backend: no release on the index has it
    ("FLASH_ATTN", True),
    ("flash_attn", True),  # the validator upper-cases the name
])
def test_attention_backend_is_converted_by_the_releases_own_validator(vllm_tree, version: str, value: str,
                                                                        known: bool) -> None:
    """create_engine_config converts --attention-backend through AttentionConfig's backend
    validator (an enum lookup): the gate context replays that validator on the value."""
    from types import SimpleNamespace

    from compat.recipes.argv import parse_serve_args
    from compat.scan import release_facts
    from compat.verdict.config_values import Validator, schemas_from_rows
    from compat.verdict.gates import attention_backend

    facts, _ = release_facts(vllm_tree(version))
    k = SimpleNamespace(serve_parser=SimpleNamespace(validator=Validator(schemas_from_rows(facts["config_field"]))))
    got = attention_backend(k, parse_serve_args(["vllm", "serve", "m", "--attention-backend", value]))
    assert got.get("attention_backend_known") is known, got
    if not known:
        assert got["attention_backend_error"] == f"KeyError: '{value}'"
