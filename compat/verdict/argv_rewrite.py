"""The release's own argv rewrite, run from its source: `FlexibleArgumentParser.parse_args`.

Before argparse sees `vllm serve ...`, vLLM rewrites the list: `_` to `-` in option names
(the whole name up to 0.9.0, the part before the first `.` after), `--model X` rejected
(0.9-0.10) or moved to the positional (later), `--config FILE` spliced in, `-O3`, dotted
`--x.key v` merged into `--x '{"key": v}'` (from 0.9). Each release does this differently,
so the replay runs the release's method itself instead of one reimplementation:

* `super().parse_args(processed, namespace)` is replaced by `return processed` (argparse is
  the replay's part, compat.verdict.arguments);
* `self._pull_args_from_config(args)` (and the class-level spelling) is the replay's
  `pull_config` (the file is read by the caller's loader, never by the release's code);
  attributes it sets on itself for `--help` become locals;
* helpers the method calls from its module (`human_readable_int`) are compiled from the
  same tree; `re`, `json`, `defaultdict`, `sys.argv`, `logger` (silent) are host objects.

The method is compiled once per release in the sandbox's restricted globals (no imports
beyond the pure stdlib, no file access). Its AST must hold no `while` loop, so every run
ends; runs are then not traced (the replay calls it once per argv and release). What the
method raises is vLLM's answer (`ValueError: With vllm serve, you should provide the
model as a positional argument...`, an IndexError on a trailing dotted option); a name the
host does not provide is `unknown`, never a pass.
"""

from __future__ import annotations

import argparse
import ast
import copy
import hashlib
import json
import re
from collections import defaultdict
from typing import Any

from compat.verdict.replay_cache import cached, to_doc
from compat.vllm.cli_surface import SymbolResolver
from compat.vllm.sandbox import IsolatedProgram, SandboxError

#: Where FlexibleArgumentParser lives, newest first (compat.vllm.cli_surface reads the same).
PARSER_HOMES = ("vllm/utils/argparse_utils.py", "vllm/utils/__init__.py", "vllm/utils.py")


class RewriteError(Exception):
    """What the release's parse_args raised: `exc` is the exception's name ('unknown' when
    the replay cannot run it), `message` its text."""

    def __init__(self, exc: str, message: str) -> None:
        super().__init__(message)
        self.exc = exc
        self.message = message


class ReleaseRewrite:
    """One release's parse_args, compiled once when first run; `__call__(argv, pull)` returns
    the rewritten list or raises RewriteError."""

    def __init__(self, tree: Any) -> None:
        self.tree = tree
        self._program: IsolatedProgram | None = None
        found = cached(tree, f"argv_rewrite {tree.version}", lambda: _found(tree))
        self.file, self.line, self.reason = found["file"], found["line"], found["reason"]
        self._functions = {name: (fn, file) for name, fn, file in found.get("functions", [])}
        self.shape = found.get("shape", "")

    def _compiled(self) -> IsolatedProgram | None:
        """The program, compiled on the first run this release's own (not a run shared from
        another release with this parse_args); None, with `reason`, when it cannot be isolated."""
        if self._program is None and not self.reason:
            host = {
                "re": re,
                "json": json,
                "defaultdict": defaultdict,
                "ArgumentTypeError": argparse.ArgumentTypeError,
                "Namespace": argparse.Namespace,
                "sys": _Sys(),
                "pull_args_from_config": None,  # set per call
            }
            try:
                self._program = IsolatedProgram(self.tree, self._functions, host)
            except (SandboxError, SyntaxError) as exc:
                self.reason = f"parse_args ({self.file}:{self.line}) cannot be isolated: {exc}"
        return self._program

    def __call__(self, argv: list[str], pull: Any) -> list[str]:
        if self.reason:
            raise RewriteError("unknown", f"vLLM's argv rewrite is not replayed: {self.reason}")
        key = (self.shape, tuple(argv))
        run = _RUNS.get(key)
        if run is None:
            if self._compiled() is None:
                raise RewriteError("unknown", f"vLLM's argv rewrite is not replayed: {self.reason}")
            pulled: list[bool] = []

            def pulling(args: list[str]) -> list[str]:
                pulled.append(True)
                return pull(args)

            run = self._run(argv, pulling)
            if not pulled and self.shape:  # a run that read no --config file: the argv's alone
                if len(_RUNS) >= _MAX_RUNS:
                    _RUNS.clear()  # the runs a recipe shares are its own, met close together
                _RUNS[key] = run
        return self._answer(run)

    def _run(self, argv: list[str], pull: Any) -> tuple[Any, ...]:
        """How the release's parse_args ends on `argv`: ("ok", out), or how it fails."""
        assert self._program is not None
        fn = self._program.globals["parse_args"]
        self._program.globals["pull_args_from_config"] = pull
        try:
            out = fn(None, list(argv), None)
        except RewriteError:
            raise
        except NameError as exc:
            return ("name", str(exc))
        except SandboxError as exc:
            return ("sandbox", str(exc))
        except Exception as exc:  # noqa: BLE001 - the release's own rewrite raised: its answer
            return ("raised", type(exc).__name__, str(exc))
        if not isinstance(out, list) or not all(isinstance(a, str) for a in out):
            return ("not-list",)
        return ("ok", tuple(out))

    def _answer(self, run: tuple[Any, ...]) -> list[str]:
        """The rewritten list of a run, or its failure as this release's RewriteError."""
        where = f"parse_args ({self.file}:{self.line})"
        if run[0] == "ok":
            return list(run[1])
        if run[0] == "name":
            raise RewriteError("unknown", f"{where} uses {run[1]}, not provided")
        if run[0] == "sandbox":
            raise RewriteError("unknown", f"{where}: {run[1]}")
        if run[0] == "raised":
            raise RewriteError(run[1], run[2])
        raise RewriteError("unknown", f"{where} did not end in super().parse_args")


#: Runs of parse_args by (shape, argv). Releases share a parse_args far more often than not
#: (55 releases, 15 shapes), and works_from and cause analysis judge one argv at many of them.
_RUNS: dict[tuple[str, tuple[str, ...]], tuple[Any, ...]] = {}
#: At most this many kept: unbounded, the memo would grow with every argv a worker meets.
_MAX_RUNS = 20_000


def _shape(functions: list[Any]) -> str:
    """What a run of these functions depends on: their code, not where it sits (line numbers
    change nothing a run returns or raises; the messages naming the file and line are the
    release's own, made per release from the run)."""

    def unplaced(doc: Any) -> Any:
        if isinstance(doc, dict):
            return {k: unplaced(v) for k, v in doc.items() if k != "@"}
        if isinstance(doc, list):
            return [unplaced(v) for v in doc]
        return doc

    text = json.dumps(unplaced(to_doc([[name, fn] for name, fn, _file in functions])))
    return hashlib.sha256(text.encode()).hexdigest()


class _Sys:
    argv: list[str] = ["vllm"]


class _Rewritten(ast.NodeTransformer):
    """`super().parse_args(x, ...)` -> `x`; `self._pull_args_from_config(x)` (or through the
    class) -> `pull_args_from_config(x)`, the host's; an attribute set on `self` or the class
    (`_show_serve_task_hint`, `_search_keyword`: what `--help` prints) -> a local."""

    def visit_Call(self, node: ast.Call) -> Any:
        self.generic_visit(node)
        f = node.func
        if (
            isinstance(f, ast.Attribute)
            and f.attr == "parse_args"
            and isinstance(f.value, ast.Call)
            and isinstance(f.value.func, ast.Name)
            and f.value.func.id == "super"
            and node.args
        ):
            return node.args[0]
        if isinstance(f, ast.Attribute) and f.attr == "_pull_args_from_config" and _on_self(f):
            return ast.copy_location(
                ast.Call(ast.Name("pull_args_from_config", ast.Load()), node.args, []), node
            )
        return node

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        self.generic_visit(node)
        if isinstance(node.ctx, ast.Store) and _on_self(node):
            return ast.copy_location(ast.Name(f"self_{node.attr.lstrip('_')}", ast.Store()), node)
        return node


def _on_self(node: ast.Attribute) -> bool:
    return isinstance(node.value, ast.Name) and node.value.id in ("self", "FlexibleArgumentParser")


def _found(tree: Any) -> dict[str, Any]:
    """parse_args rewritten for the replay, and the helper it calls, as found in the source
    (or why not: `reason`)."""
    found = _find(tree)
    if found is None:
        return {"file": "", "line": 0, "reason": "FlexibleArgumentParser.parse_args not found"}
    file, fn = found
    out: dict[str, Any] = {"file": file, "line": fn.lineno, "reason": "", "functions": []}
    if any(isinstance(n, ast.While) for n in ast.walk(fn)):
        out["reason"] = f"parse_args ({file}:{fn.lineno}) has a while loop"
        return out
    out["functions"].append(("parse_args", _Rewritten().visit(copy.deepcopy(fn)), file))
    got = SymbolResolver(tree).resolve(file, "human_readable_int")
    if got is not None and isinstance(got[1], ast.FunctionDef):
        out["functions"].append(("human_readable_int", got[1], got[0]))
    out["shape"] = _shape(out["functions"])
    return out


def _find(tree: Any) -> tuple[str, ast.FunctionDef] | None:
    for rel in PARSER_HOMES:
        mod = tree.parse(rel)
        for st in mod.body if mod else []:
            if isinstance(st, ast.ClassDef) and st.name == "FlexibleArgumentParser":
                for fn in st.body:
                    if isinstance(fn, ast.FunctionDef) and fn.name == "parse_args":
                        return rel, fn
    return None
