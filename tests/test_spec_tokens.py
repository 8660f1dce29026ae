"""num_speculative_tokens as SpeculativeConfig settles it (issue 16, golden G1-G2): the release fact
read from `__post_init__` / `_verify_args`, and the engine's check, a firing and a quiet case for
each step. Real vLLM agrees at 0.17.0, 0.25.0 and 0.33.0 (tests/test_specdecode_recipes_golden.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from compat.sources import tree_from_path
from compat.verdict.spec_tokens import DraftCounts, check, counts_from_config
from compat.vllm.spec_tokens import token_count_rule
from compat.vocab import Status

# The shape of 0.33.0's __post_init__, cut down to what the fact reads.
SPEC_NEW = '''
class SpeculativeConfig:
    def __post_init__(self):
        if self.method == "suffix":
            self._validate_suffix_decoding()
        else:
            if self.model is not None:
                if self.method in ("eagle", "eagle3"):
                    pass
                elif self.draft_model_config.hf_config.model_type in MTP:
                    self.method = "mtp"
                    if self.num_speculative_tokens > 1 and self.x not in ("a",):
                        logger.warning("many")
                n_predict = getattr(self.draft_model_config.hf_config, "n_predict", None)
                if self.use_dspark():
                    if self.num_speculative_tokens is None:
                        self.num_speculative_tokens = block_size
                elif n_predict is not None:
                    if self.num_speculative_tokens is None:
                        self.num_speculative_tokens = n_predict
                    elif (
                        self.num_speculative_tokens > n_predict
                        and self.num_speculative_tokens % n_predict != 0
                    ):
                        raise ValueError(f"num_speculative_tokens:{self.num_speculative_tokens} must be divisible by {n_predict=}")
                if self.num_speculative_tokens is None:
                    raise ValueError(
                        "A speculative model was provided, but "
                        "`num_speculative_tokens` was not provided"
                    )

    def _validate_suffix_decoding(self):
        if self.num_speculative_tokens is None:
            self.num_speculative_tokens = self.suffix_decoding_max_tree_depth

    def _verify_args(self):
        if self.num_speculative_tokens is None:
            raise ValueError("num_speculative_tokens must be provided with speculative model")
'''

# 0.17.0: the raise only when no token tree is given either; no DSpark block fill.
SPEC_TREE = '''
class SpeculativeConfig:
    def __post_init__(self):
        if self.model is not None:
            n_predict = getattr(self.draft_model_config.hf_config, "n_predict", None)
            if n_predict is not None:
                if self.num_speculative_tokens is None:
                    self.num_speculative_tokens = n_predict
            if self.speculative_token_tree is None:
                if self.num_speculative_tokens is None:
                    raise ValueError(
                        "A speculative model was provided, but neither "
                        "`speculative_token_tree` nor `num_speculative_tokens` was provided"
                    )
'''


def _tree(tmp_path: Path, source: str, configs: dict[str, str] | None = None):
    (tmp_path / "vllm" / "config").mkdir(parents=True)
    (tmp_path / "vllm" / "config" / "speculative.py").write_text(source)
    cdir = tmp_path / "vllm" / "transformers_utils" / "configs"
    cdir.mkdir(parents=True)
    for name, text in (configs or {}).items():
        (cdir / name).write_text(text)
    return tree_from_path(f"{tmp_path}=9.9.9")


def test_the_fact_reads_each_step_where_the_release_writes_it(tmp_path):
    tree = _tree(tmp_path, SPEC_NEW, {
        "mlp.py": 'class C:\n    model_type = "mlp_speculator"\n    def __init__(self, n_predict=3): pass\n',
        "plain.py": 'class D:\n    model_type = "plainish"\n',
    })
    v = token_count_rule(tree)["value"]
    lines = (tmp_path / "vllm/config/speculative.py").read_text().splitlines()
    assert "num_speculative_tokens > 1" in lines[v["mtp_compare"] - 1]
    assert "= n_predict" in lines[v["n_predict_fill"] - 1]
    assert "= block_size" in lines[v["block_fill"] - 1]
    assert v["dspark_skips_n_predict"] is True
    assert v["divisible"]["message"] == "num_speculative_tokens:{...} must be divisible by n_predict={...}"
    assert v["model_missing"]["message"].startswith("A speculative model was provided")
    assert v["model_missing"]["unless"] == []
    assert v["verify_missing"]["message"].startswith("num_speculative_tokens must be provided")
    assert list(v["fill_methods"]) == ["suffix"]  # through the helper it calls
    assert v["other_fills"] == []
    assert v["config_types"] == ["mlp_speculator"]


def test_a_raise_guarded_by_another_field_names_it(tmp_path):
    v = token_count_rule(_tree(tmp_path, SPEC_TREE))["value"]
    assert v["model_missing"]["unless"] == ["speculative_token_tree"]
    assert v["mtp_compare"] is None and v["block_fill"] is None and v["verify_missing"] is None
    assert v["dspark_skips_n_predict"] is False


def test_no_speculative_config_class_is_not_found(tmp_path):
    assert token_count_rule(_tree(tmp_path, "X = 1\n"))["value"] == {"found": False}


FACT = {
    "found": True, "file": "vllm/config/speculative.py", "mtp_compare": 10, "n_predict_fill": 20,
    "divisible": {"line": 25, "message": "m"}, "block_fill": 15, "dspark_skips_n_predict": True,
    "model_missing": {"line": 30, "message": "A speculative model was provided, but ...", "unless": []},
    "verify_missing": {"line": 40, "message": "num_speculative_tokens must be provided ..."},
    "fill_methods": {"suffix": 5}, "other_fills": [], "config_types": ["mlp_speculator"],
}


def _k(**over):
    return SimpleNamespace(release_facts={"speculative_token_count": {**FACT, **over}},
                           version="9.9.9", mtp_types={"deepseek_mtp"})


NONE = DraftCounts()
UNDECIDED = DraftCounts.unknown("draft checkpoint 'x' unresolved")


@pytest.mark.parametrize("spec,method,model_based,counts,status,key", [
    # absent count, no model: _verify_args refuses; suffix fills it itself
    ({"method": "ngram"}, "ngram", False, None, Status.BLOCKED, "spec_tokens:verify_missing"),
    ({"method": "mtp"}, "mtp", True, None, Status.BLOCKED, "spec_tokens:verify_missing"),
    ({"method": "suffix"}, "suffix", False, None, None, None),
    # absent count, a model: the MTP branch compares None > 1 first, even with n_predict
    ({"method": "mtp", "model": "m"}, "mtp", True, DraftCounts(n_predict=2), Status.BLOCKED,
     "spec_tokens:mtp_compare"),
    # ... also when __post_init__ switches a draft_model to mtp by the draft's model_type
    ({"model": "m"}, "draft_model", True, DraftCounts(n_predict=1, model_type="deepseek_mtp"),
     Status.BLOCKED, "spec_tokens:mtp_compare"),
    ({"model": "m"}, "draft_model", True, DraftCounts(model_type="llama"), Status.BLOCKED,
     "spec_tokens:model_missing"),
    ({"model": "m"}, "draft_model", True, UNDECIDED, Status.UNKNOWN, "spec_tokens:undecided:model_type"),
    # n_predict fills it; without it the release raises
    ({"method": "eagle3", "model": "m"}, "eagle3", True, DraftCounts(n_predict=3), None, None),
    ({"method": "eagle3", "model": "m"}, "eagle3", True, DraftCounts(n_predict=0), Status.UNKNOWN,
     "spec_tokens:undecided:zero"),
    ({"method": "eagle3", "model": "m"}, "eagle3", True, NONE, Status.BLOCKED, "spec_tokens:model_missing"),
    ({"method": "eagle3", "model": "m"}, "eagle3", True, UNDECIDED, Status.UNKNOWN,
     "spec_tokens:undecided:n_predict"),
    # DSpark: the block size fills it, and n_predict is not read
    ({"method": "dspark", "model": "m"}, "dspark", True, DraftCounts(block_size=7), None, None),
    ({"method": "dspark", "model": "m"}, "dspark", True, DraftCounts(n_predict=2), Status.BLOCKED,
     "spec_tokens:model_missing"),
    # a given count above n_predict must be a multiple of it
    ({"method": "mtp", "num_speculative_tokens": 3}, "mtp", True, DraftCounts(n_predict=2),
     Status.BLOCKED, "spec_tokens:divisible:3:2"),
    ({"method": "mtp", "num_speculative_tokens": 4}, "mtp", True, DraftCounts(n_predict=2), None, None),
    ({"method": "mtp", "num_speculative_tokens": 1}, "mtp", True, UNDECIDED, None, None),
    ({"method": "mtp", "num_speculative_tokens": 2}, "mtp", True, UNDECIDED, None, None),
    ({"method": "mtp", "num_speculative_tokens": 1}, "mtp", True, DraftCounts(n_predict=0),
     Status.BLOCKED, "spec_tokens:n_predict_zero"),
    ({"method": "eagle", "num_speculative_tokens": 3, "model": "m"}, "eagle", True, UNDECIDED,
     Status.UNKNOWN, "spec_tokens:undecided:n_predict"),
    ({"method": "dspark", "num_speculative_tokens": 3}, "dspark", True, DraftCounts(n_predict=2), None, None),
    ({"method": "ngram", "num_speculative_tokens": 3}, "ngram", False, None, None, None),
])
def test_the_count_check(spec, method, model_based, counts, status, key):
    found = check(_k(), spec, method, model_based, counts, "method x")
    assert (found.status if found else None) == status
    assert (found.key if found else None) == key


def test_undecided_pieces_of_the_release_are_unknown_never_ok():
    spec = {"method": "eagle3", "model": "m"}
    assert check(_k(found=False), spec, "eagle3", True, NONE, "s").status == Status.UNKNOWN
    assert check(_k(found=False), {**spec, "num_speculative_tokens": 2}, "eagle3", True, NONE, "s") is None
    assert check(_k(found=False), {**spec, "num_speculative_tokens": 3}, "eagle3", True, NONE,
                 "s").status == Status.UNKNOWN
    assert check(_k(other_fills=[77]), spec, "eagle3", True, NONE, "s").status == Status.UNKNOWN
    unless = {"line": 30, "message": "m", "unless": ["speculative_token_tree"]}
    tree_spec = {**spec, "speculative_token_tree": "[(0,)]"}
    assert check(_k(model_missing=unless), tree_spec, "eagle3", True, NONE, "s").status == Status.UNKNOWN
    assert check(_k(model_missing=unless), spec, "eagle3", True, NONE, "s").status == Status.BLOCKED
    assert check(_k(divisible=None), {**spec, "num_speculative_tokens": 3}, "eagle3", True,
                 DraftCounts(n_predict=2), "s").status == Status.UNKNOWN
    # no model_missing raise (0.11-0.14): nothing fills it, _verify_args refuses
    assert check(_k(model_missing=None), spec, "eagle3", True, NONE, "s").key == "spec_tokens:verify_missing"


def test_counts_follow_the_override_then_the_config_class():
    over = SimpleNamespace(status="ok", changed=True, model_type="deepseek_mtp",
                           counts={"n_predict": 2, "block_size": None})
    c = counts_from_config({"model_type": "deepseek_v3"}, over, [])
    assert (c.n_predict, c.model_type, c.undecided) == (2, "deepseek_mtp", {})
    c = counts_from_config({"model_type": "llama", "n_predict": 4}, None, [])
    assert (c.n_predict, c.block_size) == (4, None)
    c = counts_from_config({"model_type": "mlp_speculator"}, None, ["mlp_speculator"])
    assert set(c.undecided) == {"n_predict", "block_size"}


def test_a_facts_lock_keeps_what_the_count_check_reads():
    """A locked draft config must still say whether it has n_predict / a block size: a lock that
    dropped them would read as 'absent' and block a command vLLM fills the count for."""
    from compat.hf.lock import READ_KEYS, config_subset

    got = config_subset({"n_predict": 2, "block_size": 7, "dspark_block_size": 7, "rope_theta": 1.0}, READ_KEYS)
    assert got == {"n_predict": 2, "block_size": 7, "dspark_block_size": 7}
