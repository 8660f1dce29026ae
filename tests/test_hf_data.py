"""The committed model data (curated facts, transformers mappings) and the tool that makes the latter."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import yaml

from compat.hf.curated import DEFAULT_CURATED, load_curated
from compat.hf.model_types import TransformersTypes
from compat.hf.resolver import TRANSFORMERS_TYPES

REPO = Path(__file__).resolve().parents[1]
MACHINE_PATH = re.compile(r"(?<![\w.])/(?:tmp|home|root|work|Users|var|private)/")


def load_tool():
    spec = importlib.util.spec_from_file_location(
        "extract_transformers_mappings", REPO / "tools" / "extract_transformers_mappings.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_curated_data_validates_and_every_entry_has_provenance():
    entries = load_curated(DEFAULT_CURATED)
    assert entries, "data/model_configs.yaml is empty"
    for entry in entries.values():
        assert entry.provenance.strip()
        assert entry.line > 0
        if entry.same_as:
            assert entry.same_as.casefold() != entry.model_id.casefold()


def test_curated_aliases_point_at_ids_not_aliased_in_turn_to_themselves():
    entries = load_curated(DEFAULT_CURATED)
    for entry in entries.values():
        seen = {entry.model_id.casefold()}
        target = entry.same_as
        while target and target.casefold() in entries:
            assert target.casefold() not in seen, f"alias cycle through {entry.model_id}"
            seen.add(target.casefold())
            target = entries[target.casefold()].same_as


def test_data_files_hold_no_machine_paths():
    for rel in (
        "data/model_configs.yaml",
        "data/transformers_model_types.json",
        "schema/model_configs.schema.json",
    ):
        text = (REPO / rel).read_text(encoding="utf-8")
        assert not MACHINE_PATH.search(text), rel


def test_transformers_mapping_data():
    data = json.loads(TRANSFORMERS_TYPES.read_text(encoding="utf-8"))
    assert data["generated_by"] == "tools/extract_transformers_mappings.py"
    assert re.match(r"^\d+\.\d+", data["transformers_version"])
    assert "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES" in data["mapping_priority"]
    types = TransformersTypes(TRANSFORMERS_TYPES)
    assert types.lookup("GlmMoeDsaForCausalLM").model_type == "glm_moe_dsa"
    assert types.lookup("DeepseekV3ForCausalLM").model_type == "deepseek_v3"
    assert types.lookup("Qwen3NextForCausalLM").model_type == "qwen3_next"
    assert types.lookup("LlamaForCausalLM").model_type == "llama"  # owner among several
    both = types.lookup("Qwen3_5MoeForCausalLM")  # qwen3_5_moe and qwen3_5_moe_text
    assert both.model_type is None and "several model types" in both.note
    assert types.lookup("NoSuchForCausalLM") is None
    for entry in data["architectures"].values():
        assert entry["model_types"] and set(entry["model_types"]) <= set(data["model_types"])


def test_schema_is_valid_json_schema():
    import jsonschema

    schema = json.loads((REPO / "schema" / "model_configs.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    assert yaml.safe_load(DEFAULT_CURATED.read_text())["models"]


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_extract_tool_inverts_auto_mappings(tmp_path):
    pkg = tmp_path / "transformers"
    write(pkg / "__init__.py", '__version__ = "9.9.9"\n')
    write(
        pkg / "models/auto/modeling_auto.py",
        """
from collections import OrderedDict
MODEL_MAPPING_NAMES = OrderedDict([("llama", "LlamaModel"), ("funnel", ("FunnelModel", "FunnelBaseModel"))])
MODEL_FOR_CAUSAL_LM_MAPPING_NAMES = OrderedDict(
    [
        ("llama", "LlamaForCausalLM"),
        ("internlm3", "LlamaForCausalLM"),
        ("qwen3_5_moe", "Qwen3_5MoeForCausalLM"),
        ("qwen3_5_moe_text", "Qwen3_5MoeForCausalLM"),
    ]
)
MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES = OrderedDict([("qwen3_5_moe", "Qwen3_5MoeForConditionalGeneration")])
MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES = OrderedDict([*list(MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES.items())])
""",
    )
    write(
        pkg / "models/auto/auto_mappings.py",
        """
from collections import OrderedDict
CONFIG_MAPPING_NAMES = OrderedDict([("llama", "LlamaConfig"), ("internlm3", "InternLM3Config"),
    ("qwen3_5_moe", "Qwen3_5MoeConfig"), ("qwen3_5_moe_text", "Qwen3_5MoeTextConfig"),
    ("funnel", "FunnelConfig")])
SPECIAL_MODEL_TYPE_TO_MODULE_NAME = OrderedDict([("qwen3_5_moe_text", "qwen3_5_moe")])
""",
    )
    write(
        pkg / "models/auto/configuration_auto.py",
        'CONFIG_MAPPING_NAMES.update({"extra_type": "ExtraConfig"})\n',
    )
    write(pkg / "models/llama/modeling_llama.py", "class LlamaForCausalLM(Base):\n    pass\n")
    write(
        pkg / "models/qwen3_5_moe/modeling_qwen3_5_moe.py",
        "class Qwen3_5MoeForCausalLM(Base):\n    pass\n",
    )
    out = tmp_path / "out.json"
    tool = load_tool()
    assert tool.main(["--transformers-dir", str(pkg), "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["transformers_version"] == "9.9.9"
    archs = data["architectures"]
    assert archs["LlamaForCausalLM"] == {
        "model_types": ["internlm3", "llama"],
        "mapping": "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
        "owner": "llama",
    }
    assert "owner" not in archs["Qwen3_5MoeForCausalLM"]  # both types live in one module
    assert archs["Qwen3_5MoeForConditionalGeneration"]["mapping"] == (
        "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES"
    )
    assert archs["FunnelBaseModel"]["model_types"] == ["funnel"]
    assert "extra_type" in data["model_types"]
    assert not MACHINE_PATH.search(out.read_text())
