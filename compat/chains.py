"""How a stored reason chain is shown: its steps, each follower node's repeat said once.

The nodes of one deployment share their model checks, so a 4-node command's chain holds each
finding four times (and differs from its 2-node twin only there). Every reader that shows a
chain (the site, `compat explain`) shows it through here.
"""

from __future__ import annotations

import functools
import json
import re

# A follower node's role, 'worker 2' or 'prefill worker 1' (compat.recipes.synthesis.role_name),
# and a chain step about one: "[blocked] worker 2: ...".
_FOLLOWER = r"(?:(\w+) )?worker \d+"
FOLLOWER_ROLE = re.compile(f"^{_FOLLOWER}$")
_NODE_STEP = re.compile(rf"^(\[\w+\] )({_FOLLOWER}): (.*)$", re.DOTALL)


def shown_steps(raw: str) -> list[str]:
    """The steps of a stored chain (JSON list), follower repeats said once."""
    return list(_shown(raw))


@functools.lru_cache(maxsize=4096)
def _shown(raw: str) -> tuple[str, ...]:
    try:
        steps = json.loads(raw or "[]")
    except json.JSONDecodeError:
        return (raw,)
    if isinstance(steps, list):
        return tuple(without_repeated_nodes([str(s) for s in steps if str(s).strip()]))
    return (str(steps),) if steps else ()


def without_repeated_nodes(steps: list[str]) -> list[str]:
    """A follower node's step that its lead node (the head, or node 0 of its PD pool) already
    shows, said once. A finding only a follower has (its own node flags) stays."""
    shown = set(steps)
    kept = []
    for step in steps:
        m = _NODE_STEP.match(step)
        if m:
            status, _role, pool, rest = m.groups()
            lead = f"{status}{pool}: {rest}" if pool else f"{status}{rest}"
            if lead in shown:
                continue
        kept.append(step)
    return kept
