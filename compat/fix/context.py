"""What a fixer sees: one recipe's judged rows, its causes, and the means to judge again."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from compat.recipes import Combination
from compat.recipes.repo import Recipe, RecipesRepo
from compat.verdict.engine import Outcome
from compat.verdict.releases import STARTS, ReleasePool


@dataclass
class Row:
    """One judged verdict of the recipe: the combination, its release, outcome and causes."""

    combo: Combination
    release: str
    outcome: Outcome
    cause_ids: tuple[int, ...] = ()
    cause_keys: dict[int, tuple[str, ...]] = field(default_factory=dict)  # cause id -> finding keys

    @property
    def starts(self) -> bool:
        return self.outcome.status in STARTS

    @property
    def blocked(self) -> bool:
        return self.outcome.status == "blocked" and not self.combo.gated

    def uses(self, feature: str, mode: str | None = None) -> bool:
        """Is `feature` on in this command (as its own row, or on by default), in `mode` if given?"""
        c = self.combo
        on = c.feature == feature or feature in c.features
        return on and (mode is None or dict(c.picks).get(feature) == mode)


@dataclass(frozen=True)
class Proposal:
    """A fixer's answer for one cause: the edits and one line saying what they do."""

    kind: str
    edits: tuple[Any, ...]
    summary: str
    works_from: str = ""  # the target release of a pin bump
    note: str = ""  # anything a maintainer should check by hand (e.g. a custom docker tag)


@dataclass
class Case:
    """One recipe's findings, as the fixers see them."""

    path: str
    recipe: Recipe
    rows: list[Row]
    causes: dict[int, dict[str, Any]]  # cause id -> cause row (compat.verdict.batch.CauseBook)
    pinned: bool  # judged at its own pin (pinned mode), so min_vllm_version edits mean something
    pin_release: dict[str, str] = field(default_factory=dict)  # pin string -> release on the index

    def blocked_by(self, cause_id: int) -> list[Row]:
        return [r for r in self.rows if r.blocked and cause_id in r.cause_ids]

    def ungated(self, rows: Iterable[Row] | None = None) -> list[Row]:
        return [r for r in (self.rows if rows is None else rows) if not r.combo.gated]


@dataclass
class Context:
    """Shared by every recipe: the checkout, the release pool and the pin resolver."""

    repo: RecipesRepo
    pool: ReleasePool
    resolve_pin: Any  # (pin string) -> release label or None
    #: combinations by (recipe path, repr of its data): see `combinations`
    enumerated: dict[tuple[str, str], list[Combination]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def release_for(self, pin: str, fallback: str) -> str:
        return self.resolve_pin(pin) or fallback

    def know(self, recipe: Recipe, combos: list[Combination]) -> None:
        """`recipe`'s combinations, enumerated already (the build judged them)."""
        self.enumerated[(recipe.path, repr(recipe.data))] = combos

    def combinations(self, recipe: Recipe) -> list[Combination]:
        """`recipe`'s combinations in this checkout (as it is, or an edited copy), enumerated
        once per content: planning judges one edited copy in several steps (judged_case, then
        rejudge), and each gate review enumerates the recipe as it is. Read, never changed."""
        from dataclasses import replace

        from compat.recipes import enumerate_recipe

        key = (recipe.path, repr(recipe.data))
        hit = self.enumerated.get(key)
        if hit is None:
            repo = replace(self.repo, recipes={**self.repo.recipes, recipe.path: recipe})
            hit = self.enumerated[key] = enumerate_recipe(repo, recipe)
        return hit
