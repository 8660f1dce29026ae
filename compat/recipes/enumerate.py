"""Every command line the recipes site emits, one row per thing a verdict judges.

Rows are (recipe, variant, strategy, feature, mode) per platform, with the
hardware profile kept only where it changes the command, and with the surface
of the site that emits it (`source`):

* `ui`, the builder: for each variant and each profile it offers the variant on
  (`hardware.offered_hardware`), each strategy offered there
  (`offering.offered_strategies`) renders the base row (default feature states:
  not opt-in, not opt-in on this profile, or forced on by the variant's
  `default_modes`; feature '' and mode '') and one row per feature and, for a
  modal feature, per mode available on this variant and profile: the defaults
  plus that feature switched on, which the builder appends after the defaults
  (`features.switched_on`; `text_only` and `encoder_parallel` exclude each
  other). Sizes are the builder's defaults (`sizing.ui_sizing`), and a PD pool
  spanning several nodes renders every node.
* `api`, the JSON API: the base rows it publishes (`json_api.api_renderings`),
  at its own sizes (`sizing.api_sizing`), node 0 of each PD pool.

A feature whose `strategies` allowlist excludes the strategy is dropped by the
site; its row is marked `gated` and rendered as if the gate were absent, so a
verdict can say whether the gate is still needed. Base rows honour gates.

Each multi-node command is judged on every node: the head (role '') and each
follower ('worker N', with its --node-rank / --headless or DP start rank); PD
pools likewise ('prefill', 'prefill worker N', ...). See `synthesis`.

Collapsing, per (variant, strategy, feature, mode, platform): on each profile,
the API's render and the builder's become one row (source 'api,ui') when every
command the API publishes is one the builder renders identically (the builder
adds the followers of PD pools, which the API does not publish). Then, when
every row left has the same source, argvs and docker pin on every profile, they
are one row with hardware '' (`profiles` lists them); otherwise there is one row
per profile and source. Profiles of brands other than NVIDIA (cuda) and AMD
(rocm) are not judged; they are counted in `Enumeration.skipped`. A variant is
not offered on non-scalable hardware it does not fit (the builder disables it
there; the API renders the largest variant that fits instead, which is that
variant's own row), so 31 (recipe, variant, profile, strategy) renders of the
snapshot that the research notes count are left out on purpose.

Not rendered: advanced options, KV offload layers and the Mooncake compositions
the API publishes as alternatives (vllm-compat does not synthesize KV layers).
Omni recipes (served by vLLM-Omni) get one base row per variant from the
builder, with strategy '' when they list none.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from compat.recipes.argv import parsed_serve_args
from compat.recipes.features import (
    allowed_for_strategy,
    available_modes,
    default_features,
    feature_modes,
    switched_on,
)
from compat.recipes.hardware import docker_image, docker_pin, foreign_image, offered_hardware
from compat.recipes.json_api import api_renderings
from compat.recipes.offering import effective_compatible_strategies, offered_strategies
from compat.recipes.repo import HardwareProfile, Problem, Recipe, RecipesRepo, Strategy
from compat.recipes.requirements import StrategyRequirements, default_requirements
from compat.recipes.sizing import SOURCES, Sizing, ui_sizing
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
    argvs: Argvs  # ((role, argv), ...): '', 'worker N', 'prefill', 'prefill worker N', ...
    vllm_pin: str  # variant.min_vllm_version > model.min_vllm_version ('nightly' verbatim)
    docker_pin: str | None  # release named by the docker image tag ('0.23.0', 'nightly') or None
    gated: bool  # the feature's `strategies` allowlist excludes this strategy (argvs as if allowed)
    omni: bool  # meta.tasks contains 'omni': served by vLLM-Omni
    problems: tuple[str, ...]  # per-combination problems (bad args, malformed JSON, ...)
    profiles: tuple[str, ...] = ()  # the offered profiles this row stands for
    nodes: int = 1  # resolveCommand's nodeCount (PD pools are sized per role, see argvs)
    # How the row was rendered, so a cause can be found by rendering it again without one
    # element (compat.verdict.cause): the features on, in emission order; the mode picks;
    # the recipe elements that contributed args (synthesis.element_of); and the sizes.
    features: tuple[str, ...] = ()
    picks: tuple[tuple[str, str], ...] = ()  # (feature, mode) of every modal feature on
    sources: tuple[str, ...] = ()
    source: str = "ui"  # the surfaces emitting these argvs: 'api', 'ui' or 'api,ui'
    sizing: Sizing | None = None  # nodeCount / pdNodes rendered with (None: omni)
    # The docker image when it is not one of vLLM's own (a vendor or fork build): which vLLM it
    # holds is unknown, so the row is not judged against a release.
    foreign_image: str | None = None


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
            "by_source": dict(Counter(c.source for c in rows)),
            "hardware_collapsed": sum(c.hardware == "" for c in rows),
            "per_profile": sum(c.hardware != "" for c in rows),
            "recipes": len({c.recipe for c in rows}),
            "skipped_non_cuda_rocm_renders": dict(self.skipped),
        }


@dataclass(frozen=True)
class Render:
    """One surface's command(s) for one selection on one profile, with the inputs given.

    The inputs are what `resolveCommand` is called with (enabled features in
    emission order, mode picks, nodeCount and pdNodes), so the render can be
    replayed by the site's own synthesizer.
    """

    recipe: str
    variant: str
    profile: str
    platform: str
    strategy: str
    feature: str
    mode: str
    gated: bool
    source: str  # 'api' | 'ui'
    features: tuple[str, ...]  # enabled, in emission order
    modes: tuple[tuple[str, str], ...]  # the mode picks passed in (featureModes)
    sizing: Sizing | None  # None for omni commands (no strategy logic)
    argvs: Argvs
    docker_pin: str | None
    problems: tuple[str, ...]
    nodes: int
    picks: tuple[tuple[str, str], ...] = ()  # (feature, mode) every modal feature on rendered in
    sources: tuple[str, ...] = ()  # recipe elements that contributed args (synthesis.element_of)
    foreign_image: str | None = None  # a docker image that is not vLLM's own (see Combination)


@lru_cache(maxsize=1 << 16)
def _argv_errors(argv: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(parsed_serve_args(argv).errors)


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
        enabled = switched_on(base, key)
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


@lru_cache(maxsize=1 << 15)
def _argv_problems(argvs: Argvs) -> tuple[str, ...]:
    out: list[str] = []
    for role, argv in argvs:
        prefix = f"{role}: " if role else ""
        out.extend(f"{prefix}{e}" for e in _argv_errors(argv))
    return tuple(out)


class _Renderer:
    """Synthesizers of one recipe, shared by the surfaces where their sizes agree."""

    def __init__(self, recipe: Recipe, requirements: StrategyRequirements) -> None:
        self.recipe = recipe
        self.requirements = requirements
        self._synths: dict[tuple[Any, ...], Synthesizer] = {}
        self._images: dict[tuple[str, str], str | None] = {}  # (variant, profile) -> image

    def render(
        self,
        variant_key: str,
        profile: HardwareProfile,
        strategy: Strategy,
        sizing: Sizing,
        row: tuple[str, str, list[str], dict[str, str]],
    ) -> Render:
        feature, mode, enabled, picks = row
        size_key = (sizing.node_count, sizing.pd_pools, sizing.pool_followers)
        key = (variant_key, profile.id, strategy.name, size_key)
        synth = self._synths.get(key)
        if synth is None:
            synth = Synthesizer(
                self.recipe,
                variant_key,
                strategy,
                profile,
                requirements=self.requirements,
                sizing=sizing,
            )
            self._synths[key] = synth
        gated = bool(feature) and not allowed_for_strategy(
            self.recipe.features[feature], strategy.name
        )
        result = synth.render(enabled, picks, ungated=(feature,) if gated else ())
        problems = tuple(p.line() for p in result.problems) + _argv_problems(result.argvs)
        return Render(
            recipe=self.recipe.path,
            variant=variant_key,
            profile=profile.id,
            platform=profile.platform or "",
            strategy=strategy.name,
            feature=feature,
            mode=mode,
            gated=gated,
            source=sizing.source,
            features=tuple(enabled),
            modes=tuple(picks.items()),
            sizing=sizing,
            argvs=result.argvs,
            docker_pin=self.docker_pin(variant_key, profile),
            foreign_image=self.foreign_image(variant_key, profile),
            problems=problems,
            nodes=result.node_count,
            picks=result.modes,
            sources=result.sources,
        )

    def _image(self, variant_key: str, profile: HardwareProfile) -> str | None:
        key = (variant_key, profile.id)
        if key not in self._images:
            variant = self.recipe.variants.get(variant_key) or {}
            self._images[key] = docker_image(self.recipe, variant, profile)
        return self._images[key]

    def docker_pin(self, variant_key: str, profile: HardwareProfile) -> str | None:
        return docker_pin(self._image(variant_key, profile))

    def foreign_image(self, variant_key: str, profile: HardwareProfile) -> str | None:
        return foreign_image(self._image(variant_key, profile))


def recipe_renders(
    repo: RecipesRepo,
    recipe: Recipe,
    requirements: StrategyRequirements | None = None,
    skipped: Counter[str] | None = None,
) -> Iterator[Render]:
    """Every render of one recipe on judged platforms: the builder's, then the API's."""
    requirements = requirements or default_requirements()
    skipped = skipped if skipped is not None else Counter()
    renderer = _Renderer(recipe, requirements)
    for variant_key, variant in recipe.variants.items():
        for profile in offered_hardware(recipe, variant, repo.hardware):
            if profile.platform is None:
                skipped[profile.brand] += 1
                continue
            if recipe.is_omni:
                yield _omni_render(recipe, variant_key, variant, profile)
                continue
            rows = list(_feature_rows(recipe, variant_key, variant, profile))
            for strategy in offered_strategies(repo, recipe, profile):
                sizing = ui_sizing(recipe, variant, strategy, profile)
                for row in rows:
                    yield renderer.render(variant_key, profile, strategy, sizing, row)
    if recipe.is_omni:
        return
    for api in api_renderings(repo, recipe):
        if api.profile.platform is None:
            continue
        variant = recipe.variants[api.variant]
        base: tuple[str, str, list[str], dict[str, str]] = (
            "",
            "",
            default_features(recipe, variant, api.profile),
            {},
        )
        yield renderer.render(api.variant, api.profile, api.strategy, api.sizing, base)


def _omni_render(
    recipe: Recipe, variant_key: str, variant: dict[str, Any], profile: HardwareProfile
) -> Render:
    listed = effective_compatible_strategies(recipe)
    result = synthesize_omni(recipe, variant_key, profile)
    problems = tuple(p.line() for p in result.problems) + _argv_problems(result.argvs)
    return Render(
        recipe=recipe.path,
        variant=variant_key,
        profile=profile.id,
        platform=profile.platform or "",
        strategy=listed[0] if listed else "",
        feature="",
        mode="",
        gated=False,
        source="ui",
        features=(),
        modes=(),
        sizing=None,
        argvs=result.argvs,
        docker_pin=docker_pin(docker_image(recipe, variant, profile)),
        problems=problems,
        nodes=1,
    )


def iter_renders(
    repo: RecipesRepo, requirements: StrategyRequirements | None = None
) -> Iterator[Render]:
    """Every render of a checkout, before rows are collapsed (for replay against the site)."""
    for recipe in repo.recipes.values():
        yield from recipe_renders(repo, recipe, requirements)


@dataclass
class _Unit:
    """What one row stands for on one profile: one or both sources' identical commands."""

    profile: str
    sources: tuple[str, ...]
    render: Render  # the builder's render when both sources merged (it holds every node)
    problems: tuple[str, ...]


def _covers(wide: Argvs, narrow: Argvs) -> bool:
    """Every (role, argv) of `narrow` is in `wide`."""
    have = set(wide)
    return all(item in have for item in narrow)


def _units(renders: list[Render]) -> list[_Unit]:
    """Per profile, the API's render merged into the builder's where the builder covers it."""
    by_profile: dict[str, dict[str, Render]] = {}
    for r in renders:
        by_profile.setdefault(r.profile, {})[r.source] = r
    units: list[_Unit] = []
    for profile, by_source in by_profile.items():
        api, ui = by_source.get("api"), by_source.get("ui")
        if (
            api is not None
            and ui is not None
            and api.docker_pin == ui.docker_pin
            and _covers(ui.argvs, api.argvs)
        ):
            problems = tuple(dict.fromkeys(ui.problems + api.problems))
            units.append(_Unit(profile, ("api", "ui"), ui, problems))
            continue
        for source in SOURCES:
            alone = by_source.get(source)
            if alone is not None:
                units.append(_Unit(profile, (source,), alone, alone.problems))
    return units


def _rows_from_renders(
    recipe: Recipe,
    variant_key: str,
    renders: list[Render],
    recipe_problems: list[Problem],
) -> Iterator[Combination]:
    variant = recipe.variants.get(variant_key) or {}
    model_id = served_model(recipe, variant_key)
    pin = _pin(recipe, variant)
    groups: dict[tuple[str, str, str, str, bool], list[Render]] = {}
    for r in renders:
        groups.setdefault((r.strategy, r.feature, r.mode, r.platform, r.gated), []).append(r)
    for (strategy, feature, mode, platform, gated), members in groups.items():
        units = _units(members)
        distinct = {
            (u.sources, u.render.argvs, u.render.docker_pin, u.render.foreign_image) for u in units
        }
        collapse = len(distinct) == 1
        loaded = _problems_for(recipe_problems, variant_key, feature)
        chosen = units[:1] if collapse else units
        shared = tuple(p for u in units for p in u.problems)  # a collapsed row speaks for all
        for u in chosen:
            r = u.render
            yield Combination(
                recipe=recipe.path,
                model_id=model_id,
                variant=variant_key,
                strategy=strategy,
                feature=feature,
                mode=mode,
                hardware="" if collapse else u.profile,
                platform=platform,
                argvs=r.argvs,
                vllm_pin=pin,
                docker_pin=r.docker_pin,
                foreign_image=r.foreign_image,
                gated=gated,
                omni=recipe.is_omni,
                problems=tuple(dict.fromkeys(loaded + (shared if collapse else u.problems))),
                profiles=tuple(dict.fromkeys(x.profile for x in units))
                if collapse
                else (u.profile,),
                nodes=r.nodes,
                features=r.features,
                picks=r.picks,
                sources=r.sources,
                source=",".join(u.sources),
                sizing=r.sizing,
            )


def _enumerate_recipe(
    repo: RecipesRepo,
    recipe: Recipe,
    requirements: StrategyRequirements,
    skipped: Counter[str],
    recipe_problems: list[Problem],
) -> Iterator[Combination]:
    by_variant: dict[str, list[Render]] = {key: [] for key in recipe.variants}
    for r in recipe_renders(repo, recipe, requirements, skipped):
        by_variant[r.variant].append(r)
    for variant_key, renders in by_variant.items():
        yield from _rows_from_renders(recipe, variant_key, renders, recipe_problems)


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
    """Every (recipe, variant, strategy, feature, mode, platform[, hardware], source) row."""
    return enumerate_repo(repo).combinations
