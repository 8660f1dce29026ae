"""Small, synthetic releases and model facts for input/output table tests of the engine and fixes.

A release here is a `Knowledge` built by hand (the shape `load_knowledge` builds from a
scan), and models come from a dict, so each rule of the engine can be switched on or off
by one fact and its table row says what must follow.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from compat.hf.facts import ModelFacts
from compat.verdict.knowledge import Knowledge

BASE_FLAGS = ("--tensor-parallel-size", "--pipeline-parallel-size", "--data-parallel-size",
              "--enable-expert-parallel", "--speculative-config", "--nnodes", "--node-rank",
              "--master-addr", "--headless", "--data-parallel-size-local", "--data-parallel-address",
              "--data-parallel-rpc-port", "--data-parallel-start-rank", "--max-model-len",
              "--tool-call-parser", "--enable-auto-tool-choice", "--reasoning-parser",
              "--tool-parser-plugin", "--kv-transfer-config", "--trust-remote-code", "--enable-lora",
              "--enable-eplb")


def cap(arch: str, *, pp: bool = True, spec: bool = False) -> dict[str, Any]:
    return {"arch": arch, "class_path": f"vllm.models.x.{arch}", "file": "vllm/models/x.py", "line": 10,
            "supports_pp": int(pp), "supports_multimodal": 0, "supports_encoder_tp_data": 0,
            "category": "_SPECULATIVE_DECODING_MODELS" if spec else "_TEXT_GENERATION_MODELS",
            "mro_path": "[]"}


def release(version: str, *, flags: tuple[str, ...] = (), drop: tuple[str, ...] = (),
            draft_pp: str = "target", methods: tuple[str, ...] = ("eagle3", "ngram"),
            tool_parsers: tuple[str, ...] = ("hermes",), caps: list[dict[str, Any]] | None = None) -> Knowledge:
    """A release: base flags plus `flags` minus `drop`; drafts copy the target's PP (`draft_pp`)."""
    k = Knowledge(version=version, tree=None)
    for arch_cap in caps if caps is not None else [
            cap("PPModel"), cap("NoPPModel", pp=False), cap("Eagle3NoPP", pp=False, spec=True),
            cap("Eagle3PP", pp=True, spec=True)]:
        k.caps[("cuda", arch_cap["arch"])] = arch_cap
    for flag in (*BASE_FLAGS, *flags):
        if flag not in drop:
            k.flags[flag] = {"flag": flag, "canonical": flag, "value_type": "str", "file": "vllm/args.py",
                             "line": 1, "kind": "long"}
    k.methods = {m: m for m in methods}
    k.draft_pc = {m: {"method": m, "pp_source": "none" if m == "ngram" else draft_pp,
                      "file": "vllm/config/speculative.py", "line": 900} for m in methods}
    k.parsers = defaultdict(set, {"tool": set(tool_parsers), "reasoning": {"deepseek_r1"}})
    k.raises = [{"file": "vllm/config/model.py", "line": 1200,
                 "template": "Pipeline parallelism is not supported for this model."},
                {"file": "vllm/config/parallel.py", "line": 300,
                 "template": "Number of experts in the model must be greater than 0"}]
    k.release_facts = {"class_attr_scans": {}, "speculative_token_count": TOKEN_COUNT}
    return k


# How SpeculativeConfig settles num_speculative_tokens (compat.vllm.spec_tokens), 0.33.0's shape.
TOKEN_COUNT = {
    "found": True, "file": "vllm/config/speculative.py", "line": 1226, "mtp_compare": 1487,
    "n_predict_fill": 1603, "divisible": {"line": 1609, "message": "must be divisible"},
    "block_fill": 1599, "dspark_skips_n_predict": True,
    "model_missing": {"line": 1615, "message": "A speculative model was provided, but "
                      "`num_speculative_tokens` was not provided", "unless": []},
    "verify_missing": {"line": 1947, "message": "num_speculative_tokens must be provided"},
    "fill_methods": {"suffix": 1333}, "other_fills": [], "config_types": [],
}


@dataclass
class Models:
    """A ModelResolver stand-in: id -> (architecture, experts), anything else unknown."""

    known: dict[str, tuple[str, int | None]] = field(default_factory=dict)

    def resolve(self, model_id: str) -> ModelFacts:
        if model_id not in self.known:
            return ModelFacts(model_id, "unknown", reason=f"no config for {model_id}")
        arch, experts = self.known[model_id]
        return ModelFacts(model_id, "resolved", architectures=(arch,), model_type="x", num_experts=experts,
                          is_moe=None if experts is None else experts > 0, source="curated")

    def coverage(self, ids: Any) -> dict[str, Any]:
        return {"total": 0, "resolved": 0}


MODELS = Models({
    "acme/moe-pp": ("PPModel", 8),
    "acme/dense-pp": ("PPModel", 0),
    "acme/dense-nopp": ("NoPPModel", 0),
    "acme/experts-unknown": ("PPModel", None),
    "acme/eagle3-nopp": ("Eagle3NoPP", None),
    "acme/eagle3-pp": ("Eagle3PP", None),
    "acme/eagle3-unregistered": ("Eagle3Unregistered", None),
})
