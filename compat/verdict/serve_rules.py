"""The release's own checks of parsed `vllm serve` arguments, run from its source.

`ServeSubcommand.validate` calls `validate_parsed_serve_args(args)` right after
parsing, and the API server's `setup_server` calls `validate_api_server_args(args)`
before it binds its socket (0.23 `entrypoints/openai/cli_args.py` and
`openai/api_server.py`, 0.33 both in `entrypoints/common/cli_args.py`). Which
arguments each checks, and when, changes between releases (for example the tool-call
parser name is checked only with `--enable-auto-tool-choice`), so both functions are
taken from the release's AST with every helper they call in the same tree
(`validate_chat_template`, `validate_grpc_port_arg`, ...) and run in the sandbox on the
parsed namespace. What they would import is answered from the release's facts:

* `ToolParserManager` / `ReasoningParserManager.list_registered()`: the parser names
  registered in the release (sorted, as its `list_registered` returns them);
* `Path`: a view of the release's file list, so `--chat-template examples/x.jinja`
  exists exactly when that release ships the file (examples/ is the working directory of
  vLLM's docker image; the built-in templates sit next to the chat template registry);
* `logger`: silent.

Anything else they reach (`vllm.envs`, a module attribute that is not a literal) stops
the run with a SandboxError, reported as `unknown` naming it, never as a pass.
"""

from __future__ import annotations

import argparse
import ast
import functools
import posixpath
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from compat.sources.tree import VllmTree
from compat.verdict.replay_cache import cached
from compat.vllm.cli_surface import SymbolResolver
from compat.vllm.sandbox import IsolatedProgram, SandboxError

SERVE_CLI = "vllm/entrypoints/cli/serve.py"
SCRIPTS = "vllm/scripts.py"  # the `vllm` command before vllm/entrypoints/cli (0.5-0.7)
RUN_SERVER_CHECKS = "run_server"  # its checks before the socket, as a function (before 0.9)
#: (stage, function, how it is reached from `vllm serve`), in the order vLLM runs them: the name
#: imported into serve.py, or the name called by a function serve.py imports.
ENTRY_POINTS = (
    ("validate", "validate_parsed_serve_args", None),
    ("api_server", "validate_api_server_args", "setup_server"),
)
_MAX_HELPERS = 40


@dataclass
class RuleResult:
    stage: str
    status: str  # ok | blocked | unknown
    exception: str = ""
    message: str = ""
    evidence: str = ""  # file:line of the raise, or of the function
    function: str = ""


class VirtualPath:
    """`pathlib.Path` over a fixed file list: relative paths resolve against the release root."""

    files: frozenset[str] = frozenset()

    def __init__(self, *parts: Any) -> None:
        self._p = posixpath.normpath(posixpath.join(*[str(p) for p in parts])) if parts else "."

    def __truediv__(self, other: Any) -> VirtualPath:
        return type(self)(self._p, str(other))

    def __str__(self) -> str:
        return self._p

    def __fspath__(self) -> str:
        return self._p

    def __repr__(self) -> str:
        return f"PosixPath({self._p!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VirtualPath) and other._p == self._p

    def __hash__(self) -> int:
        return hash(self._p)

    @property
    def parent(self) -> VirtualPath:
        return type(self)(posixpath.dirname(self._p) or ".")

    @property
    def name(self) -> str:
        return posixpath.basename(self._p)

    def _known(self) -> None:
        """A relative path resolves in vLLM's image, whose working directory is the release root
        (what the golden runs reproduce); an absolute path is a file of the machine running vLLM."""
        if posixpath.isabs(self._p):
            raise _Unknown(
                f"whether {self._p} exists (a file of the machine that runs vLLM, not of the release)"
            )

    def exists(self) -> bool:
        self._known()
        return self._p in self.files or any(f.startswith(self._p + "/") for f in self.files)

    def is_file(self) -> bool:
        self._known()
        return self._p in self.files


class _Manager:
    """A parser manager as the release registers it: the name -> parser dicts in registration
    order (older releases read `ToolParserManager.tool_parsers.keys()` directly), and
    `list_registered()`, which every release defining it answers sorted
    (`sorted(set(cls.tool_parsers) | set(cls.lazy_parsers))`)."""

    def __init__(self, names: list[str]) -> None:
        self._names = names
        registry = {n: None for n in names}
        self.tool_parsers = self.reasoning_parsers = self.lazy_parsers = registry

    def list_registered(self) -> list[str]:
        return sorted(self._names)


class ServeRules:
    """Both validation functions of one release, compiled once, run per namespace."""

    def __init__(
        self,
        tree: VllmTree | None,
        parsers: Mapping[str, Collection[str]],  # parser names by kind, in registration order
        template_files: list[str] | None,
        version: str,
    ) -> None:
        self.tree = tree
        self.version = version
        self.reason = ""
        self.program: IsolatedProgram | None = None
        self.entries: list[tuple[str, str, str, int]] = []  # (stage, name, file, line)
        self.missing: dict[str, str] = {}  # stage -> why its function was not found
        self.absent: set[str] = set()  # stages this release does not have (nothing to run)
        if tree is None:
            self.reason = f"the source of vLLM {version} is not available"
            return
        found = cached(tree, f"serve_rules {version}", self._found)
        functions: dict[str, tuple[ast.FunctionDef, str]] = {
            name: (fn, file) for name, fn, file in found["functions"]
        }
        self.entries = list(found["entries"])
        self.missing, self.absent = found["missing"], set(found["absent"])
        self.headless_dispatch = found["headless_dispatch"]
        if not functions:
            return
        path_cls = type("Path", (VirtualPath,), {"files": frozenset(template_files or [])})
        self.template_files_known = template_files is not None
        host: dict[str, Any] = {
            "Path": path_cls,
            "argparse": argparse,
            # in registration order: vLLM's messages list the manager's dict as it was filled
            "ToolParserManager": _Manager(list(parsers.get("tool") or [])),
            "ReasoningParserManager": _Manager(list(parsers.get("reasoning") or [])),
        }
        self._path = path_cls
        self.host = host
        self.parsers_known = bool(parsers.get("tool")) and bool(parsers.get("reasoning"))
        try:
            self.program = IsolatedProgram(tree, functions, host, self._import)
        except (SandboxError, SyntaxError) as exc:
            self.reason = f"cannot isolate the validation functions of vLLM {version}: {exc}"
            self.program = None

    @functools.cached_property
    def r(self) -> SymbolResolver:
        """The release's symbols (only what is not cached needs them: compat.verdict.replay_cache)."""
        assert self.tree is not None
        return SymbolResolver(self.tree)

    def _found(self) -> dict[str, Any]:
        """The entry points and every helper they call, as found in the release's source."""
        functions: dict[str, tuple[ast.FunctionDef, str]] = {}
        entries: list[tuple[str, str, str, int]] = []
        missing: dict[str, str] = {}
        absent: list[str] = []
        for stage, name, via in ENTRY_POINTS:
            found = self._find(name, via)
            if found is None and stage == "api_server":
                found = self._run_server_checks()
                if found is not None:
                    name = RUN_SERVER_CHECKS
            if found is None and stage == "validate" and self._never_called(name):
                absent.append(stage)  # this release's `vllm serve` runs no such check
                continue
            if found is None:
                missing[stage] = (
                    f"{name} not found in vLLM {self.version} "
                    f"(from {SERVE_CLI}{' via ' + via if via else ''})"
                )
                continue
            file, fn = found
            functions[name] = (fn, file)
            entries.append((stage, name, file, fn.lineno))
        self._helpers(functions)
        return {
            "functions": [(name, fn, file) for name, (fn, file) in functions.items()],
            "entries": entries,
            "missing": missing,
            "absent": absent,
            "headless_dispatch": self._headless_dispatch(),
        }

    def _headless_dispatch(self) -> str:
        """`file:line` of `ServeSubcommand.cmd` when it sends a headless node to `run_headless`
        (which starts no API server, so `validate_api_server_args` never runs), else ''."""
        mod = self.tree.parse(SERVE_CLI) if self.tree is not None else None
        for cls in mod.body if mod else []:
            if not isinstance(cls, ast.ClassDef):
                continue
            for fn in cls.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == "cmd":
                    calls = {
                        n.func.id
                        for n in ast.walk(fn)
                        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                    }
                    reads = {n.attr for n in ast.walk(fn) if isinstance(n, ast.Attribute)}
                    if "run_headless" in calls and {"headless", "api_server_count"} <= reads:
                        return f"{SERVE_CLI}:{fn.lineno}"
        return ""

    @staticmethod
    def _headless(args: argparse.Namespace) -> bool:
        """cmd's dispatch: --headless sets api_server_count to 0, and a count below 1 is run_headless."""
        count = getattr(args, "api_server_count", None)
        return bool(getattr(args, "headless", False)) or (isinstance(count, int) and count < 1)

    def _find(self, name: str, via: str | None) -> tuple[str, ast.FunctionDef] | None:
        """Where `vllm serve` gets the function from (its home moves between releases)."""
        rel = SERVE_CLI
        if via is not None:
            caller = self.r.resolve(SERVE_CLI, via)
            if caller is None or not isinstance(caller[1], ast.FunctionDef):
                return None
            rel = caller[0]
            if not any(
                isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name
                for n in ast.walk(caller[1])
            ):
                return None
        for home in (rel, SCRIPTS) if via is None else (rel,):  # main() calls it in scripts.py
            got = self.r.resolve(home, name)
            if got is not None and isinstance(got[1], ast.FunctionDef):
                return got[0], got[1]
        return None

    def _never_called(self, name: str) -> bool:
        """The release's `vllm serve` command is found and never names `name` (0.5-0.7:
        vllm/scripts.py main() before validate_parsed_serve_args existed)."""
        tree = self.tree
        assert tree is not None  # ServeRules reads no source without one
        homes = [m for m in (tree.parse(SERVE_CLI), tree.parse(SCRIPTS)) if m is not None]
        return bool(homes) and not any(
            isinstance(n, ast.Name) and n.id == name or isinstance(n, ast.alias) and n.name == name
            for m in homes
            for n in ast.walk(m)
        )

    def _run_server_checks(self) -> tuple[str, ast.FunctionDef] | None:
        """Before 0.9 the API server checks the parser names inline, at the top of `run_server`,
        before it binds its socket: those statements, up to the first that calls
        `create_server_socket` (or `socket.socket`, 0.6.2) or, where no socket is bound first
        (0.6.0-0.6.1), `build_async_engine_client` (the engine starts), as a function of `args`
        (logging calls left out, they decide nothing; none left is a run_server that checks
        nothing).
        `run_server` is found from the `vllm serve` command (serve.py, or vllm/scripts.py before
        vllm/entrypoints/cli existed)."""
        for rel in (SERVE_CLI, SCRIPTS):
            got = self.r.resolve(rel, "run_server")
            if got is None or not isinstance(got[1], (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            file, fn = got[0], got[1]
            body: list[ast.stmt] = []
            for st in fn.body:
                if any(
                    isinstance(n, ast.Call)
                    and ast.unparse(n.func).endswith(
                        ("create_server_socket", "socket.socket", "build_async_engine_client")
                    )
                    for n in ast.walk(st)
                ):
                    break
                if _is_logging(st):
                    continue
                if any(
                    isinstance(n, (ast.Await, ast.AsyncWith, ast.AsyncFor)) for n in ast.walk(st)
                ):
                    return None
                body.append(st)
            else:
                return None  # no socket bound: not the shape this reads
            template = ast.parse(f"def {RUN_SERVER_CHECKS}(args):\n    pass").body[0]
            assert isinstance(template, ast.FunctionDef)
            checks = template  # built by the parser, so every field this Python wants is there
            checks.body = body or [ast.Pass()]
            ast.copy_location(checks, fn)
            return file, ast.fix_missing_locations(checks)
        return None

    def _helpers(self, functions: dict[str, tuple[ast.FunctionDef, str]]) -> None:
        """Add every module-level function the entry points call, transitively, from the tree."""
        pending = list(functions.items())
        while pending and len(functions) < _MAX_HELPERS:
            _name, (fn, file) = pending.pop()
            for free in _free(fn):
                if free in functions:
                    continue
                got = self.r.resolve(file, free)
                if got is not None and isinstance(got[1], ast.FunctionDef):
                    functions[free] = (got[1], got[0])
                    pending.append((free, (got[1], got[0])))

    def _import(self, module: str, name: str) -> Any:
        """An in-function import: a host stub, a function of the tree, or a `Path(__file__)...` constant."""
        if name in self.host:
            return self.host[name]
        rel = self.r.module_file(module)
        if rel is None:
            return None
        got = self.r.resolve(rel, name)
        if got is None:
            return None
        node = got[1]
        if isinstance(node, ast.FunctionDef):
            helpers = {name: (node, got[0])}
            self._helpers(helpers)
            sub = IsolatedProgram(self.r.tree, helpers, self.host, self._import)
            return lambda *a: sub.call(name, *a)
        if isinstance(node, ast.Assign):
            return self._path_constant(node.value, got[0])
        return None

    def _path_constant(self, value: ast.expr, rel: str) -> Any:
        """`Path(__file__).parent` (optionally `/ "x"`) evaluated against the release's files."""
        if (
            isinstance(value, ast.BinOp)
            and isinstance(value.op, ast.Div)
            and isinstance(value.right, ast.Constant)
        ):
            base = self._path_constant(value.left, rel)
            return base / value.right.value if base is not None else None
        if isinstance(value, ast.Attribute) and value.attr == "parent":
            base = self._path_constant(value.value, rel)
            return base.parent if base is not None else None
        if (
            isinstance(value, ast.Call)
            and ast.unparse(value.func) == "Path"
            and len(value.args) == 1
            and ast.unparse(value.args[0]) == "__file__"
        ):
            return self._path(rel)
        return None

    def run(self, args: argparse.Namespace) -> list[RuleResult]:
        """One result per stage, in vLLM's order; stops at the first stage that raises."""
        out: list[RuleResult] = []
        if self.program is None and self.reason:
            return [
                RuleResult(stage, "unknown", message=self.reason) for stage, _n, _v in ENTRY_POINTS
            ]
        found = {e[0]: e for e in self.entries}
        for stage, _name, _via in ENTRY_POINTS:
            if stage in self.absent:
                continue
            if stage in self.missing or self.program is None:
                out.append(
                    RuleResult(stage, "unknown", message=self.missing.get(stage, self.reason))
                )
                continue
            _stage, name, file, line = found[stage]
            if stage == "api_server" and self.headless_dispatch and self._headless(args):
                continue  # a headless node starts no API server
            try:
                self.program.call(name, args)
            except SandboxError as exc:
                out.append(
                    RuleResult(
                        stage,
                        "unknown",
                        "",
                        f"{name} could not be evaluated: {exc}",
                        f"{file}:{line}",
                        name,
                    )
                )
                return out
            except _Unknown as exc:
                out.append(
                    RuleResult(stage, "unknown", "", f"{name} read {exc}", f"{file}:{line}", name)
                )
                return out
            except (
                AttributeError,
                NameError,
            ) as exc:  # what the analysis stands in for lacks something
                out.append(
                    RuleResult(
                        stage,
                        "unknown",
                        "",
                        f"{name} could not be evaluated: {type(exc).__name__}: {exc}",
                        f"{file}:{line}",
                        name,
                    )
                )
                return out
            except Exception as exc:  # the release's own check fired: this is the answer
                out.append(
                    RuleResult(
                        stage, "blocked", type(exc).__name__, str(exc), f"{file}:{line}", name
                    )
                )
                return out
            out.append(RuleResult(stage, "ok", function=name, evidence=f"{file}:{line}"))
        return out


class _Unknown(Exception):
    """A namespace attribute whose value the analysis does not have."""


class ConfigObject:
    """A parsed config value as the namespace holds it: set keys, else the field's default."""

    def __init__(
        self, cls: str, data: dict[str, Any], defaults: dict[str, tuple[Any, str]]
    ) -> None:
        self._cls, self._data, self._defaults = cls, data, defaults

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self._data:
            return self._data[name]
        if name in self._defaults:
            value, kind = self._defaults[name]
            if kind == "literal":
                return value
            raise _Unknown(f"{self._cls}.{name} (default {kind})")
        raise AttributeError(f"'{self._cls}' object has no attribute '{name}'")


def _is_logging(st: ast.stmt) -> bool:
    """`logger.info(...)` and the like: a statement that only logs."""
    return (
        isinstance(st, ast.Expr)
        and isinstance(st.value, ast.Call)
        and isinstance(st.value.func, ast.Attribute)
        and isinstance(st.value.func.value, ast.Name)
        and st.value.func.value.id == "logger"
    )


def _free(fn: ast.FunctionDef) -> set[str]:
    assigned = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}
    loaded: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Name):
            (assigned if isinstance(node.ctx, ast.Store) else loaded).add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            assigned.update((a.asname or a.name).split(".")[0] for a in node.names)
    return loaded - assigned
