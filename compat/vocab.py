"""The project's two closed orders, each written once: verdict statuses and release labels.

Every stage that ranks statuses or sorts releases calls these, so a check, the site and
bisect cannot disagree about which status is worse or which release is newer.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from functools import lru_cache

from packaging.version import InvalidVersion, Version


class Status(StrEnum):
    """A verdict, in order of severity (`blocked` is worst).

    `unknown` ranks above `warning`: a missing fact may hide a failure, while a warning
    is a known start with a fallback. Members compare equal to their strings.
    """

    OK = "ok"
    WARNING = "warning"
    UNKNOWN = "unknown"
    BLOCKED = "blocked"

    @property
    def rank(self) -> int:
        return _STATUS_ORDER.index(self)


_STATUS_ORDER = (Status.OK, Status.WARNING, Status.UNKNOWN, Status.BLOCKED)


def status_rank(status: str) -> int:
    """Rank of a status string; ValueError names an unknown one."""
    return Status(status).rank


def worst(statuses: Iterable[str], default: str = Status.OK) -> Status:
    """The most severe of `statuses` (`default` when there are none)."""
    return max((Status(s) for s in statuses), key=lambda s: s.rank, default=Status(default))


#: What recipes write for "the newest release on the index".
NIGHTLY = "nightly"


@lru_cache(maxsize=4096)
def release_key(label: str) -> tuple:
    """Sort key for release labels, oldest first (memoised: bisection sorts the same few
    hundred labels a million times a build).

    PEP 440 order for releases (0.11.0rc1 < 0.11.0 < 0.11.0.post1 < 0.11.1); then
    `nightly`; then any other label (a local tree's name), by name.
    """
    try:
        return (0, Version(label), "")
    except InvalidVersion:
        return (1 if label == NIGHTLY else 2, Version("0"), label)


def sort_releases(labels: Iterable[str], *, newest_first: bool = False) -> list[str]:
    return sorted(set(labels), key=release_key, reverse=newest_first)


def newest(labels: Iterable[str]) -> str | None:
    return max(labels, key=release_key, default=None)


@lru_cache(maxsize=64)
def _ordered(labels: tuple[str, ...]) -> tuple[str, ...]:
    """`labels` sorted, once per list: a build resolves pins against the index's few hundred
    releases thousands of times (a fix's pin, a cause's works_from)."""
    return tuple(sort_releases(labels))


def resolve_pin(pin: str, releases: Iterable[str]) -> str | None:
    """The release among `releases` a recipe pin names: `nightly` is the newest, a release is
    itself, and a prefix ("0.11", "0.11.") is the oldest release it starts; None when none is."""
    ordered = _ordered(tuple(releases))
    if pin == NIGHTLY:
        return ordered[-1] if ordered else None
    if pin in ordered:
        return pin
    return next((v for v in ordered if v.startswith(pin.rstrip(".") + ".")), None)


#: Statuses under which a command starts (a warning starts, with a fallback).
STARTS = frozenset({Status.OK, Status.WARNING})
#: Statuses under which no known check fails (unknown: a fact is missing, nothing is known to fail).
NOT_BLOCKED = frozenset({Status.OK, Status.WARNING, Status.UNKNOWN})
