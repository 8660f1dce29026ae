"""Run one function taken from vLLM source in isolation, on a stub config.

The function is compiled from its AST alone (decorators dropped), with restricted
builtins (no open, eval, exec or compile), an import hook that only serves pure
stdlib modules and *literal constants* of vLLM modules read from the same tree, and
a line budget plus a wall-clock limit enforced by a tracer. A global or import the
stubs do not cover raises SandboxError naming it, so a new dependency in a future
release shows up as `unknown` (and fails a test), never as a silent pass.
"""

from __future__ import annotations

import ast
import builtins
import copy as _copy
import sys
import time
import types
import weakref
from typing import Any

from compat.sources.tree import VllmTree

LINE_BUDGET = 200_000
TIME_LIMIT_S = 5.0

SUBCONFIG_KEYS = {
    "text_config",
    "vision_config",
    "audio_config",
    "decoder",
    "encoder",
    "mtp_config",
    "thinker_config",
    "talker_config",
    "llm_config",
    "language_config",
    "dflash_config",
}
_SAFE_BUILTINS = [
    "abs",
    "all",
    "any",
    "bool",
    "callable",
    "dict",
    "enumerate",
    "filter",
    "float",
    "frozenset",
    "getattr",
    "hasattr",
    "int",
    "isinstance",
    "issubclass",
    "iter",
    "len",
    "list",
    "map",
    "max",
    "min",
    "next",
    "object",
    "print",
    "range",
    "repr",
    "reversed",
    "round",
    "set",
    "setattr",
    "slice",
    "sorted",
    "str",
    "sum",
    "tuple",
    "type",
    "zip",
    "ValueError",
    "TypeError",
    "KeyError",
    "AttributeError",
    "NotImplementedError",
    "RuntimeError",
    "AssertionError",
    "IndexError",
    "StopIteration",
    "Exception",
    "True",
    "False",
    "None",
]
# No `typing`: typing.get_type_hints evaluates annotation strings, i.e. arbitrary expressions.
_STDLIB_OK = {"copy", "math", "re", "json", "collections", "functools", "itertools"}
# Attributes that lead from any object to frames, code or module globals (and so to `sys`):
# every name starting with `_` (`__class__`, `__globals__`, `__subclasses__`, `collections._sys`)
# and the public frame/code attributes of generators, coroutines and tracebacks.
_FRAME_ATTRS = frozenset(
    {
        "gi_frame",
        "gi_code",
        "gi_yieldfrom",
        "cr_frame",
        "cr_code",
        "cr_await",
        "cr_origin",
        "ag_frame",
        "ag_code",
        "ag_await",
        "f_back",
        "f_globals",
        "f_locals",
        "f_builtins",
        "f_code",
        "tb_frame",
        "tb_next",
    }
)


class SandboxError(Exception):
    """The isolated function needed something the sandbox does not provide, or ran too long."""


class StubConfig:
    """Attribute bag standing in for a transformers PretrainedConfig."""

    def __init__(self, data: dict[str, Any] | None = None, **kw: Any) -> None:
        for k, v in {**(data or {}), **kw}.items():
            object.__setattr__(self, k, _wrap(k, v))

    def __setattr__(self, name: str, value: Any) -> None:
        _note_change()
        object.__setattr__(self, name, value)

    def update(self, values: dict[str, Any]) -> None:
        _note_change()
        for k, v in values.items():
            object.__setattr__(self, k, _wrap(k, v))

    def get_text_config(self, decoder: bool = False, **_: Any) -> StubConfig:
        tc = self.__dict__.get("text_config")
        return tc if isinstance(tc, StubConfig) else self

    def to_dict(self) -> dict[str, Any]:
        return {
            k: (v.to_dict() if isinstance(v, StubConfig) else _copy.deepcopy(v))
            for k, v in self.__dict__.items()
        }

    def __contains__(self, key: str) -> bool:
        return key in self.__dict__

    def __repr__(self) -> str:
        return f"StubConfig(model_type={self.__dict__.get('model_type')!r})"


def _wrap(key: str, value: Any) -> Any:
    if isinstance(value, dict) and key in SUBCONFIG_KEYS:
        return StubConfig(value)
    return value


# The line (in the isolated function) of the first config mutation of the current run.
_STATE: dict[str, Any] = {"marker": None, "first": 0}


def _note_change() -> None:
    if _STATE["first"] or _STATE["marker"] is None:
        return
    f: types.FrameType | None = sys._getframe(2)
    while f is not None:
        if f.f_code.co_filename == _STATE["marker"]:
            _STATE["first"] = f.f_lineno
            return
        f = f.f_back


def _get_hf_text_config(config: Any) -> Any:
    for attr in ("text_config", "thinker_config", "llm_config", "language_config"):
        sub = getattr(config, attr, None)
        if isinstance(sub, StubConfig):
            inner = getattr(sub, "text_config", None)
            return inner if isinstance(inner, StubConfig) else sub
    return config


class _Logger:
    def __getattr__(self, _name: str) -> Any:
        return lambda *a, **k: None


def _constants_module(tree: VllmTree, module: str) -> types.ModuleType:
    rel = module.replace(".", "/") + ".py"
    mod_ast = tree.parse(rel) or tree.parse(module.replace(".", "/") + "/__init__.py")
    if mod_ast is None:
        raise SandboxError(f"in-function import of {module}: not in the tree")
    m = types.ModuleType(module)
    for st in mod_ast.body:
        if isinstance(st, (ast.Assign, ast.AnnAssign)) and st.value is not None:
            targets = st.targets if isinstance(st, ast.Assign) else [st.target]
            try:
                val = ast.literal_eval(st.value)
            except (ValueError, SyntaxError, TypeError):
                continue
            for t in targets:
                if isinstance(t, ast.Name):
                    setattr(m, t.id, val)
    return m


def _forbidden(name: Any) -> bool:
    return isinstance(name, str) and (name.startswith("_") or name in _FRAME_ATTRS)


def _check_attrs(fn: ast.FunctionDef) -> None:
    """Refuse (SandboxError) a function that names an attribute leading out of the sandbox."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Attribute) and _forbidden(node.attr):
            raise SandboxError(
                f"{fn.name} uses attribute {node.attr!r} (line {node.lineno}), "
                "which isolated code may not"
            )


def _guarded(real: Any) -> Any:
    def guarded(obj: Any, name: Any, *rest: Any) -> Any:
        if _forbidden(name):
            raise SandboxError(f"{real.__name__}(..., {name!r}) is not allowed in isolated code")
        return real(obj, name, *rest)

    return guarded


def _module_view(mod: types.ModuleType) -> types.ModuleType:
    """A copy of a stdlib module's public, non-module attributes: no `typing.sys`, no
    `copy.types`, and assigning to it cannot monkeypatch the host's module."""
    view = types.ModuleType(mod.__name__)
    for k, v in vars(mod).items():
        if not k.startswith("_") and not isinstance(v, types.ModuleType):
            setattr(view, k, v)
    return view


def _globals_for(tree: VllmTree, fn: ast.FunctionDef) -> dict[str, Any]:
    # The compiled function and its globals are a reference cycle: they reach the tree only
    # weakly, so the tree does not wait for the cycle collector (compat.vllm.facts).
    tree_ref = weakref.ref(tree)
    safe = {n: getattr(builtins, n) for n in _SAFE_BUILTINS if hasattr(builtins, n)}
    for n in ("getattr", "hasattr", "setattr"):
        safe[n] = _guarded(getattr(builtins, n))

    def importer(
        name: str, globals_: Any = None, locals_: Any = None, fromlist: Any = (), level: int = 0
    ) -> Any:
        if level:
            raise SandboxError(f"relative in-function import of {name}")
        if name.split(".")[0] in _STDLIB_OK:
            mod = __import__(name, None, None, fromlist, 0)
            return _module_view(mod)  # fresh per import: writes stay inside this run
        if name.startswith("vllm.") and (live := tree_ref()) is not None:
            m = _constants_module(live, name)
            for f in fromlist or ():
                if not hasattr(m, f):
                    raise SandboxError(
                        f"in-function import of {name}.{f}: not a literal constant (unstubbed)"
                    )
            return m
        raise SandboxError(f"in-function import of {name} is not stubbed")

    safe["__import__"] = importer
    g: dict[str, Any] = {
        "__builtins__": safe,
        "__name__": "compat_isolated",
        "copy": _module_view(_copy),
        "get_hf_text_config": _get_hf_text_config,
        "PretrainedConfig": StubConfig,
        "PreTrainedConfig": StubConfig,
        "logger": _Logger(),
        "Any": Any,
    }
    return g


def _free_names(fn: ast.FunctionDef) -> set[str]:
    assigned = {a.arg for a in fn.args.args + fn.args.kwonlyargs + fn.args.posonlyargs}
    loaded: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Name):
            (assigned if isinstance(node.ctx, (ast.Store, ast.Del)) else loaded).add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                assigned.add((a.asname or a.name).split(".")[0])
        elif isinstance(node, ast.arg):
            assigned.add(node.arg)
    return loaded - assigned


def _bare(fn: ast.FunctionDef, name: str, annotations: bool = False) -> ast.FunctionDef:
    """`fn` named `name`, without decorators (and annotations, unless kept), for compiling
    alone. A new FunctionDef (and arguments) sharing the body with `fn`: compiling reads an
    AST, never changes it, and a deep copy of a release's function cost more than compiling it."""
    out = _copy.copy(fn)
    out.name, out.decorator_list = name, []
    if annotations:
        return out
    out.returns = None
    args = out.args = _copy.copy(fn.args)

    def bare(a: ast.arg) -> ast.arg:
        a = _copy.copy(a)
        a.annotation = None
        return a

    args.posonlyargs = [bare(a) for a in fn.args.posonlyargs]
    args.args = [bare(a) for a in fn.args.args]
    args.kwonlyargs = [bare(a) for a in fn.args.kwonlyargs]
    args.vararg = bare(fn.args.vararg) if fn.args.vararg else None
    args.kwarg = bare(fn.args.kwarg) if fn.args.kwarg else None
    return out


def _compiled(tree: VllmTree, fn: ast.FunctionDef, file: str) -> tuple[Any, list[str], str]:
    """The function compiled alone, once per (tree, FunctionDef): kept with the tree (the
    same FunctionDef may serve the next release, whose globals differ)."""
    compiled: dict[tuple[int, str], tuple[Any, list[str], str, Any]]
    compiled = tree.derived.setdefault("sandbox.compiled", {})
    key = (id(fn), file)
    hit = compiled.get(key)
    if hit is not None and hit[3] is fn:
        return hit[0], hit[1], hit[2]
    _check_attrs(fn)
    g = _globals_for(tree, fn)
    missing = sorted(n for n in _free_names(fn) if n not in g and n not in g["__builtins__"])
    fn2 = _bare(fn, fn.name, annotations=True)
    marker = f"<isolated {file}:{fn.name}>"
    code = compile(
        ast.fix_missing_locations(ast.Module(body=[fn2], type_ignores=[])), marker, "exec"
    )
    exec(code, g)  # noqa: S102 (defines the function only)
    compiled[key] = (g[fn.name], missing, marker, fn)
    return g[fn.name], missing, marker


def run_isolated(
    tree: VllmTree, fn: ast.FunctionDef, file: str, config: dict[str, Any], *args: Any
) -> tuple[Any, int]:
    """Execute `fn(StubConfig(config), *args)`; returns (result, line of first config change)."""
    return call_isolated(tree, fn, file, StubConfig(_copy.deepcopy(config)), *args)


class _Budget:
    """The trace function that ends a sandboxed call over its line or time budget. An object,
    not a closure: a closure returning itself is a reference cycle, which kept the function's
    AST alive after the release in a worker that scans many (compat.vllm.facts)."""

    def __init__(self, marker: str, name: str) -> None:
        self.marker, self.name = marker, name
        self.deadline = time.monotonic() + TIME_LIMIT_S
        self.count = 0

    def __call__(self, frame: Any, event: str, _arg: Any) -> Any:
        if frame.f_code.co_filename != self.marker:
            return None
        if event == "line":
            self.count += 1
            if self.count > LINE_BUDGET or (
                self.count % 1000 == 0 and time.monotonic() > self.deadline
            ):
                raise SandboxError(f"{self.name} exceeded its time budget")
        return self


def call_isolated(
    tree: VllmTree, fn: ast.FunctionDef, file: str, *args: Any, **kwargs: Any
) -> tuple[Any, int]:
    """Execute `fn(*args, **kwargs)` under the sandbox; (result, line of first config change)."""
    func, missing, marker = _compiled(tree, fn, file)
    _STATE["marker"], _STATE["first"] = marker, 0
    old = sys.gettrace()
    sys.settrace(_Budget(marker, fn.name))
    try:
        result = func(*args, **kwargs)
    except NameError as exc:
        raise SandboxError(
            f"{fn.name} uses an unstubbed global ({exc}); free names not stubbed: {missing}"
        ) from None
    finally:
        sys.settrace(old)
        first = _STATE["first"]
        _STATE["marker"] = None
    return result, first


class IsolatedProgram:
    """Several functions of one release compiled together, for code that calls its helpers.

    `functions` maps a global name to (FunctionDef, file); each is compiled alone, as
    `call_isolated` does (decorators and annotations dropped, attributes checked), into
    one shared globals dict holding the others and the host objects the caller vouches
    for (`host`: stubs standing for what the source would import). `imports` answers an
    in-function `from vllm.x import name` with a host object, or None to fall back to
    the literal constants of that module. Every call runs under the line and time budget.
    """

    MARKER = "<isolated program>"

    def __init__(
        self,
        tree: VllmTree,
        functions: dict[str, tuple[ast.FunctionDef, str]],
        host: dict[str, Any],
        imports: Any = None,
    ) -> None:
        self.tree = tree
        g = _globals_for(tree, next(iter(functions.values()))[0]) if functions else {}
        base_import = g["__builtins__"]["__import__"]

        def importer(
            name: str, globals_: Any = None, locals_: Any = None, fromlist: Any = (), level: int = 0
        ) -> Any:
            if imports is not None and name.startswith("vllm.") and fromlist:
                mod = types.ModuleType(name)
                for f in fromlist:
                    obj = imports(name, f)
                    if obj is None:
                        return base_import(name, globals_, locals_, fromlist, level)
                    setattr(mod, f, obj)
                return mod
            return base_import(name, globals_, locals_, fromlist, level)

        g["__builtins__"] = dict(g["__builtins__"], __import__=importer)
        g.update(host)
        self.globals = g
        for name, (fn, _file) in functions.items():
            _check_attrs(fn)
            fn2 = _bare(fn, name)
            code = compile(
                ast.fix_missing_locations(ast.Module(body=[fn2], type_ignores=[])),
                self.MARKER,
                "exec",
            )
            exec(code, g)  # noqa: S102 (defines the function only)

    def call(self, name: str, *args: Any) -> Any:
        func = self.globals[name]
        deadline = time.monotonic() + TIME_LIMIT_S
        count = [0]

        def tracer(frame: Any, event: str, _arg: Any) -> Any:
            if frame.f_code.co_filename != self.MARKER:
                return None
            if event == "line":
                count[0] += 1
                if count[0] > LINE_BUDGET or (count[0] % 1000 == 0 and time.monotonic() > deadline):
                    raise SandboxError(f"{name} exceeded its time budget")
            return tracer

        old = sys.gettrace()
        sys.settrace(tracer)
        try:
            return func(*args)
        except NameError as exc:
            raise SandboxError(
                f"{name} uses a global the analysis does not provide ({exc})"
            ) from None
        finally:
            sys.settrace(old)
