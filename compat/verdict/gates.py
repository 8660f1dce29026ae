"""Curated runtime gates (data/gates.yaml) applied to one invocation at one release.

The engine builds a context from the parsed argv, the target's capabilities and
config facts, and what the release's source says about the draft; every rule
*verified* for that release (all anchors found) is evaluated with the rules' own
condition vocabulary. A rule that applies becomes a finding with its effect
(config_error / startup_error -> blocked, fallback / warning -> warning); a rule that
might apply, because a condition it reads cannot be decided (a fact is missing, the model
runner is not known), and no condition it reads is known to be false, is `unknown`, naming
what is undecided. A skipped rule never turns into `ok`.

Which model runner vLLM picks is itself read from the release (`runner_default`
release fact, see compat.vllm.facts.runner_default) plus the `v2_unsupported` rules.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from compat.verdict.findings import Finding, Stage
from compat.vllm.gates import GateRule, load_rules, rule_applies, undecided
from compat.vocab import Status

# Rules the engine decides itself with a fuller reason chain.
HANDLED_BY_ENGINE = {"draft-pp-gate", "ep-needs-moe", "mm-encoder-tp-data-fallback"}
_BLOCKING = {"config_error", "startup_error"}
_DSA_TYPES = {"deepseek_v32", "glm_moe_dsa"}


@lru_cache(maxsize=1)
def rules() -> tuple[GateRule, ...]:
    return tuple(load_rules())


def module_file(class_path: str) -> str:
    mod = class_path.rsplit(".", 1)[0]
    return mod.replace(".", "/")


def aux_over_pp(k: Any, cap: dict[str, Any]) -> bool | None:
    """Does the target's inner decoder set supports_aux_hidden_states_over_pp = True?

    Approximation: a class with that attribute set True lives in a module of the
    target's MRO (the inner decoder sits beside its ForCausalLM class).
    """
    attr = "supports_aux_hidden_states_over_pp"
    if (k.release_facts.get("class_attr_scans") or {}).get(attr) != "ok":
        return None  # the attribute is not known in this release
    classes = k.class_attrs.get(attr)
    if not classes:
        return False
    import json

    mods = {
        module_file(p) for p in json.loads(cap.get("mro_path") or "[]") if p.startswith("vllm.")
    }
    files = {c["file"].rsplit(".py", 1)[0].removesuffix("/__init__") for c in classes}
    return bool(mods & files)


def has_top_tokens(k: Any, cap: dict[str, Any]) -> bool | None:
    """Does the draft class (or a base) define `get_top_tokens`? None when not scanned here."""
    if (k.release_facts.get("class_attr_scans") or {}).get("get_top_tokens") != "ok":
        return None
    name = (cap.get("class_path") or "").rsplit(".", 1)[-1]
    return any(
        c["class_name"] == name and c["file"] == cap.get("file")
        for c in k.class_attrs.get("get_top_tokens", [])
    )


def returns_lse(k: Any, facts: Any) -> bool | None:
    """Does the attention impl vLLM would pick return the softmax LSE (needed by DCP)?"""
    if (k.release_facts.get("class_attr_scans") or {}).get("can_return_lse_for_decode") != "ok":
        return None
    impls = {c["class_name"] for c in k.class_attrs.get("can_return_lse_for_decode", [])}
    if facts.use_mla is None:
        return None
    if facts.use_mla and (facts.model_type in _DSA_TYPES):
        return any("Sparse" in i for i in impls)
    if facts.use_mla:
        return any("MLA" in i and "Sparse" not in i for i in impls)
    return "FlashAttentionImpl" in impls or "FlashInferImpl" in impls


def attention_backend(k: Any, args: Any) -> dict[str, Any]:
    """`attention_backend_known`: does AttentionConfig's own `backend` validator accept the
    --attention-backend value? argparse keeps it a string; create_engine_config converts it
    there (the enum lookup), so a name the release lacks fails at engine start. Replayed with
    the release's validator, as a JSON flag's value is; left out of the context (undecided)
    when it cannot be run."""
    value = next(
        (t.value for t in args.tokens if t.flag == "--attention-backend" and not t.subkey), None
    )
    if value is None:
        return {"attention_backend_known": True}
    sp = getattr(k, "serve_parser", None)
    if sp is None or "AttentionConfig" not in sp.validator.schemas:
        return {}
    res = sp.validator.validate("AttentionConfig", {"backend": value})
    if res.raised or res.errors:
        error = res.raised or f"{res.errors[0].type}: {res.errors[0].msg}"
        return {"attention_backend_known": False, "attention_backend_error": error}
    return {} if res.unchecked else {"attention_backend_known": True}


OPTIONAL_PACKAGES = ("arctic_inference",)


def installed(k: Any) -> dict[str, bool]:
    """Optional packages a stock install of the release has (from its requirements files)."""
    pkgs = (k.release_facts.get("requirements") or {}).get("packages")
    if pkgs is None:
        return {}
    return {p: p.replace("_", "-") in set(pkgs) for p in OPTIONAL_PACKAGES}


def context(
    k: Any,
    args: Any,
    facts: Any,
    cap: dict[str, Any],
    spec_method: str | None,
    draft_pp: int | None,
    draft_cap: dict[str, Any] | None,
) -> dict[str, Any]:
    flags = {t.flag for t in args.tokens if not t.negated}
    kv = args.kv_transfer_config if isinstance(args.kv_transfer_config, dict) else {}
    spec = args.speculative_config if isinstance(args.speculative_config, dict) else {}
    ctx: dict[str, Any] = {
        "pp": args.pipeline_parallel_size,
        "tp": args.tensor_parallel_size,
        "dp": args.data_parallel_size,
        "dcp": args.decode_context_parallel_size,
        "pcp": args.prefill_context_parallel_size,
        "ep": args.enable_expert_parallel,
        "dp_external": args.data_parallel_external_lb,
        "async_scheduling": "--async-scheduling" in flags,
        "elastic_ep": "--enable-elastic-ep" in flags,
        "adaptive_verification": bool(spec.get("enable_adaptive_verification", False)),
        "local_argmax": bool(spec.get("use_local_argmax_reduction", False)),
        "model_runner_forced": False,  # recipes' env is not modelled; VLLM_USE_V2_MODEL_RUNNER unset
        "lora": "--enable-lora" in flags,
        "eplb": "--enable-eplb" in flags,
        "auto_tool_choice": args.enable_auto_tool_choice,
        "tool_call_parser_set": bool(args.tool_call_parser),
        **attention_backend(k, args),
        "spec_method": spec_method,
        "draft_tp": spec.get("draft_tensor_parallel_size"),
        "kv_connector": kv.get("kv_connector"),
        "kv_role": kv.get("kv_role"),
        "mm_encoder_tp_mode": args.mm_encoder_tp_mode,
        "distributed_executor_backend": None,
        "target": {
            "supports_pp": cap.get("supports_pp"),
            "supports_eagle3": cap.get("supports_eagle3"),
            "is_hybrid": cap.get("is_hybrid"),
            "has_inner_state": cap.get("has_inner_state"),
            "is_attention_free": cap.get("is_attention_free"),
            "supports_multimodal": cap.get("supports_multimodal"),
            "supports_encoder_tp_data": cap.get("supports_encoder_tp_data"),
            "is_moe": facts.is_moe,
            "use_mla": facts.use_mla,
            "aux_hidden_states_over_pp": aux_over_pp(k, cap),
            "attention_returns_lse": returns_lse(k, facts),
            "supports_lora": cap.get("supports_lora"),
            "is_moe_class": cap.get("is_moe"),
        },
        "installed": installed(k),
    }
    if facts.num_key_value_heads is not None:
        ctx["kv_heads"] = facts.num_key_value_heads
    for t in args.tokens:
        if t.flag == "--distributed-executor-backend":
            ctx["distributed_executor_backend"] = t.value
    if draft_pp is not None:
        ctx["draft_pp"] = draft_pp
    if "draft_sample_method" in spec:  # else the release's default decides: undecided here
        ctx["draft_sample_method"] = spec["draft_sample_method"]
    if draft_cap is not None:
        ctx["draft"] = {
            "supports_pp": draft_cap.get("supports_pp"),
            "is_moe": draft_cap.get("is_moe"),
            "has_get_top_tokens": has_top_tokens(k, draft_cap),
        }
        ctx["draft_class"] = (draft_cap.get("class_path") or "").rsplit(".", 1)[-1]  # messages
    runner = choose_runner(k, ctx, facts, cap, args)
    if runner is not None:
        ctx["model_runner"] = runner
    return ctx


def choose_runner(
    k: Any, ctx: dict[str, Any], facts: Any, cap: dict[str, Any], args: Any
) -> str | None:
    """'v0' / 'v1' / 'v2': the engine and model runner this release starts, or None (undecided).

    Read from the release (`runner_default`, compat.vllm.facts.runner_default): V0 by default;
    V1 with the V0 fallback oracle (undecided: the oracle reads more than the command); V1
    only; V2 for some architectures; V2 unless a `v2_unsupported` rule holds.
    """
    rd = k.release_facts.get("runner_default") or {}
    mode = rd.get("mode")
    if mode in ("v0", "v1"):
        return str(mode)
    if mode == "v2":
        candidate: bool | None = True
    elif mode == "restricted":
        candidate = cap.get("arch") in set(rd.get("archs") or [])
        if candidate and rd.get("requires_dense"):
            candidate = None if facts.is_moe is None else not facts.is_moe
        if candidate and rd.get("requires_unquantized"):
            quant = bool(args.quantization) or bool((facts.config or {}).get("quantization_config"))
            candidate = (
                False
                if quant
                else (None if facts.config is None and not args.quantization else True)
            )
    else:
        return None
    if candidate is False:
        return "v1"
    verified = {g for g, row in k.gates.items() if row["status"] == "verified"}
    hits = [
        rule_applies(r, ctx, list(rules()), verified)
        for r in rules()
        if r.group == "v2_unsupported" and r.id in verified
    ]
    if any(h is True for h in hits):
        return "v1"
    if candidate is None or any(h is None for h in hits):
        return None
    return "v2"


class _Known(dict):
    """Format values for a rule's message; a field the context does not know stays visibly named."""

    def __missing__(self, key: str) -> str:
        return f"<{key}>"


def message(rule: GateRule, ctx: dict[str, Any], cap: dict[str, Any]) -> str:
    """The rule's message with its fields filled as vLLM fills them, from this invocation.

    `{model}` is the target's class name (what vLLM's `type(model).__name__` prints);
    the sizes and the speculative method come from the argv.
    """
    values = _Known(
        {
            k: v
            for k, v in ctx.items()
            if isinstance(v, (str, int, float)) and not isinstance(v, bool)
        }
    )
    values["method"] = ctx.get("spec_method") or "<method>"
    values["model"] = (cap.get("class_path") or "").rsplit(".", 1)[-1] or "<model>"
    try:
        return rule.message.format_map(values)
    except (ValueError, IndexError):  # a brace the message does not mean as a field
        return rule.message


def apply(k: Any, ctx: dict[str, Any]) -> list[tuple[Status, GateRule, dict[str, Any], list[str]]]:
    """(status, rule, gate row, undecided conditions) for every verified rule that applies
    (blocked for errors, warning for fallbacks) or might apply (unknown: a condition it reads
    is undecided, and none it reads is known to be false)."""
    verified = {g for g, row in k.gates.items() if row["status"] == "verified"}
    every = list(rules())
    out: list[tuple[Status, GateRule, dict[str, Any], list[str]]] = []
    for r in every:
        if r.id in HANDLED_BY_ENGINE or r.id not in verified:
            continue
        if r.group == "v2_unsupported" and r.effect == "fallback":
            # Falling back to V1 only matters where V2 would have run (choose_runner reads them).
            continue
        hit = rule_applies(r, ctx, every, verified)
        if hit is True:
            out.append(
                (Status.BLOCKED if r.effect in _BLOCKING else Status.WARNING, r, k.gates[r.id], [])
            )
        elif hit is None:
            out.append((Status.UNKNOWN, r, k.gates[r.id], undecided(r, ctx, every, verified)))
    return out


def findings(k: Any, ctx: dict[str, Any], cap: dict[str, Any]) -> list[Finding]:
    """A finding per verified rule that applies or might apply (see `apply`)."""
    out = []
    for status, rule, row, open_conditions in apply(k, ctx):
        what = rule.description.split(". ")[0]
        evidence = [f"{row['file']}:{row['line']}" if row.get("file") else ""]
        stage = Stage.STARTUP if rule.effect == "startup_error" else Stage.CONFIG
        if status == Status.UNKNOWN:
            out.append(
                Finding(
                    status,
                    f"gate {rule.id} ({rule.effect}) may apply, undecided: "
                    f"{', '.join(open_conditions) or 'a condition'} ({what})",
                    "",
                    evidence,
                    stage,
                    key=f"gate:{rule.id}",
                )
            )
        else:
            out.append(
                Finding(
                    status,
                    f"gate {rule.id} ({rule.effect}): {what}",
                    message(rule, ctx, cap),
                    evidence,
                    stage,
                    key=f"gate:{rule.id}",
                )
            )
    return out
