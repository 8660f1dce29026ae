"""HF ids the transformers wheel's own configuration classes were written for, read statically.

transformers documents each configuration class with the checkpoint it describes:
`@auto_docstring(checkpoint="meta-llama/Llama-2-7b-hf")` on `LlamaConfig` (5.x), or
`_CHECKPOINT_FOR_DOC = "..."` and `[org/name](https://huggingface.co/org/name)` links
in older files. That pairs an HF id with the class's `model_type`, in a versioned
package. The architecture is then what the same wheel's generation auto mappings
(causal LM, image-text-to-text, multimodal, seq2seq, speech) give that model_type:
one class across all of them is an answer; several (`qwen3_5` is `Qwen3_5ForCausalLM`
and `Qwen3_5ForConditionalGeneration`) are candidates the verdict engine decides over
only when they agree. Every such fact is marked inferred, with the version and file:line.

Never a guess: an id documented by several top-level configuration classes with
different model types (`zai-org/GLM-4.5` documents `glm4_moe` and `glm4_moe_lite`)
gets nothing; sub-configurations (a class named in another's `sub_configs`) only give
`text_config.model_type` (a class with a `base_config_key`, or named in another's
`sub_configs` / `sub_configs_defaults`, is a sub-configuration). The wheel is the newest stable release on the package index
(sha256-checked, cached by hash, see compat.sources.pypi.fetch_wheel), unless a
version is pinned; its parsed index is cached beside it.
"""

from __future__ import annotations

import ast
import json
import os
import re
import zipfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path

GENERATION_MAPPINGS = (
    "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
    "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES",
    "MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES",
    "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
    "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES",
)
MODELING_AUTO = "transformers/models/auto/modeling_auto.py"
_FILE = re.compile(r"transformers/models/[^/]+/(configuration|modeling)_[^/]+\.py")
_ID = r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.+-]*"
_LINK = re.compile(rf"\[({_ID})\]\(https://huggingface\.co/\1/?\)")
_DOC_CONST = re.compile(rf"""^_CHECKPOINT_FOR_DOC\s*=\s*["']({_ID})["']""", re.MULTILINE)
INDEX_VERSION = "2"


@dataclass(frozen=True)
class ConfigClass:
    name: str
    model_type: str
    file: str
    line: int
    checkpoints: tuple[str, ...]
    sub_configs: dict[str, str]  # key (text_config, ...) -> class name
    is_sub: bool  # named in another class's sub_configs in the same module


@dataclass(frozen=True)
class Checkpoint:
    """What the wheel says about one documented id."""

    model_id: str
    model_type: str
    text_model_type: str | None
    config_class: str
    where: str  # transformers-<version>/<file>:<line>
    architectures: tuple[str, ...]  # every class the generation mappings give the model_type
    mappings: tuple[str, ...]  # the mappings that name them


def _const(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def config_classes(path: str, text: str) -> list[ConfigClass]:
    """Every class with a literal `model_type` in one file, with the checkpoints it documents."""
    try:
        module = ast.parse(text)
    except SyntaxError:
        return []
    module_ids = tuple(_DOC_CONST.findall(text))
    found: list[tuple[ast.ClassDef, str, list[str], dict[str, str]]] = []
    base_keys: dict[str, str] = {}  # class name -> its base_config_key (it is someone's sub-config)
    for node in module.body:
        if not isinstance(node, ast.ClassDef):
            continue
        model_type: str | None = None
        subs: dict[str, str] = {}
        for st in node.body:
            targets = (
                st.targets
                if isinstance(st, ast.Assign)
                else [st.target]
                if isinstance(st, ast.AnnAssign)
                else []
            )
            value = st.value if isinstance(st, (ast.Assign, ast.AnnAssign)) else None
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            if "model_type" in names and value is not None:
                model_type = _const(value)
            if "base_config_key" in names and value is not None and (key := _const(value)):
                base_keys[node.name] = key
            if {"sub_configs", "sub_configs_defaults"} & set(names) and isinstance(value, ast.Dict):
                for k, v in zip(value.keys, value.values):
                    if k is not None and (sub := _const(k)) and isinstance(v, ast.Name):
                        subs[sub] = v.id
        if not model_type:
            continue
        ids: list[str] = []
        for d in node.decorator_list:
            if (
                isinstance(d, ast.Call)
                and getattr(d.func, "id", getattr(d.func, "attr", "")) == "auto_docstring"
            ):
                ids += [
                    checkpoint
                    for k in d.keywords
                    if k.arg == "checkpoint" and (checkpoint := _const(k.value))
                ]
        ids += _LINK.findall(ast.get_docstring(node) or "")
        found.append((node, model_type, ids, subs))
    sub_names = {v for _n, _t, _i, subs in found for v in subs.values()} | set(base_keys)
    text_by_key = [name for name, key in base_keys.items() if key == "text_config"]
    out = []
    for n, mt, ids, subs in found:
        if n.name not in sub_names and "text_config" not in subs and len(text_by_key) == 1:
            subs = {**subs, "text_config": text_by_key[0]}
        out.append(
            ConfigClass(
                n.name,
                mt,
                path,
                n.lineno,
                tuple(dict.fromkeys(ids + list(module_ids))),
                subs,
                n.name in sub_names,
            )
        )
    return out


def generation_mappings(text: str) -> dict[str, dict[str, tuple[str, ...]]]:
    """{mapping name: {model_type: class names}} for GENERATION_MAPPINGS in modeling_auto.py."""
    out: dict[str, dict[str, tuple[str, ...]]] = {}
    for node in ast.parse(text).body:
        if not (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id in GENERATION_MAPPINGS
        ):
            continue
        call = node.value
        seq = call.args[0] if isinstance(call, ast.Call) and call.args else None
        pairs: dict[str, tuple[str, ...]] = {}
        for elt in getattr(seq, "elts", []):
            if not (isinstance(elt, ast.Tuple) and len(elt.elts) == 2):
                continue
            try:
                key, val = ast.literal_eval(elt.elts[0]), ast.literal_eval(elt.elts[1])
            except ValueError:
                continue
            names = (val,) if isinstance(val, str) else tuple(v for v in val if isinstance(v, str))
            if isinstance(key, str):
                pairs[key] = names
        out.setdefault(node.targets[0].id, pairs)
    return out


def build_index(wheel: Path, version: str) -> dict:
    """The wheel's documented checkpoints and generation mappings, as JSON-able data."""
    classes: list[ConfigClass] = []
    modeling_ids: dict[
        str, list[str]
    ] = {}  # models/<module>/ -> _CHECKPOINT_FOR_DOC of its modeling files
    mappings: dict[str, dict[str, tuple[str, ...]]] = {}
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if _FILE.fullmatch(name):
                text = zf.read(name).decode("utf-8", "replace")
                if "/modeling_" in name:
                    modeling_ids.setdefault(name.rsplit("/", 1)[0], []).extend(
                        _DOC_CONST.findall(text)
                    )
                else:
                    classes += config_classes(name, text)
        if MODELING_AUTO in zf.namelist():
            mappings = generation_mappings(zf.read(MODELING_AUTO).decode("utf-8", "replace"))
    # A modeling file's checkpoint documents its module's top-level configuration classes.
    classes = [
        c
        if c.is_sub or not modeling_ids.get(c.file.rsplit("/", 1)[0])
        else replace(
            c,
            checkpoints=tuple(
                dict.fromkeys(c.checkpoints + tuple(modeling_ids[c.file.rsplit("/", 1)[0]]))
            ),
        )
        for c in classes
    ]
    return {
        "index_version": INDEX_VERSION,
        "transformers_version": version,
        "classes": [asdict(c) for c in classes],
        "mappings": {k: {t: list(v) for t, v in m.items()} for k, m in mappings.items()},
    }


class TransformersCheckpoints:
    """Lookup of documented ids in one transformers wheel (case-insensitive, as on the Hub)."""

    def __init__(self, index: dict) -> None:
        self.version: str = index["transformers_version"]
        self.mappings: dict[str, dict[str, list[str]]] = index.get("mappings", {})
        self._by_id: dict[str, list[ConfigClass]] = {}
        self._by_name: dict[tuple[str, str], ConfigClass] = {}
        for raw in index.get("classes", []):
            c = ConfigClass(**{**raw, "checkpoints": tuple(raw["checkpoints"])})
            self._by_name[(c.file, c.name)] = c
            for mid in c.checkpoints:
                self._by_id.setdefault(mid.casefold(), []).append(c)

    def lookup(self, model_id: str) -> tuple[Checkpoint | None, str | None]:
        """(what the wheel says, why nothing) for one id."""
        classes = self._by_id.get(model_id.casefold(), [])
        top = [c for c in classes if not c.is_sub]
        if not top:
            return None, (
                f"no transformers {self.version} configuration class documents it"
                if not classes
                else f"transformers {self.version} documents it only on "
                f"sub-configurations ({', '.join(sorted({c.name for c in classes}))})"
            )
        types = sorted({c.model_type for c in top})
        if len(types) > 1:
            return None, (
                f"transformers {self.version} documents it on configurations of several model "
                f"types ({', '.join(types)})"
            )
        c = top[0]
        text_cls = self._by_name.get((c.file, c.sub_configs.get("text_config", "")))
        archs: dict[str, None] = {}
        mappings = []
        for name in GENERATION_MAPPINGS:
            hit = self.mappings.get(name, {}).get(c.model_type)
            if hit:
                archs.update(dict.fromkeys(hit))
                mappings.append(name)
        return Checkpoint(
            model_id,
            c.model_type,
            text_cls.model_type if text_cls else None,
            c.name,
            f"transformers-{self.version}/{c.file}:{c.line}",
            tuple(archs),
            tuple(mappings),
        ), None


def load_checkpoints(
    version: str | None = None, cache: Path | None = None
) -> TransformersCheckpoints:
    """The newest stable transformers wheel (or `version`), its parsed index cached by hash."""
    from compat.sources.pypi import cache_dir, fetch_wheel

    cache = cache or cache_dir()
    wheel, sha, ver = fetch_wheel("transformers", version, cache=cache)
    cached = cache / "wheels" / f"{sha}.checkpoints.json"
    try:
        index = json.loads(cached.read_text(encoding="utf-8"))
        if index.get("index_version") == INDEX_VERSION:
            return TransformersCheckpoints(index)
    except (OSError, ValueError):
        pass
    index = build_index(wheel, ver)
    tmp = cached.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(index), encoding="utf-8")
    os.replace(tmp, cached)
    return TransformersCheckpoints(index)
