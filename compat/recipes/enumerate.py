"""Every command line the recipes site can synthesize, one row per thing a verdict judges.

Rows are (recipe, variant, strategy, feature, mode) per platform, with the
hardware profile kept only where it changes the command. For each variant and
each profile the site offers it on (`hardware.offered_hardware`), each strategy
offered there (`offering.offered_strategies`) renders:

* the base row: default feature states (not opt-in, not opt-in on this profile,
  or forced on by the variant's `default_modes`), feature '' and mode '';
* one row per feature and, for a modal feature, per mode available on this
  variant and profile: the defaults plus that feature on with that mode
  (`text_only` and `encoder_parallel` exclude each other).

A feature whose `strategies` allowlist excludes the strategy is dropped by the
site; its row is marked `gated` and rendered as if the gate were absent, so a
verdict can say whether the gate is still needed. Base rows honour gates.

Simplifications (see `synthesis`): multi-node strategies render the head node
at max(2, floor) nodes; pd_cluster renders one node per role, each role in its
default pool mode (`strategy_overrides.pd_cluster.<role>.parallelism`, else the
first of the recipe's PD pool modes). Omni recipes (served by vLLM-Omni) get one
base row per variant, with strategy '' when they list none.

Hardware: a row has hardware '' when every profile offering it renders the same
argvs and docker pin (`profiles` lists them); otherwise there is one row per
profile. Profiles of brands other than NVIDIA (cuda) and AMD (rocm) are not
judged; they are counted in `Enumeration.skipped`. A variant is not offered on
non-scalable hardware it does not fit (the builder disables it there), so 31
(recipe, variant, profile, strategy) renders of the snapshot that the research
notes count are left out on purpose.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from compat.recipes.argv import parse_serve_args
from compat.recipes.features import (
    allowed_for_strategy,
    available_modes,
    default_features,
    feature_modes,
    with_feature,
)
from compat.recipes.hardware import docker_image, docker_pin, offered_hardware
from compat.recipes.offering import effective_compatible_strategies, offered_strategies
from compat.recipes.repo import HardwareProfile, Problem, Recipe, RecipesRepo
from compat.recipes.requirements import StrategyRequirements, default_requirements
from compat.recipes.synthesis import Argvs, Synthesizer, served_model, synthesize_omni


@dataclass(frozen=True)
class Combination:
    """One synthesizable command (or PD command pair) a verdict is computed for."""

    recipe: str  # path relative to the recipes root, e.g. "models/zai-org/GLM-5.2.yaml"
    model_id: str  # served model (variant.model_id or model.model_id)
    variant: str
    strategy: str
    feature: str  # '' = the base command (default feature states)
    mode: str  # '' when the feature has no modes
    hardware: str  # taxonomy profile id, or '' when every offered profile gives the same argv
    platform: str  # 'cuda' (NVIDIA) or 'rocm' (AMD)
    argvs: Argvs  # ((role, argv), ...): role '' (head node) or 'prefill' / 'decode'
    vllm_pin: str  # variant.min_vllm_version > model.min_vllm_version ('nightly' verbatim)
    docker_pin: str | None  # release named by the docker image tag ('0.23.0', 'nightly') or None
    gated: bool  # the feature's `strategies` allowlist excludes this strategy (argvs as if allowed)
    omni: bool  # meta.tasks contains 'omni': served by vLLM-Omni
    problems: tuple[str, ...]  # per-combination problems (bad args, malformed JSON, ...)
    profiles: tuple[str, ...] = ()  # the offered profiles this row stands for
    nodes: int = 1  # nodes rendered (per role for pd_cluster)
    # How the row was rendered, so a cause can be found by rendering it again without one
    # element (compat.verdict.cause): the features on, in emission order; the mode picks;
    # and the recipe elements that contributed args (synthesis.element_of).
    features: tuple[str, ...] = ()
    picks: tuple[tuple[str, str], ...] = ()  # (feature, mode) of every modal feature on
    sources: tuple[str, ...] = ()


@dataclass
class Enumeration:
    """All combinations plus what was left out and why."""

    combinations: list[Combination]
    skipped: Counter[str] = field(
        default_factory=Counter
    )  # brand -> (recipe, variant, profile) renders

    def summary(self) -> dict[str, Any]:
        rows = self.combinations
        return {
            "total": len(rows),
            "by_platform": dict(Counter(c.platform for c in rows)),
            "omni": sum(c.omni for c in rows),
            "gated": sum(c.gated for c in rows),
            "hardware_collapsed": sum(c.hardware == "" for c in rows),
            "per_profile": sum(c.hardware != "" for c in rows),
            "recipes": len({c.recipe for c in rows}),
            "skipped_non_cuda_rocm_renders": dict(self.skipped),
        }


@dataclass(frozen=True)
class _Rendered:
    profile: str
    argvs: Argvs
    docker_pin: str | None
    problems: tuple[str, ...]
    nodes: int
    features: tuple[str, ...] = ()
    picks: tuple[tuple[str, str], ...] = ()
    sources: tuple[str, ...] = ()


@lru_cache(maxsize=1 << 16)
def _argv_errors(argv: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(parse_serve_args(argv).errors)


def _pin(recipe: Recipe, variant: dict[str, Any]) -> str:
    for source in (variant.get("min_vllm_version"), recipe.model.get("min_vllm_version")):
        if isinstance(source, (str, int, float)) and not isinstance(source, bool) and str(source):
            return str(source)
    return ""


def _feature_rows(
    recipe: Recipe, variant_key: str, variant: dict[str, Any], profile: HardwareProfile
) -> Iterator[tuple[str, str, list[str], dict[str, str]]]:
    """(feature, mode, enabled features, mode picks) for the base row and each feature row."""
    base = default_features(recipe, variant, profile)
    yield "", "", base, {}
    for key, feature in recipe.features.items():
        if not isinstance(feature, dict):
            continue
        enabled = with_feature(recipe, base, key)
        if feature_modes(feature) is None:
            yield key, "", enabled, {}
        else:
            for mode in available_modes(feature, variant_key, profile):
                yield key, mode, enabled, {key: mode}


def _problems_for(
    recipe_problems: list[Problem], variant_key: str, feature: str
) -> tuple[str, ...]:
    """Load-time problems that belong to a row: its variant's and its feature's."""
    prefixes = [f"variants.{variant_key}."]
    if feature:
        prefixes.append(f"features.{feature}.")
    return tuple(
        p.line()
        for p in recipe_problems
        if any(p.field.startswith(x) or p.field == x[:-1] for x in prefixes)
    )


def _rows_from_groups(
    recipe: Recipe,
    variant_key: str,
    variant: dict[str, Any],
    groups: dict[tuple[str, str, str, str, bool], list[_Rendered]],
    omni: bool,
    recipe_problems: list[Problem],
) -> Iterator[Combination]:
    model_id = served_model(recipe, variant_key)
    pin = _pin(recipe, variant)
    for (strategy, feature, mode, platform, gated), rendered in groups.items():
        distinct = {(r.argvs, r.docker_pin) for r in rendered}
        collapse = len(distinct) == 1
        chosen = rendered[:1] if collapse else rendered
        loaded = _problems_for(recipe_problems, variant_key, feature)
        shared = tuple(p for r in rendered for p in r.problems)  # a collapsed row speaks for all
        for r in chosen:
            yield Combination(
                recipe=recipe.path,
                model_id=model_id,
                variant=variant_key,
                strategy=strategy,
                feature=feature,
                mode=mode,
                hardware="" if collapse else r.profile,
                platform=platform,
                argvs=r.argvs,
                vllm_pin=pin,
                docker_pin=r.docker_pin,
                gated=gated,
                omni=omni,
                problems=tuple(dict.fromkeys(loaded + (shared if collapse else r.problems))),
                profiles=tuple(x.profile for x in rendered) if collapse else (r.profile,),
                nodes=r.nodes,
                features=r.features,
                picks=r.picks,
                sources=r.sources,
            )


def _argv_problems(argvs: Argvs) -> tuple[str, ...]:
    out: list[str] = []
    for role, argv in argvs:
        prefix = f"{role}: " if role else ""
        out.extend(f"{prefix}{e}" for e in _argv_errors(argv))
    return tuple(out)


def _enumerate_recipe(
    repo: RecipesRepo,
    recipe: Recipe,
    requirements: StrategyRequirements,
    skipped: Counter[str],
    recipe_problems: list[Problem],
) -> Iterator[Combination]:
    for variant_key, variant in recipe.variants.items():
        groups: dict[tuple[str, str, str, str, bool], list[_Rendered]] = {}
        for profile in offered_hardware(recipe, variant, repo.hardware):
            platform = profile.platform
            if platform is None:
                skipped[profile.brand] += 1
                continue
            pin = docker_pin(docker_image(recipe, variant, profile))
            if recipe.is_omni:
                listed = effective_compatible_strategies(recipe)
                result = synthesize_omni(recipe, variant_key, profile)
                problems = tuple(p.line() for p in result.problems) + _argv_problems(result.argvs)
                key = (listed[0] if listed else "", "", "", platform, False)
                groups.setdefault(key, []).append(
                    _Rendered(profile.id, result.argvs, pin, problems, 1)
                )
                continue
            rows = list(_feature_rows(recipe, variant_key, variant, profile))
            for strategy in offered_strategies(repo, recipe, profile):
                synthesizer = Synthesizer(
                    recipe, variant_key, strategy, profile, requirements=requirements
                )
                for feature, mode, enabled, picks in rows:
                    gated = bool(feature) and not allowed_for_strategy(
                        recipe.features[feature], strategy.name
                    )
                    result = synthesizer.render(enabled, picks, ungated=(feature,) if gated else ())
                    problems = tuple(p.line() for p in result.problems) + _argv_problems(
                        result.argvs
                    )
                    key = (strategy.name, feature, mode, platform, gated)
                    groups.setdefault(key, []).append(
                        _Rendered(profile.id, result.argvs, pin, problems, result.node_count,
                                  tuple(enabled), result.modes, result.sources)
                    )
        yield from _rows_from_groups(
            recipe, variant_key, variant, groups, recipe.is_omni, recipe_problems
        )


def enumerate_repo(
    repo: RecipesRepo, requirements: StrategyRequirements | None = None
) -> Enumeration:
    """All combinations of a loaded checkout, with the count of renders left out."""
    requirements = requirements or default_requirements()
    by_recipe: dict[str, list[Problem]] = {}
    for problem in repo.problems:
        by_recipe.setdefault(problem.recipe, []).append(problem)
    skipped: Counter[str] = Counter()
    rows: list[Combination] = []
    for recipe in repo.recipes.values():
        rows.extend(
            _enumerate_recipe(repo, recipe, requirements, skipped, by_recipe.get(recipe.path, []))
        )
    return Enumeration(combinations=rows, skipped=skipped)


def enumerate_recipe(
    repo: RecipesRepo, recipe: Recipe, requirements: StrategyRequirements | None = None
) -> list[Combination]:
    """The combinations of one recipe (e.g. an edited copy being judged again)."""
    problems = [p for p in repo.problems if p.recipe == recipe.path]
    return list(
        _enumerate_recipe(repo, recipe, requirements or default_requirements(), Counter(), problems)
    )


def enumerate_combinations(repo: RecipesRepo) -> list[Combination]:
    """Every (recipe, variant, strategy, feature, mode, platform[, hardware]) the site renders."""
    return enumerate_repo(repo).combinations
