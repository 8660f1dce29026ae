"""compat.jsoncache.cache_lock: one process at a time fills a cache entry (a release a build's
workers all need is downloaded and scanned once); where no lock can be taken the work runs."""

from __future__ import annotations

import os
import time

from compat.jsoncache import cache_lock


def test_a_second_process_waits_for_the_first(isolated_cache) -> None:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child holds the lock, says so, then keeps it a while
        try:
            with cache_lock("release-0.1.0"):
                os.write(w, b"x")
                time.sleep(0.6)
        finally:
            os._exit(0)
    os.read(r, 1)  # the child has the lock
    t0 = time.monotonic()
    with cache_lock("release-0.1.0"):
        waited = time.monotonic() - t0
    os.waitpid(pid, 0)
    assert waited > 0.3
    t0 = time.monotonic()
    with cache_lock("release-0.2.0"):  # another name is not held
        assert time.monotonic() - t0 < 0.3


def test_no_lock_to_be_had_runs_the_block(tmp_path, monkeypatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("COMPAT_CACHE", str(blocker))  # the locks folder cannot be made
    ran = []
    with cache_lock("release-0.1.0"):
        ran.append(1)
    assert ran == [1]
