"""Signals around a fork, for every stage that forks a worker (judging, enumeration, downloads).

A forked child starts with a copy of the parent's Python signal handlers. The CLI's SIGTERM
handler raises SystemExit and SIGINT raises KeyboardInterrupt; either, run in the child,
would unwind a copy of the parent's stack there (its database cleanup included). So the
parent holds both signals while it forks, and the child sets its own handlers before it
lets them through.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from typing import Any

#: The signals a forked child takes no handler of the parent's for.
HELD = frozenset({signal.SIGINT, signal.SIGTERM})


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM held back while a child forks: the child keeps them held until its
    own handlers are set (child_signals); the parent gets any that arrived once the fork is
    done."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, HELD)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def child_signals() -> None:
    """A forked child's signals: SIGINT ignored and SIGTERM ending it (the parent handles
    both), then the two released that were held since the fork (signals_held)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, HELD)


def reap(proc: Any) -> None:
    """End a forked child the parent is done with: SIGTERM if it still runs, then wait for it
    (a child that never started is left as it is)."""
    if proc.is_alive():
        proc.terminate()
    if proc.pid is not None:
        proc.join()
