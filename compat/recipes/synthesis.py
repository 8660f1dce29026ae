"""Rebuild the `vllm serve` argv the recipes site synthesizes for one selection.

A faithful port of `resolveCommand`'s `buildArgs` and `dedupeArgs` (recipes
`src/lib/command-synthesis.js` at 8959cf6; research notes §2.2-§2.7), because
the verdict is about the command users copy, quirks included: recipe arguments
emitted after the strategy block shadow its sizes, feature arguments beat every
override, and dedupe compares literal flag strings.

Argument order (L1005-1331):
 1. model.base_args
 2. variant.extra_args, then variant.hardware_overrides[<exact id>].extra_args
 3. the strategy's vllm_args (a PD role's for pd_cluster), then its parallel
    flags, rendered from data/strategy_requirements.yaml
 4. strategy_overrides[s].extra_args + vllm_args (PD: [role].extra_args + vllm_args)
 5. a strategy generation override replaces the recipe and variant generation
    overrides; then the strategy and role exact-id overrides
 6. (advanced options: UI only, never rendered here)
 7. enabled features in the caller's order (the builder's: defaults in
    `features` order, then each feature switched on, appended): a modal
    feature emits its resolved mode's args, swapped by the mode's
    hardware-keyed override; a boolean feature emits its args, swapped by its
    generation override
 8. (KV offload and Mooncake compositions: not rendered here)

Every node renders (`Synthesizer.nodes_rendered`): a multi-node strategy's head
and each follower (`--node-rank r` and `--headless`, or `--data-parallel-start-rank`),
and each node of a PD pool the sizing asks for. Sizes are inputs, as they are
to `resolveCommand`: `nodeCount` and `pdNodes` come from `sizing` (what the
JSON API or the builder passes), including the legacy PD sizes without
`pdNodes` (one node per role at nodeCount > 1, else both roles sharing a node).

Simplifications: no advanced options, no KV offload layers, no env (the argv
alone is judged). Boolean-feature hardware overrides are read by generation
(else `nvidia`) as at 8959cf6; later revisions use the exact id > generation >
brand > default lookup, which gives the same args on every recipe of the
snapshot. tools/recipes_site/compare.py replays every render with the
snapshot's own JavaScript and compares.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from compat.recipes.features import allowed_for_strategy, feature_modes, resolve_mode
from compat.recipes.hardware import as_mapping, generation_entry, keyed_entry, keyed_value
from compat.recipes.offering import pd_role_parallelism
from compat.recipes.repo import HardwareProfile, Problem, Recipe, Strategy
from compat.recipes.requirements import StrategyRequirements, default_requirements
from compat.recipes.shape import arg_list
from compat.recipes.sizing import PD_ROLES, Sizing, ui_sizing

#: ((role, argv), ...): role '' (head node), 'worker N' (follower node N of a multi-node
#: strategy), 'prefill' / 'decode' (node 0 of a PD pool), 'prefill worker N' / 'decode worker N'.
Argvs = tuple[tuple[str, tuple[str, ...]], ...]


def role_name(role: str, rank: int) -> str:
    """The name a command goes by: its PD role ('' outside PD), plus 'worker N' past node 0."""
    if rank == 0:
        return role
    return f"{role} worker {rank}" if role else f"worker {rank}"


@dataclass(frozen=True)
class Synthesized:
    """What one selection renders to."""

    argvs: Argvs  # (role, argv) per node rendered, see `role_name`
    problems: tuple[Problem, ...]
    node_count: int
    sources: tuple[str, ...] = ()  # recipe elements (see `element_of`) that contributed args
    modes: tuple[
        tuple[str, str], ...
    ] = ()  # (feature, mode) each enabled modal feature rendered in


#: The strategy file's own args and parallel flags, as one omittable element.
STRATEGY = "strategy"


def element_of(field: str, source: str | None = None) -> str:
    """The recipe element an args field belongs to, the unit a cause names and `omit` removes.

    `model.base_args`; `variants.<v>` (its extra_args); `features.<f>` (args of the feature
    and its modes); `strategy` (the strategy file); `strategy_overrides.<s>`; and hardware
    overrides, which are their own elements wherever they sit (`hardware_overrides.<key>`,
    `variants.<v>.hardware_overrides.<key>`, `strategy_overrides.<s>[.<role>].hardware_overrides.<key>`).
    """
    if source is not None:
        return STRATEGY
    parts = field.split(".")
    if "hardware_overrides" in parts and parts[0] != "features":
        i = parts.index("hardware_overrides")
        return ".".join(parts[: i + 2])
    if parts[0] in ("variants", "features", "strategy_overrides"):
        return ".".join(parts[:2])
    return field


#: dedupe_args' results by argument list: cause analysis renders a recipe again without each
#: element, through a synthesizer per omission, and most of those lists were deduplicated before.
_DEDUPED: dict[tuple[str, ...], tuple[str, ...]] = {}


def dedupe_args(args: Iterable[str]) -> list[str]:
    """`dedupeArgs` (L785-825): keep each flag's last (flag, value) unit, at its last position.

    A '-'-token followed by a non-'-' token is a unit; positionals always stay.
    Empty strings are dropped first, as `args.filter(Boolean)` does.
    """
    key = tuple(args)
    hit = _DEDUPED.get(key)
    if hit is None:
        if len(_DEDUPED) >= 1 << 16:
            _DEDUPED.clear()  # bounded: a build meets a few tens of thousands
        hit = _DEDUPED[key] = tuple(_dedupe(key))
    return list(hit)


def _dedupe(args: tuple[str, ...]) -> list[str]:
    tokens = [a for a in args if a]
    count = len(tokens)
    units: list[tuple[str | None, int, int]] = []  # (flag or None, start, end)
    i = 0
    while i < count:
        current = tokens[i]
        if current[0] != "-":
            units.append((None, i, i + 1))
            i += 1
        elif i + 1 < count and tokens[i + 1][0] != "-":
            units.append((current, i, i + 2))
            i += 2
        else:
            units.append((current, i, i + 1))
            i += 1
    seen: set[str] = set()
    kept: list[tuple[int, int]] = []
    for flag, start, end in reversed(units):
        if flag is None:
            kept.append((start, end))
        elif flag not in seen:
            seen.add(flag)
            kept.append((start, end))
    out: list[str] = []
    for start, end in reversed(kept):
        out.extend(tokens[start:end])
    return out


def _js_number(value: float) -> str:
    """String(n) in JavaScript: integral numbers print without a decimal point."""
    return str(int(value)) if float(value).is_integer() else str(value)


def _js_to_number(value: Any) -> float:
    """JavaScript's Number(value) for what an args list holds (strings, numbers, missing)."""
    if value is None:
        return math.nan  # Number(undefined); only a missing value reaches here
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if not isinstance(value, str):
        return math.nan
    text = value.strip()
    if not text:
        return 0.0
    if text in ("Infinity", "+Infinity", "-Infinity"):
        return -math.inf if text.startswith("-") else math.inf
    try:
        if text.lower().startswith(("0x", "0o", "0b")):
            return float(int(text, 0))
        return float(text) if text.lower() not in ("inf", "+inf", "-inf", "nan") else math.nan
    except ValueError:
        return math.nan


def _js_number_text(value: float) -> str:
    """String(n) for any number, NaN and Infinity included."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return _js_number(value)


def _positive_number(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return value
    return None


def single_node_tp(
    recipe: Recipe, variant: dict[str, Any], profile: HardwareProfile, strategy: str
) -> int:
    """`resolveSingleNodeTp` (L108-140): only single_node_tp may run below a full node."""
    gpus = profile.gpu_count
    if strategy != "single_node_tp":
        return gpus
    is_cpu = profile.generation == "cpu"
    for declared in (
        variant.get("tp"),
        as_mapping(recipe.section("strategy_overrides").get(strategy)).get("tp"),
    ):
        tp = _positive_number(
            declared if not isinstance(declared, dict) else keyed_value(declared, profile)
        )
        if tp is not None:
            return int(tp) if is_cpu else int(min(tp, gpus))
    need = _positive_number(variant.get("vram_minimum_gb"))
    per_gpu = (profile.vram_gb or 0) / gpus if gpus else 0
    if need is None or per_gpu <= 0:
        return gpus
    return 1 if need <= per_gpu else gpus


class Synthesizer:
    """One (recipe, variant, strategy, profile) selection; renders any feature state of it.

    Steps 1-5 do not depend on features, so they are assembled once per role
    and shared by every feature state rendered from this object (enumeration
    renders several per selection). Problems found in the arg lists a render
    touches are reported with it.
    """

    def __init__(
        self,
        recipe: Recipe,
        variant_key: str,
        strategy: Strategy,
        profile: HardwareProfile,
        nodes: int | None = None,
        requirements: StrategyRequirements | None = None,
        omit: frozenset[str] = frozenset(),
        sizing: Sizing | None = None,
    ) -> None:
        self.recipe = recipe
        self.omit = omit  # elements (see `element_of`) rendered as if absent, to find a cause
        self.variant_key = variant_key
        self.variant = recipe.variants.get(variant_key) or recipe.variants.get("default") or {}
        self.strategy = strategy
        self.profile = profile
        self.requirements = requirements or default_requirements()
        self.overrides = as_mapping(recipe.section("strategy_overrides").get(strategy.name))
        self.sizing = sizing or ui_sizing(recipe, self.variant, strategy, profile)
        if nodes is not None:
            self.sizing = replace(self.sizing, node_count=nodes)
        self.nodes = self.sizing.node_count
        self.model = served_model(recipe, variant_key)
        if f"variants.{variant_key}" in omit:  # the variant removed: its model id goes too
            self.model = recipe.model_id
        self.problems: list[Problem] = list(self.sizing.problems)
        self.sources: list[str] = []
        self._argvs: dict[tuple[str, ...], Argvs] = {}  # feature tail -> rendered argvs
        self._features: dict[
            tuple[str, str | None, bool],
            tuple[tuple[str, ...], tuple[Problem, ...], tuple[str, ...]],
        ] = {}
        self._prefix = {
            role_name(role, rank): self.prefix(role, rank) for role, rank in self.nodes_rendered()
        }
        self._prefix_problems = tuple(self.problems)
        self._prefix_sources = tuple(self.sources)

    def nodes_rendered(self) -> list[tuple[str, int]]:
        """(role, node rank) of every command this selection copies out as.

        A multi-node strategy renders its head (rank 0) and one command per
        follower (`followerRanks`, L183-185); a PD pool renders node 0, and its
        other nodes when the sizing asks for them (the builder's node selector).
        """
        if self.strategy.deploy_type == "pd_cluster":
            out = []
            for role in PD_ROLES:
                count = max(1, self.pool_nodes(role)) if self.sizing.pool_followers else 1
                out += [(role, rank) for rank in range(count)]
            return out
        if self.strategy.deploy_type == "multi_node" and self.nodes > 1:
            return [("", rank) for rank in range(self.nodes)]
        return [("", 0)]

    def pool_nodes(self, role: str) -> int:
        """A PD role's nodes: the sizing's pool, else 1 at nodeCount > 1, else 0 (co-located)."""
        pool = self.sizing.pool(role)
        if pool is not None:
            return pool.nodes
        return 1 if self.nodes > 1 else 0

    def render(
        self,
        features: Sequence[str],
        modes: Mapping[str, str] | None = None,
        ungated: Iterable[str] = (),
    ) -> Synthesized:
        """The deduped argv(s) with these features on (in emission order).

        `modes` picks the mode of modal features; `ungated` features render even
        where their `strategies` allowlist excludes the strategy.
        """
        self.problems = list(self._prefix_problems)
        self.sources = list(self._prefix_sources)
        picks = modes or {}
        allowed = frozenset(ungated)
        tail: list[str] = []
        used: list[tuple[str, str]] = []
        for key in features:
            tail += self.feature_args(key, picks.get(key), key in allowed)
            feature = self.recipe.features.get(key)
            if feature_modes(feature) is not None:
                mode = resolve_mode(
                    feature, key, self.variant, self.variant_key, self.profile, picks.get(key)
                )
                if mode is not None:
                    used.append((key, mode))
        tail_key = tuple(tail)
        argvs = self._argvs.get(tail_key)
        if argvs is None:
            argvs = tuple(
                (name, ("vllm", "serve", self.model, *dedupe_args([*prefix, *tail])))
                for name, prefix in self._prefix.items()
            )
            self._argvs[tail_key] = argvs
        return Synthesized(
            argvs,
            tuple(dict.fromkeys(self.problems)),
            self.nodes,
            tuple(dict.fromkeys(self.sources)),
            tuple(used),
        )

    def take(self, value: Any, field: str, source: str | None = None) -> tuple[str, ...]:
        """Read an args list; `source` names the file when it is not the recipe."""
        element = element_of(field, source)
        if element in self.omit:
            return ()
        args, problems = arg_list(value, source or self.recipe.path, field)
        self.problems.extend(problems)
        if args:
            self.sources.append(element)
        return args

    # --- step 3: parallel flags -------------------------------------------------------

    def parallel_flags(self, role: str, nodes: int, rank: int = 0) -> list[str]:
        strategy, profile = self.strategy, self.profile
        gpus = profile.gpu_count
        symbols: dict[str, int | str] = {
            "G": gpus,
            "N": nodes,
            "NG": gpus * max(1, nodes),
            "node_rank": rank,
        }
        conditions = frozenset({"worker"}) if rank > 0 else frozenset()
        flags = {"@parallel_flag": strategy.parallel_flag}
        multi = strategy.deploy_type == "multi_node" and nodes > 1
        if multi and strategy.parallel_flag == "--data-parallel-size":
            branch = "multi_node_dep"
            symbols["worker_dp_start_rank"] = _js_number_text(rank * self.dep_local_size())
        elif multi and strategy.parallelism == "tp_pp":
            branch = "multi_node_tp_pp"
        elif multi and strategy.parallelism == "tp_dp":
            branch = "multi_node_tp_dp"
        elif multi:
            branch = "multi_node_tp"
        elif strategy.deploy_type == "pd_cluster":
            return self.pd_pool_flags(role, rank)
        else:
            branch = "single_node"
            symbols["single_node_tp"] = single_node_tp(
                self.recipe, self.variant, profile, strategy.name
            )
        return self.requirements.render(branch, symbols, conditions, flags)

    def dep_local_size(self) -> float:
        """DP ranks per follower node of multi_node_dep (L1050-1061).

        The last `--data-parallel-size-local` value among the strategy override's
        vllm_args, extra_args and its generation and exact-id hardware overrides
        (in that order, read as JavaScript's Number()), else the GPUs per node.
        An omitted element is read as absent, as `take` reads it.
        """
        so = f"strategy_overrides.{self.strategy.name}"
        by_hardware = self.overrides.get("hardware_overrides")
        gen = generation_entry(by_hardware, self.profile)
        exact = as_mapping(as_mapping(by_hardware).get(self.profile.id))
        pooled: list[Any] = []
        for value, field in (
            (self.overrides.get("vllm_args"), f"{so}.vllm_args"),
            (self.overrides.get("extra_args"), f"{so}.extra_args"),
            (
                as_mapping(gen[1]).get("extra_args") if gen is not None else None,
                f"{so}.hardware_overrides.{gen[0] if gen is not None else ''}.extra_args",
            ),
            (exact.get("extra_args"), f"{so}.hardware_overrides.{self.profile.id}.extra_args"),
        ):
            if isinstance(value, list) and element_of(field) not in self.omit:
                pooled += value
        flag = "--data-parallel-size-local"
        if flag not in pooled:
            return float(self.profile.gpu_count)
        at = len(pooled) - 1 - pooled[::-1].index(flag)
        return _js_to_number(pooled[at + 1] if at + 1 < len(pooled) else None)

    def pd_pool_flags(self, role: str, rank: int = 0) -> list[str]:
        profile, strategy = self.profile, self.strategy
        gpus = profile.gpu_count
        role_spec = as_mapping(strategy.data.get(role))
        role_over = as_mapping(self.overrides.get(role))
        pool = self.sizing.pool(role)
        mode = pd_role_parallelism(
            self.recipe, strategy, role, pool.parallelism if pool is not None else None
        )
        pool_nodes = self.pool_nodes(role)
        node_index = max(0, min(max(1, pool_nodes) - 1, rank))
        symbols: dict[str, int | str] = {
            "G": gpus,
            "node_rank": node_index,
            "pool_nodes": pool_nodes,
        }
        conditions: set[str] = set()
        if pool_nodes > 1:
            conditions.add("pool_nodes_gt_1")
        if node_index > 0:
            conditions.add("worker")
        if mode == "dep":
            explicit = (
                role_over.get("tp") if role_over.get("tp") is not None else role_spec.get("tp")
            )
            role_tp = _positive_number(explicit)
            if explicit is not None and role_tp is None:
                self.problems.append(
                    Problem(
                        self.recipe.path,
                        f"strategy_overrides.{strategy.name}.{role}.tp",
                        f"must be a positive number, not {explicit!r}; ignored",
                    )
                )
            if role_tp is not None:
                conditions.add("role_tp_explicit")
            tp = int(role_tp) if role_tp is not None else 1
            dp_local = max(1, math.floor(gpus / tp))
            symbols.update(
                role_tp=tp,
                dp_local=dp_local,
                dp_size=max(1, pool_nodes) * dp_local,
                start_rank=node_index * dp_local,
            )
            branch = "pd_pool_dep"
        else:
            if mode == "tep":
                conditions.add("pool_tep")
            pool_gpus = gpus // 2 if pool_nodes == 0 else pool_nodes * gpus
            symbols["pool_gpus"] = max(1, pool_gpus)
            branch = "pd_pool_tp"
        role_flag = next(
            (
                f
                for f in (
                    role_over.get("parallel_flag"),
                    role_spec.get("parallel_flag"),
                    strategy.parallel_flag,
                )
                if isinstance(f, str) and f
            ),
            "--tensor-parallel-size",
        )
        flags = {"@parallel_flag": strategy.parallel_flag, "@role_parallel_flag": role_flag}
        return self.requirements.render(branch, symbols, frozenset(conditions), flags, role)

    # --- the whole command ------------------------------------------------------------

    def prefix(self, role: str, rank: int = 0) -> list[str]:
        """Steps 1-5: everything before the feature arguments, for one node of a role."""
        recipe, variant, profile, strategy = self.recipe, self.variant, self.profile, self.strategy
        v = f"variants.{self.variant_key}"
        so = f"strategy_overrides.{strategy.name}"
        args: list[str] = []
        # 1-2. recipe and variant
        args += self.take(recipe.model.get("base_args"), "model.base_args")
        args += self.take(variant.get("extra_args"), f"{v}.extra_args")
        variant_hw = as_mapping(variant.get("hardware_overrides"))
        exact = variant_hw.get(profile.id)
        if isinstance(exact, dict):
            args += self.take(
                exact.get("extra_args"), f"{v}.hardware_overrides.{profile.id}.extra_args"
            )
        # 3. strategy
        if strategy.deploy_type != "pd_cluster":
            args += self.take(strategy.data.get("vllm_args"), "vllm_args", strategy.path)
        elif role:
            role_args = as_mapping(strategy.data.get(role)).get("vllm_args")
            args += self.take(role_args, f"{role}.vllm_args", strategy.path)
        if STRATEGY not in self.omit:
            flags = self.parallel_flags(role, self.nodes, rank)
            args += flags
            if flags:
                self.sources.append(STRATEGY)
        # 4. strategy overrides
        scope = as_mapping(self.overrides.get(role)) if role else self.overrides
        prefix = f"{so}.{role}" if role else so
        args += self.take(scope.get("extra_args"), f"{prefix}.extra_args")
        args += self.take(scope.get("vllm_args"), f"{prefix}.vllm_args")
        # 5. hardware overrides
        strategy_hw = self.overrides.get("hardware_overrides")
        replacing = generation_entry(strategy_hw, profile)
        if replacing is not None:
            key, block = replacing
            args += self.take(
                as_mapping(block).get("extra_args"), f"{so}.hardware_overrides.{key}.extra_args"
            )
        else:
            for mapping, field in (
                (recipe.data.get("hardware_overrides"), "hardware_overrides"),
                (variant_hw, f"{v}.hardware_overrides"),
            ):
                entry = generation_entry(mapping, profile)
                if entry is not None:
                    key, block = entry
                    args += self.take(
                        as_mapping(block).get("extra_args"), f"{field}.{key}.extra_args"
                    )
        exact_blocks = [(as_mapping(strategy_hw).get(profile.id), f"{so}.hardware_overrides")]
        if role:
            role_hw = as_mapping(as_mapping(self.overrides.get(role)).get("hardware_overrides"))
            exact_blocks.append((role_hw.get(profile.id), f"{so}.{role}.hardware_overrides"))
        for block, field in exact_blocks:
            if isinstance(block, dict):
                args += self.take(block.get("extra_args"), f"{field}.{profile.id}.extra_args")
        return args

    def feature_args(self, key: str, selected: str | None, ungated: bool) -> tuple[str, ...]:
        """Step 7 for one feature; memoised, since every feature state repeats the defaults."""
        memo_key = (key, selected, ungated)
        hit = self._features.get(memo_key)
        if hit is None:
            before, before_sources = len(self.problems), len(self.sources)
            args = self._feature_args(key, selected, ungated)
            self._features[memo_key] = (
                args,
                tuple(self.problems[before:]),
                tuple(self.sources[before_sources:]),
            )
            return args
        self.problems.extend(hit[1])
        self.sources.extend(hit[2])
        return hit[0]

    def _feature_args(self, key: str, selected: str | None, ungated: bool) -> tuple[str, ...]:
        feature = self.recipe.features.get(key)
        field = f"features.{key}"
        if not isinstance(feature, dict):
            if feature is not None:
                self.problems.append(Problem(self.recipe.path, field, "is not a mapping; ignored"))
            return ()
        if not ungated and not allowed_for_strategy(feature, self.strategy.name):
            return ()
        modes = feature_modes(feature)
        if modes is not None:
            mode_key = resolve_mode(
                feature, key, self.variant, self.variant_key, self.profile, selected
            )
            mode = modes.get(mode_key) if mode_key is not None else None
            if not isinstance(mode, dict):
                return ()
            entry = keyed_entry(mode.get("hardware_overrides"), self.profile)
            if entry is not None and as_mapping(entry[1]).get("args") is not None:
                return self.take(
                    entry[1]["args"], f"{field}.modes.{mode_key}.hardware_overrides.{entry[0]}.args"
                )
            return self.take(mode.get("args"), f"{field}.modes.{mode_key}.args")
        entry = generation_entry(feature.get("hardware_overrides"), self.profile)
        if entry is not None and as_mapping(entry[1]).get("args") is not None:
            return self.take(entry[1]["args"], f"{field}.hardware_overrides.{entry[0]}.args")
        return self.take(feature.get("args"), f"{field}.args")


_SHELL_VAR = re.compile(r"^\$[A-Z_][A-Z0-9_]*$")
_SHELL_SAFE = re.compile(r"^[A-Za-z0-9_./=:@,+%-]+$")


def shell_quote(arg: str) -> str:
    """`shellQuote` (L831-837): bare $VARS stay unquoted so the shell expands them."""
    if not arg or _SHELL_VAR.match(arg) or _SHELL_SAFE.match(arg):
        return arg
    return "'" + arg.replace("'", "'\\''") + "'"


def command_line(argv: Sequence[str]) -> str:
    """An argv as the one line a user copies from the site."""
    return " ".join(shell_quote(a) for a in argv)


def served_model(recipe: Recipe, variant_key: str) -> str:
    """variant.model_id > model.model_id (L950)."""
    variant = recipe.variants.get(variant_key) or recipe.variants.get("default") or {}
    own = variant.get("model_id")
    return own if isinstance(own, str) and own else recipe.model_id


def synthesize(
    recipe: Recipe,
    variant_key: str,
    strategy: Strategy,
    profile: HardwareProfile,
    features: Sequence[str],
    modes: Mapping[str, str] | None = None,
    ungated: Iterable[str] = (),
    nodes: int | None = None,
    requirements: StrategyRequirements | None = None,
    sizing: Sizing | None = None,
) -> Synthesized:
    """The deduped argv(s) the site renders for this selection, one per node.

    `features` are the enabled feature keys in emission order; `modes` the
    picked mode per modal feature; `ungated` features render even where their
    `strategies` allowlist excludes the strategy (to judge whether a gate is
    still needed). `sizing` defaults to the builder's default sizes
    (`sizing.ui_sizing`); `nodes` overrides its node count.
    """
    synthesizer = Synthesizer(
        recipe, variant_key, strategy, profile, nodes, requirements, sizing=sizing
    )
    return synthesizer.render(features, modes, ungated)


def synthesize_omni(recipe: Recipe, variant_key: str, profile: HardwareProfile) -> Synthesized:
    """`resolveOmniCommand` without a task: the `vllm serve --omni` line.

    Unlike `resolveCommand` it skips the default variant's extra_args and reads
    no strategy at all.
    """
    variant = recipe.variants.get(variant_key) or recipe.variants.get("default") or {}
    problems: list[Problem] = []

    def take(value: Any, field: str) -> tuple[str, ...]:
        args, found = arg_list(value, recipe.path, field)
        problems.extend(found)
        return args

    v = f"variants.{variant_key}"
    args: list[str] = list(take(recipe.model.get("base_args"), "model.base_args"))
    if variant_key != "default":
        args += take(variant.get("extra_args"), f"{v}.extra_args")
    variant_hw = as_mapping(variant.get("hardware_overrides"))
    for mapping, field in (
        (recipe.data.get("hardware_overrides"), "hardware_overrides"),
        (variant_hw, f"{v}.hardware_overrides"),
    ):
        entry = generation_entry(mapping, profile)
        if entry is not None:
            args += take(as_mapping(entry[1]).get("extra_args"), f"{field}.{entry[0]}.extra_args")
    exact = variant_hw.get(profile.id)
    if isinstance(exact, dict):
        args += take(exact.get("extra_args"), f"{v}.hardware_overrides.{profile.id}.extra_args")
    port = as_mapping(recipe.data.get("omni")).get("port")
    if port:
        args += ["--port", _js_number(port) if isinstance(port, (int, float)) else str(port)]
    args.append("--omni")
    argv = ("vllm", "serve", served_model(recipe, variant_key), *dedupe_args(args))
    return Synthesized(argvs=(("", argv),), problems=tuple(dict.fromkeys(problems)), node_count=1)
