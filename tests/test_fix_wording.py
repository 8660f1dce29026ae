"""The comment a fix writes above the line it edits: one readable line of at most 120 characters."""

from __future__ import annotations

import pytest

from compat.fix.wording import LIMIT, comment, joined, releases_text


@pytest.mark.parametrize("phrasings,evidence,want", [
    (["spec_decoding:mtp cannot start on multi_node_tp_pp at vLLM 0.23.0"], "vllm/config/speculative.py:308",
     "vllm-compat: spec_decoding:mtp cannot start on multi_node_tp_pp at vLLM 0.23.0 (vllm/config/speculative.py:308)"),
    # the full path does not fit: the file name keeps the line
    (["spec_decoding:mtp cannot start on multi_node_tp_pp, multi_node_tp at vLLM 0.23.0"],
     "vllm/model_executor/models/deepseek_mtp.py:241",
     "vllm-compat: spec_decoding:mtp cannot start on multi_node_tp_pp, multi_node_tp at vLLM 0.23.0 (deepseek_mtp.py:241)"),
    # the detailed phrasing does not fit: the next one does
    (["x" * 200, "spec_decoding cannot start on 7 strategies at vLLM 0.23.0"], "vllm/a.py:1",
     "vllm-compat: spec_decoding cannot start on 7 strategies at vLLM 0.23.0 (vllm/a.py:1)"),
])
def test_the_first_phrasing_that_fits_with_the_most_evidence(phrasings, evidence, want) -> None:
    got = comment(phrasings, evidence)
    assert got == want and len(got) <= LIMIT


def test_never_longer_than_the_limit_and_never_an_ellipsis() -> None:
    got = comment(["word " * 60], "vllm/" + "d/" * 80 + "f.py:1")
    assert len(got) <= LIMIT and "…" not in got and got.startswith("vllm-compat: word")


def test_joined_comments_of_merged_edits_stay_one_line() -> None:
    a = comment("spec_decoding:mtp cannot start on multi_node_tp_pp at vLLM 0.23.0", "vllm/config/speculative.py:308")
    b = comment("spec_decoding:dspark cannot start on multi_node_tp_pp at vLLM 0.23.0", "vllm/config/vllm.py:900")
    once = joined(a, b)
    # too long for both: the first, cut at a word, with a count of the others
    assert once.startswith("vllm-compat: spec_decoding:mtp cannot start") and once.endswith("(+1 more)")
    assert len(once) <= LIMIT
    assert joined(once, comment("tool_calling cannot start on pd_cluster")).endswith("(+2 more)")
    assert joined(a, a) == a
    short = joined(comment("a fails"), comment("b fails"))
    assert short == "vllm-compat: a fails; also b fails"


def test_releases_text() -> None:
    assert releases_text(["0.23.0"]) == "0.23.0"
    assert releases_text(["0.23.0", "0.24.0", "0.23.0"]) == "0.23.0, 0.24.0"
    assert releases_text(["0.23.0", "0.24.0", "0.33.0"]) == "0.23.0 to 0.33.0"
