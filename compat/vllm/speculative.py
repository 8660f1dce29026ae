"""Speculative decoding per release: accepted methods, draft architecture, draft parallelism.

The draft architecture for model-based methods comes from
`SpeculativeConfig.hf_config_override`, a long chain of string tests that changes
every release. Rather than re-implementing it, we run that release's own function in
isolation: the FunctionDef is taken from the AST, compiled alone, and executed with a
stub config object, restricted builtins, an import hook that only serves stubbed
modules, and a line budget (see compat.vllm.sandbox). The EAGLE rewrite is read the
same way from `EAGLEConfig.__init__`. Whether the draft inherits the target's pipeline
parallel size is read from the `ParallelConfig(...)` call in
`create_draft_parallel_config` and from the `__post_init__` branches that reuse the
target's parallel config.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from compat.sources.tree import VllmTree, speculative_file
from compat.vllm.sandbox import SandboxError, StubConfig, call_isolated, run_isolated

EAGLE_CONFIG = "vllm/transformers_utils/configs/eagle.py"
MTP_ALIAS_LITERAL = "MTPModelTypes"
ROOT_LITERAL = "SpeculativeMethod"


@dataclass(frozen=True)
class Method:
    method: str
    canonical: str
    kind: str  # method | mtp_alias
    line: int


def _class(mod: ast.Module, name: str) -> ast.ClassDef | None:
    for st in mod.body:
        if isinstance(st, ast.ClassDef) and st.name == name:
            return st
    return None


def _method(cls: ast.ClassDef | None, name: str) -> ast.FunctionDef | None:
    if cls is None:
        return None
    for st in cls.body:
        if isinstance(st, ast.FunctionDef) and st.name == name:
            return st
    return None


def accepted_methods(tree: VllmTree) -> list[Method]:
    """Expand the `Literal` aliases behind `SpeculativeMethod`; [] if the layout is unknown."""
    mod = tree.parse(speculative_file(tree))
    if mod is None:
        return []
    literals: dict[str, tuple[ast.expr, int]] = {}
    for st in mod.body:
        value = st.value if isinstance(st, (ast.Assign, ast.AnnAssign)) else None
        targets = (
            (st.targets if isinstance(st, ast.Assign) else [st.target])
            if isinstance(st, (ast.Assign, ast.AnnAssign)) and value is not None
            else []
        )
        if (
            isinstance(value, ast.Subscript)
            and isinstance(value.value, ast.Name)
            and value.value.id == "Literal"
        ):
            for t in targets:
                if isinstance(t, ast.Name):
                    literals[t.id] = (value.slice, st.lineno)

    def expand(name: str, seen: frozenset[str]) -> list[tuple[str, int, str]]:
        if name not in literals or name in seen:
            return []
        node, line = literals[name]
        elts = node.elts if isinstance(node, ast.Tuple) else [node]
        out: list[tuple[str, int, str]] = []
        for e in elts:
            if isinstance(e, ast.Constant) and isinstance(e.value, str):
                out.append((e.value, getattr(e, "lineno", line), name))
            elif isinstance(e, ast.Name):
                out += expand(e.id, seen | {name})
        return out

    if ROOT_LITERAL not in literals:
        return []
    aliases = {v for v, _, _ in expand(MTP_ALIAS_LITERAL, frozenset())}
    methods, seen_m = [], set()
    for name, line, _origin in expand(ROOT_LITERAL, frozenset()):
        if name in seen_m:
            continue
        seen_m.add(name)
        if name in aliases and name != "mtp":
            methods.append(Method(name, "mtp", "mtp_alias", line))
        else:
            methods.append(Method(name, name, "method", line))
    return methods


# -- draft parallel config -------------------------------------------------------------


@dataclass
class DraftParallelFacts:
    """How each method builds the draft's ParallelConfig in one release."""

    pp_from_create: str  # target | one | unknown  (the ParallelConfig(...) keyword)
    ep_from_create: str  # off | target | target_if_moe | unknown
    create_line: int
    target_pc_methods: dict[str, int]  # methods whose draft PC *is* the target PC -> line
    no_draft_methods: dict[str, int]  # methods with no draft model config at all -> line
    verify_line: int  # `self.draft_model_config.verify_with_parallel_config(` in _verify_args
    notes: list[str] = field(default_factory=list)

    def pp_source(self, method: str) -> str:
        if method in self.no_draft_methods:
            return "none"
        if method in self.target_pc_methods:
            return "target_config"
        return self.pp_from_create

    def inherits_pp(self, method: str) -> bool | None:
        src = self.pp_source(method)
        return {"target": True, "target_config": True, "one": False, "none": False}.get(src)

    def line_for(self, method: str) -> int:
        return (
            self.no_draft_methods.get(method)
            or self.target_pc_methods.get(method)
            or self.create_line
        )


def _methods_in_test(test: ast.expr) -> list[str]:
    out: list[str] = []
    for node in ast.walk(test):
        if (
            isinstance(node, ast.Compare)
            and isinstance(node.left, ast.Attribute)
            and node.left.attr == "method"
        ):
            for comp in node.comparators:
                for c in ast.walk(comp):
                    if isinstance(c, ast.Constant) and isinstance(c.value, str):
                        out.append(c.value)
    return out


def _assigns(body: list[ast.stmt], attr: str) -> list[ast.Assign]:
    found = []
    for st in body:
        for node in ast.walk(st):
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Attribute)
                and node.targets[0].attr == attr
            ):
                found.append(node)
    return found


def draft_parallel_facts(tree: VllmTree) -> DraftParallelFacts | None:
    mod = tree.parse(speculative_file(tree))
    cls = _class(mod, "SpeculativeConfig") if mod else None
    create = _method(cls, "create_draft_parallel_config")
    post = _method(cls, "__post_init__")
    if create is None or post is None:
        return None
    notes: list[str] = []
    pp, ep, line = "unknown", "off", create.lineno
    for node in ast.walk(create):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ParallelConfig":
            line = node.lineno
            kws = {k.arg: k.value for k in node.keywords}
            v = kws.get("pipeline_parallel_size")
            if isinstance(v, ast.Constant) and v.value == 1:
                pp = "one"
            elif isinstance(v, ast.Attribute) and v.attr == "pipeline_parallel_size":
                pp = "target"
            elif v is None:
                pp = "one"  # ParallelConfig's default pipeline_parallel_size is 1
                notes.append("create_draft_parallel_config passes no pipeline_parallel_size")
            else:
                notes.append(f"unrecognised pipeline_parallel_size={ast.unparse(v)}")
            e = kws.get("enable_expert_parallel")
            if e is None:
                ep = "off"
            elif isinstance(e, ast.Attribute) and e.attr == "enable_expert_parallel":
                ep = "target"
            else:
                src = ast.unparse(create)
                ep = "target_if_moe" if "is_moe" in src else "unknown"
            if (
                isinstance(v, ast.Attribute)
                and v.attr == "pipeline_parallel_size"
                or isinstance(v, ast.Constant)
            ):
                line = v.lineno
    target_pc: dict[str, int] = {}
    no_draft: dict[str, int] = {}
    # The method dispatch in __post_init__ is one if/elif chain: walk it branch by branch.
    for node in ast.walk(post):
        if not isinstance(node, ast.If) or not _methods_in_test(node.test):
            continue
        chain, cur = [], node
        while True:
            chain.append(cur)
            if len(cur.orelse) == 1 and isinstance(cur.orelse[0], ast.If):
                cur = cur.orelse[0]
            else:
                break
        if not any(_assigns(b.body, "draft_parallel_config") for b in chain):
            continue
        for branch in chain:
            methods = _methods_in_test(branch.test)
            pcs = [
                a
                for a in _assigns(branch.body, "draft_parallel_config")
                if isinstance(a.value, ast.Attribute) and a.value.attr == "target_parallel_config"
            ]
            for m in methods:
                if pcs:
                    target_pc.setdefault(m, pcs[0].lineno)
                elif not _assigns(branch.body, "draft_model_config"):
                    no_draft.setdefault(m, branch.lineno)
        break
    verify_line = 0
    verify = _method(cls, "_verify_args")
    text = tree.read(speculative_file(tree)) or ""
    if verify is not None:
        for node in ast.walk(verify):
            if isinstance(node, ast.Attribute) and node.attr == "verify_with_parallel_config":
                verify_line = node.lineno
                break
    if not verify_line and "verify_with_parallel_config(" in text:
        verify_line = text[: text.index("verify_with_parallel_config(")].count("\n") + 1
    return DraftParallelFacts(pp, ep, line, target_pc, no_draft, verify_line, notes)


# -- hf_config_override ----------------------------------------------------------------


@dataclass
class OverrideResult:
    status: str  # ok | error | unknown
    model_type: str | None = None
    architectures: tuple[str, ...] = ()
    changed: bool = False
    line: int = 0  # line (in speculative.py) of the first statement that rewrote the config
    detail: str = ""
    counts: dict[str, Any] = field(default_factory=dict)  # n_predict, block_size as set after it


class OverrideRunner:
    """One release's `SpeculativeConfig.hf_config_override`, compiled once."""

    def __init__(self, tree: VllmTree) -> None:
        self.tree = tree
        self.fn: ast.FunctionDef | None = None
        self.line = 0
        self.file = speculative_file(tree)
        mod = tree.parse(self.file)
        cls = _class(mod, "SpeculativeConfig") if mod else None
        fn = _method(cls, "hf_config_override")
        if fn is not None:
            self.fn = fn
            self.line = fn.lineno
        self._code = None

    @property
    def available(self) -> bool:
        return self.fn is not None

    def run(self, config: dict[str, Any]) -> OverrideResult:
        if self.fn is None:
            return OverrideResult(
                "unknown", detail=f"no SpeculativeConfig.hf_config_override in {self.file}"
            )
        try:
            cfg, first_line = run_isolated(self.tree, self.fn, self.file, config)
        except SandboxError as exc:
            return OverrideResult("unknown", detail=str(exc))
        except Exception as exc:  # vLLM's own validation inside the override (e.g. Inkling)
            return OverrideResult("error", detail=f"{type(exc).__name__}: {exc}")
        archs = tuple(getattr(cfg, "architectures", None) or ())
        mt = getattr(cfg, "model_type", None)
        changed = (archs != tuple(config.get("architectures") or ())) or mt != config.get(
            "model_type"
        )
        return OverrideResult(
            "ok",
            mt,
            archs,
            changed,
            first_line,
            "rewrote the config" if changed else "left the config unchanged",
            {
                "n_predict": getattr(cfg, "n_predict", None),
                "block_size": getattr(cfg, "block_size", None)
                if getattr(cfg, "block_size", None) is not None
                else getattr(cfg, "dspark_block_size", None),
            },
        )


# -- EAGLE architecture rewrite ------------------------------------------------------------


def eagle_rewrite(
    tree: VllmTree, method: str, archs: list[str]
) -> tuple[list[str] | None, int, str]:
    """Apply `EAGLEConfig.__init__`'s rewrite for `method` to `archs`: (archs, line, why)."""
    mod = tree.parse(EAGLE_CONFIG)
    cls = _class(mod, "EAGLEConfig") if mod else None
    init = _method(cls, "__init__")
    if init is None:
        return None, 0, f"no EAGLEConfig.__init__ in {EAGLE_CONFIG}"
    for node in ast.walk(init):
        if not isinstance(node, ast.If) or method not in _methods_in_test_name(node.test, "method"):
            continue
        for st in node.body:
            if (
                isinstance(st, ast.Assign)
                and isinstance(st.targets[0], ast.Subscript)
                and isinstance(st.value, ast.ListComp)
            ):
                key = st.targets[0].slice
                if isinstance(key, ast.Constant) and key.value == "architectures":
                    out = _eval_listcomp(st.value, archs)
                    if out is None:
                        return None, st.lineno, "EAGLE rewrite not evaluable"
                    return out, st.lineno, "EAGLEConfig rewrite"
    return None, init.lineno, f"EAGLEConfig has no architecture rewrite for method {method!r}"


def _module_constants(mod: ast.Module) -> dict[str, str]:
    return {
        st.targets[0].id: st.value.value
        for st in mod.body
        if isinstance(st, ast.Assign)
        and len(st.targets) == 1
        and isinstance(st.targets[0], ast.Name)
        and isinstance(st.value, ast.Constant)
        and isinstance(st.value.value, str)
    }


def _arch_names(test: ast.expr, op: type[ast.cmpop], consts: dict[str, str]) -> list[str]:
    """Names X in `X <op> self.draft_model_config.architectures` comparisons of `test`."""
    out: list[str] = []
    for n in ast.walk(test):
        if (
            isinstance(n, ast.Compare)
            and isinstance(n.ops[0], op)
            and ast.unparse(n.comparators[0]).endswith("draft_model_config.architectures")
        ):
            left = n.left
            if isinstance(left, ast.Constant) and isinstance(left.value, str):
                out.append(left.value)
            elif isinstance(left, ast.Name) and left.id in consts:
                out.append(consts[left.id])
    return out


def dspark_rewrite(
    tree: VllmTree, archs: list[str], target_model_type: str | None
) -> tuple[list[str] | None, int, str]:
    """`SpeculativeConfig.__post_init__`'s rewrite of a DSpark draft built from a full target
    config (DeepSeek-V4: "DSpark reuses the full DeepSeek-V4 config"): when none of the
    architectures the test keeps is the draft's, they become the one it names (`DSparkDraftModel`,
    or by the target's model_type its V4.1 twin). (new archs, line, why): archs unchanged when
    the rewrite does not apply, None when the release has none or it cannot be decided."""
    home = speculative_file(tree)
    mod = tree.parse(home)
    post = _method(_class(mod, "SpeculativeConfig") if mod else None, "__post_init__")
    if mod is None or post is None:
        return None, 0, "no SpeculativeConfig.__post_init__"
    consts = _module_constants(mod)
    parents = {id(c): p for p in ast.walk(post) for c in ast.iter_child_nodes(p)}
    for node in ast.walk(post):
        if not (
            isinstance(node, ast.If)
            and "dspark" in _methods_in_test(node.test)
            and _arch_names(node.test, ast.NotIn, consts)
        ):
            continue
        new = next(
            (
                st.value
                for st in ast.walk(ast.Module(body=node.body, type_ignores=[]))
                if isinstance(st, ast.Assign)
                and isinstance(st.targets[0], ast.Attribute)
                and st.targets[0].attr == "architectures"
                and isinstance(st.value, ast.List)
                and len(st.value.elts) == 1
            ),
            None,
        )
        if new is None:
            continue
        up = parents.get(id(node))
        if isinstance(up, ast.If) and set(_arch_names(up.test, ast.In, consts)) & set(archs):
            return None, node.lineno, "an earlier DSpark branch may take this draft"
        if set(_arch_names(node.test, ast.NotIn, consts)) & set(archs):
            return list(archs), node.lineno, "kept"
        name = _pick_arch(new.elts[0], node.body, target_model_type)
        if name is None:
            return None, node.lineno, "the rewritten architecture is not decided here"
        return [name], node.lineno, "rewritten"
    return None, 0, "no DSpark architecture rewrite in this release"


def _pick_arch(value: ast.expr, body: list[ast.stmt], target_model_type: str | None) -> str | None:
    """`"A"`, or `"A" if flag else "B"` with `flag = (...target_model_config.hf_config.model_type
    == "t")` set in the same branch."""
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return value.value
    if not (
        isinstance(value, ast.IfExp)
        and isinstance(value.test, ast.Name)
        and isinstance(value.body, ast.Constant)
        and isinstance(value.orelse, ast.Constant)
    ):
        return None
    flag = value.test.id
    for st in body:
        if (
            isinstance(st, ast.Assign)
            and isinstance(st.targets[0], ast.Name)
            and st.targets[0].id == flag
            and isinstance(st.value, ast.Compare)
            and ast.unparse(st.value.left).endswith("target_model_config.hf_config.model_type")
            and isinstance(st.value.ops[0], ast.Eq)
            and isinstance(st.value.comparators[0], ast.Constant)
        ):
            if target_model_type is None:
                return None
            hit = target_model_type == st.value.comparators[0].value
            return str(value.body.value if hit else value.orelse.value)
    return None


def _methods_in_test_name(test: ast.expr, name: str) -> list[str]:
    out = []
    for node in ast.walk(test):
        if (
            isinstance(node, ast.Compare)
            and isinstance(node.left, ast.Name)
            and node.left.id == name
        ):
            for c in node.comparators:
                for k in ast.walk(c):
                    if isinstance(k, ast.Constant) and isinstance(k.value, str):
                        out.append(k.value)
    return out


def _eval_listcomp(comp: ast.ListComp, archs: list[str]) -> list[str] | None:
    """Evaluate `[f(arch) for arch in <anything>]` with `arch` over `archs`."""
    if len(comp.generators) != 1 or not isinstance(comp.generators[0].target, ast.Name):
        return None
    var = comp.generators[0].target.id
    expr = ast.Expression(comp.elt)
    try:
        code = compile(ast.fix_missing_locations(expr), EAGLE_CONFIG, "eval")
        out = []
        for a in archs:
            if all(
                eval(
                    compile(ast.Expression(c), EAGLE_CONFIG, "eval"), {"__builtins__": {}}, {var: a}
                )
                for c in comp.generators[0].ifs
            ):
                out.append(eval(code, {"__builtins__": {}}, {var: a}))
        return [str(x) for x in out]
    except Exception:
        return None


SPECULATORS_ALGOS = "vllm/transformers_utils/configs/speculators/algos.py"


def speculators_rewrite(
    tree: VllmTree, config: dict[str, Any]
) -> tuple[list[str] | None, int, str]:
    """Architectures vLLM gives a speculators-format draft checkpoint (its `config.json` has
    `speculators_model_type`): the release's own `@register_speculator` function for that
    type, run in isolation on a copy of the checkpoint's config. (archs, line, why)."""
    import copy

    kind = config.get("speculators_model_type")
    mod = tree.parse(SPECULATORS_ALGOS)
    if mod is None:
        return None, 0, f"no {SPECULATORS_ALGOS} in this release"
    for st in mod.body:
        if not isinstance(st, ast.FunctionDef):
            continue
        for d in st.decorator_list:
            if (
                isinstance(d, ast.Call)
                and getattr(d.func, "id", "") == "register_speculator"
                and d.args
                and isinstance(d.args[0], ast.Constant)
                and d.args[0].value == kind
            ):
                pre = copy.deepcopy(config.get("transformer_layer_config") or {})
                try:
                    call_isolated(
                        tree,
                        st,
                        SPECULATORS_ALGOS,
                        config_dict=copy.deepcopy(config),
                        pre_trained_config=pre,
                    )
                except SandboxError as exc:
                    return None, st.lineno, str(exc)
                except Exception as exc:  # the release's own validation (unsupported model_type)
                    return None, st.lineno, f"{type(exc).__name__}: {exc}"
                archs = pre.get("architectures")
                if isinstance(archs, list) and archs:
                    return [str(a) for a in archs], st.lineno, f"speculators algorithm {kind!r}"
                return None, st.lineno, f"speculators algorithm {kind!r} sets no architectures"
    return None, 0, f"speculators type {kind!r} is not registered in {SPECULATORS_ALGOS}"


ARG_UTILS = "vllm/engine/arg_utils.py"


def spec_key_normalization(tree: VllmTree) -> dict:
    """Does `EngineArgs.create_speculative_config` rewrite the `--speculative-config` keys
    before `SpeculativeConfig(**...)` sees them? Some releases rebuild the dict as
    `{k.replace("-", "_"): v for k, v in self.speculative_config.items()}`, so a key spelled
    `num-speculative-tokens` is accepted there and rejected as an unexpected keyword by the
    others. The `release_fact` row `speculative_key_normalization`: `{"replace": ["-", "_"]}`
    at that comprehension's line, or `{"replace": null}` when the function has none."""
    mod = tree.parse(ARG_UTILS)
    cls = _class(mod, "EngineArgs") if mod else None
    fn = _method(cls, "create_speculative_config")
    value: dict[str, Any] = {"replace": None}
    line = fn.lineno if fn is not None else 0
    for node in ast.walk(fn) if fn is not None else ():
        if not (isinstance(node, ast.DictComp) and len(node.generators) == 1):
            continue
        it = node.generators[0].iter
        if not (
            isinstance(it, ast.Call)
            and isinstance(it.func, ast.Attribute)
            and it.func.attr == "items"
            and isinstance(it.func.value, ast.Attribute)
            and it.func.value.attr == "speculative_config"
        ):
            continue
        key = node.key
        if (
            isinstance(key, ast.Call)
            and isinstance(key.func, ast.Attribute)
            and key.func.attr == "replace"
            and len(key.args) == 2
            and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in key.args)
        ):
            old, new = (a.value for a in key.args if isinstance(a, ast.Constant))
            value = {"replace": [old, new]}
            line = node.lineno
            break
    return {"key": "speculative_key_normalization", "value": value, "file": ARG_UTILS, "line": line}


def _raise_text(node: ast.Raise) -> str:
    """The literal text of `raise X("..." f"...")` (placeholders of f-strings as `{...}`)."""
    call = node.exc
    if not (isinstance(call, ast.Call) and call.args):
        return ""
    parts: list[str] = []
    for piece in ast.walk(call.args[0]):
        if isinstance(piece, ast.Constant) and isinstance(piece.value, str):
            parts.append(piece.value)
        elif isinstance(piece, ast.FormattedValue):
            parts.append("{...}")
    return "".join(parts)


def without_model_rule(tree: VllmTree) -> dict:
    """What `SpeculativeConfig.__post_init__` does with `num_speculative_tokens` but no `model`:
    the `if self.model is None and self.num_speculative_tokens is not None:` chain that picks the
    draft per method (the target for mtp, `"ngram"` for ngram, ...) and raises for the rest
    (`num_speculative_tokens was provided but without speculative model.`). It runs after the
    MTP aliases became `mtp`. The `release_fact` row `speculative_without_model`:
    `{"methods": {method: {"outcome": "model" | "raise", "line", "message"}}, "else": {...}}`,
    `{"methods": null}` when the chain is not found."""
    home = speculative_file(tree)
    mod = tree.parse(home)
    cls = _class(mod, "SpeculativeConfig") if mod else None
    post = _method(cls, "__post_init__")
    value: dict[str, Any] = {"methods": None, "else": None}
    line = 0
    for node in ast.walk(post) if post is not None else ():
        if not isinstance(node, ast.If):
            continue
        test = ast.unparse(node.test).replace(" ", "")
        if test != "self.modelisNoneandself.num_speculative_tokensisnotNone":
            continue
        line = node.lineno
        inner = node.body[-1] if node.body and isinstance(node.body[-1], ast.If) else None
        if inner is None or len(node.body) != 1:
            break
        methods: dict[str, dict[str, Any]] = {}
        cur: ast.If | None = inner
        other: list[ast.stmt] = []
        while cur is not None:
            names = _methods_in_test(cur.test)
            if not names:
                # A branch chosen by something other than the method (0.10: the target's
                # model_type picks the target as the MTP draft): not a per-method table.
                value = {"methods": None, "else": None, "undecided": cur.lineno}
                break
            sets_model = bool(_assigns(cur.body, "model"))
            raises = [r for st in cur.body for r in ast.walk(st) if isinstance(r, ast.Raise)]
            row = (
                {"outcome": "model", "line": cur.lineno, "message": ""}
                if sets_model
                else {
                    "outcome": "raise",
                    "line": raises[0].lineno,
                    "message": _raise_text(raises[0]),
                }
                if raises
                else {"outcome": "model", "line": cur.lineno, "message": ""}
            )
            for m in names:
                methods.setdefault(m, row)
            if len(cur.orelse) == 1 and isinstance(cur.orelse[0], ast.If):
                cur = cur.orelse[0]
            else:
                other = cur.orelse
                cur = None
        if value.get("undecided"):
            break
        tail = [r for st in other for r in ast.walk(st) if isinstance(r, ast.Raise)]
        value = {
            "methods": methods,
            "else": {"outcome": "raise", "line": tail[0].lineno, "message": _raise_text(tail[0])}
            if tail
            else {"outcome": "model", "line": line, "message": ""},
        }
        break
    return {
        "key": "speculative_without_model",
        "value": value,
        "file": home,
        "line": line,
    }


def forbidden_fields(tree: VllmTree) -> dict:
    """`SpeculativeConfig` fields the user may not set although the schema has them: top-level
    `if self.<field> is not None: raise ...` statements of its `_verify_args` model validator
    (e.g. `tensor_parallel_size`: "Please pass 'draft_tensor_parallel_size' instead"). The
    `release_fact` row `speculative_forbidden_fields`: `{"fields": {field: {"line", "message"}}}`,
    `{"fields": null}` without a `_verify_args`."""
    home = speculative_file(tree)
    mod = tree.parse(home)
    cls = _class(mod, "SpeculativeConfig") if mod else None
    fn = _method(cls, "_verify_args")
    if fn is None:
        return {
            "key": "speculative_forbidden_fields",
            "value": {"fields": None},
            "file": home,
            "line": 0,
        }
    fields: dict[str, dict[str, Any]] = {}
    for st in fn.body:
        if not (
            isinstance(st, ast.If)
            and not st.orelse
            and len(st.body) == 1
            and isinstance(st.body[0], ast.Raise)
        ):
            continue
        t = st.test
        if (
            isinstance(t, ast.Compare)
            and len(t.ops) == 1
            and isinstance(t.ops[0], ast.IsNot)
            and isinstance(t.left, ast.Attribute)
            and isinstance(t.left.value, ast.Name)
            and t.left.value.id == "self"
            and isinstance(t.comparators[0], ast.Constant)
            and t.comparators[0].value is None
        ):
            fields[t.left.attr] = {"line": st.body[0].lineno, "message": _raise_text(st.body[0])}
    return {
        "key": "speculative_forbidden_fields",
        "value": {"fields": fields},
        "file": home,
        "line": fn.lineno,
    }


__all__ = [
    "DraftParallelFacts",
    "Method",
    "OverrideResult",
    "OverrideRunner",
    "StubConfig",
    "accepted_methods",
    "draft_parallel_facts",
    "dspark_rewrite",
    "eagle_rewrite",
    "forbidden_fields",
    "spec_key_normalization",
    "speculators_rewrite",
    "without_model_rule",
]
