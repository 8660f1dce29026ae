"""Judges for any release on the package index, built on demand; the true first working release.

`works_from` means the first release on the index where a combination starts, not the
next release that happens to be scanned (DESIGN.md). Finding it needs releases nobody
asked to judge, so this pool fetches and scans them lazily (facts are cached by sdist
hash, so a release costs its scan once per machine) and keeps their knowledge in memory,
not in the build's database. Bisection, `compat bisect` and the fix stage's
`min_vllm_version` bump all search through one pool.

The search assumes a combination, once fixed, stays fixed (as `compat bisect` always
has); both ends are judged, so a release where it breaks again is never reported as
the first that works.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from packaging.version import InvalidVersion, Version

from compat.errors import UserError
from compat.hf import ModelResolver
from compat.recipes import Combination
from compat.verdict.engine import Judge, Outcome
from compat.verdict.knowledge import knowledge_from_facts
from compat.verdict.trace import JudgeTrace
from compat.vocab import NOT_BLOCKED, STARTS, release_key

__all__ = ["NOT_BLOCKED", "STARTS", "ReleasePool", "final_releases"]

Progress = Callable[[str], None]


def final_releases(labels: Iterable[str]) -> list[str]:
    """Final releases (no pre-, post- or dev-release), oldest first."""
    out = []
    for label in labels:
        try:
            v = Version(label)
        except InvalidVersion:
            continue
        if not (v.is_prerelease or v.is_postrelease or v.is_devrelease):
            out.append(label)
    return sorted(out, key=release_key)


class ReleasePool:
    """Judges per release: the build's own, plus any release on the index, scanned when first asked.

    `index` is the list of releases on the package index (None: offline, only the given
    judges are searched, and `exhaustive` is False so callers can say so). `lazy` holds
    judges made on first use (a build's own releases, whose knowledge its database holds):
    a build whose results are all reused never loads one. `trace` is told what every judge
    of the pool reads (compat.verdict.trace).
    """

    def __init__(
        self,
        judges: dict[str, Judge],
        models: ModelResolver,
        recipe_moe: dict[str, bool] | None = None,
        index: Sequence[str] | None = None,
        progress: Progress | None = None,
        shell: Any = None,
        lazy: Mapping[str, Callable[[], Judge]] | None = None,
        trace: JudgeTrace | None = None,
    ) -> None:
        self.judges = dict(judges)
        self._lazy = dict(lazy or {})
        self.trace = trace
        for judge in self.judges.values():
            judge.trace = trace
        self.models = models
        self.recipe_moe = recipe_moe or {}
        self.shell = (
            shell  # the recipes' shell placeholders (compat.verdict.shell), for scanned releases
        )
        self.say = progress or (lambda _m: None)
        self.exhaustive = index is not None
        own = [*judges, *self._lazy]
        self._own = frozenset(own)  # the build's releases: what the bisection tests first
        self.releases = final_releases(index if index is not None else own)
        for label in own:  # a judged local tree or pre-release still counts where it sorts
            if label not in self.releases:
                self.releases.append(label)
        self.releases.sort(key=release_key)
        self.unavailable: dict[str, str] = {}
        self._outcomes: dict[tuple, Outcome] = {}

    # -- judges ------------------------------------------------------------------------
    def judge_at(self, version: str) -> Judge | None:
        """The judge of `version`, scanning it on first use; None when it cannot be analysed."""
        if version in self.judges:
            return self.judges[version]
        if version in self._lazy:
            judge = self.judges[version] = self._lazy.pop(version)()
            judge.trace = self.trace
            return judge
        if version in self.unavailable:
            return None
        from compat import scan
        from compat.jsoncache import cache_lock
        from compat.sources import tree_from_index

        try:
            self.say(f"works_from: scanning vllm {version}")
            # One process downloads and scans a release; a build's other workers wait for it,
            # then read the caches (each would otherwise scan it too, on the same cores).
            with cache_lock(f"release-{version}"):
                tree = tree_from_index(version, progress=self.say)
                if scan.remote is not None and not scan.facts_path(tree).is_file():
                    scan.remote(version)  # the build's process scans it; read here from the cache
                facts, _cached = scan.release_facts(tree, self.say)
        except UserError as exc:
            self.unavailable[version] = exc.line()
            return None
        knowledge = knowledge_from_facts(version, tree, facts, _notes(facts))
        judge = Judge(knowledge, self.models, self.recipe_moe, self.shell)
        judge.trace = self.trace
        self.judges[version] = judge
        return judge

    def memoised(self, version: str) -> Memoised:
        """`version`'s judge, its verdicts memoised in the pool (see `Memoised`)."""
        return Memoised(self, version)

    def knows(self, version: str) -> bool:
        """Is `version` one of the pool's own releases (judged, or made on first use)?"""
        return version in self.judges or version in self._lazy

    def forget_outcomes(self) -> None:
        """Drop the memoised verdicts (each is keyed by its recipe: once a recipe is done,
        nothing asks for its verdicts again); the judges keep what recipes share."""
        self._outcomes.clear()

    def outcome(self, version: str, combo: Combination) -> Outcome | None:
        """The verdict of `combo` at `version`, memoised on what the engine reads of a combination."""
        key = (
            version,
            combo.recipe,
            combo.platform,
            combo.model_id,
            combo.argvs,
            combo.omni,
            combo.problems,
        )
        hit = self._outcomes.get(key)
        if hit is None:
            judge = self.judge_at(version)
            if judge is None:
                return None
            hit = self._outcomes[key] = judge.judge(combo)
        return hit

    def starts(
        self, version: str, combos: Sequence[Combination], accept: frozenset[str] = STARTS
    ) -> bool | None:
        """Do all `combos` start (status in `accept`) at `version`? None when it cannot be analysed."""
        for c in combos:
            o = self.outcome(version, c)
            if o is None:
                return None
            if o.status not in accept:
                return False
        return True

    # -- search ------------------------------------------------------------------------
    def later(self, version: str, until: str | None = None) -> list[str]:
        """Releases after `version` (up to `until`), oldest first."""
        lo = release_key(version)
        hi = release_key(until) if until else None
        return [
            v for v in self.releases if release_key(v) > lo and (hi is None or release_key(v) <= hi)
        ]

    def first_working(
        self,
        version: str,
        combos: Sequence[Combination],
        until: str | None = None,
        accept: frozenset[str] = STARTS,
    ) -> str | None:
        """The first release after `version` where every combo starts, by bisection; None if none.

        `accept=NOT_BLOCKED` asks instead for the first release where none is known to fail.
        """
        return self.first_release(version, lambda v: self.starts(v, combos, accept), until)

    def first_without(self, version: str, combo: Combination, key: str) -> str | None:
        """The first release after `version` where `combo` no longer has blocking finding `key`."""
        return self.first_release(version, self._without(combo, key))

    def gone_later(self, version: str, combo: Combination, key: str) -> bool:
        """Whether some release after `version` no longer has blocking finding `key` for `combo`:
        `first_without(...) is not None`, which the newest analysable release decides (the
        bisection below it only places the change)."""
        return self._newest_passes(self.later(version), self._without(combo, key))

    def _without(self, combo: Combination, key: str) -> Callable[[str], bool | None]:
        def gone(v: str) -> bool | None:
            o = self.outcome(v, combo)
            return None if o is None else ("blocked", key) not in o.keys

        return gone

    @staticmethod
    def _newest_passes(span: list[str], test: Callable[[str], bool | None]) -> bool:
        """Drops the newest releases of `span` that cannot be analysed; does the newest left pass?"""
        while span and test(span[-1]) is None:
            span.pop()  # the newest end cannot be analysed: search below it
        return bool(span) and bool(test(span[-1]))

    def first_release(
        self, version: str, test: Callable[[str], bool | None], until: str | None = None
    ) -> str | None:
        """The first release after `version` passing `test` (None: cannot tell), by bisection."""
        span = self.later(version, until)
        if not self._newest_passes(span, test):
            return None
        lo, hi = -1, len(span) - 1  # span[hi] passes; everything at or below lo is not known to
        while hi - lo > 1:
            mid = self._probe(span, lo, hi)
            if test(span[mid]):
                hi = mid
            else:  # False, or unanalysable: not known to pass
                lo = mid
        return span[hi]

    def _probe(self, span: list[str], lo: int, hi: int) -> int:
        """The release the bisection tests next, strictly between `lo` and `hi`: the middle one,
        unless one of the build's own releases (judged, so scanned) lies in the middle half of
        the interval (the nearest to the middle is taken). Such a test costs no scan, and the
        interval still shrinks to at most three quarters; the release found is the same, since
        the search assumes a combination once fixed stays fixed (see the module docstring).
        Releases scanned on demand do not count: which a judging worker holds depends on what
        it judged before, and the releases tested (their draft mappings are written) must not.
        A cold pinned build's searches scanned 23 releases nobody judged; testing the judges
        at hand first, 15 (cold pinned 89 s -> 81 s on 2 cores)."""
        mid = (lo + hi) // 2
        reach = (hi - lo) // 4
        near = sorted(range(mid - reach, mid + reach + 1), key=lambda i: (abs(i - mid), i))
        for i in near:
            if lo < i < hi and span[i] in self._own:
                return i
        return mid


class Memoised:
    """A release's judge whose verdicts go through the pool's memo. Cause analysis judges a row
    again without one element, and that render often is a row already judged (a feature's row
    without the feature is the base row) or met by another row's analysis."""

    def __init__(self, pool: ReleasePool, version: str) -> None:
        self.pool = pool
        self.version = version

    def judge(self, c: Combination) -> Outcome:
        o = self.pool.outcome(self.version, c)
        if o is None:
            raise ValueError(f"vLLM {self.version} cannot be judged")
        return o


def _notes(facts: dict[str, Any]) -> list[str]:
    import json

    raw = (facts.get("release") or {}).get("notes") or "[]"
    return json.loads(raw) if isinstance(raw, str) else list(raw)
