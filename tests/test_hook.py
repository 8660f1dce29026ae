"""The pre-commit hook: .pre-commit-hooks.yaml's wiring, the hook on staged files, and (slow) a real
`pre-commit try-repo` of this repository on a changed recipe file."""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from compat import hook

REPO = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
RECIPES = HERE / "fixtures" / "recipes" / "minimal"
MINI = HERE / "fixtures" / "minitrees" / "dispatch"
HF = HERE / "fixtures" / "hardening" / "hf"


def test_the_hook_definition() -> None:
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    assert [h["id"] for h in hooks] == ["vllm-compat"]
    h = hooks[0]
    assert h["entry"] == "python -m compat.hook" and h["language"] == "python" and h["pass_filenames"]
    files = re.compile(h["files"])
    for name in ("models/zai-org/GLM-5.2.yaml", "recipes/models/a/b.yml", "strategies/single_node_tp.yaml",
                 "taxonomy.yaml", "src/lib/command-synthesis.js"):
        assert files.search(name), name
    for name in ("README.md", "models/README.md", "scripts/build-recipes-api.mjs"):
        assert not files.search(name), name


def run_hook(cwd: Path, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stdout(out):
        code = hook.run(list(args))
    return code, out.getvalue()


def judged(root: Path) -> set[str]:
    from compat import api

    return {r[0] for r in api.sql(hook._db_for(root), "select distinct recipe from verdict")[1]}


def test_the_hook_checks_only_the_staged_recipes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMPAT_CACHE", str(tmp_path / "cache"))
    repo = tmp_path / "repo"
    shutil.copytree(RECIPES, repo / "recipes")
    opts = ("--vllm-src", f"{MINI}=0.0.1", "--hf-config-dir", str(HF))
    code, out = run_hook(repo, *opts, "recipes/models/acme/Widget.yaml")
    lines = [line for line in out.splitlines() if line.startswith("models/")]
    assert lines and all(line.startswith("models/acme/Widget.yaml:") for line in lines), out
    assert code == 1 and "blocked ungated rows in 1 recipes" in out
    assert judged(repo / "recipes") == {"models/acme/Widget.yaml"}  # a view of the staged recipe
    # a staged strategy file: the whole checkout is judged
    run_hook(repo, *opts, "recipes/strategies/single_node_tp.yaml")
    assert judged(repo / "recipes") == {"models/acme/Widget.yaml", "models/acme/Gadget.yaml",
                                        "models/acme/Sound.yaml"}
    # files outside a recipes checkout are not the hook's
    (repo / "README.md").write_text("x")
    assert run_hook(repo, *opts, "README.md") == (0, "")


@pytest.mark.slow
def test_pre_commit_try_repo_checks_a_changed_recipe(tmp_path: Path, snapshot: Path) -> None:
    """`pre-commit try-repo` installs this repository as the hook (pip, in pre-commit's own venv) and
    runs it on a staged GLM-5.2 change: the mtp x multi_node_tp_pp cause fails the commit."""
    if shutil.which("pre-commit") is None:
        pytest.skip("pre-commit is not installed (pip install pre-commit)")
    work = tmp_path / "recipes"
    work.mkdir()
    for name in ("taxonomy.yaml", "strategies", "src", "platforms.yaml"):
        src = snapshot / name
        if src.is_dir():
            shutil.copytree(src, work / name)
        elif src.exists():
            shutil.copy2(src, work / name)
    (work / "models" / "zai-org").mkdir(parents=True)
    glm = work / "models" / "zai-org" / "GLM-5.2.yaml"
    shutil.copy2(snapshot / "models" / "zai-org" / "GLM-5.2.yaml", glm)

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(work), *args], check=True, capture_output=True)

    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "recipes")
    glm.write_text(glm.read_text().replace('date_updated: 2026-07-12', 'date_updated: 2026-08-01'))
    git("add", str(glm))
    done = subprocess.run(
        ["pre-commit", "try-repo", str(REPO), "vllm-compat", "--files", "models/zai-org/GLM-5.2.yaml"],
        cwd=work, capture_output=True, text=True, timeout=1800)
    print(done.stdout[-3000:], done.stderr[-2000:])
    assert done.returncode == 1, done.stdout + done.stderr
    assert "vllm-compat check" in done.stdout and "Failed" in done.stdout
    assert "models/zai-org/GLM-5.2.yaml:52: spec_decoding:mtp blocks" in done.stdout
