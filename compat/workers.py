"""Recipes judged on every core: forked workers take the next recipe as they finish one.

A recipe's block depends on nothing another recipe computes (compat.blocks), so which
process judges it, and after which other recipes, changes nothing in it: the caches a worker
warms are memos. Each worker is forked once the release facts are committed to the build's
private database, reads them through its own connection (compat.store.Store.here), and sends
each block back as its JSON document; the parent writes them in recipe order. With one core,
no fork, or a worker that fails, the recipes left are judged here, one after the other.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

from compat.blocks import Block, Judging, judge_recipe
from compat.forking import child_signals, reap, signals_held
from compat.verdict import arg_memo
from compat.vllm.facts import cpu_count as cpus  # one answer for scans and builds

Say = Callable[[str], None]
#: Fewer recipes than this are judged here: forking and warming a second process's caches
#: costs more than one recipe takes (an incremental build judges one or two).
MIN_PARALLEL = 4


def judge_all(
    j: Judging, paths: list[str], combos: Callable[[str], list[Any]], say: Say
) -> Iterator[tuple[str, Block]]:
    """(path, block) of every recipe of `paths`, in any order."""
    done: set[str] = set()
    workers = min(cpus(), 4)
    if len(paths) >= MIN_PARALLEL and workers >= 2:
        for path, block in _in_workers(j, paths, combos, workers, say):
            done.add(path)
            yield path, block
    for path in paths:
        if path not in done:
            yield path, judge_recipe(j, path, combos(path))


def _in_workers(
    j: Judging, paths: list[str], combos: Callable[[str], list[Any]], n: int, say: Say
) -> Iterator[tuple[str, Block]]:
    """Blocks from `n` forked workers as they come; stops early (the caller judges what is
    left) when fork is unavailable or a worker fails."""
    import multiprocessing
    import multiprocessing.connection
    from multiprocessing.connection import Connection

    if "fork" not in multiprocessing.get_all_start_methods():
        return
    ctx = multiprocessing.get_context("fork")
    position = ctx.Value("i", 0)
    jobs: list[tuple[Any, Any]] = []
    answers: dict[Any, Any] = {}  # a worker's pipe -> the pipe that answers its scan requests
    try:
        for _ in range(n):
            recv, send = ctx.Pipe(duplex=False)
            answer_recv, answer_send = ctx.Pipe(duplex=False)
            args = (j, paths, combos, position, send, answer_recv)
            proc = ctx.Process(target=_worker, args=args, daemon=True)
            with signals_held():
                proc.start()
            send.close()
            answer_recv.close()
            jobs.append((proc, recv))
            answers[recv] = answer_send
        pending: dict[Any, Connection] = {recv: recv for _proc, recv in jobs}
        while pending:
            for ready in multiprocessing.connection.wait(list(pending)):
                conn = pending[ready]
                try:
                    message: tuple[Any, ...] = conn.recv()
                except EOFError:
                    return  # a worker died: the caller judges what is left
                if message[0] == "scan":
                    _scan_here(message[1], say)
                    answers[conn].send(("scanned", message[1]))
                elif message[0] == "say":
                    say(message[1])
                elif message[0] == "block":
                    yield paths[message[1]], Block.from_text(message[2])
                elif message[0] == "arguments":
                    arg_memo.add_new(message[1])
                elif message[0] == "done":
                    del pending[ready]
                else:
                    return
    except OSError:  # no processes or pipes to be had
        return
    finally:
        for proc, recv in jobs:
            recv.close()
            answers[recv].close()
            reap(proc)


def _scan_here(version: str, say: Say) -> None:
    """A release's facts computed and cached for a worker that asked (its search met the
    release): scanned here, by the build's kept share workers (compat.vllm.facts.share_workers),
    which do not parse again what the last release had. A release that cannot be scanned is
    left for the worker, which meets the error itself and reports it."""
    from compat.errors import UserError
    from compat.scan import release_facts
    from compat.sources import tree_from_index

    try:
        release_facts(tree_from_index(version, progress=say), say)
    except UserError:
        pass


def split_map(fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    """`[fn(x) for x in items]`, every other item computed in a forked child while this process
    computes the rest; the child's results come back pickled. With one core, no fork, or a
    child that fails, its items are computed here too (an error then surfaces as itself)."""
    import multiprocessing
    import pickle

    if len(items) < MIN_PARALLEL or cpus() < 2:
        return [fn(x) for x in items]
    if "fork" not in multiprocessing.get_all_start_methods():
        return [fn(x) for x in items]
    ctx = multiprocessing.get_context("fork")
    theirs: list[Any] | None = None
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_map_child, args=(fn, items[1::2], send), daemon=True)
    try:
        with signals_held():
            proc.start()
        send.close()
        mine = [fn(x) for x in items[0::2]]
        with contextlib.suppress(EOFError, OSError, pickle.UnpicklingError):
            theirs = pickle.loads(recv.recv_bytes())
    finally:
        recv.close()
        reap(proc)
    if theirs is None:
        theirs = [fn(x) for x in items[1::2]]
    out: list[Any] = [None] * len(items)
    out[0::2], out[1::2] = mine, theirs
    return out


def _map_child(fn: Callable[[Any], Any], items: list[Any], conn: Any) -> None:
    """split_map's child: its results, pickled, or nothing when it fails (the parent then
    computes them)."""
    child_signals()
    code = 0
    try:
        conn.send_bytes(_pickled([fn(x) for x in items]))
    except BaseException:  # noqa: BLE001 (the parent computes them)
        code = 1
    finally:
        conn.close()
        os._exit(code)


def _pickled(value: Any) -> bytes:
    import pickle

    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def _worker(
    j: Judging,
    paths: list[str],
    combos: Callable[[str], list[Any]],
    position: Any,
    conn: Any,
    answers: Any,
) -> None:
    """Judge the next unclaimed recipe until none is left; each block goes back through `conn`.
    A release works_from's search meets unscanned is scanned by the parent, asked through
    `conn` and answered through `answers` (compat.scan.remote).

    Signals are the parent's to handle (it terminates the worker); the worker ends with
    os._exit, leaving the parent's files, buffers and database connection alone.
    """
    from compat import scan

    child_signals()
    code = 0
    try:
        j.pool.say = lambda msg: conn.send(("say", msg))

        def ask(version: str) -> None:
            conn.send(("scan", version))
            answers.recv()

        scan.remote = ask
        while True:
            with position.get_lock():
                i = position.value
                position.value = i + 1
            if i >= len(paths):
                break
            block = judge_recipe(j, paths[i], combos(paths[i]))
            conn.send(("block", i, block.text()))
        conn.send(("arguments", arg_memo.take_new()))  # the parent keeps what was found
        conn.send(("done",))
    except BaseException as exc:  # noqa: BLE001 (the parent judges what is left)
        code = 1
        with contextlib.suppress(Exception):
            conn.send(("failed", repr(exc)))
    finally:
        conn.close()
        os._exit(code)
