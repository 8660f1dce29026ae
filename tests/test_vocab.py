"""The two closed orders (compat.vocab): status severity and release order, at their edges."""

from __future__ import annotations

import pytest

from compat.vocab import Status, newest, release_key, sort_releases, status_rank, worst


@pytest.mark.parametrize("older,newer", [
    ("0.9.2", "0.10.0"),            # numeric, not lexical
    ("0.10.1", "0.10.1.1"),         # a fourth component
    ("0.11.0rc1", "0.11.0"),        # a pre-release sorts before its final release
    ("0.11.0.dev0", "0.11.0rc1"),   # dev before rc
    ("0.11.0", "0.11.0.post1"),     # a post-release after it
    ("0.11.0.post1", "0.11.1"),
    ("0.33.0", "nightly"),          # nightly is newer than every release
    ("nightly", "my-local-tree"),   # other labels (local trees) last, by name
])
def test_release_order(older: str, newer: str) -> None:
    assert release_key(older) < release_key(newer)
    assert sort_releases([newer, older]) == [older, newer]
    assert newest([older, newer]) == newer


def test_sort_releases_dedupes_and_reverses() -> None:
    assert sort_releases(["0.23.0", "0.23.0", "0.4.2"], newest_first=True) == ["0.23.0", "0.4.2"]
    assert newest([]) is None


def test_status_order() -> None:
    assert [s.value for s in sorted(Status, key=lambda s: s.rank)] == ["ok", "warning", "unknown", "blocked"]
    assert worst(["ok", "warning"]) == "warning"
    assert worst(["warning", "unknown"]) == "unknown"  # a missing fact may hide a failure
    assert worst(["unknown", "blocked", "ok"]) == "blocked"
    assert worst([]) == "ok"
    assert status_rank("blocked") == 3
    with pytest.raises(ValueError):
        status_rank("fine")


def test_every_module_uses_the_one_order() -> None:
    """No stage keeps its own rank table or version parser (they disagreed before)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "compat"
    offenders = []
    for path in root.rglob("*.py"):
        text = path.read_text()
        if path.name == "vocab.py":
            continue
        if re.search(r'\{\s*"ok"\s*:\s*0', text) or re.search(r"def _?v(ersion_)?key\(", text):
            offenders.append(path.name)
    assert not offenders, offenders
