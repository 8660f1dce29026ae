"""ReleasePool's searches over later releases: `gone_later` answers what `first_without(...) is
not None` answers, without the bisection that only places the change; the bisection tests the
build's own releases where it may, and finds the same release."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from compat.verdict.releases import ReleasePool

RELEASES = [f"0.{n}.0" for n in range(1, 13)]


def _pool(held: frozenset[str] = frozenset()) -> ReleasePool:
    pool = ReleasePool.__new__(ReleasePool)  # only the search's release list and judges are read
    pool.releases = list(RELEASES)
    pool.judges = {}
    pool._lazy = {}
    pool._own = frozenset(held)  # the build's own releases: tested first, no scan
    return pool


def _plain_bisection(span: list[str], test) -> str:
    """The search as it was: the newest release, then the middle of what is left."""
    assert test(span[-1])
    lo, hi = -1, len(span) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if test(span[mid]) else (mid, hi)
    return span[hi]


@given(st.integers(0, 11), st.integers(0, 12), st.sets(st.sampled_from(RELEASES)))
def test_judges_at_hand_are_tested_first_and_the_release_found_is_the_same(
    start: int, fixed_at: int, held: set[str]
) -> None:
    """A combination fixed from `fixed_at` on (the search's assumption): with any releases held,
    the first working release is the one the plain bisection finds."""
    pool = _pool(frozenset(held))
    tested: list[str] = []

    def test(v: str) -> bool:
        tested.append(v)
        return RELEASES.index(v) >= fixed_at

    found = pool.first_release(RELEASES[start], test)
    span = pool.later(RELEASES[start])
    if not span or fixed_at >= len(RELEASES):
        assert found is None
        return
    assert found == _plain_bisection(span, test) == RELEASES[max(fixed_at, start + 1)]
    assert len(set(tested)) <= 2 * len(span).bit_length() + 2  # still a bisection


def test_a_search_between_held_releases_scans_fewer() -> None:
    """Every other release held (as a pinned build's are): the search scans fewer of the rest."""
    held = frozenset(RELEASES[::2])
    total = {"held": 0, "plain": 0}
    for fixed_at in range(2, 12):
        scanned: dict[str, set[str]] = {"held": set(), "plain": set()}

        def test(v: str, kind: str) -> bool:
            if v not in held:
                scanned[kind].add(v)
            return RELEASES.index(v) >= fixed_at

        found = _pool(held).first_release(RELEASES[0], lambda v: test(v, "held"))
        assert found == _plain_bisection(_pool().later(RELEASES[0]), lambda v: test(v, "plain"))
        assert len(scanned["held"]) <= len(scanned["plain"]), fixed_at
        for kind in total:
            total[kind] += len(scanned[kind])
    assert total["held"] < total["plain"]


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


def test_releases_scanned_on_demand_do_not_change_what_is_tested() -> None:
    """Which releases a judging worker scanned before depends on what it judged; the releases a
    search tests (whose draft mappings are written) must not."""
    held = frozenset(RELEASES[::3])
    sequences = []
    for scanned in ([], RELEASES[1::2]):
        pool = _pool(held)
        pool.judges = dict.fromkeys(scanned)  # type: ignore[arg-type]
        tested: list[str] = []
        pool.first_release(RELEASES[0], lambda v: tested.append(v) or RELEASES.index(v) >= 7)
        sequences.append(tested)
    assert sequences[0] == sequences[1]
