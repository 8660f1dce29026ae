"""`compat` run in-process as a user runs it: argv in; exit code, stdout and stderr out.

`compat.cli.main` with `sys.argv` patched and the streams captured, its end translated as
the interpreter would: SystemExit's code, and an exception that escapes `main` written to
stderr as a traceback with exit 1, so "no Traceback on stderr" stays a real check.
Warnings a fresh interpreter would print go to stderr too.

A process is kept where it is what a test is about: the installed console script
(test_install.py), signals (test_hardening_interrupt.py), huggingface_hub configured by its
environment at import (test_hf_hub.py), imports from the working directory at start-up
(test_hardening_no_exec.py) and whole-process budgets (test_site.py).
"""

from __future__ import annotations

import contextlib
import io
import sys
import traceback
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

#: Categories Python's default filters hide outside __main__.
_HIDDEN = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)


@dataclass(frozen=True)
class Result:
    """What a subprocess.CompletedProcess would hold."""

    returncode: int
    stdout: str
    stderr: str


def run(*args: str, cwd: Path | None = None) -> Result:
    """`compat ARGS...` in this process, from `cwd` when given."""
    from compat import cli

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.ExitStack() as stack:
        if cwd is not None:
            stack.enter_context(contextlib.chdir(cwd))
        stack.enter_context(_argv(["compat", *args]))
        stack.enter_context(_consoles(cli, out, err))
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        caught = stack.enter_context(warnings.catch_warnings(record=True))
        warnings.simplefilter("always")
        try:
            cli.main()
        except SystemExit as exc:
            code = _exit_code(exc, err)
        except Exception:  # noqa: BLE001 -- what the interpreter does with one escaping main
            err.write(traceback.format_exc())
            code = 1
        for w in caught:
            if not issubclass(w.category, _HIDDEN):
                err.write(warnings.formatwarning(w.message, w.category, w.filename, w.lineno, w.line))
    return Result(code, out.getvalue(), err.getvalue())


def _exit_code(exc: SystemExit, err: io.StringIO) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    err.write(f"{exc.code}\n")  # sys.exit("message"): printed, exit 1
    return 1


@contextlib.contextmanager
def _argv(argv: list[str]) -> Iterator[None]:
    old = sys.argv
    sys.argv = argv
    try:
        yield
    finally:
        sys.argv = old


@contextlib.contextmanager
def _consoles(cli, out: io.StringIO, err: io.StringIO) -> Iterator[None]:
    """The CLI's rich consoles on the captured streams, as in a process whose output is a pipe
    (no colour: they were made at import, maybe with a terminal attached)."""
    from rich.console import Console

    old = cli.out, cli.err
    cli.out, cli.err = Console(file=out), Console(file=err)
    try:
        yield
    finally:
        cli.out, cli.err = old
