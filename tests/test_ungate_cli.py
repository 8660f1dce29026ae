"""Ungate proposals as the CLI shows them: a warning line in `check` (never exit 1 by itself), a
`proposals` entry in `overrides`, and written by `fix --apply` only with `--only ungate`."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from compat import store
from compat import tables as t
from compat.emit.overrides import generate_overrides, render_yaml, validate
from compat.fix.edits import Edit, dumps
from tests.cli_kit import run

RECIPE = """\
model:
  model_id: acme/a
  min_vllm_version: "0.30.0"
features:
  spec_decoding:
    description: mtp
    # gated off PP: the MTP draft lacks SupportsPP before 0.30.0
    strategies: [single_node_tp]
    args: []
compatible_strategies: [single_node_tp, multi_node_tp_pp]
"""


def gated_db(tmp_path: Path, blocked: bool = False) -> tuple[Path, Path]:
    """A database whose only finding is a gate to review (and, with `blocked`, one blocked row)."""
    root = tmp_path / "recipes"
    (root / "models").mkdir(parents=True)
    (root / "models" / "a.yaml").write_text(RECIPE)
    db = tmp_path / "c.db"
    delete = Edit("delete", ("features", "spec_decoding", "strategies"), None,
                  comment="vllm-compat: gate removed: spec_decoding starts everywhere at vLLM 0.30.0")
    base = {"vllm_version": "0.30.0", "platform": "cuda", "recipe": "models/a.yaml", "model_id": "acme/a",
            "variant": "default", "feature": "spec_decoding", "judged": 1, "pinned": 1}
    with store.writing(db) as s:
        s.append(t.Verdict, [dict(base, id=1, strategy="single_node_tp", status="ok"),
                             dict(base, id=2, strategy="multi_node_tp_pp", status="ok", gated=1),
                             dict(base, id=3, strategy="single_node_tp", feature="", status="blocked"
                                  if blocked else "ok")])
        s.append(t.CauseRow, [{
            "id": 1, "recipe": "models/a.yaml", "kind": "gate", "element": "features.spec_decoding",
            "label": "gate features.spec_decoding.strategies", "field": "features.spec_decoding.strategies",
            "line": 8, "finding": "hides 1 command(s) that start at vLLM 0.30.0", "works_from": "0.30.0",
            "fix_kind": "ungate", "fix": "remove features.spec_decoding.strategies: the 1 command(s) it hides "
            "start at vLLM 0.30.0", "fix_why": "a gate may exist for reasons other than startup",
            "fix_edits": dumps([delete])}])
        s.replace(t.RecipeFile, [{"path": "models/a.yaml",
                                  "sha256": hashlib.sha256(RECIPE.encode()).hexdigest()}])
    return db, root


def test_check_warns_and_exits_0_for_a_gate_to_review(tmp_path: Path) -> None:
    db, _ = gated_db(tmp_path)
    r = run("check", "--db", str(db))
    assert r.returncode == 0, r
    assert r.stdout.startswith("models/a.yaml:8: warning: gate features.spec_decoding.strategies hides 1")
    assert "proposal (ungate): remove features.spec_decoding.strategies" in r.stdout
    assert "1 gate(s) to review" in r.stdout
    gh = run("check", "--db", str(db), "--format", "github")
    assert gh.returncode == 0 and gh.stdout.startswith("::warning file=models/a.yaml,line=8,title=")
    blocked_db, _ = gated_db(tmp_path / "b", blocked=True)
    assert run("check", "--db", str(blocked_db)).returncode == 1  # a blocked row still fails


def test_overrides_show_it_as_a_proposal_and_apply_writes_it_only_when_asked(tmp_path: Path) -> None:
    db, root = gated_db(tmp_path)
    data = yaml.safe_load(render_yaml(generate_overrides(db)))
    validate(data)
    entry = data["models/a.yaml"]
    assert "fixes" not in entry and entry["proposals"][0]["kind"] == "ungate"
    r = run("fix", "--db", str(db), "--apply", str(root))
    assert r.returncode == 0 and "changed 0 recipe files" in r.stderr, r
    listed = run("fix", "--db", str(db)).stdout  # the listing shows proposals too
    assert listed.startswith("models/a.yaml: ungate: remove features.spec_decoding.strategies")
    r = run("fix", "--db", str(db), "--apply", str(root), "--only", "ungate")
    assert r.returncode == 0 and "changed 1 recipe files" in r.stderr, r
    text = (root / "models" / "a.yaml").read_text()
    assert "strategies:" not in text.split("compatible_strategies")[0]
    # the maintainer's comment stays; ours says why the gate went
    assert "# gated off PP: the MTP draft lacks SupportsPP before 0.30.0" in text
    assert "# vllm-compat: gate removed" in text


def test_only_names_every_fix_kind_in_its_help() -> None:
    from compat.fix import KINDS

    help_text = " ".join(run("fix", "--help").stdout.split())
    assert f"({', '.join(KINDS)};" in help_text, help_text


def glm_view(tmp_path: Path, snapshot: Path, pin: str) -> Path:
    """The snapshot's GLM-5.2 alone, gated off multi_node_tp_pp for MTP (the fix stage's gate),
    pinned at `pin`."""
    import shutil

    root = tmp_path / f"glm-{pin}"
    shutil.copytree(snapshot, root, ignore=shutil.ignore_patterns("node_modules", "models"))
    (root / "models" / "zai-org").mkdir(parents=True)
    text = (snapshot / "models" / "zai-org" / "GLM-5.2.yaml").read_text()
    text = text.replace('min_vllm_version: "0.23.0"', f'min_vllm_version: "{pin}"')
    text = text.replace("vllm-openai:v0.23.0", f"vllm-openai:v{pin}")
    text = text.replace(
        '    description: "Multi-Token Prediction speculative decoding (up to 7 draft tokens)"\n',
        '    description: "Multi-Token Prediction speculative decoding (up to 7 draft tokens)"\n'
        "    strategies: [single_node_tp, single_node_tep, multi_node_tp, multi_node_tep, multi_node_dep, "
        "pd_cluster]\n")
    assert "strategies: [single_node_tp, single_node_tep" in text
    (root / "models" / "zai-org" / "GLM-5.2.yaml").write_text(text)
    return root


@pytest.mark.slow
def test_ungate_waits_for_glm52_commands_known_to_start(tmp_path: Path, snapshot: Path) -> None:
    """Issue 19's case: gated off multi_node_tp_pp for MTP, then bumped to 0.30.0, where the draft's PP
    failure is gone. Whether the hidden commands start there depends on GLM-5.2's MTP layer count
    (num_speculative_tokens=5 against the draft's n_predict), which offline facts lack: they are
    unknown, so the gate is not proposed for removal (it would offer commands not known to start)."""
    moved = glm_view(tmp_path, snapshot, "0.30.0")
    db = tmp_path / "moved.db"
    assert run("build", "--recipes", str(moved), "--db", str(db)).returncode == 0
    r = run("check", "--db", str(db), "--format", "json")
    assert r.returncode == 0, r.stdout  # nothing blocked
    report = json.loads(r.stdout)
    assert report["reviews"] == []
    hidden = _sql(db, "SELECT DISTINCT status, reason FROM verdict WHERE strategy = 'multi_node_tp_pp' "
                     "AND feature = 'spec_decoding' AND mode = 'mtp' AND judged = 1")
    assert hidden and {h["status"] for h in hidden} == {"unknown"}, hidden
    assert all("MTP layer count" in h["reason"] for h in hidden)
    real = glm_view(tmp_path, snapshot, "0.23.0")
    db2 = tmp_path / "real.db"
    assert run("build", "--recipes", str(real), "--db", str(db2)).returncode == 0
    report = json.loads(run("check", "--db", str(db2), "--format", "json").stdout)
    assert report["reviews"] == []


def _sql(db: Path, statement: str) -> list[dict]:
    import sqlite3

    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute(statement)]
    finally:
        con.close()
