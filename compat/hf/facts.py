"""What the rest of the pipeline needs to know about one HF model id, and how to read it off a config.

The verdict stage needs a handful of config facts to predict vLLM's behaviour:
`architectures[0]` picks the model class, `model_type` / `architectures[0]` /
`num_nextn_predict_layers` / `text_config` drive `SpeculativeConfig.hf_config_override`
(the MTP draft), and the expert count decides `is_moe`, which the expert-parallel
gate reads. They are read from a config.json dict with vLLM's own rules, so a
facts row and vLLM never disagree about the same file.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

Status = Literal["resolved", "unknown"]
# "vllm candidates": the engine's per-candidate copy when the config is unknown but vLLM names the
# architectures the id can be
Source = Literal[
    "local",
    "hub",
    "curated",
    "vllm-tests",
    "vllm-docs",
    "transformers",
    "derived",
    "vllm candidates",
]

# vLLM's CONFIG_FIELD_ALIASES["num_experts"] (0.33 transformers_utils/config.py:56-70;
# 0.23/0.24 model_arch_config_convertor.py:145-162 has the same list), in order.
EXPERT_KEYS = ("num_experts", "moe_num_experts", "n_routed_experts", "num_local_experts")
# vLLM's CONFIG_FIELD_ALIASES["total_num_kv_heads"], in order.
KV_HEAD_KEYS = (
    "n_head_kv",
    "num_kv_heads",
    "num_key_value_heads",
    "multi_query_group_num",
    "num_attention_groups",
)
# transformers' PreTrainedConfig.get_text_config(): encoder names, then decoder names.
TEXT_CONFIG_KEYS = ("text_encoder", "decoder", "generator", "text_config")


@dataclass(frozen=True)
class ModelFacts:
    """Config facts for one HF model id, or why they are unknown.

    `num_experts` follows vLLM's rule (0 = known dense); `is_moe` is `num_experts > 0`.
    A field is None when the source does not say. `inferred` is True when any fact
    was not read from the model's own config: an architecture from docs, a model_type
    from transformers' class mappings, facts borrowed from a base id.
    `config` is the full config.json dict when one was read (local or hub; a derived or
    aliased id carries its base's dict, without the copy's own quantization_config).
    """

    model_id: str
    status: Status
    reason: str | None = None
    architectures: tuple[str, ...] = ()
    model_type: str | None = None
    text_model_type: str | None = None
    num_nextn_predict_layers: int | None = None
    num_experts: int | None = None
    is_moe: bool | None = None
    use_mla: bool | None = None
    num_attention_heads: int | None = None
    num_key_value_heads: int | None = None
    config: dict[str, Any] | None = field(default=None, compare=False, hash=False, repr=False)
    source: Source | None = None
    provenance: str | None = None
    revision: str | None = None  # commit sha of the config.json read (hub, HF cache)
    inferred: bool = False
    base_model_id: str | None = None  # the id whose facts these are, for aliases and derived ids
    notes: tuple[str, ...] = ()  # caveats: ambiguous candidates, disagreeing sources
    # When unknown because vLLM lists the id under several architectures: those architectures.
    candidates: tuple[str, ...] = ()

    @property
    def architecture(self) -> str | None:
        return self.architectures[0] if self.architectures else None

    @property
    def resolved(self) -> bool:
        return self.status == "resolved"

    def to_row(self) -> dict[str, Any]:
        """Flat dict for tables and JSON: tuples become lists, the config dict is left out."""
        row = asdict(self)
        row.pop("config")
        row["architectures"] = list(self.architectures)
        row["notes"] = list(self.notes)
        return row

    def with_id(self, model_id: str, **changes: Any) -> ModelFacts:
        return replace(self, model_id=model_id, **changes)


def unknown(
    model_id: str, reason: str, notes: tuple[str, ...] = (), candidates: tuple[str, ...] = ()
) -> ModelFacts:
    return ModelFacts(
        model_id=model_id, status="unknown", reason=reason, notes=notes, candidates=candidates
    )


def text_config_of(config: dict[str, Any]) -> dict[str, Any]:
    """The sub-config vLLM treats as the language model (`get_hf_text_config`).

    Mirrors transformers' `get_text_config()` on a plain dict: exactly one of the
    known sub-config keys holding a dict wins; none (or an ambiguous several) means
    the config is flat. Remote-code layouts (`llm_config`, `language_config`) are used
    only when none of the standard keys is present.
    """
    subs = [k for k in TEXT_CONFIG_KEYS if isinstance(config.get(k), dict)]
    if len(subs) == 1:
        return config[subs[0]]
    if not subs:
        legacy = [k for k in ("llm_config", "language_config") if isinstance(config.get(k), dict)]
        if len(legacy) == 1:
            return config[legacy[0]]
    return config


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def num_experts_of(text_config: dict[str, Any]) -> int:
    """vLLM's `get_num_experts`: the first *present* alias key, `[0]` of a list, else
    the largest `n_routed_experts` among `block_configs` entries of type "moe"."""
    value: Any = 0
    for key in EXPERT_KEYS:
        if key in text_config:
            value = text_config[key]
            break
    if isinstance(value, list):
        value = value[0] if value else 0
    if not value:
        best = 0
        for block in text_config.get("block_configs") or ():
            if isinstance(block, dict) and block.get("block_type", "") == "moe":
                best = max(best, _int(block.get("n_routed_experts", 0)) or 0)
        return best
    return _int(value) or 0


def facts_from_config(
    model_id: str,
    config: dict[str, Any],
    *,
    source: Source,
    provenance: str,
    revision: str | None = None,
) -> ModelFacts:
    """Facts read off a real config.json dict (not inferred)."""
    text = text_config_of(config)
    archs = config.get("architectures") or ()
    if isinstance(archs, str):
        archs = (archs,)
    model_type = config.get("model_type") if isinstance(config.get("model_type"), str) else None
    text_type = text.get("model_type") if isinstance(text.get("model_type"), str) else None
    nextn = config.get("num_nextn_predict_layers", text.get("num_nextn_predict_layers"))
    experts = num_experts_of(text)
    heads = _int(text.get("num_attention_heads"))
    kv = None
    for key in KV_HEAD_KEYS:
        if key in text:
            kv = _int(text[key])
            break
    if kv is None:
        kv = heads  # vLLM: without a GQA key, KV heads equal attention heads
    notes: tuple[str, ...] = ()
    if not archs:
        notes = ("config.json has no `architectures`",)
    return ModelFacts(
        model_id=model_id,
        status="resolved",
        architectures=tuple(a for a in archs if isinstance(a, str)),
        model_type=model_type,
        text_model_type=text_type,
        num_nextn_predict_layers=_int(nextn),
        num_experts=experts,
        is_moe=experts > 0,
        use_mla=text.get("kv_lora_rank") is not None,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        config=config,
        source=source,
        provenance=provenance,
        revision=revision,
        inferred=False,
        notes=notes,
    )
