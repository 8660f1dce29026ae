"""workers.split_map: a list computed on two cores (half in a forked child) is the list computed
in one process; a child that fails leaves its items to the parent, and an error is the error."""

from __future__ import annotations

import os

import pytest

from compat import workers
from compat.errors import UserError


@pytest.fixture()
def two_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workers, "cpus", lambda: 2)


def test_half_in_a_child_gives_the_list_of_one_process(two_cores) -> None:
    parent = os.getpid()
    got = workers.split_map(lambda x: (x * x, os.getpid() == parent), list(range(9)))
    assert [v for v, _ in got] == [x * x for x in range(9)]
    assert [here for _, here in got] == [x % 2 == 0 for x in range(9)]  # odd ones in the child


def test_a_failing_child_leaves_its_items_to_the_parent(two_cores) -> None:
    parent = os.getpid()

    def fn(x: int) -> int:
        if os.getpid() != parent:
            raise RuntimeError("child fails (test)")
        return -x

    assert workers.split_map(fn, list(range(7))) == [-x for x in range(7)]


def test_an_error_surfaces_as_itself(two_cores) -> None:
    def fn(x: int) -> int:
        if x == 5:
            raise UserError("bad recipe (test)", where="models/x.yaml")
        return x

    with pytest.raises(UserError, match="bad recipe"):
        workers.split_map(fn, list(range(8)))


def test_one_core_computes_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workers, "cpus", lambda: 1)
    parent = os.getpid()
    assert workers.split_map(lambda x: os.getpid() == parent, list(range(6))) == [True] * 6
