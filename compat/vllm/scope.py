"""Static name resolution across vLLM modules, per target platform.

vLLM decides which class a registry entry means by ordinary Python import
semantics, and some packages choose their classes with `if current_platform.is_*()`
branches, `TYPE_CHECKING` blocks, PEP 562 `__getattr__` and `as`-aliases. We
reproduce that without importing: every top-level binding of a module is recorded
with the stack of `if` tests around it; a test is evaluated for an assumed platform
(`TYPE_CHECKING` is False at runtime), and the binding Python would have executed
last wins. Anything outside the tree (torch, transformers, typing) is `External`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from compat.sources.tree import VllmTree

PLATFORMS = ("cuda", "rocm", "cpu", "xpu", "unspecified")

# What `current_platform.<method>()` returns on each platform we evaluate.
_PLATFORM_TRUTH: dict[str, dict[str, bool]] = {
    "cuda": {"is_cuda": True, "is_cuda_alike": True},
    "rocm": {"is_rocm": True, "is_cuda_alike": True},
    "cpu": {"is_cpu": True},
    "xpu": {"is_xpu": True},
    "unspecified": {"is_unspecified": True},  # vLLM's UnspecifiedPlatform (no device found)
}
_PLATFORM_METHODS = {
    "is_cuda",
    "is_rocm",
    "is_cpu",
    "is_xpu",
    "is_tpu",
    "is_cuda_alike",
    "is_out_of_tree",
    "is_neuron",
    "is_hpu",
    "is_unspecified",
}
_DEVICE_TYPE = {"cuda": "cuda", "rocm": "cuda", "cpu": "cpu", "xpu": "xpu", "unspecified": ""}


@dataclass(frozen=True)
class External:
    """A name from outside the analysed tree (torch.nn.Module, typing.Protocol, ...)."""

    qualname: str


@dataclass(frozen=True)
class ModuleRef:
    module: str


@dataclass(frozen=True)
class ClassRef:
    module: str
    name: str
    file: str
    line: int

    @property
    def path(self) -> str:
        return f"{self.module}.{self.name}"


@dataclass(frozen=True)
class Unresolved:
    reason: str


@dataclass(frozen=True)
class FuncRef:
    """A module-level function; a class factory when called with a class (adapters)."""

    module: str
    name: str
    line: int


Resolved = ClassRef | External | ModuleRef | FuncRef | Unresolved


@dataclass
class Binding:
    kind: str  # class | importfrom | import | alias | other
    conds: tuple[tuple[ast.expr, bool], ...]
    in_getattr: bool
    line: int
    node: ast.AST | None = None
    target: tuple[str, str] | str | None = None  # importfrom: (module, attr); import: module


@dataclass
class ModuleScope:
    module: str
    file: str
    is_package: bool
    bindings: dict[str, list[Binding]] = field(default_factory=dict)
    star_imports: list[tuple[str, tuple[tuple[ast.expr, bool], ...]]] = field(default_factory=list)
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    # `Cls.attr = value` at module level after the class body: class attributes too.
    late_attrs: dict[str, dict[str, ast.AST]] = field(default_factory=dict)


def _abs_module(current: str, is_package: bool, level: int, module: str | None) -> str:
    if level == 0:
        return module or ""
    parts = current.split(".")
    if not is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    base = ".".join(parts)
    return f"{base}.{module}" if module else base


class ModuleIndex:
    """Lazily parsed module scopes of one tree, shared by every resolution."""

    def __init__(self, tree: VllmTree) -> None:
        self.tree = tree
        self._scopes: dict[str, ModuleScope | None] = {}
        self._resolve_cache: dict[tuple[str, str, str], Resolved] = {}
        # Classes made by factories such as `as_seq_cls_model(LlamaForCausalLM)`:
        # ref -> (class node, names bound by the factory call).
        self.synthetic: dict[ClassRef, tuple[ast.ClassDef, dict[str, Resolved]]] = {}

    # -- files -----------------------------------------------------------
    def module_file(self, module: str) -> tuple[str, bool] | None:
        rel = module.replace(".", "/")
        if self.tree.exists(rel + ".py"):
            return rel + ".py", False
        if self.tree.exists(rel + "/__init__.py"):
            return rel + "/__init__.py", True
        return None

    def in_tree(self, module: str) -> bool:
        return module == "vllm" or module.startswith("vllm.")

    def scope(self, module: str) -> ModuleScope | None:
        if module in self._scopes:
            return self._scopes[module]
        found = self.module_file(module)
        scope = None
        if found:
            rel, is_pkg = found
            tree = self.tree.parse(rel)
            if tree is not None:
                scope = ModuleScope(module=module, file=rel, is_package=is_pkg)
                self._collect(scope, tree.body, (), False)
        self._scopes[module] = scope
        return scope

    @property
    def parsed_modules(self) -> int:
        return sum(1 for s in self._scopes.values() if s is not None)

    # -- collection ------------------------------------------------------
    def _add(self, scope: ModuleScope, name: str, b: Binding) -> None:
        scope.bindings.setdefault(name, []).append(b)

    def _collect(
        self,
        scope: ModuleScope,
        body: list[ast.stmt],
        conds: tuple[tuple[ast.expr, bool], ...],
        in_getattr: bool,
    ) -> None:
        for st in body:
            if isinstance(st, ast.ClassDef):
                self._add(scope, st.name, Binding("class", conds, in_getattr, st.lineno, st))
                if not in_getattr:
                    scope.classes.setdefault(st.name, st)
            elif isinstance(st, ast.ImportFrom):
                mod = _abs_module(scope.module, scope.is_package, st.level, st.module)
                for a in st.names:
                    if a.name == "*":
                        scope.star_imports.append((mod, conds))
                        continue
                    self._add(
                        scope,
                        a.asname or a.name,
                        Binding("importfrom", conds, in_getattr, st.lineno, st, (mod, a.name)),
                    )
            elif isinstance(st, ast.Import):
                for a in st.names:
                    if a.asname:
                        self._add(
                            scope,
                            a.asname,
                            Binding("import", conds, in_getattr, st.lineno, st, a.name),
                        )
                    else:
                        top = a.name.split(".")[0]
                        self._add(
                            scope, top, Binding("import", conds, in_getattr, st.lineno, st, top)
                        )
            elif isinstance(st, ast.Assign):
                for t in st.targets:
                    if isinstance(t, ast.Name):
                        kind = (
                            "alias" if isinstance(st.value, (ast.Name, ast.Attribute)) else "other"
                        )
                        self._add(
                            scope, t.id, Binding(kind, conds, in_getattr, st.lineno, st.value)
                        )
                    elif (
                        isinstance(t, ast.Attribute)
                        and isinstance(t.value, ast.Name)
                        and not in_getattr
                    ):
                        scope.late_attrs.setdefault(t.value.id, {})[t.attr] = st.value
            elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value:
                kind = "alias" if isinstance(st.value, (ast.Name, ast.Attribute)) else "other"
                self._add(
                    scope, st.target.id, Binding(kind, conds, in_getattr, st.lineno, st.value)
                )
            elif isinstance(st, ast.If):
                self._collect(scope, st.body, conds + ((st.test, True),), in_getattr)
                self._collect(scope, st.orelse, conds + ((st.test, False),), in_getattr)
            elif isinstance(st, ast.Try):
                self._collect(scope, st.body, conds, in_getattr)
                for h in st.handlers:
                    # Only reached when the body failed: a fallback, never preferred.
                    self._collect(scope, h.body, conds + ((ast.Constant(False), True),), in_getattr)
                self._collect(scope, st.orelse, conds, in_getattr)
            elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if st.name == "__getattr__" and not in_getattr:
                    self._collect(scope, st.body, conds, True)
                else:
                    self._add(scope, st.name, Binding("other", conds, in_getattr, st.lineno, st))
            elif isinstance(st, (ast.With,)):
                self._collect(scope, st.body, conds, in_getattr)

    # -- evaluation ------------------------------------------------------
    @staticmethod
    def eval_test(expr: ast.expr, platform: str) -> bool | None:
        """Three-valued truth of an `if` test on `platform` (None: cannot tell)."""
        if isinstance(expr, ast.Constant):
            return bool(expr.value)
        if isinstance(expr, ast.Name) and expr.id == "TYPE_CHECKING":
            return False
        if isinstance(expr, ast.Attribute) and expr.attr == "TYPE_CHECKING":
            return False
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
            v = ModuleIndex.eval_test(expr.operand, platform)
            return None if v is None else not v
        if isinstance(expr, ast.BoolOp):
            vals = [ModuleIndex.eval_test(v, platform) for v in expr.values]
            if isinstance(expr.op, ast.And):
                if any(v is False for v in vals):
                    return False
                return None if any(v is None for v in vals) else True
            if any(v is True for v in vals):
                return True
            return None if any(v is None for v in vals) else False
        if (
            isinstance(expr, ast.Call)
            and isinstance(expr.func, ast.Attribute)
            and expr.func.attr in _PLATFORM_METHODS
            and _mentions_platform(expr.func.value)
        ):
            return _PLATFORM_TRUTH.get(platform, {}).get(expr.func.attr, False)
        if (
            isinstance(expr, ast.Compare)
            and len(expr.ops) == 1
            and isinstance(expr.left, ast.Attribute)
            and expr.left.attr == "device_type"
            and _mentions_platform(expr.left.value)
            and isinstance(expr.comparators[0], ast.Constant)
        ):
            eq = _DEVICE_TYPE.get(platform) == expr.comparators[0].value
            if isinstance(expr.ops[0], ast.Eq):
                return eq
            if isinstance(expr.ops[0], ast.NotEq):
                return not eq
        return None

    def _choose(self, bindings: list[Binding], platform: str) -> tuple[Binding | None, bool]:
        """The binding Python would execute last on `platform`; (binding, certain)."""
        definite, maybe = None, None
        for b in bindings:
            if b.in_getattr:
                continue
            vals = [(self.eval_test(t, platform), pol) for t, pol in b.conds]
            truth = [None if v is None else (v == pol) for v, pol in vals]
            if all(t is True for t in truth):
                definite = b
            elif not any(t is False for t in truth):
                maybe = b
        if definite is not None:
            return definite, True
        if maybe is not None:
            return maybe, False
        # PEP 562 __getattr__: the import it performs for this platform.
        for b in bindings:
            if b.in_getattr:
                vals = [(self.eval_test(t, platform), pol) for t, pol in b.conds]
                if all(v is None or v == pol for v, pol in vals):
                    return b, all(v is not None for v, _ in vals)
        # TYPE_CHECKING-only declarations: what the package says it exports.
        for b in reversed(bindings):
            return b, False
        return None, False

    # -- resolution ------------------------------------------------------
    def resolve_name(self, module: str, name: str, platform: str, _depth: int = 0) -> Resolved:
        key = (module, name, platform)
        if key in self._resolve_cache:
            return self._resolve_cache[key]
        res = self._resolve_name(module, name, platform, _depth)
        self._resolve_cache[key] = res
        return res

    def _resolve_name(self, module: str, name: str, platform: str, depth: int) -> Resolved:
        if depth > 40:
            return Unresolved(f"import cycle resolving {module}.{name}")
        if not self.in_tree(module):
            return External(f"{module}.{name}" if module else name)
        scope = self.scope(module)
        if scope is None:
            return Unresolved(f"module {module} not found in the tree")
        bindings = scope.bindings.get(name)
        if bindings:
            b, _certain = self._choose(bindings, platform)
            if b is not None:
                return self._follow(scope, b, name, platform, depth)
        for star_mod, _conds in scope.star_imports:
            res = self.resolve_name(star_mod, name, platform, depth + 1)
            if not isinstance(res, Unresolved):
                return res
        if scope.is_package and self.module_file(f"{module}.{name}"):
            return ModuleRef(f"{module}.{name}")
        return Unresolved(f"{name} is not bound in {module}")

    def _follow(
        self, scope: ModuleScope, b: Binding, name: str, platform: str, depth: int
    ) -> Resolved:
        if b.kind == "class":
            assert isinstance(b.node, ast.ClassDef)
            return ClassRef(scope.module, b.node.name, scope.file, b.node.lineno)
        if b.kind == "importfrom":
            assert isinstance(b.target, tuple)
            mod, attr = b.target
            if not self.in_tree(mod):
                return External(f"{mod}.{attr}")
            res = self.resolve_name(mod, attr, platform, depth + 1)
            if isinstance(res, Unresolved) and self.module_file(f"{mod}.{attr}"):
                return ModuleRef(f"{mod}.{attr}")
            return res
        if b.kind == "import":
            assert isinstance(b.target, str)
            return ModuleRef(b.target) if self.in_tree(b.target) else External(b.target)
        if b.kind == "alias":
            assert isinstance(b.node, ast.expr)
            return self.resolve_expr(scope.module, b.node, platform, depth + 1)
        if isinstance(b.node, ast.FunctionDef):
            return FuncRef(scope.module, b.node.name, b.node.lineno)
        if isinstance(b.node, ast.Call):
            return self.resolve_expr(scope.module, b.node, platform, depth + 1)
        return Unresolved(f"{name} in {scope.module} is not a class (line {b.line})")

    def resolve_expr(
        self,
        module: str,
        expr: ast.expr,
        platform: str,
        depth: int = 0,
        env: dict[str, Resolved] | None = None,
    ) -> Resolved:
        if env and isinstance(expr, ast.Name) and expr.id in env:
            return env[expr.id]
        if isinstance(expr, ast.Name):
            if expr.id == "object":
                return External("builtins.object")
            return self.resolve_name(module, expr.id, platform, depth)
        if isinstance(expr, ast.Attribute):
            base = self.resolve_expr(module, expr.value, platform, depth + 1, env)
            if isinstance(base, ModuleRef):
                return self.resolve_name(base.module, expr.attr, platform, depth + 1)
            if isinstance(base, External):
                return External(f"{base.qualname}.{expr.attr}")
            if isinstance(base, Unresolved):
                return base
            return Unresolved(f"attribute {expr.attr} of class {base}")
        if isinstance(expr, ast.Subscript):  # Generic[T], Protocol[T], VllmModel[T]
            return self.resolve_expr(module, expr.value, platform, depth + 1, env)
        if isinstance(expr, ast.Call) and len(expr.args) == 1 and not expr.keywords:
            fn = self.resolve_expr(module, expr.func, platform, depth + 1, env)
            arg = self.resolve_expr(module, expr.args[0], platform, depth + 1, env)
            if isinstance(fn, FuncRef) and isinstance(arg, (ClassRef, External)):
                return self._factory_class(fn, arg, platform, depth + 1)
            return Unresolved(f"base computed by a call: {ast.unparse(expr)}")
        if isinstance(expr, ast.Call):
            return Unresolved(f"base computed by a call: {ast.unparse(expr)}")
        return Unresolved(f"unsupported expression: {ast.unparse(expr)}")

    def _factory_class(
        self, fn: FuncRef, arg: ClassRef | External, platform: str, depth: int
    ) -> Resolved:
        """The class a factory returns: `def f(cls): class X(cls, Mixin): ...; return X`."""
        scope = self.scope(fn.module)
        node = None
        for b in scope.bindings.get(fn.name, []) if scope else []:
            if isinstance(b.node, ast.FunctionDef) and b.node.lineno == fn.line:
                node = b.node
        if scope is None or node is None or not node.args.args:
            return Unresolved(f"factory {fn.module}.{fn.name} not found")
        param = node.args.args[0].arg
        nested = {st.name: st for st in node.body if isinstance(st, ast.ClassDef)}
        returned = [
            st.value.id
            for st in node.body
            if isinstance(st, ast.Return) and isinstance(st.value, ast.Name)
        ]
        if not returned or returned[-1] not in nested:
            return Unresolved(f"factory {fn.name} does not return a class it defines")
        cls = nested[returned[-1]]
        argname = arg.name if isinstance(arg, ClassRef) else arg.qualname.rsplit(".", 1)[-1]
        ref = ClassRef(fn.module, f"{fn.name}({argname}).{cls.name}", scope.file, cls.lineno)
        self.synthetic.setdefault(ref, (cls, {param: arg}))
        return ref

    def classdef(self, ref: ClassRef) -> ast.ClassDef:
        if ref in self.synthetic:
            return self.synthetic[ref][0]
        scope = self.scope(ref.module)
        assert scope is not None
        for b in scope.bindings.get(ref.name, []):
            if b.kind == "class" and isinstance(b.node, ast.ClassDef) and b.node.lineno == ref.line:
                return b.node
        return scope.classes[ref.name]


def _mentions_platform(expr: ast.expr) -> bool:
    while isinstance(expr, ast.Attribute):
        if "platform" in expr.attr:
            return True
        expr = expr.value
    if isinstance(expr, ast.Call):
        return _mentions_platform(expr.func)
    return isinstance(expr, ast.Name) and "platform" in expr.id
