"""HF model id -> ModelFacts, first hit wins, every hit with provenance.

Order (DESIGN.md "Model configs"):

1. `local`: a config.json under `hf_config_dir` (HF cache layout or `org/name/`).
2. `hub`: the HF Hub, only with `allow_hub=True`; failures fall through, reason kept.
3. `curated`: data/model_configs.yaml (facts, or "same as <other id>").
4. `vllm-tests`: vLLM's `tests/config/base_model_arch_groundtruth.json` (real
   config facts) then `tests/models/registry.py` example ids, releases newest first.
5. `derived`: the id minus a quantization suffix (`-FP8`, `-NVFP4`, ...) resolves
   through 1-4; its facts are borrowed, marked inferred.
6. `transformers`: the transformers wheel documents a configuration class with this
   exact id (compat.hf.transformers_docs): its model_type, and the architecture its
   auto mappings give it; marked inferred. Several classes: candidates, unknown.
7. `vllm-docs`: docs/models/supported_models.md rows (exact id, then org + family
   name; see compat.hf.vllm_docs), marked inferred.
8. `derived` again, now letting the base id resolve through 6-7.

A facts lock (compat.hf.lock), when given, answers before all of them.

Steps 5 and 8 are split so that a quantized id borrows its base's config-backed
facts before any docs guess about either is considered. When only an architecture
is known, model_type comes from transformers' class mappings (or, for classes
transformers lacks, vLLM's config registry; compat.hf.model_types), marked inferred.
No hit: status "unknown" with the reasons each source gave, never a guess.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from compat.hf.curated import DEFAULT_CURATED, CuratedEntry, load_curated
from compat.hf.facts import ModelFacts, Source, facts_from_config, unknown
from compat.hf.hub import HubClient, HubResult
from compat.hf.ids import base_candidates
from compat.hf.local import load_local, snapshot_revision
from compat.hf.lock import FactsLock
from compat.hf.model_types import TransformersTypes, VllmConfigTypes
from compat.hf.transformers_docs import TransformersCheckpoints
from compat.hf.vllm_docs import VllmDocsIndex
from compat.hf.vllm_tests import VllmTestsIndex
from compat.sources.tree import VllmTree
from compat.vocab import release_key

TRANSFORMERS_TYPES = DEFAULT_CURATED.parent / "transformers_model_types.json"
SOURCES = ("local", "hub", "curated", "vllm-tests", "transformers", "vllm-docs", "derived")


class ModelResolver:
    """Resolve HF model ids to config facts. Indexes are built once, lazily; results are cached per id."""

    def __init__(
        self,
        hf_config_dir: Path | None = None,
        allow_hub: bool = False,
        trees: Sequence[VllmTree] = (),
        curated: Path = DEFAULT_CURATED,
        *,
        hub: HubClient | None = None,
        lock: FactsLock | None = None,
        checkpoints: TransformersCheckpoints | None = None,
        transformers_types: Path = TRANSFORMERS_TYPES,
    ) -> None:
        self.hf_config_dir = Path(hf_config_dir) if hf_config_dir else None
        self.allow_hub = allow_hub
        self.trees = sorted(trees, key=lambda t: release_key(t.version), reverse=True)
        self.curated_path = Path(curated)
        self.hub = hub if hub is not None else (HubClient() if allow_hub else None)
        self.lock = lock
        self.checkpoints = checkpoints
        self.transformers_path = Path(transformers_types)
        self._curated: dict[str, CuratedEntry] | None = None
        self._tests: VllmTestsIndex | None = None
        self._docs: VllmDocsIndex | None = None
        self._types: TransformersTypes | None = None
        self._vllm_types: VllmConfigTypes | None = None
        self._cache: dict[str, ModelFacts] = {}
        self._strong_cache: dict[str, ModelFacts | None] = {}
        self._active: set[str] = set()
        # id -> architectures vLLM lists it under when it names several (tests or docs)
        self._candidates: dict[str, set[str]] = {}
        self._hub_cache: dict[str, HubResult] = {}

    # -- indexes ---------------------------------------------------------------------------

    @property
    def curated(self) -> dict[str, CuratedEntry]:
        if self._curated is None:
            self._curated = load_curated(self.curated_path)
        return self._curated

    @property
    def tests(self) -> VllmTestsIndex:
        if self._tests is None:
            self._tests = VllmTestsIndex(self.trees)
        return self._tests

    @property
    def docs(self) -> VllmDocsIndex:
        if self._docs is None:
            self._docs = VllmDocsIndex(self.trees)
        return self._docs

    @property
    def types(self) -> TransformersTypes:
        if self._types is None:
            self._types = TransformersTypes(self.transformers_path)
        return self._types

    @property
    def vllm_types(self) -> VllmConfigTypes:
        if self._vllm_types is None:
            self._vllm_types = VllmConfigTypes(self.trees)
        return self._vllm_types

    @property
    def transformers_version(self) -> str | None:
        """The transformers release whose mappings (and checkpoint docs) informed the facts."""
        if self.checkpoints is not None:
            return self.checkpoints.version
        return self.types.version if self.transformers_path.is_file() else None

    # -- public ----------------------------------------------------------------------------

    def resolve(self, model_id: str) -> ModelFacts:
        model_id = model_id.strip()
        key = model_id.casefold()
        if key in self._cache:
            return self._cache[key]
        if key in self._active:  # an alias cycle in curated data
            return unknown(model_id, "curated same_as entries form a cycle")
        self._active.add(key)
        try:
            facts = self._resolve(model_id)
        finally:
            self._active.discard(key)
        self._cache[key] = facts
        return facts

    def coverage(self, ids: Iterable[str]) -> dict[str, Any]:
        """Counts per source over the distinct ids, and the unknown ones with their reasons."""
        seen: dict[str, str] = {}
        for mid in ids:
            seen.setdefault(mid.strip().casefold(), mid.strip())
        by_source: Counter[str] = Counter()
        inferred = 0
        unknowns: dict[str, str] = {}
        for mid in seen.values():
            f = self.resolve(mid)
            if f.resolved:
                by_source[f.source or "?"] += 1
                inferred += f.inferred
            else:
                unknowns[mid] = f.reason or ""
        return {
            "total": len(seen),
            "resolved": len(seen) - len(unknowns),
            "inferred": inferred,
            "by_source": {s: by_source[s] for s in SOURCES if by_source[s]},
            "unknown": sorted(unknowns),
            "unknown_reasons": dict(sorted(unknowns.items())),
        }

    # -- the chain -------------------------------------------------------------------------

    def _resolve(self, model_id: str) -> ModelFacts:
        misses: list[str] = []
        notes: list[str] = []
        locked = self._from_lock(model_id, misses, notes)
        if locked is not None:
            return locked
        facts = self._strong(model_id, misses, notes)
        if facts is None:
            facts = self._derived(model_id, misses, strong_only=True)
        if facts is None:
            facts = self._from_transformers(model_id, misses, notes)
        if facts is None:
            facts = self._from_docs(model_id, misses, notes)
        if facts is None:
            facts = self._derived(model_id, misses, strong_only=False)
        if facts is None:
            return unknown(
                model_id,
                "; ".join(dict.fromkeys(m for m in misses if m)),
                tuple(dict.fromkeys(notes)),
                tuple(sorted(self._candidates.get(model_id.casefold(), ()))),
            )
        extra = tuple(n for n in dict.fromkeys(notes) if n not in facts.notes)
        return replace(facts, notes=facts.notes + extra) if extra else facts

    def _strong(self, model_id: str, misses: list[str], notes: list[str]) -> ModelFacts | None:
        for stage in (self._from_local, self._from_hub, self._from_curated, self._from_tests):
            facts = stage(model_id, misses, notes)
            if facts is not None:
                return facts
        return None

    def _strong_only(self, model_id: str) -> ModelFacts | None:
        """Stages 1-4 for a base id (no docs, no further stripping), cached."""
        key = model_id.casefold()
        if key not in self._strong_cache:
            full = self._cache.get(key)
            if full is not None and full.resolved and full.source not in ("vllm-docs", "derived"):
                self._strong_cache[key] = full
            else:
                self._strong_cache[key] = self._strong(model_id, [], [])
        return self._strong_cache[key]

    def _from_local(self, model_id: str, misses: list[str], notes: list[str]) -> ModelFacts | None:
        if self.hf_config_dir is None:
            misses.append("no --hf-config-dir")
            return None
        config, rel, why = load_local(self.hf_config_dir, model_id)
        if config is None:
            misses.append(why or "no local config.json")
            if why:
                notes.append(why)
            return None
        return facts_from_config(
            model_id, config, source="local", provenance=rel, revision=snapshot_revision(rel)
        )

    def prefetch(self, model_ids: Iterable[str], progress: bool = True) -> None:
        """Ask the Hub for every id at once (concurrently) before resolving them one by one.
        Ids the lock or a local config.json answers are not asked."""
        if not self.allow_hub or self.hub is None:
            return
        todo = []
        for mid in dict.fromkeys(m.strip() for m in model_ids):
            key = mid.casefold()
            if key in self._hub_cache or (self.lock is not None and self.lock.get(mid)):
                continue
            if (
                self.hf_config_dir is not None
                and load_local(self.hf_config_dir, mid)[0] is not None
            ):
                continue
            todo.append(mid)
        for mid, res in self.hub.fetch_many(todo, progress=progress).items():
            self._hub_cache[mid.casefold()] = res

    def _from_lock(self, model_id: str, misses: list[str], notes: list[str]) -> ModelFacts | None:
        if self.lock is None:
            return None
        entry = self.lock.get(model_id)
        if entry is None:
            notes.append(f"not in the facts lock {self.lock.name}")
            return None
        return entry

    def _from_hub(self, model_id: str, misses: list[str], notes: list[str]) -> ModelFacts | None:
        if not self.allow_hub or self.hub is None:
            misses.append("hub not allowed")
            return None
        key = model_id.casefold()
        if key not in self._hub_cache:  # one request per id, even when a derived base is retried
            self._hub_cache[key] = self.hub.fetch(model_id)
        res = self._hub_cache[key]
        if res.config is None:
            misses.append(res.reason or "hub: no config")
            notes.append(res.reason or "hub: no config")
            return None
        return facts_from_config(
            model_id, res.config, source="hub", provenance=res.url, revision=res.revision
        )

    def _from_curated(
        self, model_id: str, misses: list[str], notes: list[str]
    ) -> ModelFacts | None:
        entry = self.curated.get(model_id.casefold())
        if entry is None:
            misses.append("no curated entry")
            return None
        if entry.same_as:
            base = self.resolve(entry.same_as)
            if not base.resolved:
                misses.append(f"curated: same as {entry.same_as} ({entry.where}), which is unknown")
                return None
            return replace(
                base,
                model_id=model_id,
                source="curated",
                inferred=True,
                base_model_id=base.base_model_id or base.model_id,
                provenance=(
                    f"{entry.where}: {entry.data['relation']} copy of {entry.same_as} "
                    f"({entry.provenance}); {entry.same_as}: {base.source} {base.provenance}"
                ),
                notes=base.notes + ((entry.data["note"],) if entry.data.get("note") else ()),
            )
        d = entry.data
        archs = tuple(d["architectures"])
        fill_notes: list[str] = []
        model_type, inferred = d.get("model_type"), False
        if model_type is None:
            model_type, where = self._model_type(archs[0], fill_notes)
            if model_type:
                inferred = True
                fill_notes.append(f"model_type from {where}")
        experts = d.get("num_experts")
        return ModelFacts(
            model_id=model_id,
            status="resolved",
            architectures=archs,
            model_type=model_type,
            text_model_type=d.get("text_model_type"),
            num_nextn_predict_layers=d.get("num_nextn_predict_layers"),
            num_experts=experts,
            is_moe=None if experts is None else experts > 0,
            use_mla=d.get("use_mla"),
            num_attention_heads=d.get("num_attention_heads"),
            num_key_value_heads=d.get("num_key_value_heads"),
            source="curated",
            provenance=f"{entry.where}: {entry.provenance}",
            inferred=inferred,
            notes=tuple(fill_notes) + ((d["note"],) if d.get("note") else ()),
        )

    def _model_type(self, arch: str, notes: list[str]) -> tuple[str | None, str | None]:
        hit = self.types.lookup(arch)
        if hit is not None:
            if hit.note:
                notes.append(hit.note)
            return hit.model_type, hit.provenance
        hit = self.vllm_types.lookup(arch) if self.trees else None
        if hit is not None and hit.model_type:
            return hit.model_type, hit.provenance
        notes.append(
            f"no model_type known for {arch} (not in transformers {self.types.version} "
            f"mappings; no unique vLLM config class)"
        )
        return None, None

    def _arch_only(
        self,
        model_id: str,
        arch: str,
        *,
        source: Source,
        provenance: str,
        inferred: bool,
        notes: list[str],
    ) -> ModelFacts:
        own: list[str] = []
        model_type, where = self._model_type(arch, own)
        if model_type:
            own.append(f"model_type from {where}")
        return ModelFacts(
            model_id=model_id,
            status="resolved",
            architectures=(arch,),
            model_type=model_type,
            source=source,
            provenance=provenance,
            inferred=inferred or model_type is not None,
            notes=tuple(notes + own),
        )

    def _from_tests(self, model_id: str, misses: list[str], notes: list[str]) -> ModelFacts | None:
        if not self.trees:
            misses.append("no vLLM tree given")
            return None
        versions = ", ".join(t.version for t in self.trees)
        example, ambiguous, tnotes = self.tests.architecture(model_id)
        gts = self.tests.groundtruth(model_id)
        if gts:
            gt = gts[0]
            e = gt.entry
            experts = e.get("num_experts")
            own = list(tnotes)
            archs = tuple(e.get("architectures") or ())
            if example is not None and archs and example.arch != archs[0]:
                own.append(f"{example.where} lists it under {example.arch}")
            return ModelFacts(
                model_id=model_id,
                status="resolved",
                architectures=archs,
                model_type=e.get("model_type"),
                text_model_type=e.get("text_model_type"),
                num_experts=experts if isinstance(experts, int) else None,
                is_moe=experts > 0 if isinstance(experts, int) else None,
                use_mla=e.get("is_deepseek_mla"),
                num_attention_heads=e.get("total_num_attention_heads"),
                num_key_value_heads=e.get("total_num_kv_heads"),
                source="vllm-tests",
                provenance=gt.where,
                inferred=False,
                notes=tuple(own),
            )
        if example is None:
            notes.extend(tnotes)
            if ambiguous:
                self._candidates.setdefault(model_id.casefold(), set()).update(ambiguous)
                misses.append(
                    f"vLLM tests list it under several architectures ({', '.join(ambiguous)})"
                )
            else:
                misses.append(f"not a vLLM tests example id ({versions})")
            return None
        return self._arch_only(
            model_id,
            example.arch,
            source="vllm-tests",
            provenance=f"{example.where} ({example.table})",
            inferred=False,
            notes=tnotes,
        )

    def _from_transformers(
        self, model_id: str, misses: list[str], notes: list[str]
    ) -> ModelFacts | None:
        if self.checkpoints is None:
            return None
        hit, why = self.checkpoints.lookup(model_id)
        if hit is None:
            misses.append(why or "")
            return None
        where = f"{hit.where} ({hit.config_class} documents it)"
        if len(hit.architectures) != 1:
            if hit.architectures:
                self._candidates.setdefault(model_id.casefold(), set()).update(hit.architectures)
            misses.append(
                f"{where}: model_type {hit.model_type!r}, which transformers' generation mappings "
                f"give {len(hit.architectures) or 'no'} classes ({', '.join(hit.architectures)})"
            )
            return None
        own = [
            f"architecture from transformers {self.checkpoints.version}'s auto mapping for "
            f"{hit.model_type!r}, not from the checkpoint's config.json"
        ]
        _, ambiguous, _ = self.tests.architecture(model_id) if self.trees else (None, [], [])
        if ambiguous:  # vLLM's tests name candidates: transformers may pick one of them, no other
            if hit.architectures[0] not in ambiguous:
                misses.append(
                    f"{where} gives {hit.architectures[0]} but vLLM tests list "
                    f"{', '.join(ambiguous)}"
                )
                return None
            own.append(
                f"picks {hit.architectures[0]} among vLLM tests' candidates {', '.join(ambiguous)}"
            )
        return ModelFacts(
            model_id=model_id,
            status="resolved",
            architectures=hit.architectures,
            model_type=hit.model_type,
            text_model_type=hit.text_model_type,
            source="transformers",
            provenance=f"{where}; architecture from {', '.join(hit.mappings)}",
            inferred=True,
            notes=tuple(notes) + tuple(own),
        )

    def _from_docs(self, model_id: str, misses: list[str], notes: list[str]) -> ModelFacts | None:
        if not self.trees:
            return None
        match, dnotes = self.docs.match(model_id)
        notes.extend(dnotes)
        if match is None:
            misses.append("no supported_models.md row lists the id or its org + family name")
            return None
        if match.arch is None:
            archs = sorted({a for r in match.rows for a in r.archs})
            self._candidates.setdefault(model_id.casefold(), set()).update(archs)
            misses.append(
                f"supported_models.md ({match.rule}) names several architectures "
                f"({', '.join(archs)}) at {match.where}"
            )
            return None
        _, ambiguous, _ = self.tests.architecture(model_id)
        own = [f"architecture from vLLM docs by {match.rule}"]
        if ambiguous:
            if match.arch not in ambiguous:
                misses.append(
                    f"supported_models.md says {match.arch} but vLLM tests list "
                    f"{', '.join(ambiguous)}"
                )
                return None
            own.append(f"picks {match.arch} among vLLM tests' candidates {', '.join(ambiguous)}")
        return self._arch_only(
            model_id,
            match.arch,
            source="vllm-docs",
            provenance=f"{match.where} ({match.rule})",
            inferred=True,
            notes=notes + own,
        )

    def _derived(self, model_id: str, misses: list[str], *, strong_only: bool) -> ModelFacts | None:
        cands = base_candidates(model_id)
        if not cands:
            if not strong_only:
                misses.append("no quantization suffix to strip")
            return None
        tried = []
        for base_id, suffix in cands:
            base = self._strong_only(base_id) if strong_only else self.resolve(base_id)
            if base is None or not base.resolved:
                tried.append(base_id)
                continue
            return replace(
                base,
                model_id=model_id,
                source="derived",
                inferred=True,
                base_model_id=base.base_model_id or base.model_id,
                provenance=(
                    f"{model_id} = {base_id} + {suffix!r} (quantization suffix); "
                    f"{base_id}: {base.source} {base.provenance}"
                ),
            )
        if not strong_only:
            misses.append(f"base id {', '.join(tried)} unknown")
        return None
