"""The one recipe editor (compat.fix.yaml_edit): planned edits written as text, every other byte kept.

Input/output cases on a hand-made fragment with the shapes recipes use (flow and block lists,
offset-0 lists, block scalars, comments everywhere, CRLF), then a property over every recipe of
the snapshot: comments inserted at random places survive every edit, but one written on an item
the edit drops.
"""

from __future__ import annotations

import copy
import difflib
import random
from pathlib import Path

import pytest
from compat.fix.edits import Edit, apply
from compat.fix.yaml_edit import EditError, Indent, comments, detect_indent, edit_recipe_text, load_data
from compat.recipes.offering import effective_compatible_strategies
from compat.recipes.repo import Recipe

from tests.conftest import SNAPSHOT  # noqa: E402 (COMPAT_RECIPES_SNAPSHOT, as every test reads it)
EDGE = Path(__file__).resolve().parent / "fixtures" / "overrides" / "edge_cases.yaml"


def gate(feature: str, strategies: list[str], comment: str = "vllm-compat: test gate") -> Edit:
    return Edit("set", ("features", feature, "strategies"), strategies, after="description", comment=comment)


EDITS = [
    gate("flow_gate", ["single_node_tp", "multi_node_tp"], "c1: narrowed"),
    gate("block_description", ["single_node_tp", "multi_node_tp"], "c2: inserted"),
    gate("no_description", ["single_node_tp"], "c3: inserted first"),
    gate("reordered_gate", ["single_node_tp", "multi_node_tp"], "c4: rewritten"),
]


def edit(text: str, edits: list[Edit]) -> str:
    return edit_recipe_text(text, edits, apply(load_data(text), edits)).text


def changed(old: str, new: str) -> tuple[list[str], list[str]]:
    diff = list(difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0))
    added = [ln[1:] for ln in diff if ln.startswith("+") and not ln.startswith("+++")]
    removed = [ln[1:] for ln in diff if ln.startswith("-") and not ln.startswith("---")]
    return added, removed


def test_detect_indent() -> None:
    assert detect_indent(EDGE.read_text()) == Indent(mapping=2, offset=0)


def test_edge_cases() -> None:
    text = EDGE.read_text(encoding="utf-8")
    new = edit(text, EDITS)
    want = copy.deepcopy(load_data(text))
    for e in EDITS:
        want["features"][e.path[1]]["strategies"] = e.value
    assert load_data(new) == want
    # a flow list stays flow, its trailing comment on its line
    flow = next(ln for ln in new.splitlines() if "strategies: [" in ln)
    assert flow == "    strategies: [single_node_tp, multi_node_tp] # keep this comment"
    # a list reordered is written in the new order where its first item was
    assert "    strategies:\n    - single_node_tp\n    - multi_node_tp\n    args: []" in new
    # every comment survives, the block scalar is untouched
    assert {c for _, c in comments(text)} <= {c for _, c in comments(new)}
    assert "  Text with a trailing-space line below.\n  \n" in new
    added, removed = changed(text, new)
    assert all(s.strip().startswith(("#", "strategies:", "- ")) for s in added), added
    assert all(s.strip().startswith(("strategies:", "- ")) for s in removed), removed
    assert edit(new, EDITS) == new  # a second run is a no-op


def test_crlf_line_endings_are_kept() -> None:
    text = EDGE.read_text(encoding="utf-8").replace("\n", "\r\n")
    new = edit(text, EDITS)
    assert "\n" not in new.replace("\r\n", "")


LIST = """\
model:
  model_id: acme/a
  min_vllm_version: "0.1.0"   # pinned for the docker image
features:
  spec_decoding:
    description: "mtp"
    strategies:
      - single_node_tp
      # keep tp_pp off until the draft supports PP
      - multi_node_tep  # note
      - multi_node_tp_pp  # goes with its item
    args: ["--x", "--tool-call-parser-plugin", "y"]  # args
"""


@pytest.mark.parametrize(("edits", "kept", "lost"), [
    # defect (issue 17): a gate narrowing a block list lost the comment line between items and the
    # inline comment on a kept item
    ([gate("spec_decoding", ["single_node_tp", "multi_node_tep"])],
     ["# keep tp_pp off until the draft supports PP", "# note", "# pinned for the docker image"],
     ["# goes with its item"]),
    ([gate("spec_decoding", ["multi_node_tep", "single_node_tp"])],  # reordered
     ["# keep tp_pp off until the draft supports PP", "# note"], ["# goes with its item"]),
    ([gate("spec_decoding", ["single_node_tp", "new", "multi_node_tep", "multi_node_tp_pp"])],  # widened
     ["# keep tp_pp off until the draft supports PP", "# note", "# goes with its item"], []),
    ([Edit("set", ("model", "min_vllm_version"), "0.2.0", comment="bump")],
     ["# pinned for the docker image", "# note"], []),
    ([Edit("delete", ("features", "spec_decoding", "strategies"), None, comment="ungate")],
     ["# keep tp_pp off until the draft supports PP", "# args"], ["# note", "# goes with its item"]),
    ([Edit("replace_item", ("features", "spec_decoding", "args"), "--tool-parser-plugin",
           old="--tool-call-parser-plugin")], ["# args", "# note"], []),
], ids=["narrowed", "reordered", "widened", "scalar", "deleted", "item"])
def test_comments_survive_every_kind_of_edit(edits: list[Edit], kept: list[str], lost: list[str]) -> None:
    new = edit(LIST, edits)
    have = {c for _, c in comments(new)}
    assert set(kept) <= have, new
    assert not set(lost) & have, new
    assert edit(new, edits) == new


def test_refuses_what_it_cannot_do_safely() -> None:
    text = EDGE.read_text(encoding="utf-8")
    with pytest.raises(EditError, match="empty list"):
        edit(text, [gate("reordered_gate", [])])
    mapped = text.replace("strategies: [single_node_tp, multi_node_tp, multi_node_tp_pp]",
                          "strategies: {multi_node_tp_pp: unsupported}")
    with pytest.raises(EditError, match="mapping"):
        edit(mapped, [gate("flow_gate", ["single_node_tp"])])
    with pytest.raises(EditError, match="would add an unexpected line"):
        from compat.fix import yaml_edit

        yaml_edit._check(LIST, LIST.replace("model:\n", "model:\n  extra: 1\n"),
                         load_data(LIST.replace("model:\n", "model:\n  extra: 1\n")), [])
    with pytest.raises(EditError, match="lose the comment"):
        yaml_edit._check(LIST, LIST.replace("      # keep tp_pp off until the draft supports PP\n", ""),
                         load_data(LIST), [])


# --------------------------------------------------------------------------- the snapshot, comments at random


def with_random_comments(text: str, rng: random.Random) -> str:
    """`text` with full-line and inline comments added where YAML keeps the data unchanged."""
    data = load_data(text)
    lines = text.splitlines(keepends=True)
    from compat.fix.yaml_edit import _block_scalar_lines, _compose

    inside = _block_scalar_lines(_compose(text))
    out: list[str] = []
    for i, line in enumerate(lines):
        s = line.strip()
        starts = s.startswith("- ") or (":" in s and not s.startswith("#"))
        if i not in inside and starts and rng.random() < 0.3:
            pad = line[: len(line) - len(line.lstrip())]
            out.append(f"{pad}# maintainer note {i}\n")
        if i not in inside and starts and rng.random() < 0.2 and not s.endswith(("|", ">", "|-", ">-", ":")) \
                and "#" not in s:
            trial = line.rstrip("\n") + f"  # inline note {i}\n"
            if load_data("".join([*out, trial, *lines[i + 1:]])) == data:
                out.append(trial)
                continue
        out.append(line)
    new = "".join(out)
    return new if load_data(new) == data else text


def snapshot_edits(rel: str, data: dict) -> list[Edit]:
    """Gate every feature off the last strategy it is offered on, and bump the pin."""
    effective = effective_compatible_strategies(Recipe(rel, data))
    edits = []
    for name, feat in (data.get("features") or {}).items():
        existing = (feat or {}).get("strategies") or None
        keep = [s for s in effective if existing is None or s in existing]
        if len(keep) > 1:
            edits.append(gate(name, keep[:-1]))
    if isinstance(data.get("model"), dict) and "min_vllm_version" in data["model"]:
        edits.append(Edit("set", ("model", "min_vllm_version"), "0.99.0", comment="vllm-compat: bump"))
    return edits


@pytest.mark.parametrize("seed", [1, pytest.param(2, marks=pytest.mark.slow), pytest.param(3, marks=pytest.mark.slow)])
def test_every_snapshot_recipe_keeps_comments_not_on_removed_items(seed: int) -> None:
    if not (SNAPSHOT / "taxonomy.yaml").is_file():
        pytest.skip(f"recipes snapshot not found at {SNAPSHOT}")
    rng = random.Random(seed)
    edited = 0
    for path in sorted((SNAPSHOT / "models").rglob("*.yaml")):
        rel = path.relative_to(SNAPSHOT).as_posix()
        text = with_random_comments(path.read_text(encoding="utf-8"), rng)
        data = load_data(text)
        edits = snapshot_edits(rel, data)
        if not edits:
            continue
        new = edit(text, edits)
        assert load_data(new) == apply(data, edits), rel
        removed = {i for i, line in enumerate(text.splitlines())
                   if line not in new.splitlines() and line.strip().startswith("- ")}
        old_lines = text.splitlines()
        survivors = [c for i, c in comments(new)]
        for i, c in comments(text):
            on_removed_item = i in removed and not old_lines[i].lstrip().startswith("#")
            if not on_removed_item:
                assert c in survivors, f"{rel}: lost {c!r}"
        edited += 1
    assert edited > 50
