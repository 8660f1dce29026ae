"""Release facts read from SpeculativeConfig / EngineArgs source: which model-less methods get a
draft and which raise, and whether `--speculative-config` keys are rewritten (`-` -> `_`)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from compat.sources import tree_from_path
from compat.vllm.speculative import forbidden_fields, spec_key_normalization, without_model_rule

SPEC = '''
from typing import Literal
SpeculativeMethod = Literal["ngram", "eagle", "mtp", "custom_class"]

class SpeculativeConfig:
    def __post_init__(self):
        if self.method is None:
            self.method = "draft_model"
        if self.model is None and self.num_speculative_tokens is not None:
            if self.method == "mtp":
                if self.target_model_config is None:
                    raise ValueError("target_model_config must be present for mtp")
                self.model = self.target_model_config.model
            elif self.method in ("ngram", "[ngram]"):
                self.model = "ngram"
            elif self.method == "custom_class":
                if self.model is None:
                    raise ValueError(f"method={self.method!r} requires 'model'")
            else:
                raise ValueError(
                    "num_speculative_tokens was provided but without speculative model."
                )

    def _verify_args(self):
        if self.tensor_parallel_size is not None:
            raise ValueError("'tensor_parallel_size' is not a valid argument")
        if self.num_speculative_tokens is None:
            raise ValueError("not a field the user may never set: a different test")
        return self
'''

ARGS = '''
class EngineArgs:
    def create_speculative_config(self, target_model_config, target_parallel_config):
        if self.speculative_config is None:
            return None
        {body}
        return SpeculativeConfig(**self.speculative_config)
'''


def _tree(tmp_path: Path, normalize: bool):
    root = tmp_path / ("norm" if normalize else "plain")
    (root / "vllm" / "config").mkdir(parents=True)
    (root / "vllm" / "engine").mkdir(parents=True)
    (root / "vllm" / "config" / "speculative.py").write_text(SPEC)
    body = ('self.speculative_config = {k.replace("-", "_"): v for k, v in self.speculative_config.items()}'
            if normalize else "pass")
    (root / "vllm" / "engine" / "arg_utils.py").write_text(textwrap.dedent(ARGS).replace("{body}", body))
    return tree_from_path(f"{root}=9.9.9")


def test_without_model_rule_reads_the_chain(tmp_path):
    row = without_model_rule(_tree(tmp_path, False))
    value = row["value"]
    assert value["methods"]["mtp"]["outcome"] == "model"
    assert value["methods"]["ngram"]["outcome"] == value["methods"]["[ngram]"]["outcome"] == "model"
    assert value["methods"]["custom_class"] == {
        "outcome": "raise", "line": value["methods"]["custom_class"]["line"],
        "message": "method={...} requires 'model'"}
    assert value["else"]["outcome"] == "raise"
    assert value["else"]["message"] == "num_speculative_tokens was provided but without speculative model."
    assert row["line"] == 9


def test_key_normalization_only_where_the_release_rewrites(tmp_path):
    assert spec_key_normalization(_tree(tmp_path, True))["value"] == {"replace": ["-", "_"]}
    assert spec_key_normalization(_tree(tmp_path, False))["value"] == {"replace": None}


def test_forbidden_fields_are_the_is_not_none_raises_of_verify_args(tmp_path):
    value = forbidden_fields(_tree(tmp_path, False))["value"]
    assert list(value["fields"]) == ["tensor_parallel_size"]
    assert value["fields"]["tensor_parallel_size"]["message"] == "'tensor_parallel_size' is not a valid argument"


CONFIG_010 = '''
class ModelConfig:
    pass


class SpeculativeConfig:
    def __post_init__(self):
        if self.model is None and self.num_speculative_tokens is not None:
            if self.target_model_config and \\
                    self.target_model_config.hf_text_config.model_type == "deepseek_v3":
                self.model = self.target_model_config.model
            elif self.method in ("ngram", "[ngram]"):
                self.model = "ngram"
            else:
                raise ValueError("num_speculative_tokens was provided without speculative model.")
'''


def test_a_chain_chosen_by_the_targets_model_type_is_undecided_and_read_where_it_lives(tmp_path):
    """0.10: SpeculativeConfig lives in vllm/config/__init__.py, and its model-less chain picks
    the target as the MTP draft by the target's model_type, not the method: not a per-method
    table (reading it as one said every MTP method raises)."""
    from compat.sources.tree import speculative_file

    (tmp_path / "vllm" / "config").mkdir(parents=True)
    (tmp_path / "vllm" / "config" / "__init__.py").write_text(CONFIG_010)
    tree = tree_from_path(f"{tmp_path}=0.10.1")
    assert speculative_file(tree) == "vllm/config/__init__.py"
    row = without_model_rule(tree)
    assert row["file"] == "vllm/config/__init__.py"
    assert row["value"]["methods"] is None and row["value"]["undecided"] == 9


DSPARK_025 = '''
class SpeculativeConfig:
    def __post_init__(self):
        if self.method == "dspark" and (
            "Qwen3DSparkModel" not in self.draft_model_config.architectures
        ):
            self.draft_model_config.hf_config.model_type = "deepseek_v4"
            self.draft_model_config.hf_config.architectures = ["DSparkDraftModel"]
'''

DSPARK_033 = '''
_OMNI = "Qwen3OmniDSparkModel"


class SpeculativeConfig:
    def __post_init__(self):
        if (
            self.method == "dspark"
            and "DSparkDraftModel" in self.draft_model_config.architectures
            and self.draft_model_config.hf_config.model_type == "qwen3"
        ):
            self.draft_model_config.hf_config.architectures = ["Qwen3DSparkModel"]
        elif self.method == "dspark" and (
            "Qwen3DSparkModel" not in self.draft_model_config.architectures
            and _OMNI not in self.draft_model_config.architectures
        ):
            is_v41 = self.target_model_config.hf_config.model_type == "deepseek_v41"
            draft_hf_config = self.draft_model_config.hf_config
            draft_hf_config.architectures = ["DSparkV41DraftModel" if is_v41 else "DSparkDraftModel"]
'''


def _spec_tree(tmp_path: Path, source: str):
    (tmp_path / "vllm" / "config").mkdir(parents=True)
    (tmp_path / "vllm" / "config" / "speculative.py").write_text(source)
    return tree_from_path(f"{tmp_path}=9.9.9")


def test_dspark_rewrite_of_a_full_target_config(tmp_path):
    """Golden G7: a DSpark draft built from DeepSeek-V4's own config becomes DSparkDraftModel
    (its V4.1 twin by the target's model_type), unless it is one of the kept DSpark classes."""
    from compat.vllm.speculative import dspark_rewrite

    t25 = _spec_tree(tmp_path / "a", DSPARK_025)
    assert dspark_rewrite(t25, ["DeepseekV4ForCausalLM"], "deepseek_v4")[::2] == (["DSparkDraftModel"], "rewritten")
    assert dspark_rewrite(t25, ["Qwen3DSparkModel"], "qwen3")[::2] == (["Qwen3DSparkModel"], "kept")
    t33 = _spec_tree(tmp_path / "b", DSPARK_033)
    assert dspark_rewrite(t33, ["DeepseekV4ForCausalLM"], "deepseek_v4")[0] == ["DSparkDraftModel"]
    assert dspark_rewrite(t33, ["DeepseekV4ForCausalLM"], "deepseek_v41")[0] == ["DSparkV41DraftModel"]
    assert dspark_rewrite(t33, ["Qwen3OmniDSparkModel"], "qwen3")[::2] == (["Qwen3OmniDSparkModel"], "kept")
    # the target's model_type unknown, or an earlier branch that may take the draft: undecided
    assert dspark_rewrite(t33, ["DeepseekV4ForCausalLM"], None)[0] is None
    assert dspark_rewrite(t33, ["DSparkDraftModel"], "qwen3")[0] is None
    none = _spec_tree(tmp_path / "c", "class SpeculativeConfig:\n    def __post_init__(self):\n        pass\n")
    assert dspark_rewrite(none, ["X"], "x") == (None, 0, "no DSpark architecture rewrite in this release")
