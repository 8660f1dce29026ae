"""The allowlist editor: byte-preserving edits of recipe files, with ruamel or the line fallback."""

from __future__ import annotations

import copy
import difflib
from pathlib import Path

import pytest
import yaml

from compat.fix.yaml_edit import (
    AllowlistEdit,
    EditError,
    Indent,
    choose_method,
    detect_indent,
    edit_allowlists,
    roundtrip_identical,
)
from compat.recipes.offering import effective_compatible_strategies
from compat.recipes.repo import Recipe

SNAPSHOT = Path(__file__).resolve().parents[2] / "shared" / "recipes-snapshot"
EDGE = Path(__file__).resolve().parent / "fixtures" / "overrides" / "edge_cases.yaml"

EDITS = (
    AllowlistEdit("flow_gate", ("single_node_tp", "multi_node_tp"), ("c1: narrowed",)),
    AllowlistEdit("block_description", ("single_node_tp", "multi_node_tp"), ("c2: inserted",)),
    AllowlistEdit("no_description", ("single_node_tp",), ("c3: inserted first",)),
    AllowlistEdit("reordered_gate", ("single_node_tp", "multi_node_tp"), ("c4: rewritten",)),
)


def _edge_text() -> str:
    return EDGE.read_text(encoding="utf-8")


def _ruamel_friendly(text: str) -> str:
    """The fixture without the two things ruamel cannot reproduce byte for byte."""
    return text.replace("\n  \n", "\n\n").replace(
        "Plain scalar\n      continued on a second line.", "Plain scalar on one line."
    )


def _changed_lines(old: str, new: str) -> tuple[list[str], list[str]]:
    diff = list(difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0))
    added = [ln[1:] for ln in diff if ln.startswith("+") and not ln.startswith("+++")]
    removed = [ln[1:] for ln in diff if ln.startswith("-") and not ln.startswith("---")]
    return added, removed


def _check_edit(old: str, new: str, edits: tuple[AllowlistEdit, ...]) -> None:
    """Independent of the editor's own checks: same data plus the allowlists, only allowlist lines touched."""
    before, after = yaml.safe_load(old), yaml.safe_load(new)
    want = copy.deepcopy(before)
    for e in edits:
        want["features"][e.feature]["strategies"] = list(e.strategies)
    assert after == want
    for e in edits:
        keys = list(after["features"][e.feature])
        old_keys = list(before["features"][e.feature])
        if "strategies" not in old_keys and "description" in old_keys:
            assert keys[keys.index("description") + 1] == "strategies"
    allowed = {s for e in edits for s in e.strategies}
    added, removed = _changed_lines(old, new)
    for line in added:
        s = line.strip()
        ok = s.startswith(("#", "strategies:")) or (s.startswith("- ") and s[2:] in allowed)
        assert ok, line
    for line in removed:
        s = line.strip()
        assert s.startswith(("strategies:", "- ")), line
    for line in old.splitlines():  # every comment survives
        if line.lstrip().startswith("#"):
            assert line.strip() in {ln.strip() for ln in new.splitlines()}


def test_detect_indent() -> None:
    assert detect_indent(_edge_text()) == Indent(mapping=2, offset=0)
    if (SNAPSHOT / "models/moonshotai/Kimi-K3.yaml").is_file():
        kimi = (SNAPSHOT / "models/moonshotai/Kimi-K3.yaml").read_text(encoding="utf-8")
        assert detect_indent(kimi) == Indent(mapping=2, offset=2)


@pytest.mark.parametrize("method", ["lines", "ruamel"])
def test_edge_cases_with_each_editor(method: str) -> None:
    text = _edge_text() if method == "lines" else _ruamel_friendly(_edge_text())
    if method == "ruamel":
        assert roundtrip_identical(text)
    out = edit_allowlists(text, EDITS, method=method)
    assert out.method == method
    assert out.changed == [e.feature for e in EDITS]
    _check_edit(text, out.text, EDITS)
    # flow lists stay flow, the trailing comment stays on its line
    flow = next(ln for ln in out.text.splitlines() if "strategies: [" in ln)
    assert flow.startswith("    strategies: [single_node_tp, multi_node_tp]") and flow.endswith(
        "# keep this comment"
    )
    # the block scalar is untouched and the list follows the file's offset-0 style
    assert (
        '    strategies:\n    - single_node_tp\n    - multi_node_tp\n    args:\n    - "--block"'
        in out.text
    )
    # a second run is a no-op
    again = edit_allowlists(out.text, EDITS, method=method)
    assert again.method is None and again.text == out.text


def test_auto_falls_back_when_ruamel_would_rewrite_the_file() -> None:
    text = _edge_text()
    assert not roundtrip_identical(text)  # a multi-line plain scalar and a whitespace-only line
    assert choose_method(text) == "lines"
    out = edit_allowlists(text, EDITS)
    assert out.method == "lines" and out.notes
    _check_edit(text, out.text, EDITS)
    assert "  Text with a trailing-space line below.\n  \n" in out.text
    with pytest.raises(EditError):
        edit_allowlists(text, EDITS, method="ruamel")


def test_crlf_line_endings_are_kept() -> None:
    text = _edge_text().replace("\n", "\r\n")
    out = edit_allowlists(text, EDITS)
    assert out.method == "lines"
    assert "\n" not in out.text.replace("\r\n", "")
    _check_edit(text, out.text, EDITS)


def test_refuses_unsafe_edits() -> None:
    text = _edge_text()
    with pytest.raises(EditError, match="empty allowlist"):
        edit_allowlists(text, [AllowlistEdit("flow_gate", ())])
    with pytest.raises(EditError, match="no such feature"):
        edit_allowlists(text, [AllowlistEdit("missing", ("single_node_tp",))])
    mapped = text.replace(
        "strategies: [single_node_tp, multi_node_tp, multi_node_tp_pp]",
        "strategies: {multi_node_tp_pp: unsupported}",
    )
    with pytest.raises(EditError, match="not a list"):
        edit_allowlists(mapped, [AllowlistEdit("flow_gate", ("single_node_tp",))])


def test_every_snapshot_recipe_edits_cleanly_with_either_editor() -> None:
    """Each recipe with features: gate every feature off its last strategy, with both editors.

    Files ruamel loads and dumps byte-identically are edited with ruamel; the
    others must take the line fallback. Either way the result is the old data
    plus the allowlists, and only comment and allowlist lines change.
    """
    if not (SNAPSHOT / "taxonomy.yaml").is_file():
        pytest.skip(f"recipes snapshot not found at {SNAPSHOT}")
    methods: dict[str, int] = {}
    for path in sorted((SNAPSHOT / "models").rglob("*.yaml")):
        rel = path.relative_to(SNAPSHOT).as_posix()
        text = path.read_text(encoding="utf-8")
        data = yaml.safe_load(text)
        effective = effective_compatible_strategies(Recipe(rel, data))
        edits = []
        for name, feat in (data.get("features") or {}).items():
            existing = feat.get("strategies") or None
            keep = [s for s in effective if existing is None or s in existing]
            if len(keep) > 1:
                edits.append(AllowlistEdit(name, tuple(keep[:-1]), ("vllm-compat: test gate",)))
        if not edits:
            continue
        auto = edit_allowlists(text, tuple(edits))
        expected = "ruamel" if roundtrip_identical(text) else "lines"
        assert auto.method == expected, rel
        _check_edit(text, auto.text, tuple(edits))
        lines = edit_allowlists(text, tuple(edits), method="lines")
        _check_edit(text, lines.text, tuple(edits))
        methods[expected] = methods.get(expected, 0) + 1
    assert methods.get("ruamel", 0) > 0 and methods.get("lines", 0) > 0
    glm = (SNAPSHOT / "models/zai-org/GLM-5.2.yaml").read_text(encoding="utf-8")
    assert roundtrip_identical(glm)
