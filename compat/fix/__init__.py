"""The fix stage: for each (recipe, cause) the smallest recipe edit today's synthesizer honours.

Fixers are tried in order of preference, one module each, behind `FIXERS`:

    gate            (a) features.<f>.strategies, also for features on by default
    mode_variants   (b) features.<f>.modes.<m>.variants, where the failure follows the variant
    pin_bump        (c) min_vllm_version (recipe or variant), to the first release on the index
                        where the blocked commands start and nothing that starts at the old pin breaks
    spelling        (d) the flag spelling the pinned release knows, when exactly one candidate exists
    strategy        (e) drop a strategy from compatible_strategies when no release on the index
                        starts its blocked commands and nothing on it starts
    (f) otherwise no automatic fix, with the reason each fixer gave

Besides fixes of blocked commands, `ungate` proposes removing (or widening) a gate whose
hidden commands all start at the recipe's pin. It is a proposal, not a fix: `compat check`
shows it as a warning and `compat fix --apply` writes it only when asked (`--only ungate`),
since a gate may exist for reasons other than startup.

Fixers read the verdict rows and reuse the engine's own predicates (`STARTS`, the
engine's flag check); they never restate a rule. Every plan is checked by judging the
edited recipe again through the same synthesis replay and engine (`rejudge`), and a
fix that does not make its commands start, or that takes away one that works, is not
kept. `writer` is the only module that writes recipe files.
"""

from __future__ import annotations

from compat.fix import gate, mode_variants, pin_bump, spelling, strategy, ungate

#: Fix kinds in order of preference (the order `plan` tries them in).
FIXERS = (gate, mode_variants, pin_bump, spelling, strategy, ungate)
KINDS = tuple(f.KIND for f in FIXERS)
#: Kinds `--apply` writes only when `--only` names them: proposals, not fixes of blocked commands.
OPT_IN = (ungate.KIND,)

__all__ = ["FIXERS", "KINDS", "OPT_IN"]
