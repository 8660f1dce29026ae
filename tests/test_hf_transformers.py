"""The transformers wheel as an offline source: documented checkpoints -> model_type, architecture (inferred).

Fast tests use a tiny wheel written here (5.x `@auto_docstring(checkpoint=...)` and the
older `_CHECKPOINT_FOR_DOC` / docstring-link styles) served by a fake package index; the
slow test reads the newest real wheel from the index.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from compat.errors import UserError
from compat.hf import ModelResolver
from compat.hf.transformers_docs import TransformersCheckpoints, build_index, load_checkpoints
from compat.sources.pypi import INDEX_URL, fetch_wheel

LLAMA = '''
from ...utils import auto_docstring

@auto_docstring(checkpoint="meta-llama/Llama-2-7b-hf")
class LlamaConfig(PreTrainedConfig):
    model_type = "llama"
'''
QWEN_VL = '''
@auto_docstring(checkpoint="Qwen/Vis-7B")
class VisTextConfig(PreTrainedConfig):
    model_type = "vis_text"
    base_config_key = "text_config"

@auto_docstring(checkpoint="Qwen/Vis-7B")
class VisVisionConfig(PreTrainedConfig):
    model_type = "vis_vision"
    base_config_key = "vision_config"

@auto_docstring(checkpoint="Qwen/Vis-7B")
class VisConfig(PreTrainedConfig):
    model_type = "vis"
    sub_configs = {"text_config": VisTextConfig, "vision_config": VisVisionConfig}
'''
OLD_STYLE = '''
class OldConfig(PretrainedConfig):
    r"""
    Configuration of an Old model, e.g. [acme/old-1b](https://huggingface.co/acme/old-1b).
    """
    model_type = "old"
'''
OLD_MODELING = '_CHECKPOINT_FOR_DOC = "acme/old-doc-1b"\n'
TWIN_A = '@auto_docstring(checkpoint="acme/Twin")\nclass TwinAConfig(PreTrainedConfig):\n    model_type = "twin_a"\n'
TWIN_B = '@auto_docstring(checkpoint="acme/Twin")\nclass TwinBConfig(PreTrainedConfig):\n    model_type = "twin_b"\n'
MODELING_AUTO = '''
MODEL_FOR_CAUSAL_LM_MAPPING_NAMES = OrderedDict(
    [("llama", "LlamaForCausalLM"), ("vis", "VisForCausalLM"), ("old", "OldForCausalLM")]
)
MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES = OrderedDict([("vis", "VisForConditionalGeneration")])
MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES = OrderedDict([("llama", "LlamaForSequenceClassification")])
'''


def make_wheel(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in {
            "transformers/models/llama/configuration_llama.py": LLAMA,
            "transformers/models/vis/configuration_vis.py": QWEN_VL,
            "transformers/models/old/configuration_old.py": OLD_STYLE,
            "transformers/models/old/modeling_old.py": OLD_MODELING,
            "transformers/models/twin_a/configuration_twin_a.py": TWIN_A,
            "transformers/models/twin_b/configuration_twin_b.py": TWIN_B,
            "transformers/models/auto/modeling_auto.py": MODELING_AUTO,
        }.items():
            zf.writestr(name, text)
    return path


@pytest.fixture()
def checkpoints(tmp_path) -> TransformersCheckpoints:
    return TransformersCheckpoints(build_index(make_wheel(tmp_path / "t.whl"), "9.9.9"))


@pytest.mark.parametrize(
    ("model_id", "model_type", "text_type", "archs"),
    [
        ("meta-llama/Llama-2-7b-hf", "llama", None, ("LlamaForCausalLM",)),  # classification is not generation
        ("META-LLAMA/llama-2-7B-hf", "llama", None, ("LlamaForCausalLM",)),  # ids are case-insensitive
        ("Qwen/Vis-7B", "vis", "vis_text", ("VisForCausalLM", "VisForConditionalGeneration")),
        ("acme/old-1b", "old", None, ("OldForCausalLM",)),  # docstring link
        ("acme/old-doc-1b", "old", None, ("OldForCausalLM",)),  # _CHECKPOINT_FOR_DOC
    ],
)
def test_documented_checkpoints(checkpoints, model_id, model_type, text_type, archs):
    hit, why = checkpoints.lookup(model_id)
    assert why is None and hit is not None
    assert (hit.model_type, hit.text_model_type, hit.architectures) == (model_type, text_type, archs)
    assert hit.where.startswith("transformers-9.9.9/transformers/models/")


@pytest.mark.parametrize(
    ("model_id", "why"),
    [("acme/Twin", "several model types (twin_a, twin_b)"), ("acme/Nothing", "no transformers 9.9.9")],
)
def test_no_guess(checkpoints, model_id, why):
    hit, reason = checkpoints.lookup(model_id)
    assert hit is None and why in reason


def test_resolver_marks_them_inferred_and_keeps_candidates(checkpoints):
    r = ModelResolver(checkpoints=checkpoints)
    llama = r.resolve("meta-llama/Llama-2-7b-hf")
    assert (llama.status, llama.source, llama.inferred, llama.architecture) == (
        "resolved", "transformers", True, "LlamaForCausalLM")
    assert "transformers-9.9.9/transformers/models/llama/configuration_llama.py:5" in llama.provenance
    vis = r.resolve("Qwen/Vis-7B")  # two classes: the engine decides only if both agree
    assert vis.status == "unknown" and vis.candidates == ("VisForCausalLM", "VisForConditionalGeneration")
    assert ModelResolver().resolve("meta-llama/Llama-2-7b-hf").status == "unknown"  # source off by default


# -- the wheel from the package index --------------------------------------------------------


class FakeIndex:
    def __init__(self, wheels: dict[str, bytes], bad_sha: bool = False) -> None:
        self.wheels, self.bad_sha, self.downloads = wheels, bad_sha, 0

    def __call__(self, url: str, headers: dict[str, str]) -> bytes:
        if url.startswith(INDEX_URL):
            files = [{"filename": f"transformers-{v}-py3-none-any.whl", "url": f"https://f.invalid/{v}.whl",
                      "hashes": {"sha256": "0" * 64 if self.bad_sha else hashlib.sha256(b).hexdigest()}}
                     for v, b in self.wheels.items()]
            return json.dumps({"meta": {"api-version": "1.1"}, "files": files}).encode()
        self.downloads += 1
        return self.wheels[url.rsplit("/", 1)[1][: -len(".whl")]]


def test_newest_stable_wheel_verified_and_cached(tmp_path):
    body = make_wheel(tmp_path / "w.whl").read_bytes()
    idx = FakeIndex({"9.8.0": b"old", "9.9.9": body, "10.0.0rc1": b"pre"})
    path, sha, version = fetch_wheel("transformers", opener=idx, cache=tmp_path / "c")
    assert (version, sha, path.read_bytes()) == ("9.9.9", hashlib.sha256(body).hexdigest(), body)
    fetch_wheel("transformers", opener=idx, cache=tmp_path / "c")
    assert idx.downloads == 1
    with pytest.raises(UserError, match="sha256 mismatch"):
        fetch_wheel("transformers", opener=FakeIndex({"9.9.9": body}, bad_sha=True), cache=tmp_path / "d")
    assert not list((tmp_path / "d" / "wheels").glob("*.whl"))


@pytest.mark.slow
def test_newest_real_wheel_documents_recipe_ids(snapshot):
    """The newest transformers on the index documents dozens of the recipes' ids by name."""
    from compat.recipes import load_repo

    cps = load_checkpoints()
    ids = {r.model.get("model_id") for r in load_repo(snapshot).recipes.values()}
    found = {mid for mid in ids if isinstance(mid, str) and cps.lookup(mid)[0] is not None}
    assert len(found) >= 20, sorted(found)
    hit, _ = cps.lookup("meta-llama/Llama-2-7b-hf")
    assert hit is not None and hit.model_type == "llama"
