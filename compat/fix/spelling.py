"""(d) The spelling the pinned release uses, where exactly one candidate exists.

For a flag the release does not know (the engine's own `known_flag` predicate), the
candidates are the release's flags that `difflib` finds close (ratio >= 0.8) and that
the command does not already pass (that would give it twice); with
exactly one, the recipe's args item is rewritten to it (`--tool-call-parser-plugin` ->
`--tool-parser-plugin`). Two or more candidates are a guess, and none is no fix. A known
flag and its value written as one argv item (`"--max-model-len auto"`, which argparse
reads as a positional) is split into the two items vLLM parses. Only the recipe file is
edited: the shared strategy files are left to their owners.
"""

from __future__ import annotations

import difflib
from typing import Any

from compat.fix import wording
from compat.fix.context import Case, Context, Proposal, Row
from compat.fix.edits import Edit
from compat.recipes import parsed_serve_args
from compat.recipes.synthesis import STRATEGY
from compat.verdict.engine import known_flag

KIND = "spelling"
CUTOFF = 0.8


def propose(case: Case, cause: dict[str, Any], blocked: list[Row], ctx: Context) -> Proposal | str:
    element = cause["carrier"] if cause["kind"] == "pin" else cause["element"]
    if not element or element == STRATEGY or cause["kind"] in ("fact", "omni", "recipe"):
        return "not args of the recipe file"
    judge = ctx.pool.judge_at(blocked[0].release)
    if judge is None:
        return f"vLLM {blocked[0].release} cannot be analysed"
    k = judge.k
    renames: dict[str, str] = {}
    for r in blocked:
        for _role, argv in r.combo.argvs:
            tokens = parsed_serve_args(tuple(argv)).tokens
            given = {t.flag for t in tokens}
            for t in tokens:
                if known_flag(k, t) is not None or t.flag in renames or " " in t.raw:
                    continue  # (an item holding a space is split instead, below)
                # a flag the command already passes is no respelling: it would be given twice
                close = [
                    f
                    for f in difflib.get_close_matches(t.flag, list(k.flags), n=4, cutoff=CUTOFF)
                    if f not in given
                ][:2]
                if len(close) == 1:
                    renames[t.flag] = close[0]
                elif len(close) > 1:
                    return f"{t.flag}: more than one close spelling in vLLM {k.version} ({', '.join(close)})"
    edits = _splits(case, element, blocked, k)
    if not renames and not edits:
        return "no unknown flag with a single close spelling"
    for old, new in renames.items():
        for path, item in _items(case.recipe.data, element, old):
            value = new + item[len(old) :]  # keeps '=value'
            edits.append(
                Edit(
                    "replace_item",
                    path,
                    value,
                    old=item,
                    comment=wording.comment(f"vLLM {k.version} has no {old}; its flag is {new}"),
                )
            )
    if not edits:
        return f"{', '.join(renames)} not found in {element}'s args"
    what = [f"{a} -> {b}" for a, b in renames.items()] + [
        f"split {e.old!r}" for e in edits if isinstance(e.value, list)
    ]
    return Proposal(KIND, tuple(edits), "respell " + ", ".join(what))


def _splits(case: Case, element: str, blocked: list[Row], k: Any) -> list[Edit]:
    """One argv item holding a known flag and its value ('--max-model-len auto'): split it in two.

    argparse reads such an item as a positional; the two-item spelling is what vLLM parses.
    """
    out = []
    seen: set[str] = set()
    for r in blocked:
        for _role, argv in r.combo.argvs:
            for item in argv:
                head, _, rest = item.partition(" ")
                if not rest or item in seen or not head.startswith("--") or head not in k.flags:
                    continue
                seen.add(item)
                for path, found in _items(case.recipe.data, element, item):
                    if found == item:
                        out.append(
                            Edit(
                                "replace_item",
                                path,
                                [head, rest.strip()],
                                old=item,
                                comment=wording.comment(
                                    [
                                        (
                                            f"{item!r} is one argv item; vLLM {k.version} "
                                            "parses the flag and its value as two"
                                        ),
                                        (
                                            f"{head} and its value are one argv item; vLLM "
                                            f"{k.version} parses them as two"
                                        ),
                                    ]
                                ),
                            )
                        )
    return out


def _items(data: Any, element: str, flag: str) -> list[tuple[tuple[str, ...], str]]:
    """(path of an args list, item) for items under `element` that spell `flag` (or `flag=...`)."""
    node: Any = data
    base = tuple(element.split("."))
    for key in base:
        node = node.get(key) if isinstance(node, dict) else None
    found: list[tuple[tuple[str, ...], str]] = []

    def walk(n: Any, path: tuple[str, ...]) -> None:
        if isinstance(n, dict):
            for k, v in n.items():
                walk(v, (*path, str(k)))
        elif isinstance(n, list):
            for item in n:
                if isinstance(item, str) and (item == flag or item.startswith(flag + "=")):
                    found.append((path, item))

    walk(node, base)
    return found
