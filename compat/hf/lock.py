"""The model facts lock: every model id a recipes checkout uses, pinned with its source and revision.

`compat models lock` writes it, the recipes repo commits it, and `compat build
--facts-lock FILE` reads it first and offline, so two CI runs a day apart judge the
same facts. An entry is the resolver's answer for one id (resolved or unknown, with
source, provenance, the Hub commit sha and the date it was resolved) plus only the
config.json fields the verdicts read:

* the facts compat.hf.facts reads with vLLM's rules (architectures, model_type,
  text_config.model_type, MTP/nextn layers, the expert-count and KV-head aliases,
  kv_lora_rank for MLA);
* `quantization_config` (its scalar members): the model-runner choice reads whether
  a checkpoint is quantized (compat.verdict.gates.choose_runner);
* the names the releases' own `SpeculativeConfig.hf_config_override` and speculators
  algorithms read (they run on the config in compat.vllm.sandbox), found statically
  in the releases the lock was made with, and the speculators fields.

Its shape is schema/model_facts_lock.schema.json. A malformed lock is a one-line
error naming the file and field. No token is ever part of it.
"""

from __future__ import annotations

import ast
import datetime as dt
import json
import os
import re
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

from compat.errors import UserError
from compat.hf.facts import EXPERT_KEYS, KV_HEAD_KEYS, TEXT_CONFIG_KEYS, ModelFacts
from compat.resources import schema_dir
from compat.sources.tree import VllmTree

LOCK_VERSION = 1
SCHEMA = schema_dir() / "model_facts_lock.schema.json"
FACT_FIELDS = (
    "architectures",
    "model_type",
    "text_model_type",
    "num_nextn_predict_layers",
    "num_experts",
    "is_moe",
    "use_mla",
    "num_attention_heads",
    "num_key_value_heads",
)
# config.json keys compat.hf.facts and compat.verdict read, whatever the release.
READ_KEYS = frozenset(
    {
        "architectures",
        "model_type",
        "num_nextn_predict_layers",
        "num_attention_heads",
        "kv_lora_rank",
        "block_configs",
        "block_type",
        "n_routed_experts",
        "quantization_config",
        "speculators_model_type",
        "speculators_config",
        "transformer_layer_config",
        # SpeculativeConfig fills num_speculative_tokens from the draft's (compat.verdict.spec_tokens)
        "n_predict",
        "block_size",
        "dspark_block_size",
        *EXPERT_KEYS,
        *KV_HEAD_KEYS,
        *TEXT_CONFIG_KEYS,
        "llm_config",
        "language_config",
    }
)
# Functions run on a config in the sandbox: (file, function name or decorator name).
SANDBOXED = (
    ("vllm/config/speculative.py", "hf_config_override"),
    ("vllm/transformers_utils/configs/speculators/algos.py", "register_speculator"),
)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def sandbox_keys(trees: Sequence[VllmTree]) -> set[str]:
    """Every attribute name and identifier-like string constant in the functions the
    sandbox runs on a config, over the given releases: the config keys they can read."""
    names: set[str] = set()
    for tree in trees:
        for file, fn_name in SANDBOXED:
            module = tree.parse(file)
            if module is None:
                continue
            for fn in ast.walk(module):
                if not isinstance(fn, ast.FunctionDef):
                    continue
                decorated = any(
                    isinstance(d, ast.Call) and getattr(d.func, "id", "") == fn_name
                    for d in fn.decorator_list
                )
                if fn.name != fn_name and not decorated:
                    continue
                for node in ast.walk(fn):
                    if isinstance(node, ast.Attribute):
                        names.add(node.attr)
                    elif (
                        isinstance(node, ast.Constant)
                        and isinstance(node.value, str)
                        and _NAME.fullmatch(node.value)
                    ):
                        names.add(node.value)
    return names


def config_subset(config: dict[str, Any], keys: frozenset[str] | set[str]) -> dict[str, Any]:
    """The fields of a config.json dict the verdicts read (sub-config dicts filtered the same
    way; `quantization_config` keeps its scalar members, which is all anything reads of it)."""
    out: dict[str, Any] = {}
    for k, v in config.items():
        if k not in keys:
            continue
        if k == "quantization_config" and isinstance(v, dict):
            out[k] = {qk: qv for qk, qv in v.items() if not isinstance(qv, (dict, list))}
        elif isinstance(v, dict):
            out[k] = config_subset(v, keys)
        elif isinstance(v, list) and k == "block_configs":
            out[k] = [config_subset(b, keys) if isinstance(b, dict) else b for b in v]
        else:
            out[k] = v
    return out


def entry_of(facts: ModelFacts, keys: frozenset[str] | set[str], date: str) -> dict[str, Any]:
    """One lock entry from resolved (or unknown) facts."""
    return {
        "status": facts.status,
        "reason": facts.reason,
        "source": facts.source,
        "provenance": facts.provenance,
        "revision": facts.revision,
        "date": date,
        "inferred": facts.inferred,
        "base_model_id": facts.base_model_id,
        "notes": list(facts.notes),
        "candidates": list(facts.candidates),
        "facts": {
            f: (list(getattr(facts, f)) if f == "architectures" else getattr(facts, f))
            for f in FACT_FIELDS
        },
        "config": config_subset(facts.config, keys) if facts.config is not None else None,
    }


def facts_of(model_id: str, entry: dict[str, Any], label: str) -> ModelFacts:
    f = entry["facts"]
    # provenance is optional in the schema: a hand-written entry may leave it out
    where = " ".join(x for x in (entry.get("source"), entry.get("provenance")) if x)
    where = f"{label}: {where}" if entry.get("source") else label
    return ModelFacts(
        model_id=model_id,
        status=entry["status"],
        reason=entry.get("reason"),
        architectures=tuple(f.get("architectures") or ()),
        model_type=f.get("model_type"),
        text_model_type=f.get("text_model_type"),
        num_nextn_predict_layers=f.get("num_nextn_predict_layers"),
        num_experts=f.get("num_experts"),
        is_moe=f.get("is_moe"),
        use_mla=f.get("use_mla"),
        num_attention_heads=f.get("num_attention_heads"),
        num_key_value_heads=f.get("num_key_value_heads"),
        config=entry.get("config"),
        source=entry.get("source"),
        provenance=where,
        revision=entry.get("revision"),
        inferred=bool(entry.get("inferred")),
        base_model_id=entry.get("base_model_id"),
        notes=tuple(entry.get("notes") or ()),
        candidates=tuple(entry.get("candidates") or ()),
    )


@dataclass
class FactsLock:
    """A parsed lock: entries by lower-cased id."""

    path: Path
    doc: dict[str, Any]
    _by_key: dict[str, str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._by_key = {mid.casefold(): mid for mid in self.doc["models"]}

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def models(self) -> dict[str, dict[str, Any]]:
        return self.doc["models"]

    def entry(self, model_id: str) -> tuple[str, dict[str, Any]] | None:
        """(id as locked, entry); ids are case-insensitive, as on the Hub."""
        mid = self._by_key.get(model_id.strip().casefold())
        return (mid, self.models[mid]) if mid is not None else None

    def get(self, model_id: str) -> ModelFacts | None:
        hit = self.entry(model_id)
        return facts_of(hit[0], hit[1], self.name) if hit else None


def _validate(doc: Any, label: str) -> None:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(doc), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        err = errors[0]
        at = "/".join(str(p) for p in err.absolute_path) or "(root)"
        raise UserError(f"field {at}: {err.message}", where=label)


def read_lock(path: Path) -> FactsLock:
    """Parse and schema-check a lock; any defect is a UserError naming the file and field."""
    label = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(
            f"cannot read the facts lock: {type(exc).__name__}: "
            f"{getattr(exc, 'strerror', None) or exc}",
            where=label,
        ) from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(
            f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})", where=label
        ) from None
    _validate(doc, label)
    return FactsLock(Path(path), doc)


def build_lock(
    facts: Iterable[ModelFacts],
    keys: set[str],
    sources: dict[str, Any],
    previous: FactsLock | None = None,
    today: str | None = None,
) -> dict[str, Any]:
    """The lock document. An entry unchanged since `previous` keeps its date, so re-locking
    an unchanged checkout changes nothing."""
    date = today or dt.datetime.now(dt.UTC).date().isoformat()
    models: dict[str, Any] = {}
    for f in sorted(facts, key=lambda x: x.model_id.casefold()):
        entry = entry_of(f, keys, date)
        old = previous.entry(f.model_id) if previous is not None else None
        if old is not None and {**old[1], "date": date} == entry:
            entry["date"] = old[1]["date"]
        models[f.model_id] = entry
    doc = {
        "lock_version": LOCK_VERSION,
        "generator": "vllm-compat",
        "sources": sources,
        "config_keys": sorted(keys),
        "models": models,
    }
    _validate(doc, "model facts lock (internal)")
    return doc


def write_lock(doc: dict[str, Any], path: Path) -> None:
    """Atomically: the old lock stays whole until the new one is complete."""
    path = Path(path)
    text = json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or Path("."))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
