"""Curated runtime gates (data/gates.yaml), re-checked against each vLLM release by anchors.

Some rejections cannot be derived from class structure: an error raised in a model
runner, a handshake that fails at startup, an attention implementation that cannot
return the softmax LSE. They are curated as rules (research §3.7, §4, §8.3). A rule
never carries a version table: which releases it describes is decided, per scanned
release, by its provenance anchors.

Rule record (validated against schema/gates.schema.json on load)::

    id: ep-needs-moe
    description: ...
    applies_when: {ep: true, target: {is_moe: false}}
    effect: config_error            # config_error | startup_error | warning | fallback
    exception: ValueError           # null for warnings / fallbacks
    message: "Number of experts ..."   # exact text, or a template with {holes}
    anchors:
      - {file: vllm/config/model.py, anchor: "Number of experts ...", kind: string}
      - {file: vllm/config/model.py, anchor: "if parallel_config.enable_expert_parallel:"}
    group: v2_unsupported           # optional, see `group_hit`
    research: "§4.1"                # optional pointer into the research notes
    notes: ...                      # optional

Anchors
-------
`file` is a path relative to the sdist root, or a glob (`*`, `?`) matched against the
release's .py files. `kind`:

* `source` (default): `anchor` must occur verbatim in the file text. Use it for code
  (`if self.speculative_config.method in ("eagle3", "dflash"):`).
* `string`: `anchor` must occur in one of the file's string literals after
  flattening (implicit concatenation joined, `+` joined, f-string holes rendered as
  `{expr}`). A `{...}` in the anchor matches any hole, so a message split over
  several source lines or holding f-string expressions is written as the user reads
  it: `"{} with pipeline parallel is not supported."`.

`absent: true` turns an anchor into a negative one: the file must exist and must
not contain it (e.g. "NIXL does not override `set_xfer_handshake_metadata_pp_aware`").

A rule is `verified` for a release when every anchor holds; its evidence line is the
line of the first anchor. Otherwise it is `unverified`, with the failing anchors in
the reason, and must not be applied to that release.

Condition vocabulary (`applies_when`)
-------------------------------------
A mapping; every key must hold (AND). Evaluated by `rule_applies(rule, ctx)` against
a context dict describing one candidate `vllm serve` invocation; a key the context
does not provide makes the result `None` (unknown) unless another key is already
false (three-valued AND).

Numbers (int, or a comparison string ``">1"``, ``">=2"``, ``"==1"``, ``"!=1"``, ``"<4"``):

* ``pp``, ``tp``, ``dp``, ``dcp``, ``pcp``: pipeline / tensor / data / decode-context /
  prefill-context parallel sizes of the target (defaults 1 are the caller's business).
* ``draft_tp``: ``draft_tensor_parallel_size`` as given (``None`` when unset).
* ``draft_pp``: the PP size of the *draft's* ParallelConfig, as vLLM builds it in that
  release (the caller reads `create_draft_parallel_config`; it is the target PP in
  0.23/0.24 and 1 in 0.33 for model-based drafts).
* ``kv_heads``: total KV heads of the target (HF config).

Booleans:

* ``ep`` (``--enable-expert-parallel``), ``dp_external`` (``--data-parallel-external-lb``
  or ``--data-parallel-rank`` given), ``async_scheduling`` (``--async-scheduling``
  explicitly on), ``elastic_ep``, ``adaptive_verification``,
  ``model_runner_forced`` (``VLLM_USE_V2_MODEL_RUNNER`` set explicitly), ``lora``
  (``--enable-lora``), ``eplb`` (``--enable-eplb``), ``local_argmax``
  (``speculative_config.use_local_argmax_reduction``).

Strings (a scalar means equality, a list means one of, ``{not_in: [...]}`` means
none of, ``null`` means "not set"):

* ``spec_method`` (``speculative_config.method``, ``null`` without spec decode),
  ``kv_connector``, ``kv_role``, ``mm_encoder_tp_mode``, ``model_runner`` (``v1`` or
  ``v2``: the runner vLLM ends up using), ``distributed_executor_backend``,
  ``draft_sample_method`` (``speculative_config.draft_sample_method``).

Capabilities (mapping of capability -> required bool):

* ``target``: facts of the target architecture / checkpoint: ``supports_pp``,
  ``is_moe``, ``supports_eagle3``, ``is_hybrid``, ``has_inner_state``,
  ``is_attention_free``, ``supports_multimodal``, ``supports_encoder_tp_data``,
  ``use_mla``, ``aux_hidden_states_over_pp`` (inner decoder sets
  ``supports_aux_hidden_states_over_pp = True``, see `extract_aux_over_pp_classes`),
  ``attention_returns_lse`` (the selected attention impl sets
  ``can_return_lse_for_decode``, see `extract_lse_impls`), ``supports_lora`` and
  ``is_moe_class`` (the class: SupportsLoRA, MixtureOfExperts in its MRO; ``is_moe`` is the
  HF config's expert count).
* ``draft``: the same keys for the draft architecture (``supports_pp``, ``is_moe``), and
  ``has_get_top_tokens`` (the class or a base defines ``get_top_tokens``, see
  `extract_top_tokens_classes`).
* ``installed``: optional packages, ``{arctic_inference: false}``.

Composition:

* ``expr``: a small arithmetic/boolean expression over the numeric and boolean keys
  above (``"tp % dcp != 0"``, ``"draft_tp is not None and draft_tp not in (1, tp)"``);
  names, int/None/bool constants, + - * // %, comparisons, ``in``/``not in`` tuples,
  and/or/not only.
* ``group_hit``: true when some other *verified* rule of that ``group`` applies
  (``v2_unsupported`` items escalate to a config error when V2 is forced).
* ``any_of``: list of conditions, at least one holds. ``not``: a condition that must not hold.
"""

from __future__ import annotations

import ast
import fnmatch
import json
import operator
import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from compat.errors import UserError
from compat.resources import data_dir, schema_dir
from compat.sources.tree import VllmTree
from compat.vllm.cli_surface import ClassInfo, SymbolResolver
from compat.vllm.raises import flatten_message, no_gc, template_regex

REPO_ROOT = data_dir().parent
DEFAULT_RULES = data_dir() / "gates.yaml"
SCHEMA = schema_dir() / "gates.schema.json"

EFFECTS = ("config_error", "startup_error", "warning", "fallback")


# --------------------------------------------------------------------------- rules


@dataclass
class Anchor:
    file: str
    anchor: str
    kind: str = "source"  # "source" | "string"
    absent: bool = False


@dataclass
class GateRule:
    id: str
    description: str
    applies_when: dict[str, Any]
    effect: str
    exception: str | None
    message: str
    anchors: list[Anchor]
    group: str | None = None
    research: str | None = None
    notes: str | None = None


@lru_cache(maxsize=4)
def _schema(path: str) -> dict:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise UserError("gate rule schema is missing", where=path) from e


def load_rules(
    path: str | Path | None = None, schema_path: str | Path | None = None
) -> list[GateRule]:
    """Read and validate a gates YAML file (default: data/gates.yaml of this checkout)."""
    import jsonschema
    import yaml

    p = Path(path) if path is not None else DEFAULT_RULES
    try:
        # libyaml's parser when PyYAML has it: the same documents, a tenth of the time.
        doc = yaml.load(
            p.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        )
    except FileNotFoundError as e:
        raise UserError("gate rules file not found", where=str(p)) from e
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise UserError(f"invalid YAML{at}: {problem}", where=str(p)) from e
    schema = _schema(str(schema_path or SCHEMA))
    validator = jsonschema.Draft202012Validator(schema)
    if not isinstance(doc, dict):
        raise UserError("expected a mapping with `version` and `rules`", where=str(p))
    errors = sorted(validator.iter_errors(doc), key=lambda e: [str(x) for x in e.absolute_path])
    if errors:
        err = errors[0]
        loc = "".join(f"[{x}]" if isinstance(x, int) else f".{x}" for x in err.absolute_path)
        raise UserError(err.message, where=f"{p}: {loc.lstrip('.') or '(top)'}")
    rules = []
    seen: set[str] = set()
    for i, r in enumerate(doc["rules"]):
        if r["id"] in seen:
            raise UserError(f"duplicate rule id {r['id']!r}", where=f"{p}: rules[{i}].id")
        seen.add(r["id"])
        expr = r["applies_when"].get("expr")
        if expr is not None:
            try:
                _check_expr(ast.parse(expr, mode="eval").body)
            except (SyntaxError, ValueError) as ex:
                raise UserError(
                    f"bad expr {expr!r}: {ex}", where=f"{p}: rules[{i}].applies_when.expr"
                ) from ex
        rules.append(
            GateRule(
                id=r["id"],
                description=r["description"],
                applies_when=r["applies_when"],
                effect=r["effect"],
                exception=r.get("exception"),
                message=r["message"],
                anchors=[
                    Anchor(a["file"], a["anchor"], a.get("kind", "source"), a.get("absent", False))
                    for a in r["anchors"]
                ],
                group=r.get("group"),
                research=r.get("research"),
                notes=r.get("notes"),
            )
        )
    return rules


# --------------------------------------------------------------------------- checking


@dataclass
class AnchorResult:
    file: str  # the file actually checked (a glob resolves to the first matching file)
    anchor: str
    kind: str
    absent: bool
    ok: bool
    line: int | None
    reason: str | None = None


@dataclass
class GateStatus:
    rule_id: str
    status: str  # "verified" | "unverified"
    file: str | None  # evidence: file and line of the first anchor
    line: int | None
    reason: str | None
    anchors: list[AnchorResult] = field(default_factory=list)


class _StringIndex:
    """Flattened string literals of each file, built lazily from tree.parse."""

    def __init__(self, tree: VllmTree) -> None:
        self.tree = tree
        self._cache: dict[str, list[tuple[str, int]]] = {}

    def strings(self, rel: str) -> list[tuple[str, int]]:
        if rel not in self._cache:
            mod = self.tree.parse(rel)
            out: list[tuple[str, int]] = []
            if mod is not None:
                # One breadth-first pass: a `+` chain is seen before its operands, so the
                # operands are known to be inner parts by the time they are visited.
                inner: set[int] = set()
                for node in ast.walk(mod):
                    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
                        inner.add(id(node.left))
                        inner.add(id(node.right))
                        if id(node) not in inner and _has_string(node):
                            out.append((flatten_message(node), node.lineno))
                    elif isinstance(node, ast.JoinedStr) or (
                        isinstance(node, ast.Constant) and isinstance(node.value, str)
                    ):
                        out.append((flatten_message(node), node.lineno))
            self._cache[rel] = out
        return self._cache[rel]


def _has_string(node: ast.AST) -> bool:
    if isinstance(node, (ast.JoinedStr,)) or (
        isinstance(node, ast.Constant) and isinstance(node.value, str)
    ):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _has_string(node.left) or _has_string(node.right)
    return False


def _files_for(tree: VllmTree, pattern: str, all_files: list[str] | None) -> list[str]:
    if not any(c in pattern for c in "*?["):
        return [pattern] if tree.exists(pattern) else []
    files = all_files if all_files is not None else tree.py_files("vllm")
    return [f for f in files if fnmatch.fnmatchcase(f, pattern)]


def check_anchor(
    tree: VllmTree, a: Anchor, index: _StringIndex | None = None, all_files: list[str] | None = None
) -> AnchorResult:
    index = index or _StringIndex(tree)
    files = _files_for(tree, a.file, all_files)
    if not files:
        return AnchorResult(
            a.file,
            a.anchor,
            a.kind,
            a.absent,
            False,
            None,
            f"{a.file} does not exist in this release",
        )
    hit_file, hit_line = None, None
    for rel in files:
        line = _find(tree, rel, a, index)
        if line is not None:
            hit_file, hit_line = rel, line
            break
    if a.absent:
        if hit_file is None:
            return AnchorResult(files[0], a.anchor, a.kind, True, True, None)
        return AnchorResult(
            hit_file,
            a.anchor,
            a.kind,
            True,
            False,
            hit_line,
            f"{hit_file}:{hit_line} contains {a.anchor!r}, which must be absent",
        )
    if hit_file is None:
        where = a.file if len(files) == 1 else f"{a.file} ({len(files)} files)"
        return AnchorResult(
            files[0],
            a.anchor,
            a.kind,
            False,
            False,
            None,
            f"{a.kind} anchor {a.anchor!r} not found in {where}",
        )
    return AnchorResult(hit_file, a.anchor, a.kind, False, True, hit_line)


def _find(tree: VllmTree, rel: str, a: Anchor, index: _StringIndex) -> int | None:
    text = tree.read(rel)
    if text is None:
        return None
    if a.kind == "source":
        i = text.find(a.anchor)
        return None if i < 0 else text.count("\n", 0, i) + 1
    pat = template_regex(a.anchor)
    best = None
    for s, line in index.strings(rel):
        if pat.search(s) and (best is None or line < best):
            best = line
    return best


def check_gates(tree: VllmTree, rules: list[GateRule]) -> list[GateStatus]:
    """Per rule: verified (every anchor holds) or unverified (with the failing anchors)."""
    with no_gc():
        return _check_gates(tree, rules)


def _check_gates(tree: VllmTree, rules: list[GateRule]) -> list[GateStatus]:
    index = _StringIndex(tree)
    all_files: list[str] | None = None
    if any(any(c in a.file for c in "*?[") for r in rules for a in r.anchors):
        all_files = tree.py_files("vllm")
    out = []
    for r in rules:
        results = [check_anchor(tree, a, index, all_files) for a in r.anchors]
        if not results:
            out.append(GateStatus(r.id, "unverified", None, None, "rule has no anchors", results))
            continue
        first = results[0]
        bad = [x for x in results if not x.ok]
        if bad:
            out.append(
                GateStatus(
                    r.id,
                    "unverified",
                    first.file,
                    first.line,
                    "; ".join(x.reason or "" for x in bad),
                    results,
                )
            )
        else:
            line_src = next((x for x in results if x.line is not None), first)
            out.append(GateStatus(r.id, "verified", line_src.file, line_src.line, None, results))
    return out


# --------------------------------------------------------------------------- conditions

_CMP_RE = re.compile(r"^\s*(>=|<=|>|<|==|!=)\s*(-?\d+)\s*$")
_NUMERIC = ("pp", "tp", "dp", "dcp", "pcp", "draft_tp", "draft_pp", "kv_heads")
_BOOLEAN = (
    "ep",
    "dp_external",
    "async_scheduling",
    "elastic_ep",
    "adaptive_verification",
    "model_runner_forced",
    "lora",
    "eplb",
    "auto_tool_choice",
    "tool_call_parser_set",
    "attention_backend_known",
    "local_argmax",
)
_STRING = (
    "spec_method",
    "kv_connector",
    "kv_role",
    "mm_encoder_tp_mode",
    "model_runner",
    "distributed_executor_backend",
    "draft_sample_method",
)
_CAPS = ("target", "draft", "installed")


def _and(values: list[bool | None]) -> bool | None:
    if any(v is False for v in values):
        return False
    if any(v is None for v in values):
        return None
    return True


def _num(cond: Any, val: Any) -> bool | None:
    if val is None and not (isinstance(cond, str) and cond.strip() in ("==None", "is None")):
        return None
    if isinstance(cond, bool):
        return bool(val) == cond
    if isinstance(cond, int):
        return val == cond
    m = _CMP_RE.match(str(cond))
    if not m:
        raise ValueError(f"bad numeric condition {cond!r}")
    op, n = m.group(1), int(m.group(2))
    return {
        ">": val > n,
        ">=": val >= n,
        "<": val < n,
        "<=": val <= n,
        "==": val == n,
        "!=": val != n,
    }[op]


def _str(cond: Any, val: Any) -> bool:
    if isinstance(cond, dict):
        return val not in cond.get("not_in", [])
    if isinstance(cond, list):
        return val in cond
    return val == cond


def rule_applies(
    rule: GateRule | dict,
    ctx: dict[str, Any],
    rules: list[GateRule] | None = None,
    verified: set[str] | None = None,
) -> bool | None:
    """Does the rule's `applies_when` hold for `ctx`? True / False / None (a fact is missing).

    `rules` and `verified` (ids verified for the release) are needed for `group_hit`.
    """
    cond = rule.applies_when if isinstance(rule, GateRule) else rule
    return _eval(cond, ctx, rules or [], verified, getattr(rule, "id", None))


def _eval(
    cond: dict[str, Any],
    ctx: dict[str, Any],
    rules: list[GateRule],
    verified: set[str] | None,
    self_id: str | None,
) -> bool | None:
    results: list[bool | None] = []
    for key, want in cond.items():
        if key in _NUMERIC:
            results.append(_num(want, ctx[key]) if key in ctx else None)
        elif key in _BOOLEAN:
            results.append((bool(ctx[key]) == bool(want)) if key in ctx else None)
        elif key in _STRING:
            results.append(_str(want, ctx[key]) if key in ctx else None)
        elif key in _CAPS:
            caps = ctx.get(key)
            for cap, v in want.items():
                if not isinstance(caps, dict) or caps.get(cap) is None:
                    results.append(None)
                else:
                    results.append(bool(caps[cap]) == bool(v))
        elif key == "expr":
            results.append(eval_expr(want, ctx))
        elif key == "group_hit":
            hits: list[bool | None] = []
            for r in rules:
                if r.group != want or r.id == self_id:
                    continue
                if verified is not None and r.id not in verified:
                    continue
                hits.append(_eval(r.applies_when, ctx, rules, verified, r.id))
            results.append(
                True
                if any(h is True for h in hits)
                else (None if any(h is None for h in hits) else False)
            )
        elif key == "any_of":
            sub = [_eval(c, ctx, rules, verified, self_id) for c in want]
            results.append(
                True
                if any(s is True for s in sub)
                else (None if any(s is None for s in sub) else False)
            )
        elif key == "not":
            s = _eval(want, ctx, rules, verified, self_id)
            results.append(None if s is None else not s)
        else:
            raise ValueError(f"unknown applies_when key {key!r}")
    return _and(results)


def undecided(
    rule: GateRule,
    ctx: dict[str, Any],
    rules: list[GateRule] | None = None,
    verified: set[str] | None = None,
) -> list[str]:
    """The conditions of `rule` that `ctx` leaves undecided ('model_runner', 'target.is_moe',
    'expr: tp % dcp != 0', ...), named as data/gates.yaml writes them."""
    return list(dict.fromkeys(_undecided(rule.applies_when, ctx, rules or [], verified, rule.id)))


def _undecided(
    cond: dict[str, Any],
    ctx: dict[str, Any],
    rules: list[GateRule],
    verified: set[str] | None,
    self_id: str | None,
) -> list[str]:
    out: list[str] = []
    for key, want in cond.items():
        if key in _NUMERIC or key in _BOOLEAN or key in _STRING:
            if key not in ctx or (key in _NUMERIC and _num(want, ctx[key]) is None):
                out.append(key)
        elif key in _CAPS:
            caps = ctx.get(key)
            out += [
                f"{key}.{cap}"
                for cap in want
                if not isinstance(caps, dict) or caps.get(cap) is None
            ]
        elif key == "expr":
            if eval_expr(want, ctx) is None:
                out.append(f"expr: {want}")
        elif key == "group_hit":
            for r in rules:
                if (
                    r.group == want
                    and r.id != self_id
                    and (verified is None or r.id in verified)
                    and _eval(r.applies_when, ctx, rules, verified, r.id) is None
                ):
                    out += _undecided(r.applies_when, ctx, rules, verified, r.id)
        elif key == "any_of":
            for c in want:
                out += _undecided(c, ctx, rules, verified, self_id)
        elif key == "not":
            out += _undecided(want, ctx, rules, verified, self_id)
    return out


_EXPR_NODES = (
    ast.Expression,
    ast.BoolOp,
    ast.And,
    ast.Or,
    ast.UnaryOp,
    ast.Not,
    ast.USub,
    ast.BinOp,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.FloorDiv,
    ast.Mod,
    ast.Compare,
    ast.Eq,
    ast.NotEq,
    ast.Lt,
    ast.LtE,
    ast.Gt,
    ast.GtE,
    ast.Is,
    ast.IsNot,
    ast.In,
    ast.NotIn,
    ast.Name,
    ast.Load,
    ast.Constant,
    ast.Tuple,
)


def _check_expr(node: ast.AST) -> None:
    for n in ast.walk(node):
        if not isinstance(n, _EXPR_NODES):
            raise ValueError(f"{type(n).__name__} not allowed")  # noqa: TRY004 (a bad rule value)
        if isinstance(n, ast.Constant) and not (
            n.value is None or isinstance(n.value, (int, bool))
        ):
            raise ValueError("only int/bool/None constants")
        if isinstance(n, ast.Name) and n.id not in _NUMERIC + _BOOLEAN:
            raise ValueError(f"unknown name {n.id!r}")


class _Missing(Exception):
    pass


_BIN_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_CMP_OPS = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}


@lru_cache(maxsize=256)
def _parsed_expr(expr: str) -> ast.Expression:
    node = ast.parse(expr, mode="eval")
    _check_expr(node)
    return node


def eval_expr(expr: str, ctx: dict[str, Any]) -> bool | None:
    """Evaluate an `expr` condition; None when a name it needs is missing from ctx."""
    node = _parsed_expr(expr)

    def ev(n: ast.AST) -> Any:
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant):
            return n.value
        if isinstance(n, ast.Name):
            if n.id not in ctx:
                raise _Missing(n.id)
            return ctx[n.id]
        if isinstance(n, ast.Tuple):
            return tuple(ev(e) for e in n.elts)
        if isinstance(n, ast.BoolOp):
            vals = [ev(v) for v in n.values]
            return all(vals) if isinstance(n.op, ast.And) else any(vals)
        if isinstance(n, ast.UnaryOp):
            v = ev(n.operand)
            return (not v) if isinstance(n.op, ast.Not) else -v
        if isinstance(n, ast.BinOp):
            a, b = ev(n.left), ev(n.right)
            if a is None or b is None:
                raise _Missing("None operand")
            if isinstance(n.op, (ast.FloorDiv, ast.Mod)) and b == 0:
                raise _Missing("division by zero")
            return _BIN_OPS[type(n.op)](a, b)
        if isinstance(n, ast.Compare):
            left = ev(n.left)
            for op, right_node in zip(n.ops, n.comparators):
                right = ev(right_node)
                if isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)) and (
                    left is None or right is None
                ):
                    raise _Missing("None compared")
                if not _CMP_OPS[type(op)](left, right):
                    return False
                left = right
            return True
        raise ValueError(type(n).__name__)

    try:
        return bool(ev(node))
    except _Missing:
        return None


# --------------------------------------------------------------------------- class facts


@dataclass
class ClassAttrFact:
    class_name: str
    file: str
    line: int
    value: str  # unparsed value ("True") or the expression an instance copies
    via: str  # "class_attr" | "inherited" | "instance_attr"
    inherited_from: str | None = None


@dataclass
class ClassAttrScan:
    attr: str
    status: str  # "ok" | "unknown"
    reason: str | None
    classes: list[ClassAttrFact] = field(default_factory=list)  # the ones with the value True
    default: ClassAttrFact | None = None  # base-class declaration (value False), when found
    others: list[ClassAttrFact] = field(default_factory=list)  # explicit False / dynamic

    def names(self) -> set[str]:
        return {c.class_name for c in self.classes}


_BLOCKS = (ast.stmt, ast.excepthandler, ast.match_case)


def _statements(node: ast.AST) -> Iterator[ast.AST]:
    """`ast.walk(node)` restricted to statements (and the handlers and cases holding them),
    in the same order, without visiting a single expression.

    A statement only ever sits in a list field of a statement, handler or case (never inside
    an expression), one level below it, so walking those lists breadth-first meets the
    statements exactly as ast.walk does. Class and attribute scans visit a tenth of the nodes.
    """
    todo = deque([node])
    while todo:
        node = todo.popleft()
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, list):
                todo.extend(v for v in value if isinstance(v, _BLOCKS))
        yield node


def _class_attr_scan(
    tree: VllmTree, attr: str, under: tuple[str, ...], default_file: str | None = None
) -> ClassAttrScan:
    direct: dict[tuple[str, str], ClassAttrFact] = {}
    others: list[ClassAttrFact] = []
    classes: list[ClassInfo] = []
    files: list[str] = []
    for u in under:
        files += tree.py_files(u)
    if default_file and default_file not in files:
        files.append(default_file)
    mentioned = False
    for rel in files:
        text = tree.read(rel) or ""
        if attr not in text:
            continue
        mentioned = True
        mod = tree.parse(rel)
        if mod is None:
            continue
        for node in _statements(mod):
            if not isinstance(node, ast.ClassDef):
                continue
            classes.append(ClassInfo(node.name, rel, node))
            true_fact, class_others = _class_attr_facts(node, rel, attr)
            if true_fact is not None:
                direct[(rel, node.name)] = true_fact
            others += class_others
    if not mentioned:
        return ClassAttrScan(
            attr, "unknown", f"{attr} is not referenced under {', '.join(under)} in this release"
        )
    default = next((o for o in others if o.via == "class_attr" and o.file == default_file), None)
    found = _inherit_true(tree, files, classes, direct, others)
    facts = sorted(found.values(), key=lambda f: (f.file, f.line))
    return ClassAttrScan(attr, "ok", None, facts, default, others)


def _class_attr_facts(
    node: ast.ClassDef, rel: str, attr: str
) -> tuple[ClassAttrFact | None, list[ClassAttrFact]]:
    """What one class sets `attr` to: its last `attr = True` in the class body, and the other
    assignments (class-level values other than True, then `self.attr = ...` in its methods)."""
    true_fact = None
    others = []
    for st in node.body:
        if isinstance(st, ast.FunctionDef) and st.name == attr:
            # A method of that name: `hasattr(model, attr)` holds (scans of methods).
            true_fact = ClassAttrFact(node.name, rel, st.lineno, "def", "method")
            continue
        value = _class_level_value(st, attr)
        if value is None:
            continue
        fact = ClassAttrFact(node.name, rel, st.lineno, ast.unparse(value), "class_attr")
        if isinstance(value, ast.Constant) and value.value is True:
            true_fact = fact
        else:
            others.append(fact)
    for sub in _statements(node):
        if (
            isinstance(sub, ast.Assign)
            and len(sub.targets) == 1
            and isinstance(sub.targets[0], ast.Attribute)
            and sub.targets[0].attr == attr
            and isinstance(sub.targets[0].value, ast.Name)
            and sub.targets[0].value.id == "self"
        ):
            others.append(
                ClassAttrFact(node.name, rel, sub.lineno, ast.unparse(sub.value), "instance_attr")
            )
    return true_fact, others


def _class_level_value(st: ast.stmt, attr: str) -> ast.expr | None:
    """The value a class-body statement `attr = v` / `attr: T = v` gives, else None."""
    if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
        return st.value if st.targets[0].id == attr else None
    if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
        return st.value if st.target.id == attr else None
    return None


def _inherit_true(
    tree: VllmTree,
    files: list[str],
    classes: list[ClassInfo],
    direct: dict[tuple[str, str], ClassAttrFact],
    others: list[ClassAttrFact],
) -> dict[tuple[str, str], ClassAttrFact]:
    """Inheritance: a subclass of a True class is True unless it (or a nearer base) overrides
    it. Subclasses may live in files that never mention the attribute, so look for files
    naming a known True class, until no new class turns up."""
    r = SymbolResolver(tree)
    overridden = {(o.file, o.class_name) for o in others if o.via == "class_attr"}
    found: dict[tuple[str, str], ClassAttrFact] = dict(direct)
    scanned: set[str] = set()
    have = {c.file for c in classes}
    # A file not yet scanned named none of the classes asked about before, so only the names
    # found since are looked for in it (each file's text was searched for every name on every
    # pass: 10% of a release's scan at 0.34.0).
    asked: set[str] = set()
    for _ in range(6):
        names = {k[1] for k in found}
        fresh, asked = names - asked, asked | names
        new = False
        for rel in files:
            if rel in scanned:
                continue
            text = tree.read(rel) or ""
            if not any(n in text for n in fresh):
                continue
            scanned.add(rel)
            mod = tree.parse(rel)
            if mod is not None and rel not in have:
                have.add(rel)
                classes.extend(
                    ClassInfo(n.name, rel, n)
                    for n in _statements(mod)
                    if isinstance(n, ast.ClassDef)
                )
        for c in classes:
            key = (c.file, c.name)
            if key in found or key in overridden or not c.node.bases:
                continue
            for base in r.mro(c)[1:]:
                bkey = (base.file, base.name)
                if bkey in overridden:
                    break
                if bkey in found:
                    src = found[bkey]
                    found[key] = ClassAttrFact(
                        c.name,
                        c.file,
                        c.line,
                        src.value,
                        "inherited",
                        inherited_from=src.inherited_from or base.name,
                    )
                    new = True
                    break
        if not new:
            break
    return found


def extract_lse_impls(tree: VllmTree) -> ClassAttrScan:
    """Attention impl classes with `can_return_lse_for_decode = True` (DCP-capable), research §4.3."""
    with no_gc():
        return _class_attr_scan(
            tree,
            "can_return_lse_for_decode",
            ("vllm/v1/attention/backends",),
            default_file="vllm/v1/attention/backend.py",
        )


def extract_top_tokens_classes(tree: VllmTree) -> ClassAttrScan:
    """Model classes with a `get_top_tokens` method (own or inherited, e.g. LocalArgmaxMixin): the
    drafter's `use_local_argmax_reduction` check is `hasattr(self.model, "get_top_tokens")`."""
    with no_gc():
        return _class_attr_scan(
            tree,
            "get_top_tokens",
            ("vllm/model_executor/models", "vllm/models"),
            default_file="vllm/model_executor/models/interfaces.py",
        )


def extract_aux_over_pp_classes(tree: VllmTree) -> ClassAttrScan:
    """Decoder classes with `supports_aux_hidden_states_over_pp = True` (0.33 C2), research §3.7."""
    with no_gc():
        return _class_attr_scan(
            tree,
            "supports_aux_hidden_states_over_pp",
            ("vllm/model_executor/models", "vllm/models"),
            default_file="vllm/model_executor/models/interfaces.py",
        )
