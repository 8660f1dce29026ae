"""Does SpeculativeConfig settle `num_speculative_tokens` for this command? (issue 16, G1-G2)

The release fact `speculative_token_count` (compat.vllm.spec_tokens) says where the release fills
an absent count and what it raises; this module applies it in `__post_init__`'s order to the
written config and to what the draft config vLLM builds says (`DraftCounts`). What the draft
config cannot tell (an unresolved checkpoint, a config class of the release's own that may set
the value) is undecided: the finding is `unknown` wherever that value could change the verdict,
and the check is quiet where it could not (no draft's n_predict refuses a count of 1 or 2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from compat.verdict.findings import Finding
from compat.vocab import Status

TYPE_ERROR = "'>' not supported between instances of 'NoneType' and 'int'"
#: The least count some n_predict >= 1 fails to divide (3, by 2): 1 and 2 pass any draft.
MIN_UNDIVIDED = 3


@dataclass(frozen=True)
class DraftCounts:
    """What the draft config vLLM builds holds: `n_predict`, `block_size` (or
    `dspark_block_size`) and its model_type after `hf_config_override`. `undecided` maps a
    field that is not known here to why."""

    n_predict: int | None = None
    block_size: int | None = None
    model_type: str | None = None
    undecided: dict[str, str] = field(default_factory=dict)

    @classmethod
    def unknown(cls, why: str) -> DraftCounts:
        return cls(undecided={f: why for f in ("n_predict", "block_size", "model_type")})


def counts_from_config(
    config: dict[str, Any], override: Any, config_types: list[str]
) -> DraftCounts:
    """The counts of a draft built from `config` (config.json), after the release's
    `hf_config_override` (`override`, an OverrideResult, or None when it did not run)."""
    if override is not None and override.status == "ok" and override.changed:
        mt = override.model_type
        n, b = override.counts.get("n_predict"), override.counts.get("block_size")
    else:
        mt = config.get("model_type")
        n = config.get("n_predict")
        b = config.get("block_size", config.get("dspark_block_size"))
    why = {}
    if mt in config_types:
        # One of vLLM's own config classes builds it, and it mentions the value.
        why = {
            f: f"vLLM's own config class for {mt!r} may set {f}"
            for f, v in (("n_predict", n), ("block_size", b))
            if v is None
        }
    return DraftCounts(
        n if isinstance(n, int) else None, b if isinstance(b, int) else None, mt, why
    )


def check(
    k: Any,
    spec: dict[str, Any],
    canonical: str,
    model_based: bool,
    counts: DraftCounts | None,
    step: str,
) -> Finding | None:
    """The finding for the count, or None when the release fills it or accepts it."""
    fact = k.release_facts.get("speculative_token_count") or {}
    nst = spec.get("num_speculative_tokens")
    if not fact.get("found"):
        if nst is None or (model_based and nst >= MIN_UNDIVIDED):
            return _unknown(
                k,
                f"{step}: how vLLM {k.version} settles num_speculative_tokens is not read "
                "(no SpeculativeConfig.__post_init__ found)",
                "release",
            )
        return None
    if nst is not None and not isinstance(nst, int):
        return None  # a value of another type: the schema check decides
    counts = counts or DraftCounts.unknown("no draft config")
    if nst is None:
        return _absent(k, fact, spec, canonical, model_based, counts, step)
    if model_based and not (canonical == "dspark" and fact.get("dspark_skips_n_predict")):
        return _divisible(k, fact, nst, counts, step)
    return None


def _absent(
    k: Any,
    fact: dict[str, Any],
    spec: dict[str, Any],
    canonical: str,
    model_based: bool,
    counts: DraftCounts,
    step: str,
) -> Finding | None:
    if canonical in fact.get("fill_methods", {}):
        return None
    file = fact.get("file", "")
    if not (model_based and spec.get("model") is not None):
        return _verify_raise(k, fact, file, step, "no model, so nothing in __post_init__ fills it")
    method = canonical
    if method == "draft_model" and "model_type" not in counts.undecided:
        if counts.model_type in k.mtp_types:
            method = "mtp"  # __post_init__ switches to mtp from the draft's model_type
    elif method == "draft_model":
        return _unknown(k, f"{step}: {counts.undecided['model_type']}", "model_type")
    if method == "mtp" and fact.get("mtp_compare"):
        ev = f"{file}:{fact['mtp_compare']}"
        return Finding(
            Status.BLOCKED,
            f"{step}: num_speculative_tokens absent; the MTP branch of "
            f"SpeculativeConfig.__post_init__ tests `num_speculative_tokens > 1` before anything "
            f"fills it ({ev})",
            f"TypeError: {TYPE_ERROR}",
            [ev],
            key="spec_tokens:mtp_compare",
        )
    for name, fill in (("block_size", "block_fill"), ("n_predict", "n_predict_fill")):
        if name == "block_size" and not (canonical == "dspark" and fact.get(fill)):
            continue
        if name == "n_predict" and (
            not fact.get(fill) or (canonical == "dspark" and fact.get("dspark_skips_n_predict"))
        ):
            continue
        if name in counts.undecided:
            return _unknown(
                k, f"{step}: num_speculative_tokens absent; {counts.undecided[name]}", name
            )
        if getattr(counts, name) == 0:
            return _unknown(
                k,
                f"{step}: num_speculative_tokens absent; the draft config's {name} "
                "is 0, which fills a count of 0 (not replayed past that)",
                "zero",
            )
        if getattr(counts, name) is not None:
            return None  # filled from the draft config
    if fact.get("other_fills"):
        return _unknown(
            k,
            f"{step}: num_speculative_tokens absent; __post_init__ sets it at lines "
            f"{fact['other_fills']}, which are not replayed",
            "other_fills",
        )
    missing = fact.get("model_missing")
    if missing:
        if set(missing.get("unless") or []) & set(spec):
            return _unknown(
                k,
                f"{step}: num_speculative_tokens absent with {sorted(missing['unless'])} set; "
                "what vLLM derives from it is not replayed",
                "unless",
            )
        ev = f"{file}:{missing['line']}"
        return Finding(
            Status.BLOCKED,
            f"{step}: num_speculative_tokens absent and the draft config has no n_predict to fill "
            f"it; SpeculativeConfig.__post_init__ raises ({ev})",
            f"Value error, {missing['message']}",
            [ev],
            key="spec_tokens:model_missing",
        )
    return _verify_raise(k, fact, file, step, "the draft config has no n_predict to fill it")


def _verify_raise(k: Any, fact: dict[str, Any], file: str, step: str, why: str) -> Finding:
    missing = fact.get("verify_missing")
    if not missing or fact.get("other_fills"):
        return _unknown(
            k,
            f"{step}: num_speculative_tokens absent; {why}, and where vLLM "
            f"{k.version} refuses that is not read",
            "verify",
        )
    ev = f"{file}:{missing['line']}"
    return Finding(
        Status.BLOCKED,
        f"{step}: num_speculative_tokens absent; {why}, and SpeculativeConfig._verify_args "
        f"raises ({ev})",
        f"Value error, {missing['message']}",
        [ev],
        key="spec_tokens:verify_missing",
    )


def _divisible(
    k: Any, fact: dict[str, Any], nst: int, counts: DraftCounts, step: str
) -> Finding | None:
    if "n_predict" in counts.undecided:
        if nst < MIN_UNDIVIDED:
            return None  # no n_predict of a draft (>= 1) refuses 1 or 2
        return _unknown(
            k,
            f"{step}: num_speculative_tokens={nst} must divide by the draft's n_predict when "
            f"above it; {counts.undecided['n_predict']}",
            "n_predict",
        )
    n = counts.n_predict
    if n == 0 and fact.get("divisible"):
        ev = f"{fact.get('file', '')}:{fact['divisible']['line']}"
        return Finding(
            Status.BLOCKED,
            f"{step}: the draft config's n_predict is 0, and SpeculativeConfig.__post_init__ "
            f"takes num_speculative_tokens modulo it ({ev})",
            "ZeroDivisionError: integer modulo by zero",
            [ev],
            key="spec_tokens:n_predict_zero",
        )
    if n is None or n <= 0 or nst <= n or nst % n == 0:
        return None
    div = fact.get("divisible")
    if not div:
        return _unknown(
            k,
            f"{step}: num_speculative_tokens={nst} is above the draft's n_predict={n} and not "
            f"a multiple; whether vLLM {k.version} refuses that is not read",
            "divisible",
        )
    ev = f"{fact.get('file', '')}:{div['line']}"
    return Finding(
        Status.BLOCKED,
        f"{step}: num_speculative_tokens={nst} is above the draft config's n_predict={n} and "
        f"not a multiple of it; SpeculativeConfig.__post_init__ raises ({ev})",
        f"Value error, num_speculative_tokens:{nst} must be divisible by n_predict={n}",
        [ev],
        key=f"spec_tokens:divisible:{nst}:{n}",
    )


def _unknown(k: Any, text: str, what: str) -> Finding:
    return Finding(Status.UNKNOWN, text, key=f"spec_tokens:undecided:{what}")
