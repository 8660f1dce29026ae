"""compat.fix.writer, the only writer of recipe files: planned edits in, whole files out or none."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from compat import store
from compat import tables as t
from compat.errors import UserError
from compat.fix.edits import Edit, dumps
from compat.fix.writer import apply_fixes

A = """\
# a comment that must survive
model:
  model_id: acme/a
  min_vllm_version: "0.1.0"   # trailing comment
features:
  spec_decoding:
    description: "eagle3"
    args: ["--speculative-config", "{}"]
compatible_strategies: [single_node_tp, multi_node_tp_pp]
guide: |
  Keep this block scalar.
    Indented line.
"""
B = A.replace("acme/a", "acme/b")


@pytest.fixture()
def setup(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "recipes"
    (root / "models").mkdir(parents=True)
    (root / "models" / "a.yaml").write_text(A)
    (root / "models" / "b.yaml").write_text(B)
    db = tmp_path / "c.db"
    gate = Edit("set", ("features", "spec_decoding", "strategies"), ["single_node_tp"], after="description",
                comment="vllm-compat: spec_decoding cannot start on multi_node_tp_pp at vLLM 0.1.0")
    bump = Edit("set", ("model", "min_vllm_version"), "0.2.0", comment="vllm-compat: first release: 0.2.0")
    with store.writing(db) as s:
        s.replace(t.CauseRow, [
            {"id": 1, "recipe": "models/a.yaml", "kind": "feature", "fix_kind": "gate", "fix": "gate",
             "fix_edits": dumps([gate])},
            {"id": 2, "recipe": "models/b.yaml", "kind": "pin", "fix_kind": "pin_bump", "fix": "bump",
             "fix_edits": dumps([bump])},
            {"id": 3, "recipe": "models/b.yaml", "kind": "fact", "fix_kind": "none", "fix_why": "no"}])
        s.replace(t.RecipeFile, [
            {"path": f"models/{n}.yaml", "sha256": hashlib.sha256(t.encode()).hexdigest()}
            for n, t in (("a", A), ("b", B))])
    return root, db


def test_apply_edits_round_trip_and_only_the_fixed_lines(setup: tuple[Path, Path]) -> None:
    root, db = setup
    res = apply_fixes(db, root)
    assert res.changed_files == ["models/a.yaml", "models/b.yaml"]
    a = (root / "models" / "a.yaml").read_text()
    b = (root / "models" / "b.yaml").read_text()
    assert "# a comment that must survive" in a and "Keep this block scalar.\n    Indented line." in a
    added = [line for line in a.splitlines() if line not in A.splitlines()]
    assert added == ["    # vllm-compat: spec_decoding cannot start on multi_node_tp_pp at vLLM 0.1.0",
                     "    strategies: [single_node_tp]"], added
    assert 'min_vllm_version: "0.2.0"' in b and "# trailing comment" in b


def test_second_apply_is_a_no_op(setup: tuple[Path, Path]) -> None:
    root, db = setup
    apply_fixes(db, root)
    before = {p: p.read_bytes() for p in (root / "models").iterdir()}
    again = apply_fixes(db, root)
    assert again.changed_files == []
    assert {p: p.read_bytes() for p in (root / "models").iterdir()} == before


def test_dry_run_writes_nothing_and_shows_the_diff(setup: tuple[Path, Path]) -> None:
    root, db = setup
    res = apply_fixes(db, root, dry_run=True)
    assert "+    strategies: [single_node_tp]" in res.diffs["models/a.yaml"]
    assert (root / "models" / "a.yaml").read_text() == A


def test_only_selects_fix_kinds(setup: tuple[Path, Path]) -> None:
    root, db = setup
    assert apply_fixes(db, root, only=("pin_bump",)).changed_files == ["models/b.yaml"]


def test_a_file_changed_since_the_build_is_refused_and_nothing_is_written(setup: tuple[Path, Path]) -> None:
    root, db = setup
    (root / "models" / "b.yaml").write_text(B + "# edited by hand\n")
    with pytest.raises(UserError) as exc:
        apply_fixes(db, root)
    assert exc.value.where == "models/b.yaml" and "changed since the build" in exc.value.message
    assert (root / "models" / "a.yaml").read_text() == A  # not even the unchanged file


def test_an_interrupted_apply_leaves_each_file_old_or_whole(setup: tuple[Path, Path],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    root, db = setup
    real = os.replace
    calls = []

    def replace(src: str, dst: str) -> None:
        calls.append(dst)
        if len(calls) == 2:
            raise KeyboardInterrupt
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        apply_fixes(db, root)
    a = (root / "models" / "a.yaml").read_text()
    b = (root / "models" / "b.yaml").read_text()
    assert "strategies: [single_node_tp]" in a  # written whole
    assert b == B  # as it was
    assert not [p for p in (root / "models").iterdir() if p.name.endswith(".tmp")]


def test_missing_recipe_file_names_it(setup: tuple[Path, Path]) -> None:
    root, db = setup
    (root / "models" / "a.yaml").unlink()
    with pytest.raises(UserError) as exc:
        apply_fixes(db, root)
    assert exc.value.where == "models/a.yaml"


def test_a_split_item_applied_twice_is_a_no_op() -> None:
    from compat.fix.edits import apply

    data = {"model": {"base_args": ["--max-model-len auto", "--x"]}}
    split = Edit("replace_item", ("model", "base_args"), ["--max-model-len", "auto"], old="--max-model-len auto")
    once = apply(data, [split])
    assert once["model"]["base_args"] == ["--max-model-len", "auto", "--x"]
    assert apply(once, [split]) == once


def test_cause_lines_point_at_the_deepest_key_present() -> None:
    from compat.fix.locate import key_lines, line_of

    lines = key_lines(A)
    assert line_of(lines, ("model", "min_vllm_version")) == 4
    assert line_of(lines, ("features", "spec_decoding", "modes", "mtp")) == 6  # no modes: the feature's line
    assert line_of(lines, ("nothing",)) == 1


def test_key_lines_read_with_libyaml_are_the_pure_python_loaders(snapshot, monkeypatch) -> None:
    """key_lines uses libyaml's loader where PyYAML has it: on every snapshot file, the same lines."""
    import yaml

    from compat.fix import locate

    files = sorted(snapshot.rglob("*.yaml"))
    fast = [locate.key_lines(f.read_text(encoding="utf-8")) for f in files]
    monkeypatch.setattr(locate, "_LOADER", yaml.SafeLoader)
    assert [locate.key_lines(f.read_text(encoding="utf-8")) for f in files] == fast
    assert len(files) > 100 and sum(map(len, fast)) > 1000
