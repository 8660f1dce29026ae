"""The one line a fix writes above the key it edits: cause, release and evidence, <= 120 characters.

A recipe file is read by people, so the comment is one readable line, never a chain cut off
with an ellipsis: the fixer gives its phrasing from the most to the least detailed, and the
first that fits with the evidence (the vLLM file:line, then its file name, then none) is
written. The full chain, every finding with its file:line, goes into the commit message and
the PR body (`compat.fix.commit`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

#: The longest comment line a fix writes (the `# ` and indentation aside).
LIMIT = 120
PREFIX = "vllm-compat: "
_MORE = re.compile(r" \(\+(\d+) more\)$")


def releases_text(releases: Sequence[str]) -> str:
    """'0.23.0', '0.23.0, 0.24.0', or '0.23.0 to 0.33.0' for three or more, in the given order."""
    rs = list(dict.fromkeys(r for r in releases if r))
    if len(rs) <= 2:
        return ", ".join(rs)
    return f"{rs[0]} to {rs[-1]}"


def first_evidence(evidence: Sequence[str] | str) -> str:
    """The first file:line of a verdict's evidence (a list, or the table's '; '-joined text)."""
    items = evidence.split("; ") if isinstance(evidence, str) else list(evidence)
    return next((e.strip() for e in items if e and e.strip()), "")


def _short_evidence(evidence: str) -> str:
    """'vllm/config/speculative.py:308' -> 'speculative.py:308' (the file name keeps the line)."""
    head, _, rest = evidence.partition(" ")
    return head.rsplit("/", 1)[-1] + (f" {rest}" if rest else "")


def comment(phrasings: Sequence[str] | str, evidence: str = "") -> str:
    """`vllm-compat: <phrasing> (<evidence>)`, at most LIMIT characters.

    `phrasings` go from the most to the least detailed; each is tried with the evidence as
    given, then with its file name only, then without. When none fits, the last one is cut
    at a word boundary (a fixer's last phrasing is short, so this is a safety net).
    """
    options = [phrasings] if isinstance(phrasings, str) else list(phrasings)
    options = [" ".join(p.split()) for p in options if p]
    evidence = " ".join(evidence.split())
    shapes = [evidence, _short_evidence(evidence), ""] if evidence else [""]
    for phrase in options:
        for ev in shapes:
            line = PREFIX + phrase + (f" ({ev})" if ev else "")
            if len(line) <= LIMIT:
                return line
    line = PREFIX + (options[-1] if options else "")
    return line[:LIMIT].rsplit(" ", 1)[0] if len(line) > LIMIT else line


def joined(a: str, b: str) -> str:
    """Two fixes' comments on one edited key (merged allowlists): both when they fit, else the
    first with a count of the others."""
    if b in a:
        return a
    both = f"{a}; also {b.removeprefix(PREFIX)}"
    if len(both) <= LIMIT and not _MORE.search(a):
        return both
    m = _MORE.search(a)
    base, n = (a[: m.start()], int(m.group(1)) + 1) if m else (a, 1)
    counted = f"{base} (+{n} more)"
    if len(counted) <= LIMIT:
        return counted
    return f"{base[: LIMIT - len(f' (+{n} more)')].rsplit(' ', 1)[0]} (+{n} more)"
