"""The cause of a non-ok verdict: the recipe element whose arguments make the command fail.

Found by judging the combination again with one element removed, through the same
synthesis replay and the same engine, never by matching message strings: an element
explains a decisive finding (one at the verdict's own status) when the finding is gone
from the re-judged chain. Elements are tried most specific first, so a feature that is
on by default is blamed on itself, not on the base command:

    features.<f> (the row's feature, then features on by default)
    variants.<v> (its extra_args and its model id)
    hardware overrides (recipe, variant or strategy level)
    strategy_overrides.<s>
    strategy (the strategy file's args and parallel flags)
    model.base_args

Cause kinds: `feature` (an element of that kind explains it), `pin` (no feature does,
but the same command starts at a later release: the flag, parser, method or value exists
only later; the element that carries it is kept as `carrier`), the element kinds
`variant`, `hardware`, `strategy`, `base_args`, `recipe` (a malformed recipe field),
`omni` (out of scope) and `fact` (nothing in the recipe explains it: a fact is missing).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from compat.recipes import Combination
from compat.recipes.repo import RecipesRepo
from compat.recipes.synthesis import STRATEGY, Synthesizer
from compat.verdict.engine import Outcome

Render = Callable[[Combination, frozenset[str]], Combination | None]


class Judges(Protocol):
    """What cause analysis judges renders with: a release's Judge, or one memoised in the
    release pool (compat.verdict.releases.Memoised)."""

    def judge(self, c: Combination) -> Outcome: ...


@dataclass(frozen=True)
class Cause:
    """What makes one verdict non-ok, in recipe terms."""

    kind: str  # feature | pin | variant | hardware | strategy | base_args | recipe | omni | fact
    element: str  # 'features.spec_decoding', 'model.base_args', 'strategy', 'variants.fp8', ...
    mode: str = ""  # the feature's mode, for feature causes
    carrier: str = ""  # for pin causes: the element carrying the args a later release accepts
    finding: str = ""  # the decisive finding (chain step, without its status) it explains
    finding_key: str = ""  # that finding's identity across releases (engine.finding_key)

    @property
    def label(self) -> str:
        if self.kind == "feature":
            return self.element.removeprefix("features.") + (f":{self.mode}" if self.mode else "")
        if self.kind == "pin":
            return "the pinned release" + (
                f" ({_element_label(self.carrier)} needs a later one)" if self.carrier else ""
            )
        if self.kind == "recipe":
            return f"recipe field {self.element}" if self.element else "a malformed argument"
        if self.kind == "fact":
            return "a missing fact"
        if self.kind == "omni":
            return "served by vLLM-Omni"
        return _element_label(self.element)

    @property
    def key(self) -> tuple[str, str, str]:
        """Identity within a recipe: rows with the same key share one cause (and one fix)."""
        return (self.kind, self.element if self.kind != "pin" else self.carrier, self.mode)


def _element_label(element: str) -> str:
    if element == STRATEGY:
        return "the strategy"
    if element.startswith("features."):
        return "feature " + element.removeprefix("features.")
    if element.startswith("variants.") and element.count(".") == 1:
        return "variant " + element.removeprefix("variants.")
    return element


def decisive(outcome: Outcome) -> list[tuple[str, str]]:
    """(step, finding key) of the chain steps at the verdict's own status, without the '[status] ' tag."""
    tag = f"[{outcome.status}] "
    return [
        (step[len(tag) :], key)
        for step, (status, key) in zip(outcome.chain, outcome.keys, strict=True)
        if status == outcome.status
    ]


def has(outcome: Outcome, status: str, key: str) -> bool:
    """Does `outcome` still hold finding `key` at `status`?"""
    return (status, key) in outcome.keys


def candidates(c: Combination) -> list[str]:
    """Elements to try removing, most specific first (see the module docstring)."""
    sources = list(c.sources)
    out: list[str] = []
    if c.feature:
        out.append(f"features.{c.feature}")
    out += [f"features.{f}" for f in c.features if f != c.feature]
    out += [s for s in sources if s.startswith("variants.") and "hardware_overrides" not in s]
    variant = f"variants.{c.variant}"
    if variant not in out:
        out.append(variant)  # its model id, even without args
    out += [s for s in sources if "hardware_overrides" in s]
    out += [
        s for s in sources if s.startswith("strategy_overrides.") and "hardware_overrides" not in s
    ]
    out += [STRATEGY, "model.base_args"]
    return list(dict.fromkeys(out))


def kind_of(element: str) -> str:
    if element.startswith("features."):
        return "feature"
    if "hardware_overrides" in element:
        return "hardware"
    if element.startswith("variants."):
        return "variant"
    if element.startswith("strategy_overrides.") or element == STRATEGY:
        return "strategy"
    return "base_args"


def renderer(repo: RecipesRepo) -> Render:
    """Render a combination again with some elements omitted (None: it cannot be rendered)."""
    from compat.recipes.requirements import default_requirements

    requirements = default_requirements()
    memo: dict[tuple, Combination | None] = {}
    # One synthesizer per selection and omission, as enumeration keeps one per selection: its
    # feature-independent steps are assembled once, and any feature state renders from it.
    synthesizers: dict[tuple, Synthesizer] = {}

    def render(c: Combination, omit: frozenset[str]) -> Combination | None:
        key = (
            c.recipe,
            c.variant,
            c.strategy,
            c.profiles[:1],
            c.features,
            c.picks,
            c.gated,
            c.sizing,
            omit,
        )
        if key in memo:
            return memo[key]
        recipe = repo.recipes.get(c.recipe)
        strategy = repo.strategies.get(c.strategy)
        profile = repo.hardware.get(c.profiles[0]) if c.profiles else None
        out = None
        if recipe is not None and strategy is not None and profile is not None and not c.omni:
            selection = (c.recipe, c.variant, c.strategy, c.profiles[:1], c.sizing, omit)
            syn = synthesizers.get(selection)
            if syn is None:
                syn = synthesizers[selection] = Synthesizer(
                    recipe,
                    c.variant,
                    strategy,
                    profile,
                    requirements=requirements,
                    omit=omit,
                    sizing=c.sizing,
                )  # the sizes the row was rendered at (its source's)
            features = [f for f in c.features if f"features.{f}" not in omit]
            result = syn.render(features, dict(c.picks), ungated=(c.feature,) if c.gated else ())
            out = replace(
                c, argvs=result.argvs, model_id=syn.model, problems=(), sources=result.sources
            )
        memo[key] = out
        return out

    return render


def causes(
    c: Combination,
    outcome: Outcome,
    judge: Judges,
    render: Render,
    gone_later: Callable[[str], bool],
) -> list[Cause]:
    """The causes of a non-ok verdict: one per decisive finding, in chain order.

    `gone_later(key)` says whether a later release no longer has finding `key` for the same
    command (asked only when no feature explains it, since it may scan releases).
    """
    if outcome.status == "ok":
        return []
    if c.omni:
        return [Cause("omni", "meta.tasks", finding=outcome.reason, finding_key="omni")]
    found: list[Cause] = []
    # The combination judged without each element, shared by its decisive findings (every
    # node of a deployment repeats the head's findings under its own role).
    without: dict[str, Outcome] = {}
    for step, key in decisive(outcome):
        if step.startswith("recipe problem: "):
            found.append(Cause("recipe", _problem_field(step), finding=step, finding_key=key))
            continue
        explained = None
        for element in candidates(c):
            again = without.get(element)
            if again is None:
                alt = render(c, frozenset({element}))
                if alt is None:
                    continue
                again = without[element] = judge.judge(alt)
            if not has(again, outcome.status, key) and not _worse(again, outcome):
                explained = element
                break
        if explained is not None and kind_of(explained) == "feature":
            mode = dict(c.picks).get(explained.removeprefix("features."), "")
            found.append(Cause("feature", explained, mode=mode, finding=step, finding_key=key))
        elif outcome.status == "blocked" and gone_later(key):
            found.append(
                Cause(
                    "pin",
                    "model.min_vllm_version",
                    carrier=explained or "",
                    finding=step,
                    finding_key=key,
                )
            )
        elif explained is not None:
            found.append(Cause(kind_of(explained), explained, finding=step, finding_key=key))
        else:
            found.append(Cause("fact", "", finding=step, finding_key=key))
    return found


def _worse(new: Outcome, old: Outcome) -> bool:
    from compat.vocab import status_rank

    return status_rank(new.status) > status_rank(old.status)


_FIELD = re.compile(r"^[A-Za-z_][\w.\[\]-]*$")


def _problem_field(step: str) -> str:
    """The recipe field a problem names ("recipe problem: models/x.yaml: variants.a.extra_args: ...")."""
    parts = step.removeprefix("recipe problem: ").split(": ")
    field = parts[1] if len(parts) > 2 and parts[0].endswith(".yaml") else ""
    return field if _FIELD.match(field) else ""
