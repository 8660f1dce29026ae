"""Which draft vLLM builds for a --speculative-config, and whether its parallel config holds.

SpeculativeConfig picks the method (written, or detected from the draft's name), the draft
architecture (the MTP rewrite of the target's config by the release's own
`hf_config_override`, the draft checkpoint's architectures through EAGLEConfig's rewrite, a
speculators algorithm), and the draft's parallel config (`create_draft_parallel_config`,
which copies the target's pipeline-parallel size in some releases). A draft class without
PP support under an inherited PP size > 1 fails `verify_with_parallel_config`.

The result is a `DraftResolution`: the findings, plus what the runtime gates read of the
draft (its method, PP size and class capabilities) and the draft mapping row for v_draft.
"""

from __future__ import annotations

import reprlib
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from compat.hf import ModelFacts
from compat.recipes import ServeArgs
from compat.verdict.findings import Finding
from compat.verdict.knowledge import Knowledge
from compat.verdict.spec_tokens import DraftCounts, check as check_counts, counts_from_config
from compat.sources.tree import speculative_file
from compat.vllm.speculative import (
    SPECULATORS_ALGOS,
    dspark_rewrite,
    eagle_rewrite,
    speculators_rewrite,
)
from compat.vocab import Status

PP_MSG = (
    "Pipeline parallelism is not supported for this model. "
    "Supported models implement the `SupportsPP` interface."
)
#: How a user decides a config fact the engine lacks.
DECIDES = " (a facts lock, --hf-config-dir or the Hub decides it)"
#: Speculative methods whose draft vLLM derives from the target's own config (hf_config_override).
TARGET_DRAFTED = frozenset({"mtp"})


@lru_cache(maxsize=1)
def method_tables() -> dict[str, Any]:
    """data/speculative_methods.yaml: how SpeculativeConfig names and builds a draft."""
    import yaml

    from compat.resources import data_dir

    doc: dict[str, Any] = yaml.safe_load(
        (data_dir() / "speculative_methods.yaml").read_text(encoding="utf-8")
    )
    return doc


@dataclass
class DraftResolution:
    """What the draft checks found, and what the runtime gates read of the draft."""

    findings: list[Finding]
    method: str | None = None  # canonical method, once known
    draft_pp: int | None = None  # the draft's PP size as vLLM builds it
    draft_cap: dict[str, Any] | None = None  # the draft class's capability row
    mapping: dict[str, Any] | None = None  # the v_draft row, for a target whose config is known
    notes: list[str] = field(default_factory=list)


def _cls_ev(cap: dict[str, Any] | None) -> str:
    return f"{cap['file']}:{cap['line']}" if cap and cap.get("file") else ""


def written_method(k: Knowledge, spec: dict[str, Any]) -> str | None:
    """The method SpeculativeConfig takes: as written, else from `model` (data/speculative_methods.yaml);
    a draft_model whose name says eagle/eagle3/dflash/dspark is re-detected as that method."""
    method, model = spec.get("method"), spec.get("model")
    tables = method_tables()
    if method is None:
        for rule in tables["method_from_model"]:
            when = rule["when"]
            if (
                (
                    when == "dotted_module_path"
                    and isinstance(model, str)
                    and "." in model
                    and "/" not in model
                )
                or (when == "ngram_name" and model in ("ngram", "[ngram]"))
                or when == "otherwise"
            ):
                method = rule["method"]
                break
    if method == "draft_model":
        low = (model or "").lower()
        for rule in tables["method_from_draft_name"]:
            if rule["needle"] in low and rule["method"] in k.methods:
                return str(rule["method"])
    return method


def resolve_draft(
    k: Knowledge,
    models: Any,
    platform: str,
    args: ServeArgs,
    facts: ModelFacts,
    target_config: dict[str, Any],
) -> DraftResolution:
    """The draft checks of one speculative config on one target (see the module doc)."""
    spec = args.speculative_config or {}
    method = _accepted_method(k, spec)
    if isinstance(method, Finding):
        return DraftResolution([method])
    canonical = k.methods[method]
    step = f"method {method}" + (f" (alias of {canonical})" if canonical != method else "")
    refused = _without_model(k, spec, canonical, step)
    if refused is not None:
        return DraftResolution([refused])
    pc = k.draft_pc.get(canonical)
    pp_src = pc["pp_source"] if pc else "unknown"
    pp = args.pipeline_parallel_size
    res = DraftResolution(
        [], canonical, {"target": pp, "target_config": pp, "one": 1, "none": None}.get(pp_src)
    )
    pc_ev = f"{pc['file']}:{pc['line']}" if pc else ""
    if pp_src in ("none", "target_config") and _no_draft_model(
        k, res, spec, canonical, pp_src, step, pc_ev
    ):
        return res
    found = _draft_arch(k, models, canonical, method, spec, facts, target_config, step)
    if isinstance(found, Finding):
        # What the count check decides without the draft config still counts (no model given).
        counted = check_counts(k, spec, canonical, True, None, step)
        if counted is not None and counted.status == Status.BLOCKED:
            res.findings.append(counted)
        res.findings.append(found)
        return res
    draft_archs, how, counts = found
    if _count_stops(res, check_counts(k, spec, canonical, True, counts, step)):
        return res
    inherits = pp_src in ("target", "target_config")
    if draft_archs and facts.architectures:  # no v_draft row for a target whose config is unknown
        res.draft_cap = k.caps.get((platform, draft_archs[0]))
        res.mapping = _mapping(
            platform, facts, canonical, draft_archs[0], res.draft_cap, inherits, how
        )
    if draft_archs and facts.architectures and res.draft_cap is None:
        # The draft's ModelConfig resolves its class like any model's, at every PP size: an
        # architecture the registry lacks raises "Model architectures [...] are not supported
        # for now" unless the Transformers backend provides it (as for a target: unknown).
        res.findings.append(
            Finding(
                Status.UNKNOWN,
                f"{step}: {how}; draft arch {draft_archs[0]} not registered in vLLM {k.version}; "
                "vLLM may fall back to the Transformers backend for it",
                key=f"draft_unregistered:{canonical}",
            )
        )
        return res
    res.findings.append(
        _draft_pp(
            k, platform, canonical, step, how, draft_archs, spec.get("model"), inherits, pp, pc_ev
        )
    )
    return res


def _no_draft_model(
    k: Knowledge,
    res: DraftResolution,
    spec: dict[str, Any],
    canonical: str,
    pp_src: str,
    step: str,
    pc_ev: str,
) -> bool:
    """A branch of __post_init__ that builds no draft model of its own (no draft, or the target's
    parallel config): its count check, then its PP verdict. True when the resolution is done."""
    if _count_stops(res, check_counts(k, spec, canonical, False, None, step)):
        return True
    if pp_src == "target_config" and canonical == "extract_hidden_states":
        return False  # its draft is ExtractHiddenStatesModel, looked up below
    text = (
        "no draft model, no draft parallel config"
        if pp_src == "none"
        else "the draft is the target itself; PP checked on the target"
    )
    res.findings.append(
        Finding(Status.OK, f"{step}: {text}", "", [pc_ev], key=f"draft:{canonical}")
    )
    return True


def _count_stops(res: DraftResolution, found: Finding | None) -> bool:
    """Record the count check's finding; True when it refuses the config (nothing after it in
    __post_init__ runs)."""
    if found is None:
        return False
    res.findings.append(found)
    return found.status == Status.BLOCKED


def _without_model(k: Knowledge, spec: dict[str, Any], canonical: str, step: str) -> Finding | None:
    """SpeculativeConfig.__post_init__ with num_speculative_tokens and no model: it picks the
    draft of a model-less method, or raises (release fact `speculative_without_model`)."""
    rule = k.release_facts.get("speculative_without_model") or {}
    if spec.get("model") is not None or spec.get("num_speculative_tokens") is None:
        return None
    if rule.get("undecided"):
        ev = f"{rule['file']}:{rule['undecided']}"
        return Finding(
            Status.UNKNOWN,
            f"{step}: num_speculative_tokens without a model; SpeculativeConfig.__post_init__ "
            f"picks the draft by more than the method there ({ev}), which is not replayed",
            "",
            [ev],
            key=f"spec_no_model_undecided:{canonical}",
        )
    if rule.get("methods") is None:
        return None
    branch = rule["methods"].get(canonical) or rule.get("else") or {}
    if branch.get("outcome") != "raise":
        return None
    ev = f"{rule['file']}:{branch['line']}"
    return Finding(
        Status.BLOCKED,
        f"{step}: num_speculative_tokens without a model; SpeculativeConfig.__post_init__ names "
        f"no draft for this method and raises ({ev})",
        branch.get("message", ""),
        [ev],
        key=f"spec_no_model:{canonical}",
    )


def _accepted_method(k: Knowledge, spec: dict[str, Any]) -> str | Finding:
    """The method as written, or what SpeculativeConfig says before any draft is looked at: a
    method or model that is not a string, a release whose methods are unknown, a method it
    does not accept."""
    for name in ("method", "model"):
        val = spec.get(name)
        # SpeculativeConfig declares both `str | None`; JSON junk ([1], {...}, 5) fails validation.
        if val is not None and not isinstance(val, str):
            return Finding(
                Status.BLOCKED,
                f"--speculative-config {name} must be a string, not "
                f"{type(val).__name__}: {reprlib.repr(val)}",
                f"{name}: Input should be a valid string",
                key=f"spec_type:{name}:{reprlib.repr(val)}",
            )
    if not k.methods:
        return Finding(
            Status.UNKNOWN, f"speculative methods of vLLM {k.version} unknown", key="spec_methods"
        )
    method = written_method(k, spec)
    if method not in k.methods:
        return Finding(
            Status.BLOCKED,
            f"speculative method {method!r} is not accepted by vLLM {k.version}",
            f"Input should be one of the SpeculativeMethod literals of vLLM {k.version}; got {method!r}",
            key=f"spec_method:{method}",
        )
    return method


def _draft_arch(
    k: Knowledge,
    models: Any,
    canonical: str,
    method: str,
    spec: dict[str, Any],
    facts: ModelFacts,
    target_config: dict[str, Any],
    step: str,
) -> tuple[list[str], str, DraftCounts] | Finding:
    """(the draft architectures vLLM builds, how, what its config says of the token count) or
    the finding that stops the check."""
    model = spec.get("model")
    if canonical == "extract_hidden_states":
        return ["ExtractHiddenStatesModel"], "ExtractHiddenStatesConfig", DraftCounts()
    if canonical == "mtp":
        return _mtp_draft(k, method, facts, target_config, step)
    if canonical in method_tables()["draft_checkpoint_methods"]:
        found: tuple[list[str], str, DraftCounts] | Finding
        if model is None and spec.get("num_speculative_tokens") is not None:
            # The model-less chain made the target checkpoint the draft (`_without_model`).
            found = _target_draft(k, facts, target_config)
        else:
            found = _checkpoint_draft(k, models, canonical, model, step)
        if canonical == "dspark" and not isinstance(found, Finding) and found[0]:
            found = _dspark_archs(k, facts, *found)
        return found
    return [], "", DraftCounts.unknown(f"the {canonical} draft config is not read")


def _target_draft(
    k: Knowledge, facts: ModelFacts, target_config: dict[str, Any]
) -> tuple[list[str], str, DraftCounts]:
    """The draft built from the target's own checkpoint: its architectures and counts after
    hf_config_override."""
    runner = k.runner
    if runner is None or not runner.available or not facts.architectures:
        why = f"hf_config_override of vLLM {k.version} unavailable"
        return [], "", DraftCounts.unknown(why)
    res = runner.run(target_config)
    if res.status != "ok":
        return [], "", DraftCounts.unknown(f"hf_config_override on {facts.model_id}: {res.detail}")
    archs = list(res.architectures) if res.changed else list(facts.architectures)
    how = f"the target checkpoint {facts.model_id} is the draft ({archs[0] if archs else '?'})"
    counts = counts_from_config(target_config, res, _config_types(k))
    if facts.config is None:
        counts = DraftCounts.unknown(f"the config.json of {facts.model_id} is not read{DECIDES}")
    return archs, how, counts


def _dspark_archs(
    k: Knowledge, facts: ModelFacts, archs: list[str], how: str, counts: DraftCounts
) -> tuple[list[str], str, DraftCounts]:
    """__post_init__'s DSpark rewrite of a draft built from a full target config."""
    if k.tree is None:
        return [], how, counts
    new, line, why = dspark_rewrite(k.tree, archs, facts.model_type)
    if new is None and line:
        return [], f"{how}; DSpark rewrite ({speculative_file(k.tree)}:{line}): {why}", counts
    if new is None or new == archs:
        return archs, how, counts
    return new, f"{how}; DSpark rewrite ({speculative_file(k.tree)}:{line}) -> {new[0]}", counts


def _config_types(k: Knowledge) -> list[str]:
    return list((k.release_facts.get("speculative_token_count") or {}).get("config_types") or [])


def _mtp_draft(
    k: Knowledge, method: str, facts: ModelFacts, target_config: dict[str, Any], step: str
) -> tuple[list[str], str, DraftCounts] | Finding:
    runner = k.runner
    if runner is None or not runner.available:
        return Finding(
            Status.UNKNOWN,
            f"{step}: hf_config_override of vLLM {k.version} unavailable",
            key="spec:hf_config_override",
        )
    res = runner.run(target_config)
    if res.status == "error" and facts.config is None and facts.num_nextn_predict_layers is None:
        # The config was rebuilt from facts that leave the MTP layers out (no config.json
        # read): vLLM's error may be about a field we do not know, not one the model lacks.
        return Finding(
            Status.UNKNOWN,
            f"{step}: hf_config_override on {facts.model_id} raises on a config "
            f"rebuilt without its MTP layer count ({res.detail}); the real config.json decides",
            key="spec:mtp_config",
        )
    if res.status != "ok":
        return Finding(
            Status.BLOCKED if res.status == "error" else Status.UNKNOWN,
            f"{step}: hf_config_override on {facts.model_id}: {res.detail}",
            res.detail,
            key=f"spec:hf_config_override:{facts.model_id}:{res.detail}",
        )
    if res.model_type not in k.mtp_types:
        return Finding(
            Status.BLOCKED,
            f"{step}: hf_config_override leaves {facts.model_id} as model_type "
            f"{res.model_type!r}, not an MTP type in vLLM {k.version}",
            f"Unsupported speculative method: '{method}'",
            [k.raise_at("Unsupported speculative method")],
            key=f"spec:mtp_type:{facts.model_id}:{res.model_type}",
        )
    archs = list(res.architectures)
    how = (
        f"SpeculativeConfig.hf_config_override ({runner.file}:{res.line}) rewrites "
        f"{facts.model_type}/{facts.architectures[0]} -> {archs[0] if archs else '?'}"
    )
    counts = counts_from_config(target_config, res, _config_types(k))
    if facts.config is None and facts.num_nextn_predict_layers is None:
        counts = DraftCounts.unknown(
            f"{facts.model_id}'s MTP layer count (the draft's n_predict) is not known{DECIDES}"
        )
    return archs, how, counts


def _checkpoint_draft(
    k: Knowledge, models: Any, canonical: str, model: Any, step: str
) -> tuple[list[str], str, DraftCounts] | Finding:
    dfacts = models.resolve(model) if isinstance(model, str) else None
    spec_cfg = (dfacts.config or {}) if dfacts is not None else {}
    if spec_cfg.get("speculators_model_type") and k.tree is not None:
        # Speculators-format checkpoints skip the EAGLEConfig wrap: the release's
        # registered algorithm sets the architecture.
        rew, line, why = speculators_rewrite(k.tree, spec_cfg)
        if rew is None:
            blocked = why.startswith(("ValueError", "speculators type"))
            return Finding(
                Status.BLOCKED if blocked else Status.UNKNOWN,
                f"{step}: speculators checkpoint {model}: {why}",
                why,
                key=f"spec:speculators:{model}:{why}",
            )
        why = f"the speculators config class of {model} may set it"
        counts = DraftCounts(
            spec_cfg.get("n_predict"), None, None, {"block_size": why, "model_type": why}
        )
        return (
            rew,
            f"speculators algorithm {spec_cfg['speculators_model_type']!r} "
            f"({SPECULATORS_ALGOS}:{line}) sets {rew[0]}",
            counts,
        )
    if dfacts is None or dfacts.status != "resolved" or not dfacts.architectures:
        return [], "", DraftCounts.unknown(f"draft checkpoint {model!r} unresolved{DECIDES}")
    archs = list(dfacts.architectures)
    how = f"draft checkpoint {model} declares {archs[0]}"
    runner = k.runner
    counts = DraftCounts.unknown(
        f"the config.json of draft checkpoint {model!r} is not read{DECIDES}"
    )
    if dfacts.config and runner is not None and runner.available:
        # The draft's ModelConfig gets hf_overrides=SpeculativeConfig.hf_config_override too,
        # before any EAGLE wrapping.
        res = runner.run(dict(dfacts.config))
        if res.status == "ok":
            counts = counts_from_config(dict(dfacts.config), res, _config_types(k))
        if res.status == "ok" and res.changed and res.architectures:
            archs = list(res.architectures)
            how += (
                f"; hf_config_override on the draft ({runner.file}:{res.line}) "
                f"-> {res.model_type}/{archs[0]}"
            )
    if canonical in method_tables()["eagle_rewrite_methods"] and k.tree is not None:
        rew, line, _why = eagle_rewrite(k.tree, canonical, archs)
        if rew:
            how += f"; EAGLEConfig rewrite (vllm/transformers_utils/configs/eagle.py:{line}) -> {rew[0]}"
            archs = rew
    return archs, how, counts


def _mapping(
    platform: str,
    facts: ModelFacts,
    method: str,
    draft_arch: str,
    dcap: dict[str, Any] | None,
    inherits: bool,
    how: str,
) -> dict[str, Any]:
    return {
        "platform": platform,
        "target_model_type": facts.model_type or "",
        "target_arch": facts.architectures[0],
        "method": method,
        "draft_arch": draft_arch,
        "draft_class": dcap["class_path"] if dcap else "",
        "draft_supports_pp": dcap["supports_pp"] if dcap else None,
        "draft_inherits_pp": int(inherits),
        "status": "ok" if dcap else "unknown",
        "detail": f"{how} (model {facts.model_id})",
        "file": dcap["file"] if dcap else "",
        "line": dcap["line"] if dcap else 0,
    }


def _draft_pp(
    k: Knowledge,
    platform: str,
    canonical: str,
    step: str,
    how: str,
    draft_archs: list[str],
    model: Any,
    inherits: bool,
    pp: int,
    pc_ev: str,
) -> Finding:
    """The draft's own PP check: it applies only when the draft inherits a PP size > 1."""
    key = f"draft_pp:{canonical}"
    if not inherits or pp <= 1:
        why = "PP 1" if pp <= 1 else f"draft PP forced to 1 ({pc_ev})"
        return Finding(
            Status.OK, f"{step}: {how or 'draft'}; {why}, no draft PP check", "", [pc_ev], key=key
        )
    if draft_archs:
        dcap = k.caps.get((platform, draft_archs[0]))
        if dcap is None:
            return Finding(
                Status.UNKNOWN,
                f"{step}: {how}; draft arch {draft_archs[0]} not registered in vLLM {k.version}",
                key=f"{key}:{draft_archs[0]}",
            )
        if dcap["supports_pp"]:
            return Finding(
                Status.OK,
                f"{step}: {how}; draft {dcap['class_path']} supports PP",
                "",
                [_cls_ev(dcap), pc_ev],
                key=key,
            )
        return Finding(
            Status.BLOCKED,
            f"{step}: {how}; draft class {dcap['class_path']} lacks PP support, and "
            f"create_draft_parallel_config copies pipeline_parallel_size={pp} from the target ({pc_ev}); "
            "the draft's verify_with_parallel_config raises",
            PP_MSG,
            [_cls_ev(dcap), pc_ev, k.raise_at("Pipeline parallelism is not supported")],
            key=key,
        )
    # Unknown draft checkpoint: decide only if every class the method can produce agrees.
    prefix = method_tables()["draft_class_prefix"].get(canonical)
    if prefix:
        cands = [
            cp
            for (p, a), cp in k.caps.items()
            if p == platform
            and a.startswith(prefix)
            and "_SPECULATIVE_DECODING_MODELS" in (cp.get("category") or "")
        ]
        if cands and not any(cp["supports_pp"] for cp in cands):
            return Finding(
                Status.BLOCKED,
                f"{step}: draft checkpoint {model!r} unresolved, but none of the "
                f"{len(cands)} {prefix}* draft classes of vLLM {k.version} supports PP and the draft "
                f"inherits pipeline_parallel_size={pp} ({pc_ev})",
                PP_MSG,
                [pc_ev, k.raise_at("Pipeline parallelism is not supported")],
                key=key,
            )
    return Finding(
        Status.UNKNOWN,
        f"{step}: draft checkpoint {model!r} unresolved; its PP support decides",
        key=f"{key}:{model}",
    )
