"""An incremental build on the real snapshot: one recipe edited, only it judged again, and every
table the same as a build of the edited checkout that judged everything."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import pytest

from tests.cli_kit import run
from tests.test_reuse import tables

pytestmark = pytest.mark.slow

RELEASES = ("--vllm", "0.23.0", "--vllm", "0.33.0")
EDITED = "models/zai-org/GLM-5.2.yaml"


def build(recipes: Path, db: Path) -> str:
    r = run("build", "--recipes", str(recipes), *RELEASES, "--db", str(db))
    assert r.returncode == 0, r.stderr
    return r.stderr


def test_one_edited_recipe_is_judged_again_and_the_tables_match_a_full_build(
    tmp_path, snapshot, vllm_tree, monkeypatch
):
    vllm_tree("0.23.0"), vllm_tree("0.33.0")  # download once, shared cache
    copy = tmp_path / "recipes"
    shutil.copytree(snapshot, copy)
    build(copy, tmp_path / "before.db")  # fills the cache (or finds it filled)
    recipe = copy / EDITED
    text = recipe.read_text()
    assert "  base_args:\n" in text
    # A value no earlier run wrote: the results cache outlives a run (CI keeps it), and an edit
    # made before with the same code is, rightly, reused.
    seqs = str(64 + time.time_ns() % 1_000_000)
    recipe.write_text(
        text.replace("  base_args:\n", f'  base_args:\n    - "--max-num-seqs"\n    - "{seqs}"\n', 1)
    )
    said = build(copy, tmp_path / "incremental.db")
    m = re.search(r"recipes: (\d+) judged, (\d+) reused", said)
    assert m and int(m.group(1)) == 1 and int(m.group(2)) > 100, said
    monkeypatch.setenv("COMPAT_REUSE", "0")
    build(copy, tmp_path / "full.db")
    assert tables(tmp_path / "incremental.db") == tables(tmp_path / "full.db")
