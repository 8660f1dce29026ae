"""How a release's `SpeculativeConfig` settles `num_speculative_tokens` (issue 16, golden G1-G2).

vLLM raises when nothing fills the count, and where it is filled depends on the method and the
draft's config, in an order that matters:

* the branch that turns a draft whose `model_type` is an MTP type into method `mtp` compares
  `self.num_speculative_tokens > 1` first, so an absent count is a `TypeError` there, even when
  the draft config has `n_predict`;
* a draft config with `n_predict` (set by `hf_config_override` for MTP drafts) fills an absent
  count, and a count above it must be a multiple of it;
* DSpark drafts fill it from the draft's `block_size` (newer releases), and there skip the
  `n_predict` step;
* a method-tested branch may fill it itself (`suffix`);
* otherwise "A speculative model was provided, but `num_speculative_tokens` was not provided",
  or `_verify_args`'s "num_speculative_tokens must be provided ..." when no model was given.

Each of these is read from the release's own `__post_init__` / `_verify_args` as the release
fact `speculative_token_count` (lines and messages); the engine applies them in that order
(compat.verdict.spec_tokens). A piece not found is `null`, and the engine leaves what it would
decide undecided. `config_types` names the release's own config classes that mention
`n_predict` or `block_size`: a draft built by one of them may get the value from the class, so
its `config.json` alone does not decide.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from compat.sources.tree import VllmTree, speculative_file
from compat.vllm.speculative import _class, _method, _methods_in_test, _raise_text

KEY = "speculative_token_count"
NST = "num_speculative_tokens"
CONFIGS_DIR = "vllm/transformers_utils/configs"


def _is_nst(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == NST
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    )


def _first_operand(test: ast.expr) -> ast.expr:
    """The part of a condition Python evaluates first (the left of `and` / `or`)."""
    while isinstance(test, ast.BoolOp):
        test = test.values[0]
    return test


def _fills(node: ast.AST, name: str) -> int | None:
    """Line of `self.num_speculative_tokens = <name>` under `node`."""
    for n in ast.walk(node):
        if (
            isinstance(n, ast.Assign)
            and len(n.targets) == 1
            and _is_nst(n.targets[0])
            and isinstance(n.value, ast.Name)
            and n.value.id == name
        ):
            return n.lineno
    return None


def _sets_method(body: list[ast.stmt], value: str) -> bool:
    return any(
        isinstance(st, ast.Assign)
        and isinstance(st.targets[0], ast.Attribute)
        and st.targets[0].attr == "method"
        and isinstance(st.value, ast.Constant)
        and st.value.value == value
        for st in body
    )


def _mtp_compare(post: ast.FunctionDef) -> int | None:
    """Line of the `self.num_speculative_tokens > 1` test evaluated first in the branch that
    switches the method to `mtp` after the draft config is built."""
    for node in ast.walk(post):
        if not isinstance(node, ast.If) or not _sets_method(node.body, "mtp"):
            continue
        for st in node.body:
            if not isinstance(st, ast.If):
                continue
            first = _first_operand(st.test)
            if (
                isinstance(first, ast.Compare)
                and _is_nst(first.left)
                and isinstance(first.ops[0], ast.Gt)
            ):
                return first.lineno
    return None


def _dspark_skips_n_predict(post: ast.FunctionDef) -> bool:
    """`if self.use_dspark(): <block fill> elif n_predict is not None: ...`: a DSpark draft's
    count is never filled or checked against n_predict."""
    for node in ast.walk(post):
        if (
            isinstance(node, ast.If)
            and "use_dspark()" in ast.unparse(node.test)
            and _fills(node, "block_size") is not None
        ):
            return any(_fills(st, "n_predict") is not None for st in node.orelse)
    return False


def _raise_in(node: ast.AST) -> ast.Raise | None:
    return next((n for n in ast.walk(node) if isinstance(n, ast.Raise)), None)


def _divisible(post: ast.FunctionDef) -> dict[str, Any] | None:
    for node in ast.walk(post):
        if isinstance(node, ast.If) and "num_speculative_tokens % n_predict" in ast.unparse(
            node.test
        ):
            r = _raise_in(node)
            if r is not None:
                return {"line": r.lineno, "message": _raise_text(r)}
    return None


def _missing_raise(fn: ast.FunctionDef | None, needle: str) -> dict[str, Any] | None:
    """`if self.num_speculative_tokens is None: raise ...` whose message holds `needle`, with
    `unless`: the other fields the enclosing tests read (0.17.0 raises only when
    `speculative_token_tree` is also unset), besides `model` and `method`."""
    if fn is None:
        return None
    parents = {id(c): p for p in ast.walk(fn) for c in ast.iter_child_nodes(p)}
    for node in ast.walk(fn):
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)):
            continue
        t = node.test
        if not (_is_nst(t.left) and isinstance(t.ops[0], ast.Is)):
            continue
        r = _raise_in(ast.Module(body=node.body, type_ignores=[]))
        if r is None or needle not in _raise_text(r):
            continue
        unless: set[str] = set()
        up = parents.get(id(node))
        while up is not None and up is not fn:
            if isinstance(up, ast.If):
                unless |= {
                    a.attr
                    for a in ast.walk(up.test)
                    if isinstance(a, ast.Attribute)
                    and isinstance(a.value, ast.Name)
                    and a.value.id == "self"
                }
            up = parents.get(id(up))
        unless -= {"model", "method", NST}
        return {"line": r.lineno, "message": _raise_text(r), "unless": sorted(unless)}
    return None


def _fill_methods(cls: ast.ClassDef, post: ast.FunctionDef) -> dict[str, int]:
    """Methods whose own branch of `__post_init__` sets the count (directly, or in a
    `self._helper()` it calls)."""
    helpers = {
        st.name: st
        for st in cls.body
        if isinstance(st, ast.FunctionDef)
        and any(
            isinstance(n, ast.Assign) and any(_is_nst(t) for t in n.targets) for n in ast.walk(st)
        )
    }
    out: dict[str, int] = {}
    for node in ast.walk(post):
        if not isinstance(node, ast.If):
            continue
        names = _methods_in_test(node.test)
        if not names:
            continue
        body = ast.Module(body=node.body, type_ignores=[])
        sets = any(
            isinstance(n, ast.Assign) and any(_is_nst(t) for t in n.targets) for n in ast.walk(body)
        ) or any(
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and isinstance(n.func.value, ast.Name)
            and n.func.value.id == "self"
            and n.func.attr in helpers
            for n in ast.walk(body)
        )
        if sets:
            for m in names:
                out.setdefault(m, node.lineno)
    return out


def _under_method_branch(post: ast.FunctionDef, node: ast.AST, fills: dict[str, int]) -> bool:
    """Is `node` inside one of the method-tested branches recorded in `fills`?"""
    for n in ast.walk(post):
        if isinstance(n, ast.If) and n.lineno in fills.values():
            if any(c is node for st in n.body for c in ast.walk(st)):
                return True
    return False


def _config_types(tree: VllmTree) -> list[str]:
    """model_type values of the release's config classes whose file mentions `n_predict` or
    `block_size`."""
    out: set[str] = set()
    for rel in tree.py_files(CONFIGS_DIR):
        text = tree.read(rel) or ""
        if "n_predict" in text or "block_size" in text:
            out.update(re.findall(r"model_type\s*(?::\s*str\s*)?=\s*[\"']([\w.-]+)[\"']", text))
    return sorted(out)


def token_count_rule(tree: VllmTree) -> dict[str, Any]:
    """The release fact `speculative_token_count` (see the module doc)."""
    home = speculative_file(tree)
    mod = tree.parse(home)
    cls = _class(mod, "SpeculativeConfig") if mod else None
    post = _method(cls, "__post_init__")
    value: dict[str, Any] = {"found": False}
    if cls is not None and post is not None:
        value = {
            "found": True,
            "mtp_compare": _mtp_compare(post),
            "n_predict_fill": _fills(post, "n_predict"),
            "divisible": _divisible(post),
            "block_fill": _fills(post, "block_size"),
            "dspark_skips_n_predict": _dspark_skips_n_predict(post),
            "model_missing": _missing_raise(post, "A speculative model was provided"),
            "verify_missing": _missing_raise(_method(cls, "_verify_args"), "must be provided"),
            "fill_methods": _fill_methods(cls, post),
            "config_types": _config_types(tree),
        }
        known = {value["n_predict_fill"], value["block_fill"]}
        value["other_fills"] = [
            n.lineno
            for n in ast.walk(post)
            if isinstance(n, ast.Assign)
            and any(_is_nst(t) for t in n.targets)
            and n.lineno not in known
            and not _under_method_branch(post, n, value["fill_methods"])
        ]
    return {"key": KEY, "value": value, "file": home, "line": post.lineno if post else 0}
