"""`compat fix --apply DIR --commit`: one branch, one commit, a message that tells each fix.

A tiny recipes checkout (tests/test_fix_stage.py's) under git and a database holding one planned
gate for a blocked command; the slow loop test does the same on a copy of the snapshot.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

from compat import store
from compat import tables as t
from compat.fix.edits import Edit, dumps
from tests.cli_kit import run
from tests.test_fix_stage import EAGLE3, checkout, recipe

PATH = "models/acme/x.yaml"
STEP = ("method eagle3: draft acme/eagle3-nopp -> Eagle3NoPP lacks PP support, and create_draft_parallel_config "
        "copies pipeline_parallel_size=2 from the target (vllm/config/speculative.py:900)")


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout


def repo_and_db(tmp_path: Path) -> tuple[Path, Path]:
    text = recipe(f"""\
        spec_decoding:
          description: eagle3
          args: ["--speculative-config", '{EAGLE3}']
        """, opt_in="[spec_decoding]")
    root = checkout(tmp_path, text)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "recipes")
    gate = Edit("set", ("features", "spec_decoding", "strategies"), ["single_node_tp", "multi_node_tp"],
                after="description",
                comment="vllm-compat: spec_decoding cannot start on multi_node_tp_pp at vLLM 0.1.0 (speculative.py:900)")
    db = tmp_path / "c.db"
    base = {"vllm_version": "0.1.0", "platform": "cuda", "recipe": PATH, "model_id": "acme/moe-pp",
            "variant": "default", "strategy": "multi_node_tp_pp", "feature": "spec_decoding", "judged": 1,
            "pinned": 1, "command_id": 1}
    with store.writing(db) as s:
        s.append(t.Command, [{"id": 1, "argv": json.dumps([["", ["vllm", "serve", "acme/moe-pp"]]])}])
        s.append(t.Verdict, [dict(base, id=1, status="blocked", evidence="vllm/config/speculative.py:900",
                                  message="Pipeline parallelism is not supported for this model.",
                                  cause_id=1)])
        s.append(t.CauseRow, [{
            "id": 1, "recipe": PATH, "kind": "feature", "element": "features.spec_decoding",
            "label": "spec_decoding", "field": "features.spec_decoding", "line": 11, "finding": STEP,
            "works_from": "0.2.0", "fix_kind": "gate", "fix": "gate spec_decoding off multi_node_tp_pp",
            "fix_edits": dumps([gate])}])
        s.append(t.VerdictCause, [{"verdict_id": 1, "cause_id": 1}])
        s.replace(t.RecipeFile, [{"path": PATH, "sha256": hashlib.sha256(text.encode()).hexdigest()}])
    return root, db


def test_commit_makes_one_commit_on_a_new_branch_with_the_full_chain(tmp_path: Path) -> None:
    root, db = repo_and_db(tmp_path)
    r = run("fix", "--db", str(db), "--apply", str(root), "--commit")
    assert r.returncode == 0, r.stderr
    assert "changed 1 recipe files; committed" in r.stderr and "on branch vllm-compat/fixes" in r.stderr
    assert git(root, "branch", "--show-current").strip() == "vllm-compat/fixes"
    assert git(root, "rev-list", "--count", "main..HEAD").strip() == "1"
    assert git(root, "status", "--porcelain").strip() == ""  # everything written is committed
    assert git(root, "show", "--name-only", "--format=", "HEAD").split() == [PATH]
    message = git(root, "log", "-1", "--format=%B")
    lines = message.splitlines()
    assert lines[0] == "vllm-compat: 1 fix(es) in 1 recipe file(s) (gate 1)"
    for needed in (f"\n{PATH}\n", "- gate: gate spec_decoding off multi_node_tp_pp",
                   "cause: spec_decoding (features.spec_decoding, line 11), 1 command(s) at vLLM 0.1.0",
                   "create_draft_parallel_config copies pipeline_parallel_size=2",  # the full chain
                   "evidence (vLLM 0.1.0): vllm/config/speculative.py:900",
                   "first release where it starts: 0.2.0",
                   "the site stops emitting: spec_decoding on multi_node_tp_pp (1 command(s): variant(s) default)"):
        assert needed in message, (needed, message)
    assert all(len(line) <= 72 for line in lines[:5])
    # the comment written in the recipe is one short line
    text = (root / PATH).read_text()
    assert "# vllm-compat: spec_decoding cannot start on multi_node_tp_pp at vLLM 0.1.0 (speculative.py:900)" in text


def test_markdown_is_the_same_as_a_pr_body_and_dry_run_writes_nothing(tmp_path: Path) -> None:
    root, db = repo_and_db(tmp_path)
    r = run("fix", "--db", str(db), "--apply", str(root), "--dry-run", "--format", "markdown")
    assert r.returncode == 0, r.stderr
    body = r.stdout
    assert body.startswith("## vllm-compat: 1 fix(es) in 1 recipe file(s) (gate 1)")
    assert f"| `{PATH}` | gate: gate spec_decoding off multi_node_tp_pp | spec_decoding | 0.2.0 |" in body
    assert "- the site stops emitting: spec_decoding on multi_node_tp_pp" in body
    assert git(root, "status", "--porcelain").strip() == "" and "would change 1" in r.stderr


def test_commit_refuses_without_git_or_when_the_branch_exists(tmp_path: Path) -> None:
    root, db = repo_and_db(tmp_path)
    git(root, "branch", "vllm-compat/fixes")
    r = run("fix", "--db", str(db), "--apply", str(root), "--commit")
    assert r.returncode == 2 and r.stderr == "error: --commit: branch 'vllm-compat/fixes' exists; give another with --branch\n"
    assert git(root, "status", "--porcelain").strip() == ""  # nothing written
    r = run("fix", "--db", str(db), "--apply", str(root), "--commit", "--branch", "fix/pp")
    assert r.returncode == 0 and git(root, "branch", "--show-current").strip() == "fix/pp"
    bare = tmp_path / "plain"
    root2, db2 = repo_and_db(bare)
    subprocess.run(["rm", "-rf", str(root2 / ".git")], check=True)
    r = run("fix", "--db", str(db2), "--apply", str(root2), "--commit")
    assert r.returncode == 2 and "not inside a git checkout; --commit needs one" in r.stderr
    r = run("fix", "--db", str(db2), "--commit")
    assert r.returncode == 2 and r.stderr == "error: --commit: needs --apply DIR (the recipes checkout)\n"
