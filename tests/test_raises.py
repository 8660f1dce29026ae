"""Error-message inventory (compat.vllm.raises)."""

from __future__ import annotations

import ast
import shutil
import time
from pathlib import Path

import pytest

from compat.sources.tree import VllmTree
from compat.vllm.raises import (
    constant_text,
    diff_inventories,
    flatten_message,
    match_keywords,
    prefilter,
    scan_raises,
    template_regex,
)

MINI = Path(__file__).parent / "fixtures" / "minitrees"


def mini(name: str = "mini_current", root: Path | None = None) -> VllmTree:
    return VllmTree(root or MINI / name, "0.0.1", "src")


def flat(src: str) -> str:
    return flatten_message(ast.parse(src, mode="eval").body)


# --------------------------------------------------------------------------- templates


def test_flatten_constants_and_implicit_concatenation() -> None:
    assert flat('"a " "b"') == "a b"
    assert flat('("Number of experts in the model must be greater than 0 "\n'
                ' "when expert parallelism is enabled.")') == (
        "Number of experts in the model must be greater than 0 when expert parallelism is enabled.")


def test_flatten_fstrings() -> None:
    assert flat('f"{self.speculative_config.method} with pipeline parallel " "is not supported."') == (
        "{self.speculative_config.method} with pipeline parallel is not supported.")
    assert flat('f"tp_size={tp} must be divisible by" f"dcp_size={dcp}."') == (
        "tp_size={tp} must be divisible bydcp_size={dcp}.")  # vLLM's missing space is kept
    assert flat('f"{x=} cannot be"') == "x={x} cannot be"  # self-documenting form
    assert flat('f"{n!r:>10} heads"') == "{n} heads"  # conversion / spec dropped
    assert flat('f"{type(model).__name__} does not support {method} with " "pipeline parallelism"') == (
        "{type(model).__name__} does not support {method} with pipeline parallelism")


def test_flatten_operators() -> None:
    assert flat('"Too many draft tokens: " + str(n)') == "Too many draft tokens: {str(n)}"
    assert flat('"a" + f"{b}" + "c"') == "a{b}c"
    assert flat('"pp=%d, tp=%s (100%%)" % (pp, tp)') == "pp={pp}, tp={tp} (100%)"
    assert flat('"size %s" % size') == "size {size}"
    assert flat('"{} is too big for {}".format(n, "x")') == "{} is too big for {}"
    assert flat("msg") == "{msg}"
    assert flat("', '.join(unsupported)") == "{', '.join(unsupported)}"


def test_template_regex_holes_match_any_hole() -> None:
    pat = template_regex("{} with pipeline parallel is not supported.")
    assert pat.search("{self.speculative_config.method} with pipeline parallel is not supported.")
    assert pat.search("EAGLE3 with pipeline parallel is not supported.")
    assert not template_regex("tp_size={} must be divisible by dcp_size={}.").search(
        "tp_size={tp} must be divisible bydcp_size={dcp}.")
    assert constant_text("{a} with {b.c(d)} pp") == "  with   pp"


def test_keyword_boundaries() -> None:
    assert match_keywords("PP>1 is not supported") == ["pp"]
    assert match_keywords("pp_size must be 1") == ["pp"]
    assert match_keywords("not supported by this app") == []  # 'pp' inside words
    assert match_keywords("SUPPORTED") == []
    assert match_keywords("DeepSeekMTP draft") == ["mtp", "draft"]  # CamelCase hump counts
    assert match_keywords("KVConnector failed") == ["connector"]
    assert match_keywords("NixlConnector (pull)") == ["nixl", "connector"]
    assert match_keywords("dcp_size=2") == ["dcp"]
    assert match_keywords("divisible bydcp_size") == []  # glued to the previous word
    assert match_keywords("Decode context parallel size") == ["context.parallel"]
    assert match_keywords("expert_parallel and data-parallel") == ["expert.parallel", "data.parallel"]
    assert match_keywords("speculative decoding") == ["specul"]
    assert match_keywords("mm_encoder_tp_mode") == ["encoder"]
    assert match_keywords("redraft nonspeculative") == []


def test_prefilter() -> None:
    assert prefilter('raise ValueError("PP is off")\n')
    assert not prefilter('raise ValueError("nothing here")\nx = "pipeline"\n')
    assert prefilter('msg = "pipeline " + x\nraise ValueError(msg)\n')  # message in a variable
    assert prefilter('unsupported.append("EAGLE3 with pipeline parallelism")\n')
    assert not prefilter('x = "speculative"\n')  # no raise/assert/append


# --------------------------------------------------------------------------- minitree scan


def test_minitree_inventory() -> None:
    inv = scan_raises(mini())
    by = {(s.file, s.template): s for s in inv.sites}
    ep = by[("vllm/config/model.py",
             "Number of experts in the model must be greater than 0 when expert parallelism is enabled.")]
    assert (ep.kind, ep.exception, ep.condition) == ("raise", "ValueError", "not self.is_moe")
    assert ep.function == "ModelConfig._verify_with_expert_parallelism"
    assert ep.keywords == ["expert.parallel"]
    v2 = by[("vllm/v1/worker/gpu/model_runner.py",
             "{self.speculative_config.method} with pipeline parallel is not supported.")]
    assert v2.conditions == ["self.speculative_config is not None",
                             "self.speculative_config.method in ('eagle3', 'dflash')", "self.use_pp"]
    assert v2.line == 8 and v2.end_line == 11
    ap = by[("vllm/config/vllm.py", "speculative method '{speculative_config.method}'")]
    assert (ap.kind, ap.list_name, ap.exception) == ("append", "unsupported", None)
    assert ap.conditions[1] == "not (speculative_config.method in ('ngram', 'ngram_gpu'))"  # elif
    # a message assembled in a local variable with `+=` and `%`
    mamba = by[("vllm/config/vllm.py",
                "Mamba cache mode 'all' is not supported with speculative decoding (n={n})")]
    assert mamba.exception == "NotImplementedError"
    asrt = by[("vllm/config/vllm.py", "Too many draft tokens for hybrid models: {str(n)}")]
    assert (asrt.kind, asrt.exception, asrt.condition) == ("assert", "AssertionError", "not (n < 8)")
    templates = inv.templates()
    assert "Plain message without any interesting words" not in templates
    assert "tensor_parallel_size must be non-negative" not in templates
    assert "Error: --enable-auto-tool-choice requires --tool-call-parser" not in templates
    assert inv.files_parsed < inv.files_total
    assert inv.find("{} with pipeline parallel is not supported.") == [v2]


def test_unparsable_file_is_reported(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    shutil.copytree(MINI / "mini_legacy", root)
    (root / "vllm/broken.py").write_text('def f(:\n    raise ValueError("pipeline broken")\n')
    inv = scan_raises(mini(root=root))
    assert inv.unparsable == ["vllm/broken.py"]
    assert [s.template for s in inv.sites] == ["Pipeline parallelism is broken in this layout"]


def test_diff_inventories(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    shutil.copytree(MINI / "mini_current", root)
    p = root / "vllm/v1/worker/gpu/model_runner.py"
    p.write_text(p.read_text().replace("with pipeline parallel", "with PP"))
    d = diff_inventories(scan_raises(mini()), scan_raises(mini(root=root)))
    assert [s.template for s in d["added"]] == ["{self.speculative_config.method} with PP is not supported."]
    assert [s.template for s in d["removed"]] == [
        "{self.speculative_config.method} with pipeline parallel is not supported."]


# --------------------------------------------------------------------------- slow


@pytest.mark.slow
def test_real_inventory_0_33_is_fast_and_finds_known_messages(vllm_tree) -> None:
    t = vllm_tree("0.33.0")
    cpu = time.process_time()
    inv = scan_raises(t)
    cpu = time.process_time() - cpu
    assert inv.files_total > 2500
    assert inv.files_parsed < inv.files_total / 3  # the text prefilter does most of the work
    assert cpu < 20  # ~3 s of CPU here; generous for slow CI machines
    assert len(inv.sites) > 500
    c2 = inv.find("{} does not support {} with pipeline parallelism")
    assert [(s.file, s.exception) for s in c2] == [
        ("vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py", "ValueError")]
    ep = inv.find("Number of experts in the model must be greater than 0")
    assert ep and ep[0].file == "vllm/config/model.py" and ep[0].condition == "not self.is_moe"
    assert inv.find("Model Runner V1 does not support: {}") or inv.find("pipeline parallelism with async")


@pytest.mark.slow
def test_real_inventory_drift_0_24_to_0_33(vllm_tree) -> None:
    old, new = scan_raises(vllm_tree("0.24.0")), scan_raises(vllm_tree("0.33.0"))
    d = diff_inventories(old, new)
    removed = {s.template for s in d["removed"]}
    added = {s.template for s in d["added"]}
    assert "{self.speculative_config.method} with pipeline parallel is not supported." in removed
    assert "{type(model).__name__} does not support {method} with pipeline parallelism" in added
