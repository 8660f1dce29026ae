"""compat.scan.scan_ahead: a release's facts computed and cached as its tree lands, once; a tree
the analysis cannot read is left for the build to report, not raised in the download loop."""

from __future__ import annotations

from pathlib import Path

import pytest

from compat import scan
from compat.errors import UserError
from compat.sources.tree import VllmTree

DISPATCH = Path(__file__).resolve().parent / "fixtures" / "minitrees" / "dispatch"


def test_facts_are_cached_as_the_tree_lands_and_computed_once(isolated_cache, monkeypatch):
    tree = VllmTree(root=DISPATCH, version="0.0.1", origin="src")
    ready = scan.scan_ahead()
    ready(tree)
    assert scan.facts_path(tree).is_file()
    facts, cached = scan.release_facts(tree)
    assert cached and facts["release"]["version"] == "0.0.1"

    def again(*_args, **_kwargs):
        raise AssertionError("the facts are cached: nothing to compute")

    monkeypatch.setattr(scan, "release_facts", again)
    ready(tree)


def test_a_tree_the_analysis_cannot_read_is_left_for_the_build(isolated_cache, tmp_path):
    (tmp_path / "vllm").mkdir()
    tree = VllmTree(root=tmp_path, version="0.0.2", origin="src")
    said: list[str] = []
    scan.scan_ahead(said.append)(tree)  # no exception here
    assert not scan.facts_path(tree).is_file()
    with pytest.raises(UserError, match="not a recognisable vLLM tree"):
        scan.release_facts(tree)
