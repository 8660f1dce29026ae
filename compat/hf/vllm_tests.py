"""HF ids that vLLM's own test suite pairs with an architecture, read statically per release.

Two files, both parsed once per tree:

* `tests/config/base_model_arch_groundtruth.json`: what `ModelConfig` computed from
  the real config.json of ~20 checkpoints (architectures, model_type,
  text_model_type, num_experts, is_deepseek_mla, head counts). These are config
  facts, not guesses.
* `tests/models/registry.py`: `{arch: _HfExamplesInfo(default, extras=...)}` dicts.
  The key is the architecture vLLM's tests load the example ids with. Excluded:
  `_SPECULATIVE_DECODING_EXAMPLE_MODELS` (its key is the *draft* arch and
  `default` the *target* id), `_TRANSFORMERS_BACKEND_MODELS` (keys are backend
  wrappers such as `TransformersForCausalLM`), `_AUTOMATIC_CONVERTED_MODELS`
  (conversions requested through hf_overrides), and entries whose `hf_overrides`
  set `architectures` or `model_type` (the checkpoint's own config says otherwise).
  One id can sit under several keys (a multimodal checkpoint also used for its
  text-only class, a Mistral-format loader next to the HF one); the registry
  cannot tell which is the checkpoint's `architectures[0]`, so such ids are
  reported as ambiguous, never guessed.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from compat.sources.tree import VllmTree

REGISTRY = "tests/models/registry.py"
GROUNDTRUTH = "tests/config/base_model_arch_groundtruth.json"

# Dicts whose keys are the architecture the example checkpoint declares (or is loaded as).
PRIMARY = ("_TEXT_GENERATION_EXAMPLE_MODELS", "_MULTIMODAL_EXAMPLE_MODELS")
EXCLUDED = (
    "_SPECULATIVE_DECODING_EXAMPLE_MODELS",
    "_TRANSFORMERS_BACKEND_MODELS",
    "_AUTOMATIC_CONVERTED_MODELS",
)


@dataclass(frozen=True)
class Example:
    model_id: str
    arch: str
    table: str  # the dict's name
    version: str
    line: int
    overridden: str | None = None  # hf_overrides keys that change the arch/model_type

    @property
    def where(self) -> str:
        return f"vllm-{self.version}/{REGISTRY}:{self.line}"


@dataclass(frozen=True)
class Groundtruth:
    model_id: str
    entry: dict
    version: str
    line: int

    @property
    def where(self) -> str:
        return f"vllm-{self.version}/{GROUNDTRUTH}:{self.line}"


def _literal(node: ast.expr | None):
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return None


def parse_registry(tree: VllmTree) -> list[Example]:
    module = tree.parse(REGISTRY)
    if module is None:
        return []
    out: list[Example] = []
    for node in module.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if not (isinstance(target, ast.Name) and isinstance(value, ast.Dict)):
            continue
        table = target.id
        for key, call in zip(value.keys, value.values):
            arch = _literal(key)
            if not (isinstance(arch, str) and isinstance(call, ast.Call)):
                continue
            func = call.func
            if not (isinstance(func, ast.Name) and func.id == "_HfExamplesInfo"):
                continue
            kw = {k.arg: k.value for k in call.keywords if k.arg}
            default = _literal(call.args[0] if call.args else kw.get("default"))
            extras = _literal(call.args[1] if len(call.args) > 1 else kw.get("extras"))
            overridden = None
            hfo = kw.get("hf_overrides")
            if isinstance(hfo, ast.Dict):
                keys = sorted(
                    k.value
                    for k in hfo.keys
                    if isinstance(k, ast.Constant) and k.value in ("architectures", "model_type")
                )
                overridden = ",".join(keys) or None
            ids = [default] + (list(extras.values()) if isinstance(extras, dict) else [])
            for mid in ids:
                if isinstance(mid, str) and "/" in mid:
                    out.append(Example(mid, arch, table, tree.version, call.lineno, overridden))
    return out


def cached_registry(tree: VllmTree) -> list[Example]:
    """`parse_registry`, cached per release (compat.hf.tree_memo)."""
    from compat.hf.tree_memo import memo

    rows = memo(
        tree,
        "tests-registry",
        lambda: [[e.model_id, e.arch, e.table, e.line, e.overridden] for e in parse_registry(tree)],
    )
    return [Example(mid, arch, table, tree.version, line, o) for mid, arch, table, line, o in rows]


def parse_groundtruth(tree: VllmTree) -> list[Groundtruth]:
    text = tree.read(GROUNDTRUTH)
    if text is None:
        return []
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return []
    if not isinstance(data, dict):
        return []
    lines = text.splitlines()
    out = []
    for mid, entry in data.items():
        if not isinstance(entry, dict):
            continue
        pat = re.compile(r"^\s*" + re.escape(json.dumps(mid)) + r"\s*:")
        line = next((i + 1 for i, ln in enumerate(lines) if pat.match(ln)), 1)
        out.append(Groundtruth(mid, entry, tree.version, line))
    return out


class VllmTestsIndex:
    """Both files of every tree, indexed by lower-cased HF id. Trees are kept in the
    order given (the resolver passes newest release first)."""

    def __init__(self, trees: Sequence[VllmTree]) -> None:
        self.versions = [t.version for t in trees]
        self._examples: dict[str, list[Example]] = {}
        self._groundtruth: dict[str, list[Groundtruth]] = {}
        for tree in trees:
            for ex in cached_registry(tree):
                self._examples.setdefault(ex.model_id.casefold(), []).append(ex)
            for gt in parse_groundtruth(tree):
                self._groundtruth.setdefault(gt.model_id.casefold(), []).append(gt)

    def groundtruth(self, model_id: str) -> list[Groundtruth]:
        return self._groundtruth.get(model_id.casefold(), [])

    def examples(self, model_id: str) -> list[Example]:
        return self._examples.get(model_id.casefold(), [])

    def architecture(self, model_id: str) -> tuple[Example | None, list[str], list[str]]:
        """(the example to use, candidate archs when ambiguous, notes) for one id.

        Per release, newest first: primary dicts (text generation, multimodal) win over
        pooling dicts; several distinct architectures at the winning level make that
        release ambiguous. The newest release with a verdict decides; older releases
        that name a different architecture are noted.
        """
        notes: list[str] = []
        by_version: dict[str, list[Example]] = {}
        for ex in self.examples(model_id):
            by_version.setdefault(ex.version, []).append(ex)
        chosen: Example | None = None
        ambiguous: list[str] = []
        for version in self.versions:
            exs = by_version.get(version, [])
            usable = [e for e in exs if e.table not in EXCLUDED and not e.overridden]
            skipped = [e for e in exs if e.overridden]
            for e in skipped:
                notes.append(
                    f"{e.where}: {e.arch} loads it with hf_overrides of {e.overridden}; not used"
                )
            primary = [e for e in usable if e.table in PRIMARY]
            level = primary or usable
            archs = sorted({e.arch for e in level})
            if not archs:
                continue
            if len(archs) > 1:
                if chosen is None and not ambiguous:
                    ambiguous = archs
                    notes.append(
                        f"vllm-{version}/{REGISTRY} lists it under several architectures: "
                        + ", ".join(f"{e.arch} ({e.table}:{e.line})" for e in level)
                    )
                continue
            pick = next(e for e in level if e.arch == archs[0])
            if chosen is None and not ambiguous:
                chosen = pick
            elif chosen is not None and pick.arch != chosen.arch:
                notes.append(f"{pick.where} names {pick.arch} instead")
        return chosen, ambiguous, notes
