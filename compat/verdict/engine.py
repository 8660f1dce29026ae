"""The one place that decides: (combination, release) -> status, message, reason chain, evidence.

Every consumer (check, overrides, site, explain, SQL) reads the rows this writes, so they
cannot disagree. Status precedence: blocked > unknown > warning > ok; a check that lacks a
fact says `unknown` with the reason, never `ok`. The checks, in the order vLLM meets them:
vLLM's own argument handling (compat.verdict.arguments), flag and parser names, the keys of
the speculative config, then per layout of the deployment the model checks: the target's PP
support, expert parallel on a model with experts, the draft (compat.verdict.drafts), and the
curated runtime gates (compat.verdict.gates).
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import lru_cache
from typing import Any

from compat.hf import ModelFacts, ModelResolver
from compat.recipes import Combination, ServeArgs, parsed_serve_args
from compat.verdict import arg_memo, gates
from compat.verdict.arguments import ArgFinding, check_arguments
from compat.verdict.config_values import format_errors
from compat.verdict.drafts import PP_MSG, TARGET_DRAFTED, DraftResolution, resolve_draft
from compat.verdict.findings import Finding, Outcome, Stage, note
from compat.verdict.knowledge import Knowledge
from compat.verdict.shell import ShellVars
from compat.verdict.trace import JudgeTrace
from compat.vllm.cli_surface import INTERNAL_FIELDS
from compat.vllm.facts import CLI_MAINS
from compat.vocab import Status, worst

__all__ = ["EP_MSG", "PP_MSG", "Finding", "Judge", "Outcome", "argv_rewrite_verified", "known_flag"]

EP_MSG = "Number of experts in the model must be greater than 0 when expert parallelism is enabled."
INTERNAL_SPEC_FIELDS = INTERNAL_FIELDS["SpeculativeConfig"]

#: Flags saying only which node of a deployment a command runs on. No model, parallel-layout
#: or gate check reads them, so the nodes of one deployment share those checks' findings.
NODE_POSITION_FLAGS = frozenset({"--node-rank", "--headless", "--data-parallel-start-rank"})


def _parse(argv: tuple[str, ...]) -> ServeArgs:
    """Parsed argv, shared by every release a combination is judged at (never mutated)."""
    return parsed_serve_args(tuple(argv))


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


def _layout(args: ServeArgs) -> tuple[Any, ...]:
    """What the model checks read of an argv: everything but the node-position flags."""
    return (
        args.model,
        tuple(args.positionals),
        tuple(
            (t.flag, t.subkey, t.value, t.negated)
            for t in args.tokens
            if t.flag not in NODE_POSITION_FLAGS
        ),
    )


def _argument_finding(af: ArgFinding, status: Status, step: str) -> Finding:
    """An argument replay's finding as the judge reports it (evidence without blanks)."""
    return Finding(
        status,
        step,
        af.message,
        [e for e in af.evidence if e],
        Stage.ARGUMENT,
        key="arg:" + "|".join(af.key),
    )


def _cls_ev(cap: dict[str, Any] | None) -> str:
    return f"{cap['file']}:{cap['line']}" if cap and cap.get("file") else ""


class Judge:
    """Decides combinations at one release; caches per model and speculative config."""

    def __init__(
        self,
        k: Knowledge,
        models: ModelResolver,
        recipe_moe: dict[str, bool] | None = None,
        shell: ShellVars | None = None,
    ) -> None:
        self.k = k
        self.models = models
        # Placeholders the recipes define ($HEAD_IP, ...): values the user's shell supplies.
        self.shell = shell if shell is not None else ShellVars()
        self._arg_cache: dict[tuple[str, ...], list[Finding]] = {}
        # The recipe's own `model.architecture: moe|dense`, used only when the model's
        # config does not give an expert count (and said so in the chain).
        self.recipe_moe = recipe_moe or {}
        self._drafts: dict[tuple[Any, ...], DraftResolution] = {}
        # Draft mappings met while judging recipe models (added to draft_mapping / v_draft).
        self.drafts: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._gate_hits: dict[str, list[Finding]] = {}
        self._spec_cache: dict[tuple[str, str], list[Finding]] = {}  # _spec_keys, per spec JSON
        self._abbreviates: dict[str, list[str]] = {}
        # Told which models and draft mappings each judgement reads, cache hits included, so
        # a build can tell what one recipe's results depend on (compat.blocks.Recorder).
        self.trace: JudgeTrace | None = None

    # -- entry ---------------------------------------------------------------------
    def judge(self, c: Combination) -> Outcome:
        out = Outcome(version=self.k.version)
        if c.omni:
            out.add(
                Finding(
                    Status.UNKNOWN,
                    "served by vLLM-Omni (meta.tasks has omni), a separate package "
                    "with its own flags; not checked against vLLM",
                    key="omni",
                )
            )
            return out
        if c.foreign_image:
            out.add(
                Finding(
                    Status.UNKNOWN,
                    f"runs the image {c.foreign_image}, a build outside vLLM's releases: which vLLM "
                    "it holds is unknown, so the command is not judged against a release",
                    key="foreign_image",
                )
            )
            return out
        for p in c.problems:
            out.add(Finding(Status.UNKNOWN, f"recipe problem: {p}", key=f"recipe_problem:{p}"))
        facts = self.models.resolve(c.model_id)
        if self.trace is not None:
            self.trace.model(c.model_id)
        by_layout: dict[
            tuple[Any, ...], list[Finding]
        ] = {}  # model findings (unprefixed) per layout
        for role, argv in c.argvs:
            args = self._spec_keys_rewritten(_parse(argv))
            prefix = f"{role}: " if role else ""
            for f in self._command(argv, args, prefix):
                out.add(f)
            layout = _layout(args)
            if layout not in by_layout:
                by_layout[layout] = self._model(c, args, facts)
            for f in by_layout[layout]:  # each node's findings carry its role, keys too
                out.add(f.on_node(prefix))
        if not out.chain:
            out.add(Finding(Status.OK, "no check failed", key="none"))
        return out

    def _command(self, argv: tuple[str, ...], args: ServeArgs, prefix: str) -> list[Finding]:
        """What vLLM's argument handling and name checks say of one node's argv."""
        out: list[Finding] = []
        command = self.k.release_facts.get("serve_command")
        if isinstance(command, dict) and command.get("module") is None and command.get("server"):
            return [
                Finding(
                    Status.BLOCKED,
                    f"{prefix}vLLM {self.k.version} installs no `vllm` command (none of "
                    f"{', '.join(CLI_MAINS)}, the modules its console script runs, exists; the "
                    "server was started with python -m vllm.entrypoints.openai.api_server)",
                    "vllm: command not found",
                    [],
                    Stage.ARGUMENT,
                    key="arg:no-vllm-command",
                )
            ]
        checked = self.arguments(argv)
        if checked is None:  # no argparse facts for this release, or a rewrite not verified
            if self.k.values and not argv_rewrite_verified(self.k):
                out.append(
                    note(
                        f"{prefix}vLLM {self.k.version}'s argv rewrite "
                        "(FlexibleArgumentParser.parse_args) is not one the argument replay is "
                        "verified against; flag names are checked, and what the replay rejects "
                        "is unknown",
                        f"{prefix}argv_rewrite",
                    )
                )
                out += [f.on_node(prefix) for f in self.unverified_arguments(argv)]
            out += self._flags(args, prefix)
        else:
            out += [f.on_node(prefix) for f in checked]
        out += self._parsers(args, prefix, tool=checked is None)
        out += self._spec_keys(args, prefix)
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
        for af in self._checked(argv):
            status = Status(af.status)
            if partial and af.key[:1] == ("unrecognized",):
                status = Status.UNKNOWN  # the flag list of this release is incomplete
            out.append(_argument_finding(af, status, af.step))
        self._arg_cache[key] = out
        return out

    def _checked(self, argv: tuple[str, ...] | list[str]) -> list[Any]:
        """check_arguments' findings, kept across a build's processes (compat.verdict.arg_memo)."""
        args = list(argv)
        return arg_memo.findings(
            self.k, args, self.shell, lambda: check_arguments(self.k, args, self.shell).findings
        )

    def unverified_arguments(self, argv: tuple[str, ...] | list[str]) -> list[Finding]:
        """The replay at a release whose argv rewrite is not verified: what it rejects is
        `unknown` (never ok by default, never blocked on an unproven replay); flag names are
        left to the name checks."""
        key = ("unverified", *argv)
        if key in self._arg_cache:
            return self._arg_cache[key]
        out = []
        for af in self._checked(argv):
            if (
                af.key[:1] == ("unrecognized",)
                and af.key[1].strip()
                and all(x.startswith("-") for x in af.key[1].split(" ") if x)
            ):
                continue  # options: _flags says which names the release lacks (a stray positional stays)
            blocked = af.status == Status.BLOCKED
            step = (
                (
                    f"{af.step} (by the argument replay, not verified for vLLM {self.k.version}'s argv "
                    "rewrite)"
                )
                if blocked
                else af.step
            )
            out.append(
                _argument_finding(af, Status.UNKNOWN if blocked else Status(af.status), step)
            )
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
        rewritten = {
            (key.replace(old, new) if isinstance(key, str) else key): v for key, v in spec.items()
        }
        return args if rewritten == spec else replace(args, speculative_config=rewritten)

    def _spec_keys(self, args: ServeArgs, prefix: str) -> list[Finding]:
        """--speculative-config is parsed as plain JSON; SpeculativeConfig(**it) validates its keys
        and values when the engine config is built (pydantic, extra forbidden), then runs its
        `__post_init__`, whose checks on the JSON alone are replayed here (compat.vllm.post_init;
        those reading the target's configs are compat.verdict.drafts')."""
        spec = args.speculative_config
        if not isinstance(spec, dict):
            return []
        key = (prefix, json.dumps(spec, default=repr))  # what they read: the dict, in its order
        hit = self._spec_cache.get(key)
        if hit is None:
            hit = self._spec_cache[key] = self._spec_keys_of(spec, prefix)
        return hit

    def _spec_keys_of(self, spec: dict[str, Any], prefix: str) -> list[Finding]:
        sp = self.k.serve_parser
        if sp is None or "SpeculativeConfig" not in sp.validator.schemas:
            return []
        forbidden = self.k.release_facts.get("speculative_forbidden_fields") or {}
        for name, row in sorted((forbidden.get("fields") or {}).items()):
            if spec.get(name) is not None:  # SpeculativeConfig._verify_args refuses the field
                ev = f"{forbidden['file']}:{row['line']}"
                return [
                    Finding(
                        Status.BLOCKED,
                        f"{prefix}--speculative-config sets {name}, which SpeculativeConfig."
                        f"_verify_args of vLLM {self.k.version} refuses ({ev})",
                        row["message"],
                        [ev],
                        key=f"{prefix}spec-forbidden:{name}",
                    )
                ]
        res = sp.validator.validate("SpeculativeConfig", spec)
        # Fields vLLM fills itself are not keys a user sets (research §5.1); method and model
        # are judged by the speculative checks.
        errors = [
            e
            for e in res.errors
            if e.type == "unexpected_keyword_argument"
            or (
                e.loc
                and e.loc[0] not in INTERNAL_SPEC_FIELDS | {"method", "model"}
                and e.type != "missing_argument"
            )
            or (not e.loc and e.type == "value_error")
        ]
        if res.raised:
            return [
                Finding(
                    Status.BLOCKED,
                    f"{prefix}--speculative-config: SpeculativeConfig.__post_init__ of "
                    f"vLLM {self.k.version} raises {res.raised}",
                    res.raised,
                    res.evidence[-1:],
                    key=f"{prefix}spec-raised:{res.raised.split(':')[0]}",
                )
            ]
        if not errors:
            return []
        heads = "; ".join(f"{'.'.join(e.loc) or 'SpeculativeConfig'}: {e.msg}" for e in errors)
        return [
            Finding(
                Status.BLOCKED,
                f"{prefix}--speculative-config: SpeculativeConfig of vLLM "
                f"{self.k.version} rejects it ({heads})",
                format_errors("SpeculativeConfig", errors),
                res.evidence[:2] if errors[0].loc else res.evidence[-1:],
                key=f"{prefix}spec-keys:{','.join('.'.join(e.loc) or 'post_init' for e in errors)}",
            )
        ]

    def _flags(self, args: ServeArgs, prefix: str) -> list[Finding]:
        k = self.k
        if not k.flags:
            return [
                Finding(
                    Status.UNKNOWN,
                    f"{prefix}CLI flags of vLLM {k.version} could not be extracted",
                    key=f"{prefix}flags",
                )
            ]
        out = []
        for t in args.tokens:
            found = self._flag(t, prefix)
            if found is not None:
                out.append(found)
        if args.speculative_config_error:
            out.append(
                Finding(
                    Status.BLOCKED,
                    f"{prefix}--speculative-config is not valid JSON: "
                    f"{args.speculative_config_error}",
                    args.speculative_config_error,
                    key=f"{prefix}spec_json",
                )
            )
        return out

    def _flag(self, t: Any, prefix: str) -> Finding | None:
        """One option of the argv against the release's flag names (None: nothing to say)."""
        k = self.k
        row = known_flag(k, t)
        if row is None and t.negated and t.flag in k.flags:
            # `--no-x` exists only for boolean fields; our type extraction may be wrong.
            if k.flags[t.flag]["value_type"] not in ("bool", "bool_or_str"):
                return Finding(
                    Status.UNKNOWN,
                    f"{prefix}{t.raw}: {t.flag} exists in vLLM {k.version} but "
                    f"is not known to be boolean (type {k.flags[t.flag]['value_type']})",
                    key=f"{prefix}flag_bool:{t.flag}",
                )
            row = k.flags[t.flag]
        if row is None and not t.negated and t.flag.startswith("--") and "=" not in t.flag:
            # argparse takes a unique prefix of a long option for it (allow_abbrev)
            longer = self._abbreviated(t.flag)
            if len(longer) == 1:
                row = k.flags[longer[0]]
            elif len(longer) > 1:
                return Finding(
                    Status.UNKNOWN,
                    f"{prefix}{t.raw} abbreviates {', '.join(longer[:4])}"
                    f"{' and more' if len(longer) > 4 else ''}: argparse says ambiguous option "
                    f"where it may abbreviate (vLLM {k.version}'s argv rewrite is not verified)",
                    key=f"{prefix}flag_prefix:{t.flag}",
                )
        if row is None and any(ch.isspace() for ch in t.raw):
            # One argv item holding a space: argparse takes it for a positional, not an option.
            return Finding(
                Status.BLOCKED,
                f"{prefix}argument {t.raw!r} is a single argv item containing a "
                "space; argparse treats it as a positional, not an option (split it into two "
                "items)",
                f"vllm serve: error: unrecognized arguments: {t.raw}",
                key=f"{prefix}argv-space:{t.raw}",
            )
        if row is None:
            return Finding(
                Status.BLOCKED,
                f"{prefix}flag {t.raw} does not exist in vLLM {k.version}",
                f"vllm serve: error: unrecognized arguments: {t.raw}",
                key=f"{prefix}flag:{t.flag}",
            )
        if t.subkey:
            keys = k.subkeys.get(row["canonical"])
            top = t.subkey.split(".")[0].rstrip("+")
            if keys and top not in keys:
                return Finding(
                    Status.BLOCKED,
                    f"{prefix}{t.raw}: {top!r} is not a field of the config behind "
                    f"{row['canonical']} in vLLM {k.version}",
                    f"{top}: Extra inputs are not permitted",
                    [f"{row['file']}:{row['line']}"],
                    key=f"{prefix}subkey:{row['canonical']}.{top}",
                )
        return None

    def _abbreviated(self, flag: str) -> list[str]:
        """The long options `flag` is a prefix of (memoised: a scan of every flag per token)."""
        found = self._abbreviates.get(flag)
        if found is None:
            found = self._abbreviates[flag] = sorted(
                {
                    r["canonical"]
                    for f, r in self.k.flags.items()
                    if f.startswith(flag) and r.get("kind") in ("long", "negated")
                }
            )
        return found

    def _parsers(self, args: ServeArgs, prefix: str, tool: bool = True) -> list[Finding]:
        """Parser names (the tool parser only when the release's own API-server check is not run).

        A headless node runs no API server: it never looks the tool parser up, and looks the
        reasoning parser up only where the release does so while building the engine config,
        or in the engine core a data-parallel node runs (`reasoning_parser_lookups`)."""
        k, out = self.k, []
        checks = []
        if tool and not args.headless and args.tool_call_parser and args.enable_auto_tool_choice:
            checks.append(
                (
                    "tool",
                    args.tool_call_parser,
                    "--tool-call-parser",
                    f"invalid tool call parser: {args.tool_call_parser}",
                )
            )
        if (
            args.reasoning_parser
            and args.reasoning_parser != "none"
            and self._looks_up_reasoning(args)
        ):
            checks.append(
                (
                    "reasoning",
                    args.reasoning_parser,
                    "--reasoning-parser",
                    f"invalid reasoning parser: {args.reasoning_parser}",
                )
            )
        plugins = {t.flag for t in args.tokens} & {
            "--tool-parser-plugin",
            "--reasoning-parser-plugin",
        }
        for kind, name, flag, msg in checks:
            names = (
                k.parsers.get(kind) or set()
            )  # defaultdict: .get gives None for a kind with no rows
            if name not in names and f"--{kind}-parser-plugin" in plugins:
                out.append(
                    Finding(
                        Status.UNKNOWN,
                        f"{prefix}{flag} {name} is not built into vLLM {k.version}; "
                        f"a --{kind}-parser-plugin may register it",
                        key=f"{prefix}parser_plugin:{kind}:{name}",
                    )
                )
            elif not names:
                out.append(
                    Finding(
                        Status.UNKNOWN,
                        f"{prefix}{kind} parsers of vLLM {k.version} unknown",
                        key=f"{prefix}parsers:{kind}",
                    )
                )
            elif name not in names:
                out.append(
                    Finding(
                        Status.BLOCKED,
                        f"{prefix}{flag} {name} is not registered in vLLM "
                        f"{k.version} (a --{kind}-parser-plugin could add it)",
                        msg,
                        key=f"{prefix}parser:{kind}:{name}",
                    )
                )
        return out

    def _looks_up_reasoning(self, args: ServeArgs) -> bool:
        """Does this node look the reasoning parser up (see `_parsers`)?"""
        if not args.headless:
            return True
        lookups = self.k.release_facts.get("reasoning_parser_lookups")
        if not isinstance(lookups, dict):
            return True  # not scanned (an older database): as before, checked
        engine_core = args.data_parallel_size > 1 or args.has("--data-parallel-size-local")
        return bool(lookups.get("config")) or (engine_core and bool(lookups.get("engine_core")))

    # -- model, parallelism, speculative decoding ---------------------------------
    def _model(self, c: Combination, args: ServeArgs, facts: ModelFacts) -> list[Finding]:
        """The checks that read the model: target PP, expert parallel, the draft, the gates."""
        k = self.k
        if facts.status != "resolved" and facts.candidates:
            return self._over_candidates(c, args, facts)
        if facts.status != "resolved" or not facts.architectures:
            return self._without_target(
                c, args, facts, f"model config of {c.model_id} unresolved"
            ) or [
                Finding(
                    Status.UNKNOWN,
                    f"model config of {c.model_id} unresolved: {facts.reason}",
                    key=f"model_config:{c.model_id}",
                )
            ]
        arch = facts.architectures[0]
        cap = k.caps.get((c.platform, arch))
        src = f"{facts.source}{' (inferred)' if facts.inferred else ''}"
        if cap is None:
            missing = (
                f"{arch} ({c.model_id}, from {src}) is not in vLLM {k.version}'s registry; "
                "vLLM may fall back to the Transformers backend"
            )
            return self._without_target(c, args, facts, missing) or [
                Finding(Status.UNKNOWN, missing, key=f"target_class:{c.model_id}:{arch}")
            ]
        out = self._target_pp(args, arch, cap)
        if facts.is_moe is None and c.recipe in self.recipe_moe:
            facts = replace(facts, is_moe=self.recipe_moe[c.recipe], inferred=True)
            src = f"{src}; expert count unknown, MoE-ness from the recipe's model.architecture"
        out += self._expert_parallel(c, args, facts, src)
        draft = (
            self._draft(c.platform, c.model_id, args, facts, cap)
            if args.speculative_config is not None
            else DraftResolution([])
        )
        out += draft.findings
        ctx = gates.context(k, args, facts, cap, draft.method, draft.draft_pp, draft.draft_cap)
        out += self._gates(ctx, cap)
        if (
            args.mm_encoder_tp_mode == "data"
            and cap.get("supports_multimodal")
            and not cap.get("supports_encoder_tp_data")
        ):
            out.append(
                Finding(
                    Status.WARNING,
                    f"{arch} does not support --mm-encoder-tp-mode data; vLLM "
                    "falls back to weights",
                    "This model does not support `--mm-encoder-tp-mode "
                    "data`. Falling back to `--mm-encoder-tp-mode weights`.",
                    [_cls_ev(cap)],
                    key=f"mm_encoder_tp_data:{arch}",
                )
            )
        return out

    def _target_pp(self, args: ServeArgs, arch: str, cap: dict[str, Any]) -> list[Finding]:
        pp, k = args.pipeline_parallel_size, self.k
        if pp <= 1:
            return []
        if cap["supports_pp"] is None:
            return [
                Finding(
                    Status.UNKNOWN,
                    f"supports_pp of {arch} unknown at {k.version}",
                    key=f"target_pp:{arch}",
                )
            ]
        if not cap["supports_pp"]:
            return [
                Finding(
                    Status.BLOCKED,
                    f"--pipeline-parallel-size {pp}: target {arch} -> "
                    f"{cap['class_path']} does not support PP in vLLM {k.version}",
                    PP_MSG,
                    [_cls_ev(cap), k.raise_at("Pipeline parallelism is not supported")],
                    key="target_pp",
                )
            ]
        return [
            Finding(Status.OK, f"target {arch} -> {cap['class_path']} supports PP", key="target_pp")
        ]

    def _expert_parallel(
        self, c: Combination, args: ServeArgs, facts: ModelFacts, src: str
    ) -> list[Finding]:
        if not args.enable_expert_parallel:
            return []
        if facts.is_moe is None:
            return [
                Finding(
                    Status.UNKNOWN,
                    f"--enable-expert-parallel: expert count of {c.model_id} unknown",
                    key=f"ep_moe:{c.model_id}",
                )
            ]
        if not facts.is_moe:
            return [
                Finding(
                    Status.BLOCKED,
                    f"--enable-expert-parallel on {c.model_id}, which has no experts ({src})",
                    EP_MSG,
                    [self.k.raise_at("Number of experts in the model")],
                    key="ep_moe",
                )
            ]
        return []

    def _draft(
        self, platform: str, model_id: str, args: ServeArgs, facts: ModelFacts, cap: dict[str, Any]
    ) -> DraftResolution:
        """The draft checks, once per (target, speculative config, PP); its v_draft row noted."""
        arch = facts.architectures[0] if facts.architectures else ""
        key = (
            platform,
            model_id,
            arch,
            json.dumps(args.speculative_config, sort_keys=True),
            args.pipeline_parallel_size,
        )
        found = self._drafts.get(key)
        m = found.mapping if found is not None else None
        if found is None:
            found = self._drafts[key] = resolve_draft(
                self.k, self.models, platform, args, facts, _target_config(facts)
            )
            m = found.mapping
            if m is not None:
                self.drafts.setdefault(_mapping_key(platform, m), m)
        if self.trace is not None:  # on a cache hit too: the caller's results read it
            spec = args.speculative_config
            draft = spec.get("model") if isinstance(spec, dict) else None
            self.trace.draft(
                self.k.version,
                draft if isinstance(draft, str) else None,
                None if m is None else (_mapping_key(platform, m), m),
            )
        return found

    def _gates(self, ctx: dict[str, Any], cap: dict[str, Any]) -> list[Finding]:
        """The curated gates' findings, once per distinct context (every node of a deployment
        shares one). The context holds JSON values only; its sorted JSON text is the key."""
        # the messages name the target's class (`{model}`), which the context does not hold
        key = json.dumps([ctx, cap.get("class_path")], sort_keys=True, default=repr)
        hits = self._gate_hits.get(key)
        if hits is None:
            hits = self._gate_hits[key] = gates.findings(self.k, ctx, cap)
        return hits

    def _over_candidates(self, c: Combination, args: ServeArgs, facts: ModelFacts) -> list[Finding]:
        """The id's config is unknown but vLLM names the architectures it can be: decide only
        when every candidate leads to the same verdict (status and vLLM message)."""
        results = []
        for cand in facts.candidates:
            f = replace(
                facts,
                status="resolved",
                architectures=(cand,),
                inferred=True,
                source="vllm candidates",
                candidates=(),
            )
            found = self._model(c, args, f)
            verdict = worst(x.status for x in found if not x.note)
            msg = next(
                (x.message for x in found if not x.note and x.status == verdict and x.message), ""
            )
            results.append((cand, verdict.value, msg, found))
        names = ", ".join(facts.candidates)
        if len({(w, m) for _, w, m, _ in results}) == 1:
            cand, shared, _, found = results[0]
            head = note(
                f"model config of {c.model_id} unresolved; vLLM lists it under {names}; every "
                f"candidate gives the same verdict ({shared}), shown for {cand}",
                f"model_config:{c.model_id}",
            )
            return [head, *found]
        split = "; ".join(f"{cand}: {status}" for cand, status, _, _ in results)
        return [
            Finding(
                Status.UNKNOWN,
                f"model config of {c.model_id} unresolved; vLLM lists it under "
                f"{names} and they disagree ({split})",
                key=f"model_config:{c.model_id}",
            )
        ]

    def _without_target(
        self, c: Combination, args: ServeArgs, facts: ModelFacts, missing: str
    ) -> list[Finding] | None:
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
        if not isinstance(spec, dict) or (
            isinstance(method, str) and self.k.methods.get(method) in TARGET_DRAFTED
        ):
            return None
        placeholder = replace(facts, architectures=(), model_type=None, config=None)
        draft = self._draft(c.platform, c.model_id, args, placeholder, {})
        if draft.method in TARGET_DRAFTED or draft.draft_pp is None:
            return None  # the draft is derived from the target's config, or its PP is unknown
        blocking = next((f for f in draft.findings if f.status == Status.BLOCKED), None)
        if blocking is None:
            return None
        earlier = set()
        if args.pipeline_parallel_size > 1:
            earlier.add(PP_MSG)
        if args.enable_expert_parallel and self.recipe_moe.get(c.recipe) is not True:
            earlier.add(EP_MSG)
        if earlier - {blocking.message}:
            return None
        head = note(
            f"{missing}; not needed: the draft check below reads nothing of the target and "
            "blocks, whatever the target is",
            f"model_config:{c.model_id}",
        )
        return [head, *draft.findings]


def _mapping_key(platform: str, m: dict[str, Any]) -> tuple[str, ...]:
    """A draft mapping's identity among the mappings a judge met (one v_draft row each)."""
    return (platform, m["target_model_type"], m["target_arch"], m["method"], m["draft_arch"])


def _target_config(facts: ModelFacts) -> dict[str, Any]:
    """The target's config.json as vLLM would read it (rebuilt from the facts when not read)."""
    if facts.config:
        return dict(facts.config)
    cfg: dict[str, Any] = {
        "model_type": facts.model_type or "",
        "architectures": list(facts.architectures),
    }
    if facts.num_nextn_predict_layers is not None:
        cfg["num_nextn_predict_layers"] = facts.num_nextn_predict_layers
    if facts.text_model_type:
        cfg["text_config"] = {"model_type": facts.text_model_type}
    return cfg
