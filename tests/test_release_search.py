"""ReleasePool's searches over later releases: `gone_later` answers what `first_without(...) is
not None` answers, without the bisection that only places the change."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from compat.verdict.releases import ReleasePool

RELEASES = [f"0.{n}.0" for n in range(1, 13)]


def _pool() -> ReleasePool:
    pool = ReleasePool.__new__(ReleasePool)  # only the search's release list is read
    pool.releases = list(RELEASES)
    return pool


@given(st.lists(st.sampled_from([True, False, None]), min_size=12, max_size=12), st.integers(0, 11))
def test_newest_passing_decides_what_the_bisection_finds(answers: list, start: int) -> None:
    pool = _pool()

    def test(v: str) -> bool | None:
        return answers[RELEASES.index(v)]

    found = pool.first_release(RELEASES[start], test)
    assert pool._newest_passes(pool.later(RELEASES[start]), test) is (found is not None)
    if found is not None:
        assert answers[RELEASES.index(found)] is True


def test_unanalysable_newest_releases_are_skipped() -> None:
    pool = _pool()
    answers = {v: None for v in RELEASES[-3:]} | {RELEASES[-4]: True}
    assert pool._newest_passes(pool.later(RELEASES[0]), lambda v: answers.get(v, False))
    assert not pool._newest_passes(pool.later(RELEASES[0]), lambda v: answers.get(v) and False)
    assert not pool._newest_passes([], lambda v: True)
