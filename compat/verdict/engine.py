"""The one place that decides: (combination, release) -> status, message, reason chain, evidence.

Every consumer (check, overrides, site, explain, SQL) reads the rows this writes,
so they cannot disagree. Status precedence: blocked > unknown > warning > ok; a
check that lacks a fact says `unknown` with the reason, never `ok`.
"""

from __future__ import annotations

import json
import re
import reprlib
from functools import lru_cache
from dataclasses import dataclass, field, replace
from typing import Any

from compat.hf import ModelFacts, ModelResolver
from compat.recipes import Combination, ServeArgs, parse_serve_args
from compat.verdict import gates
from compat.verdict.arguments import check_arguments
from compat.verdict.config_values import format_errors
from compat.verdict.knowledge import Knowledge
from compat.verdict.shell import ShellVars
from compat.vllm.cli_surface import INTERNAL_FIELDS
from compat.vocab import status_rank, worst
from compat.vllm.speculative import SPECULATORS_ALGOS, eagle_rewrite, speculators_rewrite

#: A chain step that explains without deciding (e.g. "decided without the model config").
NOTE = "note"
PP_MSG = ("Pipeline parallelism is not supported for this model. "
          "Supported models implement the `SupportsPP` interface.")
EP_MSG = "Number of experts in the model must be greater than 0 when expert parallelism is enabled."
INTERNAL_SPEC_FIELDS = INTERNAL_FIELDS["SpeculativeConfig"]
# Speculative methods whose draft vLLM derives from the target's own config (hf_config_override).
TARGET_DRAFTED = frozenset({"mtp"})


@dataclass
class Finding:
    status: str
    step: str
    message: str = ""
    evidence: list[str] = field(default_factory=list)
    # argument: vLLM's argument handling (parse, validate_parsed_serve_args, API-server checks);
    # config: rejected while building the config; startup: at model load / engine start
    stage: str = "config"
    key: str = ""  # what failed, the same at every release ('flag:--nnodes', 'target_pp'); '' = the step


def finding_key(f: Finding, version: str) -> str:
    """A finding's identity across releases: its key, else its step without release-specific text."""
    if f.key:
        return f.key
    return re.sub(r"\.py:\d+", ".py", f.step.replace(version, "<release>"))


@dataclass
class Outcome:
    status: str = "ok"
    message: str = ""
    chain: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    config_status: str = "ok"  # the verdict counting only config-time checks (what golden data covers)
    version: str = ""
    keys: list[tuple[str, str]] = field(default_factory=list)  # (status, finding_key) per chain step
    findings: list[Finding] = field(default_factory=list)  # every step, as added

    def add(self, f: Finding) -> None:
        self.findings.append(f)
        self.keys.append((f.status, finding_key(f, self.version)))
        if f.status == NOTE:  # context for the reader; decides nothing
            self.chain.append(f"[{NOTE}] {f.step}")
            return
        if f.stage in ("argument", "config") and status_rank(f.status) > status_rank(self.config_status):
            self.config_status = f.status
        self.chain.append(f"[{f.status}] {f.step}")
        for e in f.evidence:
            if e and e not in self.evidence:
                self.evidence.append(e)
        if status_rank(f.status) > status_rank(self.status):
            self.status = f.status
            if f.message:
                self.message = f.message
        elif f.status == self.status and f.message and not self.message and f.status != "ok":
            self.message = f.message

    @property
    def reason(self) -> str:
        decisive = [c for c in self.chain if c.startswith(f"[{self.status}]")]
        return (decisive[0] if decisive else (self.chain[-1] if self.chain else ""))[len(self.status) + 3:]


@lru_cache(maxsize=8192)
def _parse(argv: tuple[str, ...]) -> ServeArgs:
    """Parsed argv, shared by every release a combination is judged at (never mutated)."""
    return parse_serve_args(list(argv))


def known_flag(k: Knowledge, t: Any) -> dict[str, Any] | None:
    """The release's flag row a token matches the way vLLM's parser matches it; None: no such flag.

    (`--no-x` matches only where the release defines it; the engine decides the boolean
    fallback separately.) The spelling fixer uses this same predicate.
    """
    flag = "--no-" + t.flag[2:] if t.negated else t.flag
    return k.flags.get(flag) or (k.flags.get(t.raw.split("=")[0]) if t.is_short else None)


@lru_cache(maxsize=1)
def _verified_rewrites() -> frozenset[str]:
    """The parse_args shapes the argument replay reproduces (data/argv_rewrites.yaml)."""
    import yaml

    from compat.resources import data_dir

    doc = yaml.safe_load((data_dir() / "argv_rewrites.yaml").read_text(encoding="utf-8"))
    return frozenset(str(v["sha"]) for v in doc["verified"])


def argv_rewrite_verified(k: Knowledge) -> bool:
    """Is the release's argv rewrite one the replay was checked against vLLM for?"""
    shape = k.release_facts.get("argv_rewrite")
    return isinstance(shape, dict) and shape.get("sha") in _verified_rewrites()


#: Flags saying only which node of a deployment a command runs on. No model, parallel-layout
#: or gate check reads them, so the nodes of one deployment share those checks' findings.
NODE_POSITION_FLAGS = frozenset({"--node-rank", "--headless", "--data-parallel-start-rank"})


def _layout(args: ServeArgs) -> tuple:
    """What the model checks read of an argv: everything but the node-position flags."""
    return (args.model, tuple(args.positionals),
            tuple((t.flag, t.subkey, t.value, t.negated) for t in args.tokens
                  if t.flag not in NODE_POSITION_FLAGS))


def _cls_ev(cap: dict[str, Any] | None) -> str:
    return f"{cap['file']}:{cap['line']}" if cap and cap.get("file") else ""


class Judge:
    """Decides combinations at one release; caches per model and speculative config."""

    def __init__(self, k: Knowledge, models: ModelResolver,
                 recipe_moe: dict[str, bool] | None = None, shell: ShellVars | None = None) -> None:
        self.k = k
        self.models = models
        # Placeholders the recipes define ($HEAD_IP, ...): values the user's shell supplies.
        self.shell = shell if shell is not None else ShellVars()
        self._arg_cache: dict[tuple[str, ...], list[Finding]] = {}
        # The recipe's own `model.architecture: moe|dense`, used only when the model's
        # config does not give an expert count (and said so in the chain).
        self.recipe_moe = recipe_moe or {}
        self._spec_cache: dict[tuple, tuple[list[Finding], dict[str, Any]]] = {}
        # Draft mappings met while judging recipe models (added to draft_mapping / v_draft).
        self.drafts: dict[tuple, dict[str, Any]] = {}
        self._meta: dict[str, Any] = {}
        self._gate_hits: dict[str, list[tuple[str, Any, dict[str, Any]]]] = {}

    # -- entry ---------------------------------------------------------------------
    def judge(self, c: Combination) -> Outcome:
        out = Outcome(version=self.k.version)
        if c.omni:
            out.add(Finding("unknown", "served by vLLM-Omni (meta.tasks has omni), a separate package "
                            "with its own flags; not checked against vLLM"))
            return out
        for p in c.problems:
            out.add(Finding("unknown", f"recipe problem: {p}"))
        facts = self.models.resolve(c.model_id)
        by_layout: dict[tuple, list[Finding]] = {}  # model findings (unprefixed) per layout
        for role, argv in c.argvs:
            args = self._spec_keys_rewritten(_parse(argv))
            prefix = f"{role}: " if role else ""
            checked = self.arguments(argv)
            if checked is None:  # no argparse facts for this release, or a rewrite not verified
                if self.k.values and not argv_rewrite_verified(self.k):
                    out.add(Finding(NOTE, f"{prefix}vLLM {self.k.version}'s argv rewrite "
                                    f"(FlexibleArgumentParser.parse_args) is not one the argument replay is "
                                    "verified against; flag names are checked, and what the replay rejects "
                                    "is unknown"))
                    for f in self.unverified_arguments(argv):
                        out.add(replace(f, step=prefix + f.step, key=prefix + f.key if f.key else ""))
                for f in self._flags(args, prefix):
                    out.add(f)
            else:
                for f in checked:
                    out.add(replace(f, step=prefix + f.step, key=prefix + f.key if f.key else ""))
            for f in self._parsers(args, prefix, tool=checked is None):
                out.add(f)
            for f in self._spec_keys(args, prefix):
                out.add(f)
            layout = _layout(args)
            if layout not in by_layout:
                by_layout[layout] = self._model(c, args, facts, "")
            for f in by_layout[layout]:  # each node's findings carry its role, keys too
                out.add(replace(f, step=prefix + f.step, key=prefix + f.key if f.key else "")
                        if prefix else f)
        if not out.chain:
            out.add(Finding("ok", "no check failed"))
        return out

    # -- arguments, flags and parsers -----------------------------------------------
    def arguments(self, argv: tuple[str, ...] | list[str]) -> list[Finding] | None:
        """vLLM's own argument handling of one argv at this release (compat.verdict.arguments):
        findings with stage `argument`; None when the release's option facts are missing."""
        key = tuple(argv)
        if key in self._arg_cache:
            return self._arg_cache[key]
        if not self.k.values or not argv_rewrite_verified(self.k):
            return None
        partial = any(n.startswith("cli: partial") for n in self.k.notes)
        out = []
        for af in check_arguments(self.k, list(argv), self.shell).findings:
            status = af.status
            if partial and af.key[:1] == ("unrecognized",):
                status = "unknown"  # the flag list of this release is incomplete
            out.append(Finding(status, af.step, af.message, [e for e in af.evidence if e], "argument",
                               "arg:" + "|".join(af.key)))
        self._arg_cache[key] = out
        return out

    def unverified_arguments(self, argv: tuple[str, ...] | list[str]) -> list[Finding]:
        """The replay at a release whose argv rewrite is not verified: what it rejects is
        `unknown` (never ok by default, never blocked on an unproven replay); flag names are
        left to the name checks."""
        key = ("unverified", *argv)
        if key in self._arg_cache:
            return self._arg_cache[key]
        out = []
        for af in check_arguments(self.k, list(argv), self.shell).findings:
            if af.key[:1] == ("unrecognized",):
                continue  # _flags says which names the release lacks
            step = af.step if af.status != "blocked" else (
                f"{af.step} (by the argument replay, not verified for vLLM {self.k.version}'s argv rewrite)")
            out.append(Finding("unknown" if af.status == "blocked" else af.status, step, af.message,
                               [e for e in af.evidence if e], "argument", "arg:" + "|".join(af.key)))
        self._arg_cache[key] = out
        return out

    def _spec_keys_rewritten(self, args: ServeArgs) -> ServeArgs:
        """The --speculative-config dict as `SpeculativeConfig(**...)` receives it: releases whose
        `EngineArgs.create_speculative_config` rewrites the keys first (release_fact
        `speculative_key_normalization`, e.g. `-` -> `_` in 0.33.0) accept `num-speculative-tokens`."""
        spec = args.speculative_config
        rule = (self.k.release_facts.get("speculative_key_normalization") or {}).get("replace")
        if not isinstance(spec, dict) or not rule:
            return args
        old, new = rule
        rewritten = {(key.replace(old, new) if isinstance(key, str) else key): v for key, v in spec.items()}
        return args if rewritten == spec else replace(args, speculative_config=rewritten)

    def _spec_keys(self, args: ServeArgs, prefix: str) -> list[Finding]:
        """--speculative-config is parsed as plain JSON; SpeculativeConfig(**it) validates its keys
        and values when the engine config is built (pydantic, extra forbidden)."""
        spec = args.speculative_config
        sp = self.k.serve_parser
        if not isinstance(spec, dict) or sp is None or "SpeculativeConfig" not in sp.validator.schemas:
            return []
        forbidden = (self.k.release_facts.get("speculative_forbidden_fields") or {})
        for name, row in sorted((forbidden.get("fields") or {}).items()):
            if spec.get(name) is not None:  # SpeculativeConfig._verify_args refuses the field
                ev = f"{forbidden['file']}:{row['line']}"
                return [Finding("blocked", f"{prefix}--speculative-config sets {name}, which SpeculativeConfig."
                                f"_verify_args of vLLM {self.k.version} refuses ({ev})", row["message"], [ev],
                                key=f"{prefix}spec-forbidden:{name}")]
        res = sp.validator.validate("SpeculativeConfig", spec)
        # Fields vLLM fills itself are not keys a user sets (research §5.1); method and model
        # are judged by the speculative checks.
        errors = [e for e in res.errors if e.type == "unexpected_keyword_argument" or (
            e.loc and e.loc[0] not in INTERNAL_SPEC_FIELDS | {"method", "model"}
            and e.type != "missing_argument")]
        if not errors:
            return []
        msg = format_errors("SpeculativeConfig", errors)
        heads = "; ".join(f"{'.'.join(e.loc)}: {e.msg}" for e in errors)
        return [Finding("blocked", f"{prefix}--speculative-config: SpeculativeConfig of vLLM {self.k.version} "
                        f"rejects it ({heads})", msg, res.evidence[:2],
                        key=f"{prefix}spec-keys:{','.join('.'.join(e.loc) for e in errors)}")]

    def _flags(self, args: ServeArgs, prefix: str) -> list[Finding]:
        k = self.k
        if not k.flags:
            return [Finding("unknown", f"{prefix}CLI flags of vLLM {k.version} could not be extracted")]
        out = []
        for t in args.tokens:
            row = known_flag(k, t)
            if row is None and t.negated and t.flag in k.flags:
                # `--no-x` exists only for boolean fields; our type extraction may be wrong.
                if k.flags[t.flag]["value_type"] in ("bool", "bool_or_str"):
                    row = k.flags[t.flag]
                else:
                    out.append(Finding("unknown", f"{prefix}{t.raw}: {t.flag} exists in vLLM {k.version} but "
                                       f"is not known to be boolean (type {k.flags[t.flag]['value_type']})"))
                    continue
            if row is None and any(ch.isspace() for ch in t.raw):
                # One argv item holding a space: argparse takes it for a positional, not an option.
                out.append(Finding(
                    "blocked", f"{prefix}argument {t.raw!r} is a single argv item containing a space; "
                    "argparse treats it as a positional, not an option (split it into two items)",
                    f"vllm serve: error: unrecognized arguments: {t.raw}", key=f"{prefix}argv-space:{t.raw}"))
                continue
            if row is None:
                out.append(Finding(
                    "blocked", f"{prefix}flag {t.raw} does not exist in vLLM {k.version}",
                    f"vllm serve: error: unrecognized arguments: {t.raw}", key=f"{prefix}flag:{t.flag}"))
                continue
            if t.subkey:
                keys = k.subkeys.get(row["canonical"])
                top = t.subkey.split(".")[0].rstrip("+")
                if keys and top not in keys:
                    out.append(Finding(
                        "blocked", f"{prefix}{t.raw}: {top!r} is not a field of the config behind "
                        f"{row['canonical']} in vLLM {k.version}",
                        f"{top}: Extra inputs are not permitted", [f"{row['file']}:{row['line']}"],
                        key=f"{prefix}subkey:{row['canonical']}.{top}"))
        if args.speculative_config_error:
            out.append(Finding("blocked", f"{prefix}--speculative-config is not valid JSON: "
                               f"{args.speculative_config_error}", args.speculative_config_error))
        return out

    def _parsers(self, args: ServeArgs, prefix: str, tool: bool = True) -> list[Finding]:
        """Parser names (the tool parser only when the release's own API-server check is not run)."""
        k, out = self.k, []
        checks = []
        if tool and args.tool_call_parser and args.enable_auto_tool_choice:
            checks.append(("tool", args.tool_call_parser, "--tool-call-parser",
                           f"invalid tool call parser: {args.tool_call_parser}"))
        if args.reasoning_parser and args.reasoning_parser != "none":
            checks.append(("reasoning", args.reasoning_parser, "--reasoning-parser",
                           f"invalid reasoning parser: {args.reasoning_parser}"))
        plugins = {t.flag for t in args.tokens} & {"--tool-parser-plugin", "--reasoning-parser-plugin"}
        for kind, name, flag, msg in checks:
            names = k.parsers.get(kind) or set()  # defaultdict: .get gives None for a kind with no rows
            if name not in names and f"--{kind}-parser-plugin" in plugins:
                out.append(Finding("unknown", f"{prefix}{flag} {name} is not built into vLLM {k.version}; "
                                   f"a --{kind}-parser-plugin may register it"))
                continue
            if not names:
                out.append(Finding("unknown", f"{prefix}{kind} parsers of vLLM {k.version} unknown"))
            elif name not in names:
                out.append(Finding("blocked", f"{prefix}{flag} {name} is not registered in vLLM {k.version} "
                                   f"(a --{kind}-parser-plugin could add it)", msg,
                                   key=f"{prefix}parser:{kind}:{name}"))
        return out

    # -- model, parallelism, speculative decoding ---------------------------------
    def _model(self, c: Combination, args: ServeArgs, facts: ModelFacts, prefix: str) -> list[Finding]:
        k, out = self.k, []
        pp, ep = args.pipeline_parallel_size, args.enable_expert_parallel
        if facts.status != "resolved" and facts.candidates:
            return self._over_candidates(c, args, facts, prefix)
        if facts.status != "resolved" or not facts.architectures:
            return self._without_target(c, args, facts, prefix, f"model config of {c.model_id} unresolved") or [
                Finding("unknown", f"{prefix}model config of {c.model_id} unresolved: {facts.reason}")]
        arch = facts.architectures[0]
        cap = k.caps.get((c.platform, arch))
        src = f"{facts.source}{' (inferred)' if facts.inferred else ''}"
        if cap is None:
            missing = (f"{arch} ({c.model_id}, from {src}) is not in vLLM {k.version}'s registry; "
                       "vLLM may fall back to the Transformers backend")
            return self._without_target(c, args, facts, prefix, missing) or [Finding("unknown", prefix + missing)]
        if pp > 1:
            if cap["supports_pp"] is None:
                out.append(Finding("unknown", f"{prefix}supports_pp of {arch} unknown at {k.version}"))
            elif not cap["supports_pp"]:
                out.append(Finding("blocked", f"{prefix}--pipeline-parallel-size {pp}: target {arch} -> "
                                   f"{cap['class_path']} does not support PP in vLLM {k.version}", PP_MSG,
                                   [_cls_ev(cap), k.raise_at("Pipeline parallelism is not supported")],
                                   key=f"{prefix}target_pp"))
            else:
                out.append(Finding("ok", f"{prefix}target {arch} -> {cap['class_path']} supports PP"))
        if facts.is_moe is None and c.recipe in self.recipe_moe:
            facts = replace(facts, is_moe=self.recipe_moe[c.recipe], inferred=True)
            src = f"{src}; expert count unknown, MoE-ness from the recipe's model.architecture"
        if ep:
            if facts.is_moe is None:
                out.append(Finding("unknown", f"{prefix}--enable-expert-parallel: expert count of "
                                   f"{c.model_id} unknown"))
            elif not facts.is_moe:
                out.append(Finding("blocked", f"{prefix}--enable-expert-parallel on {c.model_id}, which has no "
                                   f"experts ({src})", EP_MSG, [k.raise_at("Number of experts in the model")],
                                   key=f"{prefix}ep_moe"))
        meta: dict[str, Any] = {}
        if args.speculative_config is not None:
            key = (c.platform, c.model_id, arch, json.dumps(args.speculative_config, sort_keys=True), pp)
            if key not in self._spec_cache:
                self._meta = {}
                self._spec_cache[key] = (self._spec(c.platform, args, facts, cap), self._meta)
            spec_findings, meta = self._spec_cache[key]
            out += [Finding(f.status, prefix + f.step, f.message, f.evidence, f.stage,
                            prefix + f.key if f.key else "") for f in spec_findings]
        ctx = gates.context(k, args, facts, cap, meta.get("method"), meta.get("draft_pp"), meta.get("draft_cap"))
        for status, rule, row in self._gates(ctx):
            out.append(Finding(status, f"{prefix}gate {rule.id} ({rule.effect}): {rule.description.split('. ')[0]}",
                               gates.message(rule, ctx, cap),
                               [f"{row['file']}:{row['line']}" if row.get("file") else ""],
                               "startup" if rule.effect == "startup_error" else "config",
                               key=f"{prefix}gate:{rule.id}"))
        if args.mm_encoder_tp_mode == "data" and cap.get("supports_multimodal") and not cap.get("supports_encoder_tp_data"):
            out.append(Finding("warning", f"{prefix}{arch} does not support --mm-encoder-tp-mode data; vLLM "
                               "falls back to weights", "This model does not support `--mm-encoder-tp-mode data`. "
                               "Falling back to `--mm-encoder-tp-mode weights`.", [_cls_ev(cap)]))
        return out

    def _gates(self, ctx: dict[str, Any]) -> list[tuple[str, Any, dict[str, Any]]]:
        """gates.apply, once per distinct context (every node of a deployment shares one).

        The context holds JSON values only; its sorted JSON text is the key.
        """
        key = json.dumps(ctx, sort_keys=True, default=repr)
        hits = self._gate_hits.get(key)
        if hits is None:
            hits = self._gate_hits[key] = gates.apply(self.k, ctx)
        return hits

    def _over_candidates(self, c: Combination, args: ServeArgs, facts: ModelFacts,
                         prefix: str) -> list[Finding]:
        """The id's config is unknown but vLLM names the architectures it can be: decide only
        when every candidate leads to the same verdict (status and vLLM message)."""
        results = []
        for cand in facts.candidates:
            f = replace(facts, status="resolved", architectures=(cand,), inferred=True,
                        source="vllm candidates", candidates=())
            found = self._model(c, args, f, prefix)
            verdict = worst(x.status for x in found).value
            msg = next((x.message for x in found if x.status == verdict and x.message), "")
            results.append((cand, verdict, msg, found))
        names = ", ".join(facts.candidates)
        if len({(w, m) for _, w, m, _ in results}) == 1:
            cand, verdict, _, found = results[0]
            head = Finding(NOTE, f"{prefix}model config of {c.model_id} unresolved; vLLM lists it under "
                           f"{names}; every candidate gives the same verdict ({verdict}), shown for {cand}")
            return [head, *found]
        split = "; ".join(f"{cand}: {verdict}" for cand, verdict, _, _ in results)
        return [Finding("unknown", f"{prefix}model config of {c.model_id} unresolved; vLLM lists it under "
                        f"{names} and they disagree ({split})")]

    def _without_target(self, c: Combination, args: ServeArgs, facts: ModelFacts,
                        prefix: str, missing: str) -> list[Finding] | None:
        """The target's config (or its class) is unknown: decide anyway when no value of it can
        change the verdict. `missing` says what is unknown.

        The "every candidate agrees" rule of `_over_candidates`, with every possible target as
        the candidates. A check that reads nothing of the target (the draft of a method whose
        draft is its own checkpoint, when it inherits the target's PP size) blocks: `blocked`
        outranks every status, so no target changes the status. The message stays that
        check's unless a target check that comes before it could raise another: the target's
        own PP check raises the same PP message; expert parallel on a model not known to be
        MoE could raise the EP message, and then the candidates disagree: None (unknown).
        """
        spec = args.speculative_config
        method = spec.get("method") if isinstance(spec, dict) else None
        if not isinstance(spec, dict) or (isinstance(method, str) and self.k.methods.get(method) in TARGET_DRAFTED):
            return None
        placeholder = replace(facts, architectures=(), model_type=None, config=None)
        key = (c.platform, c.model_id, "", json.dumps(args.speculative_config, sort_keys=True),
               args.pipeline_parallel_size)
        if key not in self._spec_cache:
            self._meta = {}
            self._spec_cache[key] = (self._spec(c.platform, args, placeholder, {}), self._meta)
        found, meta = self._spec_cache[key]
        if meta.get("method") in TARGET_DRAFTED or meta.get("draft_pp") is None:
            return None  # the draft is derived from the target's config, or its PP is unknown
        blocking = next((f for f in found if f.status == "blocked"), None)
        if blocking is None:
            return None
        earlier = set()
        if args.pipeline_parallel_size > 1:
            earlier.add(PP_MSG)
        if args.enable_expert_parallel and self.recipe_moe.get(c.recipe) is not True:
            earlier.add(EP_MSG)
        if earlier - {blocking.message}:
            return None
        head = Finding(NOTE, f"{prefix}{missing}; not needed: the draft check below reads nothing of "
                       "the target and blocks, whatever the target is")
        return [head, *(Finding(f.status, prefix + f.step, f.message, f.evidence, f.stage) for f in found)]

    def _target_config(self, facts: ModelFacts) -> dict[str, Any]:
        if facts.config:
            return dict(facts.config)
        cfg: dict[str, Any] = {"model_type": facts.model_type or "", "architectures": list(facts.architectures)}
        if facts.num_nextn_predict_layers is not None:
            cfg["num_nextn_predict_layers"] = facts.num_nextn_predict_layers
        if facts.text_model_type:
            cfg["text_config"] = {"model_type": facts.text_model_type}
        return cfg

    def _spec(self, platform: str, args: ServeArgs, facts: ModelFacts, cap: dict[str, Any]) -> list[Finding]:
        k = self.k
        spec = args.speculative_config or {}
        method = spec.get("method")
        model = spec.get("model")
        for key, val in (("method", method), ("model", model)):
            # SpeculativeConfig declares both `str | None`; JSON junk ([1], {...}, 5) fails validation.
            if val is not None and not isinstance(val, str):
                return [Finding("blocked", f"--speculative-config {key} must be a string, not "
                                f"{type(val).__name__}: {reprlib.repr(val)}",
                                f"{key}: Input should be a valid string")]
        if not k.methods:
            return [Finding("unknown", f"speculative methods of vLLM {k.version} unknown")]
        if method is None:
            if isinstance(model, str) and "." in model and "/" not in model:
                method = "custom_class"
            elif model in ("ngram", "[ngram]"):
                method = "ngram"
            else:
                method = "draft_model"
        if method == "draft_model":
            # SpeculativeConfig.__post_init__ re-detects the method from the draft's name.
            low = (model or "").lower()
            for needle, m in (("eagle-", "eagle"), ("eagle3", "eagle3"), ("dflash", "dflash"), ("dspark", "dspark")):
                if needle in low and m in k.methods:
                    method = m
                    break
        if method not in k.methods:
            return [Finding("blocked", f"speculative method {method!r} is not accepted by vLLM {k.version}",
                            f"Input should be one of the SpeculativeMethod literals of vLLM {k.version}; "
                            f"got {method!r}", key=f"spec_method:{method}")]
        canonical = k.methods[method]
        step = f"method {method}" + (f" (alias of {canonical})" if canonical != method else "")
        rule = k.release_facts.get("speculative_without_model") or {}
        if model is None and spec.get("num_speculative_tokens") is not None and rule.get("methods") is not None:
            # SpeculativeConfig.__post_init__ picks the draft of a model-less method, or raises.
            branch = rule["methods"].get(canonical) or rule.get("else") or {}
            if branch.get("outcome") == "raise":
                return [Finding("blocked", f"{step}: num_speculative_tokens without a model; SpeculativeConfig."
                                f"__post_init__ names no draft for this method and raises "
                                f"({rule['file']}:{branch['line']})", branch.get("message", ""),
                                [f"{rule['file']}:{branch['line']}"], key=f"spec_no_model:{canonical}")]
        pc = k.draft_pc.get(canonical)
        pp = args.pipeline_parallel_size
        pp_src = pc["pp_source"] if pc else "unknown"
        self._meta["method"] = canonical
        self._meta["draft_pp"] = {"target": pp, "target_config": pp, "one": 1, "none": None}.get(pp_src)
        pc_ev = f"{pc['file']}:{pc['line']}" if pc else ""
        if pp_src == "none":
            return [Finding("ok", f"{step}: no draft model, no draft parallel config", "", [pc_ev])]
        if pp_src in ("target_config",) and canonical != "extract_hidden_states":
            return [Finding("ok", f"{step}: the draft is the target itself; PP checked on the target", "", [pc_ev])]
        # Which draft architecture does vLLM build?
        draft_archs: list[str] = []
        how = ""
        if canonical == "extract_hidden_states":
            draft_archs, how = ["ExtractHiddenStatesModel"], "ExtractHiddenStatesConfig"
        elif canonical == "mtp":
            runner = k.runner
            if runner is None or not runner.available:
                return [Finding("unknown", f"{step}: hf_config_override of vLLM {k.version} unavailable")]
            res = runner.run(self._target_config(facts))
            if res.status == "error" and facts.config is None and facts.num_nextn_predict_layers is None:
                # The config was rebuilt from facts that leave the MTP layers out (no config.json
                # read): vLLM's error may be about a field we do not know, not one the model lacks.
                return [Finding("unknown", f"{step}: hf_config_override on {facts.model_id} raises on a config "
                                f"rebuilt without its MTP layer count ({res.detail}); the real config.json "
                                "decides", key="spec:mtp_config")]
            if res.status != "ok":
                return [Finding("blocked" if res.status == "error" else "unknown",
                                f"{step}: hf_config_override on {facts.model_id}: {res.detail}", res.detail)]
            if canonical == "mtp" and (res.model_type not in k.mtp_types):
                return [Finding("blocked", f"{step}: hf_config_override leaves {facts.model_id} as model_type "
                                f"{res.model_type!r}, not an MTP type in vLLM {k.version}",
                                f"Unsupported speculative method: '{method}'",
                                [k.raise_at("Unsupported speculative method")])]
            draft_archs = list(res.architectures)
            how = (f"SpeculativeConfig.hf_config_override (vllm/config/speculative.py:{res.line}) "
                   f"rewrites {facts.model_type}/{facts.architectures[0]} -> {draft_archs[0] if draft_archs else '?'}")
        elif canonical in ("eagle", "eagle3", "dflash", "draft_model", "dspark", "medusa", "mlp_speculator"):
            dfacts = self.models.resolve(model) if isinstance(model, str) else None
            spec_cfg = (dfacts.config or {}) if dfacts is not None else {}
            if spec_cfg.get("speculators_model_type") and k.tree is not None:
                # Speculators-format checkpoints skip the EAGLEConfig wrap: the release's
                # registered algorithm sets the architecture.
                rew, line, why = speculators_rewrite(k.tree, spec_cfg)
                if rew is None:
                    return [Finding("blocked" if why.startswith(("ValueError", "speculators type")) else "unknown",
                                    f"{step}: speculators checkpoint {model}: {why}", why)]
                draft_archs = rew
                how = (f"speculators algorithm {spec_cfg['speculators_model_type']!r} "
                       f"({SPECULATORS_ALGOS}:{line}) sets {rew[0]}")
            elif dfacts is not None and dfacts.status == "resolved" and dfacts.architectures:
                draft_archs = list(dfacts.architectures)
                how = f"draft checkpoint {model} declares {draft_archs[0]}"
                runner = k.runner
                if dfacts.config and runner is not None and runner.available:
                    # The draft's ModelConfig gets hf_overrides=SpeculativeConfig.hf_config_override
                    # too, before any EAGLE wrapping.
                    res = runner.run(dict(dfacts.config))
                    if res.status == "ok" and res.changed and res.architectures:
                        draft_archs = list(res.architectures)
                        how += (f"; hf_config_override on the draft (vllm/config/speculative.py:{res.line}) "
                                f"-> {res.model_type}/{draft_archs[0]}")
                if canonical in ("eagle", "eagle3", "dflash") and k.tree is not None:
                    rew, line, why = eagle_rewrite(k.tree, canonical, draft_archs)
                    if rew:
                        how += f"; EAGLEConfig rewrite (vllm/transformers_utils/configs/eagle.py:{line}) -> {rew[0]}"
                        draft_archs = rew
        inherits = pp_src in ("target", "target_config")
        if draft_archs and facts.architectures:  # no v_draft row for a target whose config is unknown
            dcap0 = k.caps.get((platform, draft_archs[0]))
            self._meta["draft_cap"] = dcap0
            key = (platform, facts.model_type or "", facts.architectures[0], canonical, draft_archs[0])
            self.drafts.setdefault(key, {
                "platform": platform, "target_model_type": facts.model_type or "",
                "target_arch": facts.architectures[0], "method": canonical,
                "draft_arch": draft_archs[0], "draft_class": dcap0["class_path"] if dcap0 else "",
                "draft_supports_pp": dcap0["supports_pp"] if dcap0 else None,
                "draft_inherits_pp": int(inherits), "status": "ok" if dcap0 else "unknown",
                "detail": f"{how} (model {facts.model_id})",
                "file": dcap0["file"] if dcap0 else "", "line": dcap0["line"] if dcap0 else 0})
        if draft_archs and facts.architectures and k.caps.get((platform, draft_archs[0])) is None:
            # The draft's ModelConfig resolves its class like any model's, at every PP size: an
            # architecture the registry lacks raises "Model architectures [...] are not supported
            # for now" unless the Transformers backend provides it (as for a target: unknown).
            return [Finding("unknown", f"{step}: {how}; draft arch {draft_archs[0]} not registered in "
                            f"vLLM {k.version}; vLLM may fall back to the Transformers backend for it",
                            key=f"draft_unregistered:{canonical}")]
        if not inherits or pp <= 1:
            why = "PP 1" if pp <= 1 else f"draft PP forced to 1 ({pc_ev})"
            return [Finding("ok", f"{step}: {how or 'draft'}; {why}, no draft PP check", "", [pc_ev])]
        # PP > 1 and the draft inherits it: the draft class must support PP.
        if draft_archs:
            dcap = k.caps.get((platform, draft_archs[0]))
            if dcap is None:
                return [Finding("unknown", f"{step}: {how}; draft arch {draft_archs[0]} not registered in "
                                f"vLLM {k.version}")]
            if dcap["supports_pp"]:
                return [Finding("ok", f"{step}: {how}; draft {dcap['class_path']} supports PP", "",
                                [_cls_ev(dcap), pc_ev])]
            return [Finding(
                "blocked",
                f"{step}: {how}; draft class {dcap['class_path']} lacks PP support, and "
                f"create_draft_parallel_config copies pipeline_parallel_size={pp} from the target ({pc_ev}); "
                f"the draft's verify_with_parallel_config raises",
                PP_MSG, [_cls_ev(dcap), pc_ev, k.raise_at("Pipeline parallelism is not supported")],
                key=f"draft_pp:{canonical}")]
        # Unknown draft checkpoint: decide only if every class the method can produce agrees.
        prefix = {"eagle": "Eagle", "eagle3": "Eagle3", "dflash": "DFlash"}.get(canonical)
        if prefix:
            cands = [cp for (p, a), cp in k.caps.items() if p == platform and a.startswith(prefix)
                     and "_SPECULATIVE_DECODING_MODELS" in (cp.get("category") or "")]
            if cands and not any(cp["supports_pp"] for cp in cands):
                return [Finding("blocked", f"{step}: draft checkpoint {model!r} unresolved, but none of the "
                                f"{len(cands)} {prefix}* draft classes of vLLM {k.version} supports PP and the "
                                f"draft inherits pipeline_parallel_size={pp} ({pc_ev})", PP_MSG,
                                [pc_ev, k.raise_at("Pipeline parallelism is not supported")],
                                key=f"draft_pp:{canonical}")]
        return [Finding("unknown", f"{step}: draft checkpoint {model!r} unresolved; its PP support decides")]
