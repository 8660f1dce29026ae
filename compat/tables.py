"""The database's tables, defined once: one frozen record class per table, each column documented.

A class here is at once the table's definition (compat.store creates it from the fields: a
`str` is a VARCHAR, an `int` an INTEGER, `| None` makes it nullable, `col(pk=True)` the
primary key, `col(index=True)` an index) and the typed record every reader gets back
(`store.verdicts()` yields `Verdict` records, not dicts). Each column's `doc` is the one
description of it: the README's SQL surface, the Datasette metadata the site writes and
`compat sql` all read it from here. Columns are a contract (DESIGN.md): append, never rename.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T")

#: Descriptions shared by every table holding a column of that name.
COMMON = {
    "id": "Row id.",
    "vllm_version": "The vLLM release (or a local tree's label) the row describes.",
    "platform": "cuda or rocm: the platform vLLM resolves the class on (a recipe's hardware brand).",
    "file": "Source file in that release (path relative to the sdist root).",
    "line": "Line in `file` (1-based; 0 = unknown).",
}


def col(
    doc: str = "", *, default: Any = dataclasses.MISSING, pk: bool = False, index: bool = False
) -> Any:
    """A column: its description, default, and whether it is (part of) the key or indexed."""
    meta = {"doc": doc, "pk": pk, "index": index}
    if default is dataclasses.MISSING:
        return field(metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class Column:
    name: str
    sql_type: str  # VARCHAR | INTEGER
    nullable: bool
    default: Any
    pk: bool
    index: bool
    doc: str


@dataclass(frozen=True)
class Table:
    name: str
    record: type
    doc: str
    columns: tuple[Column, ...]
    release: bool  # holds one release's facts (a scan replaces them per vllm_version)

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def create_sql(self) -> list[str]:
        """CREATE TABLE and CREATE INDEX statements (the shape SQLAlchemy gave earlier databases)."""
        lines = []
        pks = [c.name for c in self.columns if c.pk]
        for c in self.columns:
            null = "" if c.nullable and not c.pk else " NOT NULL"
            lines.append(f"\t{quoted(c.name)} {c.sql_type}{null}")
        lines.append(f"\tPRIMARY KEY ({', '.join(pks)})")
        out = [f"CREATE TABLE {self.name} (\n" + ", \n".join(lines) + "\n)"]
        out += [
            f"CREATE INDEX ix_{self.name}_{c.name} ON {self.name} ({c.name})"
            for c in self.columns
            if c.index
        ]
        return out


TABLES: dict[str, Table] = {}
#: Column names SQL reserves (quoted wherever a statement names them).
_RESERVED = frozenset({"default", "key"})


def quoted(name: str) -> str:
    return f'"{name}"' if name in _RESERVED else name


def table(name: str, *, release: bool = False) -> Callable[[type[T]], type[T]]:
    """Make the class a frozen record and register it as table `name`."""

    def wrap(cls: type[T]) -> type[T]:
        rec = dataclass(frozen=True, kw_only=True)(cls)
        hints = typing.get_type_hints(rec)
        columns = []
        for f in dataclasses.fields(cast("type[DataclassInstance]", rec)):
            hint = hints[f.name]
            args = typing.get_args(hint)
            nullable = isinstance(hint, types.UnionType) and type(None) in args
            base = next((a for a in args if a is not type(None)), hint) if nullable else hint
            sql_type = "INTEGER" if base is int else "VARCHAR"
            default = None if f.default is dataclasses.MISSING else f.default
            doc = f.metadata.get("doc") or COMMON.get(f.name, "")
            columns.append(
                Column(
                    f.name,
                    sql_type,
                    nullable,
                    default,
                    f.metadata.get("pk", False),
                    f.metadata.get("index", False),
                    doc,
                )
            )
        TABLES[name] = Table(name, rec, (rec.__doc__ or "").strip(), tuple(columns), release)
        rec.__table__ = TABLES[name]  # type: ignore[attr-defined]
        return rec

    return wrap


def spec(record: type) -> Table:
    return record.__table__  # type: ignore[attr-defined]


def from_row(record: type[T], row: dict[str, Any]) -> T:
    """A record from a row dict; columns the record does not have are ignored (an older or
    newer database), missing ones take the record's default."""
    names = spec(record).column_names
    return record(**{k: row[k] for k in names if k in row})


# --------------------------------------------------------------------------- release facts


@table("release")
class Release:
    """One scanned release: where its source came from and how it was analysed."""

    version: str = col("The release label (0.23.0, or a local tree's name).", pk=True)
    origin: str = col("Where the source came from: index (sdist), path or installed.")
    sha256: str | None = col("sha256 of the sdist (index releases).", default=None)
    fingerprint: str = col("Hash of the files the analysis read (facts are cached by it).")
    commit_id: str | None = col(
        "The git commit the release was built from, when it says.", default=None
    )
    pp_rule: str | None = col(
        "How the release's own interfaces decide SupportsPP (protocol or MRO).", default=None
    )
    notes: str = col(
        "JSON list of analysis notes (predicates of unknown shape, ...).", default="[]"
    )
    analyzer: str = col("The vllm-compat analysis version that wrote the facts.", default="")


@table("arch_capability", release=True)
class ArchCapability:
    """One registered architecture of a release on one platform: its class and capabilities,
    computed the way vLLM's `_ModelInfo.from_model_cls` computes them."""

    id: int | None = col(default=None, pk=True)
    vllm_version: str = col(index=True)
    platform: str = col()
    arch: str = col(
        "Architecture name as registered (the HF config's architectures[0]).", index=True
    )
    category: str = col(
        "The registry dict it is listed in (_TEXT_GENERATION_MODELS, ...).", default=""
    )
    registry_module: str = col("Module the registry names.", default="")
    registry_class: str = col("Class the registry names.", default="")
    class_path: str = col("The class vLLM loads on this platform (module.Class).", default="")
    file: str = col(default="")
    line: int = col(default=0)
    status: str = col("resolved, or why the class could not be resolved.", default="resolved")
    reason: str = col("Why a class or capability is unknown.", default="")
    supports_pp: int | None = col(
        "Pipeline parallel (SupportsPP as the release tests it); NULL = unknown.", default=None
    )
    supports_lora: int | None = col("SupportsLoRA.", default=None)
    supports_multimodal: int | None = col("SupportsMultiModal.", default=None)
    supports_encoder_tp_data: int | None = col(
        "supports_encoder_tp_data (--mm-encoder-tp-mode data).", default=None
    )
    is_hybrid: int | None = col("IsHybrid (attention and state-space layers).", default=None)
    has_inner_state: int | None = col("HasInnerState.", default=None)
    is_attention_free: int | None = col("IsAttentionFree.", default=None)
    supports_transcription: int | None = col("SupportsTranscription.", default=None)
    is_pooling_model: int | None = col("A pooling model.", default=None)
    is_text_generation_model: int | None = col("A text generation model.", default=None)
    supports_eagle3: int | None = col("SupportsEagle3 (can feed an EAGLE-3 draft).", default=None)
    is_moe: int | None = col("MixtureOfExperts in the class's MRO.", default=None)
    evidence: str = col("JSON: capability -> file:line of what decided it.", default="{}")
    mro_path: str = col("JSON list: the class MRO as resolved, for explain.", default="[]")


@table("spec_method", release=True)
class SpecMethod:
    """A speculative decoding method the release accepts."""

    id: int | None = col(default=None, pk=True)
    vllm_version: str = col(index=True)
    method: str = col("The method as written in --speculative-config.")
    canonical: str = col("What the method becomes (legacy MTP aliases -> mtp).")
    kind: str = col("method, or mtp_alias.")
    file: str = col(default="")
    line: int = col(default=0)


@table("draft_parallel", release=True)
class DraftParallel:
    """How the draft's parallel config is built per method (`create_draft_parallel_config`)."""

    id: int | None = col(default=None, pk=True)
    vllm_version: str = col(index=True)
    method: str = col("Canonical speculative method.")
    pp_source: str = col(
        "Draft PP size: target (copied), one (forced 1), target_config (the draft uses "
        "the target's parallel config), none (no draft model) or unknown."
    )
    ep_source: str = col("Draft expert parallel: off, target, target_if_moe or unknown.")
    file: str = col(default="")
    line: int = col(default=0)
    detail: str = col("How it was read.", default="")


@table("draft_mapping", release=True)
class DraftMapping:
    """A target architecture's draft per method, as vLLM derives it (hf_config_override, the EAGLE
    rewrite), for the models the recipes serve: each mapping a judge of the release met, works_from's
    searches included (which releases a search tests decides where else a mapping is listed)."""

    id: int | None = col(default=None, pk=True)
    vllm_version: str = col(index=True)
    platform: str = col()
    target_model_type: str = col("The target's HF model_type.")
    target_arch: str = col("The target's architecture.")
    method: str = col("Canonical speculative method.")
    draft_arch: str = col("The draft architecture vLLM builds.", default="")
    draft_class: str = col("The draft class vLLM loads (module.Class).", default="")
    draft_supports_pp: int | None = col(
        "The draft class supports PP; NULL = unknown.", default=None
    )
    draft_inherits_pp: int | None = col("The draft copies the target's PP size.", default=None)
    status: str = col("ok, error or unknown.", default="ok")
    detail: str = col("How the draft arch was chosen, or the error.", default="")
    file: str = col(default="")
    line: int = col(default=0)


@table("gate_status", release=True)
class GateStatus:
    """A curated runtime gate (data/gates.yaml) checked against the release by its anchors."""

    id: int | None = col(default=None, pk=True)
    vllm_version: str = col(index=True)
    rule_id: str = col("The rule's id in data/gates.yaml.")
    status: str = col("verified (every anchor holds, the rule applies) or unverified.")
    effect: str = col("config_error, startup_error, warning or fallback.", default="")
    message: str = col("vLLM's message when the rule fires.", default="")
    file: str = col(default="")
    line: int = col(default=0)
    reason: str = col("Which anchors failed (unverified).", default="")


@table("raise_message", release=True)
class RaiseMessage:
    """An error message the release raises, as a template (the raise inventory)."""

    id: int | None = col(default=None, pk=True)
    vllm_version: str = col(index=True)
    file: str = col()
    line: int = col()
    exception: str = col("The exception class raised.", default="")
    template: str = col("The message, f-string holes as {}.")
    condition: str = col("The `if` guarding the raise, when it is one.", default="")


@table("cli_flag", release=True)
class CliFlag:
    """A `vllm serve` option string, or a dotted sub-key of a JSON option."""

    id: int | None = col(default=None, pk=True)
    vllm_version: str = col(index=True)
    flag: str = col("The option string (--tensor-parallel-size, -tp, --no-x, --x.key).", index=True)
    kind: str = col("long, short, negated or subkey.")
    canonical: str = col("The long form it belongs to.")
    value_type: str = col("What value it takes (bool, int, str, json, ...).", default="")
    file: str = col(default="")
    line: int = col(default=0)


@table("cli_value", release=True)
class CliValue:
    """How argparse reads one `vllm serve` option's value (from `_compute_kwargs` and the call)."""

    id: int | None = col(default=None, pk=True)
    vllm_version: str = col(index=True)
    flag: str = col("Canonical long form, or the positional's dest ('model_tag').")
    option_strings: str = col(
        "JSON: every string argparse registers for it (-tp, --no-x, ...).", default="[]"
    )
    dest: str = col("The namespace attribute.", default="")
    action: str = col("argparse action.", default="store")
    nargs: str = col("'' one value; '?', '*', '+' or a count.", default="")
    const: str = col("JSON: argparse const.", default="null")
    type: str = col(
        "The type callable: int, float, str, json, json_or_str, dataclass (pydantic-validated "
        "JSON of json_class), human_readable_int, callable, transform, ...",
        default="",
    )
    parse: int = col("Wrapped in parse_type (its error text).", default=0)
    optional: int = col("Wrapped in optional_type: '' and 'None' read as None.", default=0)
    callable_src: str = col("Source of a type callable the release defines.", default="")
    json_class: str = col(
        "The config class a dataclass-typed option validates against.", default=""
    )
    choices: str = col("JSON list of choices; null = any value.", default="null")
    metavar_only: int = col("The choices are only shown (metavar), not enforced.", default=0)
    choices_file: str = col("Where the choices are written.", default="")
    choices_line: int = col("Line of `choices_file`.", default=0)
    default: str = col("JSON: the default value.", default="null")
    default_kind: str = col("literal, or how the default is computed.", default="literal")
    unknown: str = col("Why this option's value handling is not known.", default="")
    file: str = col(default="")
    line: int = col(default=0)


@table("config_field", release=True)
class ConfigField:
    """A field of a config class a JSON flag is validated against (field '' = the class itself)."""

    id: int | None = col(default=None, pk=True)
    vllm_version: str = col(index=True)
    class_name: str = col(
        "The config class (SpeculativeConfig, KVTransferConfig, ...).", index=True
    )
    field: str = col("The field; '' for the class row.", default="")
    type: str = col("JSON type spec (compat.vllm.config_schema).", default="")
    default: str = col("JSON: the field's default.", default="null")
    default_kind: str = col("literal, factory, or how the default is computed.", default="")
    validators: str = col("JSON: pydantic validators and bounds on the field.", default="[]")
    extra: str = col(
        "Class row: what pydantic does with an unknown key (forbid, ignore, allow, unknown).",
        default="",
    )
    file: str = col(default="")
    line: int = col(default=0)


@table("parser_name", release=True)
class ParserName:
    """A tool-call or reasoning parser registered in the release."""

    id: int | None = col(default=None, pk=True)
    vllm_version: str = col(index=True)
    kind: str = col("tool or reasoning.")
    name: str = col("The name --tool-call-parser / --reasoning-parser takes.")
    module: str = col("Module of the parser class.", default="")
    class_name: str = col("The parser class.", default="")
    file: str = col(default="")
    line: int = col(default=0)


@table("class_attr_fact", release=True)
class ClassAttrFact:
    """Classes that set a capability attribute gates depend on (LSE for DCP, aux states over PP)."""

    id: int | None = col(default=None, pk=True)
    vllm_version: str = col(index=True)
    attr: str = col(
        "The attribute (can_return_lse_for_decode, supports_aux_hidden_states_over_pp)."
    )
    class_name: str = col("The class setting it.")
    file: str = col(default="")
    line: int = col(default=0)
    value: str = col("The value as written.", default="")
    via: str = col("class_attr, inherited or instance_attr.", default="")


@table("release_fact", release=True)
class ReleaseFact:
    """Scalar facts of a release read from its source (JSON values), e.g. how the runner is chosen."""

    id: int | None = col(default=None, pk=True)
    vllm_version: str = col(index=True)
    key: str = col("What the fact is (runner_default, argv_rewrite, requirements, ...).")
    value: str = col("JSON value.", default="null")
    file: str = col(default="")
    line: int = col(default=0)


# --------------------------------------------------------------------------- a build's inputs


@table("model_fact")
class ModelFact:
    """What the build knows of a model id's config, and where it came from."""

    model_id: str = col("The HF model id a recipe serves or drafts with.", pk=True)
    status: str = col("resolved or unknown.")
    reason: str = col("Why it is unknown.", default="")
    architectures: str = col("JSON list from config.json.", default="[]")
    model_type: str | None = col("config.json's model_type.", default=None)
    num_nextn_predict_layers: int | None = col("MTP layers, when the config says.", default=None)
    num_experts: int | None = col("Routed experts (0 = dense), when the config says.", default=None)
    source: str = col(
        "The source that answered (lock, local, hub, curated, vllm tests, ...).", default=""
    )
    provenance: str = col("Where exactly (file, URL).", default="")
    revision: str = col("Commit sha of the config.json read (HF Hub or cache).", default="")
    inferred: int = col("1 when inferred (a family name, a quantized copy), not read.", default=0)


@table("shell_variable")
class ShellVariable:
    """A placeholder the recipes checkout writes into commands ($HEAD_IP): the user's shell fills it."""

    id: int | None = col(default=None, pk=True)
    pattern: str = col("Regex over the name: 'HEAD_IP', '[A-Za-z0-9_]+_DP_RPC_PORT'.")
    file: str = col("Where the recipes write it (relative to the checkout).", default="")
    line: int = col("Its line there.", default=0)


@table("command")
class Command:
    """Synthesized argv (JSON), stored once however many releases judge it."""

    id: int | None = col(default=None, pk=True)
    argv: str = col("JSON [[role, [arg, ...]], ...]: each node's argv ('' role = the head).")


# --------------------------------------------------------------------------- verdicts


@table("verdict")
class Verdict:
    """One (release, platform, hardware, recipe, variant, strategy, feature, mode): can it start?"""

    id: int | None = col(default=None, pk=True)
    vllm_version: str = col(index=True)
    platform: str = col()
    hardware: str = col(
        "Taxonomy hardware profile; '' where the args do not depend on it.", default=""
    )
    recipe: str = col(
        "Recipe file, relative to the recipes root (models/zai-org/GLM-5.2.yaml).", index=True
    )
    model_id: str = col("The model the command serves.", default="")
    variant: str = col("The recipe variant.", default="")
    strategy: str = col(
        "The strategy (single_node_tp, multi_node_tp_pp, pd_cluster, ...).", default=""
    )
    feature: str = col("The feature switched on; '' for the base command.", default="")
    mode: str = col("The feature's mode; '' for a feature without modes.", default="")
    status: str = col(
        "ok, blocked (cannot start), warning (starts with a fallback) or unknown "
        "(a needed fact is missing)."
    )
    message: str = col("The error vLLM raises (blocked) or logs (warning).", default="")
    reason: str = col("The decisive step of the reason chain.", default="")
    evidence: str = col("file:line in the release, '; '-separated.", default="")
    gated: int = col("1 when the recipe already keeps this feature off this strategy.", default=0)
    pinned: int = col("1 when vllm_version is the release the recipe pins.", default=0)
    judged: int = col(
        "1 at the releases the build judges (the pin, or every explicit --vllm).", default=0
    )
    works_from: str = col(
        "First release on the index where this combination starts (bisection).", default=""
    )
    argv: str = col("JSON [[role, [arg, ...]], ...]; '' when stored once in `command`.", default="")
    command_id: int | None = col(
        "-> command.id: the argv, shared by every release judged.", default=None
    )
    chain: str = col("JSON list of reason steps, each tagged [status] or [note].", default="[]")
    cause_kind: str = col(
        "Kind of the primary cause (compat.verdict.cause); '' when ok.", default=""
    )
    cause: str = col("The primary cause's label.", default="")
    cause_id: int | None = col("-> cause.id.", default=None)
    profiles: str = col(
        "Comma-separated hardware profiles this row stands for (hardware '' = several).", default=""
    )
    source: str = col(
        "Surfaces of the recipes site emitting the argv: api, ui or api,ui.", default="ui"
    )

    def steps(self) -> list[str]:
        return list(json.loads(self.chain or "[]"))


@table("cause")
class CauseRow:
    """One cause per (recipe, cause key): the element whose args make commands fail, and its fix."""

    id: int | None = col(default=None, pk=True)
    recipe: str = col("Recipe file.", index=True)
    kind: str = col(
        "feature, pin, variant, hardware, strategy, base_args, recipe, omni or fact; `gate` for "
        "a gate whose hidden commands start (an ungate proposal, linked to no verdict)."
    )
    element: str = col(
        "The recipe element (features.spec_decoding, model.base_args, variants.fp8, ...).",
        default="",
    )
    mode: str = col("The feature's mode, for feature causes.", default="")
    carrier: str = col(
        "For pin causes: the element carrying the args a later release accepts.", default=""
    )
    label: str = col(
        "How reports name it (spec_decoding:mtp, the pinned release, ...).", default=""
    )
    finding: str = col("The decisive finding it explains (first met).", default="")
    field: str = col("Recipe YAML path the fix or annotation points at.", default="")
    line: int = col("Its line in the recipe file (1-based; 0 = unknown).", default=0)
    works_from: str = col(
        "First release on the index where every command it blocks starts.", default=""
    )
    clear_from: str = col(
        "With no release known to start them: the first where none of the commands it blocks is "
        "known to fail (there the verdict is unknown: a missing fact decides).",
        default="",
    )
    fix_kind: str = col(
        "gate, mode_variants, pin_bump, spelling, strategy, ungate or none ('' = not planned).",
        default="",
    )
    fix: str = col("One line: what the fix does.", default="")
    fix_why: str = col("Why there is no automatic fix, or what to check by hand.", default="")
    fix_edits: str = col("JSON list of edits (compat.fix.edits).", default="[]")
    finding_keys: str = col(
        "JSON list of the engine's keys of the findings it explains (draft_pp:mtp, target_pp, "
        "gate:<rule id>, ...).",
        default="[]",
    )

    def edits(self) -> list[Any]:
        from compat.fix.edits import loads

        return loads(self.fix_edits)


@table("verdict_cause")
class VerdictCause:
    """Every cause of a verdict row (a row can fail for more than one reason)."""

    verdict_id: int = col("-> verdict.id.", pk=True)
    cause_id: int = col("-> cause.id.", pk=True, index=True)


@table("recipe_file")
class RecipeFile:
    """Recipe files as the build read them, so an apply can refuse a file changed since."""

    path: str = col("Path relative to the recipes root.", pk=True)
    sha256: str = col("sha256 of the file's bytes.")


#: A capability row, by the name the engine and readers use for it.
Capability = ArchCapability
#: A verdict row.
VerdictRow = Verdict

RELEASE_TABLES = [t for t in TABLES.values() if t.release]


# --------------------------------------------------------------------------- views (schema/views.sql)


@dataclass(frozen=True)
class View:
    name: str
    doc: str
    tables: tuple[str, ...]  # where its columns come from, first match wins
    extra: dict[str, str] = field(default_factory=dict)  # docs of computed or renamed columns


VIEWS = {
    v.name: v
    for v in (
        View(
            "v_arch_capability",
            "Architecture capabilities per release and platform (booleans 0/1, NULL = unknown).",
            ("arch_capability",),
        ),
        View(
            "v_draft",
            "The draft vLLM builds per target model type and speculative method, per release.",
            ("draft_mapping",),
        ),
        View(
            "v_gate",
            "Curated runtime gates and whether each release still holds their anchors.",
            ("gate_status",),
        ),
        View("v_flag", "`vllm serve` flags and JSON sub-keys per release.", ("cli_flag",)),
        View("v_parser", "Tool-call and reasoning parser names per release.", ("parser_name",)),
        View(
            "v_flag_value",
            "How argparse reads each `vllm serve` option's value per release: type, "
            "nargs, choices and where the choices are written.",
            ("cli_value",),
        ),
        View(
            "v_config_field",
            "Keys (and their types) the JSON config flags accept per release.",
            ("config_field",),
        ),
        View(
            "v_verdict",
            "Every verdict: can this recipe, variant, strategy and feature mode start on "
            "this vLLM release? With its primary cause and fix.",
            ("verdict", "cause"),
        ),
        View(
            "v_cause",
            "One row per (recipe, cause): what fails, where in the recipe file, the fix "
            "(or why there is none), and the ungated judged commands it blocks.",
            ("cause",),
            {
                "cause_kind": "The cause's kind (feature, pin, variant, hardware, strategy, base_args, "
                "recipe, omni or fact).",
                "cause": "The cause's label.",
                "rows": "Ungated judged verdict rows it explains.",
                "blocked": "How many of them are blocked.",
                "strategies": "Distinct strategies among them.",
                "variants": "Distinct variants among them.",
                "hardware": "Distinct hardware profiles among them.",
                "releases": "The releases they were judged at, comma-separated.",
            },
        ),
        View(
            "v_finding",
            "The verdicts that are not ok, with whether the recipe gates them and whether "
            "the release is the one the recipe pins.",
            ("verdict",),
        ),
    )
}


def column_doc(relation: str, column: str) -> str:
    """The description of a table's or view's column ('' when it has none)."""
    if relation in TABLES:
        return next((c.doc for c in TABLES[relation].columns if c.name == column), "")
    view = VIEWS.get(relation)
    if view is None:
        return ""
    if column in view.extra:
        return view.extra[column]
    for name in view.tables:
        doc = column_doc(name, column)
        if doc:
            return doc
    return ""


def relation_doc(relation: str) -> str:
    if relation in TABLES:
        return TABLES[relation].doc
    return VIEWS[relation].doc if relation in VIEWS else ""
