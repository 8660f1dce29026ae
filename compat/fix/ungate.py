"""Ungate: a gate whose hidden commands all start at the recipe's pin is proposed for removal.

Gates are `features.<f>.strategies` (`isFeatureAllowedForStrategy`, command-synthesis.js
L375-378) and `features.<f>.modes.<m>.variants` (`isModeAllowedForVariant`, L362-365). A
gate added for a failure keeps hiding the commands after a pin bump or a vLLM release fixes
it, which is the mirror of publishing a broken command. So, per gate: the recipe is rendered
with the gate removed (the same synthesis replay), the commands that appear (or change: a
feature on by default joins the base command) are the hidden ones, and each is judged at its
pin. Where every hidden command starts, the gate is proposed for removal; where they start
for some strategies (variants) only, the list is proposed widened by those.

A proposal, never a fix: a gate may exist for reasons other than startup (performance, a
validated layout, a draft trained for one checkpoint), so `compat check` shows it as a
warning, its note quotes the recipe's own comment above the gate, and `compat fix --apply`
writes it only with `--only ungate`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from compat.fix import wording
from compat.fix.context import Context, Proposal
from compat.fix.edits import Edit, apply
from compat.recipes import Combination
from compat.recipes.features import feature_modes
from compat.recipes.offering import effective_compatible_strategies
from compat.recipes.repo import Recipe
from compat.verdict.releases import STARTS
from compat.vocab import release_key

KIND = "ungate"

#: Say it in every proposal: the engine judges startup, not why a maintainer gated.
CAVEAT = (
    "a gate may exist for reasons other than startup (performance, a validated layout, a "
    "draft trained for one checkpoint): check before applying"
)


@dataclass(frozen=True)
class Gate:
    """One gate of a recipe: the list at `path` and what it could list (`universe`)."""

    path: tuple[str, ...]
    feature: str
    mode: str
    listed: tuple[str, ...]
    universe: tuple[str, ...]  # the recipe's effective strategies, or its variants

    @property
    def dimension(self) -> str:
        return "strategy" if self.path[-1] == "strategies" else "variant"

    @property
    def where(self) -> str:
        return ".".join(self.path)

    @property
    def subject(self) -> str:
        return self.feature + (f":{self.mode}" if self.mode else "")


@dataclass
class Review:
    """An ungate proposal for one gate of one recipe."""

    recipe: str
    gate: Gate
    proposal: Proposal
    hidden: int  # commands the proposal un-hides, all judged to start
    release: str  # the pin they were judged at
    opened: tuple[str, ...]  # strategies (variants) the proposal opens
    closed: dict[str, str] = field(default_factory=dict)  # still hidden: value -> why


def gates(recipe: Recipe) -> list[Gate]:
    """The recipe's gates that hide something (a list narrower than what it could list)."""
    out: list[Gate] = []
    strategies = tuple(effective_compatible_strategies(recipe))
    variants = tuple(recipe.variants)
    for name, feat in recipe.features.items():
        if not isinstance(feat, dict):
            continue
        listed = feat.get("strategies")
        if isinstance(listed, list) and listed and set(strategies) - set(map(str, listed)):
            out.append(
                Gate(
                    ("features", name, "strategies"),
                    name,
                    "",
                    tuple(map(str, listed)),
                    strategies,
                )
            )
        for mode, spec in (feature_modes(feat) or {}).items():
            allow = spec.get("variants") if isinstance(spec, dict) else None
            if isinstance(allow, list) and allow and set(variants) - set(map(str, allow)):
                out.append(
                    Gate(
                        ("features", name, "modes", mode, "variants"),
                        name,
                        mode,
                        tuple(map(str, allow)),
                        variants,
                    )
                )
    return out


def _keys(c: Combination) -> Iterator[tuple[Any, ...]]:
    for p in c.profiles or (c.hardware,):
        yield (c.variant, c.strategy, c.feature, c.mode, c.platform, p, c.argvs)


def _offered(ctx: Context, recipe: Recipe) -> tuple[set[tuple[Any, ...]], list[Combination]]:
    """(keys of the commands the site emits, every combination) of `recipe`."""
    combos = ctx.combinations(recipe)
    return {k for c in combos if not c.gated for k in _keys(c)}, combos


def hidden_by(ctx: Context, recipe: Recipe, gate: Gate) -> list[Combination]:
    """The commands the site would emit without `gate` that it does not emit with it."""
    before, _ = _offered(ctx, recipe)
    opened = Recipe(recipe.path, apply(recipe.data, [Edit("delete", gate.path, None)]))
    _, after = _offered(ctx, opened)
    return [c for c in after if not c.gated and any(k not in before for k in _keys(c))]


def review(recipe: Recipe, gate: Gate, ctx: Context, fallback: str) -> Review | None:
    """The ungate proposal for one gate, or None when a hidden command does not start."""
    hidden = hidden_by(ctx, recipe, gate)
    if not hidden:
        return None  # hides nothing judged (a platform vllm-compat does not judge)
    by_value: dict[str, list[tuple[Combination, str]]] = {}
    for c in hidden:
        value = c.strategy if gate.dimension == "strategy" else c.variant
        by_value.setdefault(value, []).append((c, ctx.release_for(c.vllm_pin, fallback)))
    opened: list[str] = []
    closed: dict[str, str] = {}
    for value, rows in by_value.items():
        bad = next(
            (
                (c, r, o)
                for c, r in rows
                if (o := ctx.pool.outcome(r, c)) is None or o.status not in STARTS
            ),
            None,
        )
        if bad is None:
            opened.append(value)
        else:
            c, r, o = bad
            closed[value] = (
                f"{o.status if o else 'not judged'} at vLLM {r} ({c.feature}:{c.mode or '-'}, variant {c.variant})"
            )
    if not opened:
        return None
    rows = [(c, r) for v in opened for c, r in by_value[v]]
    pin = max((r for _, r in rows), key=release_key)
    since = _since(ctx, rows, pin)
    return Review(
        recipe.path,
        gate,
        _proposal(gate, opened, closed, len(rows), pin, since, _maintainer_note(ctx, recipe, gate)),
        len(rows),
        pin,
        tuple(opened),
        closed,
    )


def _since(ctx: Context, rows: list[tuple[Combination, str]], pin: str) -> str:
    """The first release where every un-hidden command starts: bisected over the releases up to
    the pin (the whole index when it is reachable; scanned once, cached), the release that fixed
    the cause. The pin itself when nothing earlier can be judged."""
    combos = [c for c, _ in rows]
    return ctx.pool.first_working("0", combos, until=pin) or pin


def _proposal(
    gate: Gate,
    opened: list[str],
    closed: dict[str, str],
    n: int,
    pin: str,
    since: str,
    said: str,
) -> Proposal:
    from_ = f"first release: {since}"
    if not closed:
        edit = Edit(
            "delete",
            gate.path,
            None,
            comment=wording.comment(
                [
                    f"gate {gate.where} removed: {gate.subject} starts everywhere at vLLM {pin} ({from_})",
                    f"gate removed: {gate.subject} starts everywhere at vLLM {pin} ({from_})",
                    f"gate removed: it starts everywhere at vLLM {pin}",
                ]
            ),
        )
        summary = f"remove {gate.where}: the {n} command(s) it hides start at vLLM {pin}"
    else:
        keep = [v for v in gate.universe if v in gate.listed or v in opened]
        names = ", ".join(opened)
        edit = Edit(
            "set",
            gate.path,
            keep,
            comment=wording.comment(
                [
                    f"{names} added: {gate.subject} starts there at vLLM {pin} ({from_})",
                    f"{len(opened)} {gate.dimension}(s) added: {gate.subject} starts there at vLLM {pin}",
                ]
            ),
        )
        summary = (
            f"add {names} to {gate.where}: the {n} command(s) it hides there start at vLLM {pin}"
        )
    summary += f" (from {since})"
    notes = [CAVEAT]
    if closed:
        notes.append(
            "still hidden: " + "; ".join(f"{v}: {why}" for v, why in list(closed.items())[:4])
        )
    if said:
        notes.append(f"the recipe says: {said}")
    return Proposal(KIND, (edit,), summary, works_from=since, note="; ".join(notes))


def _maintainer_note(ctx: Context, recipe: Recipe, gate: Gate) -> str:
    """The comment lines right above the gate's key in the recipe file (why it was gated)."""
    from compat.fix.locate import key_lines

    try:
        text = (ctx.repo.root / recipe.path).read_text(encoding="utf-8")
    except OSError:
        return ""
    line = key_lines(text).get(gate.path)
    if not line:
        return ""
    lines = text.splitlines()
    said: list[str] = []
    i = line - 2
    while i >= 0 and lines[i].strip().startswith("#"):
        said.insert(0, lines[i].strip().lstrip("#").strip())
        i -= 1
    return " ".join(said)


def review_recipe(recipe: Recipe, ctx: Context, fallback: str) -> list[Review]:
    """Ungate proposals for every gate of one recipe judged at its pin."""
    return [r for g in gates(recipe) if (r := review(recipe, g, ctx, fallback)) is not None]
