"""Incremental builds: a recipe whose inputs did not change is reused, with tables identical to a
full build; a change to what it reads (its file, a strategy, data/, the code, a model's facts)
judges it again."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.cli_kit import run

HERE = Path(__file__).resolve().parent
RECIPES = HERE / "fixtures" / "recipes" / "minimal"
MINI = HERE / "fixtures" / "minitrees" / "dispatch"
HF = HERE / "fixtures" / "hardening" / "hf"

#: The tables a build writes about its verdicts (tools/compare_dbs.py's default).
TABLES = (
    "verdict",
    "cause",
    "verdict_cause",
    "command",
    "draft_mapping",
    "model_fact",
    "recipe_file",
    "shell_variable",
)


@pytest.fixture()
def checkout(tmp_path: Path, isolated_cache: Path) -> dict[str, Path]:
    recipes, hf = tmp_path / "recipes", tmp_path / "hf"
    shutil.copytree(RECIPES, recipes)
    shutil.copytree(HF, hf)
    return {"recipes": recipes, "hf": hf, "tmp": tmp_path}


def build(where: dict[str, Path], name: str, *extra: str) -> tuple[Path, tuple[int, int]]:
    """Build into a fresh database; (its path, (recipes judged, recipes reused))."""
    db = where["tmp"] / f"{name}.db"
    r = run(
        "build",
        "--recipes",
        str(where["recipes"]),
        "--vllm-src",
        f"{MINI}=0.0.1",
        "--hf-config-dir",
        str(where["hf"]),
        "--db",
        str(db),
        *extra,
    )
    assert r.returncode == 0, r.stderr
    m = re.search(r"recipes: (\d+) judged, (\d+) reused", r.stderr)
    assert m, r.stderr  # the progress line says how many recipes were reused and judged
    return db, (int(m.group(1)), int(m.group(2)))


def tables(db: Path) -> dict[str, list[tuple]]:
    con = sqlite3.connect(db)
    try:
        return {t: con.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in TABLES}
    finally:
        con.close()


def full(where: dict[str, Path], name: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A build that reuses nothing (COMPAT_REUSE=0)."""
    with monkeypatch.context() as m:
        m.setenv("COMPAT_REUSE", "0")
        db, (judged, reused) = build(where, name)
    assert (judged, reused) == (3, 0)
    return db


def test_unchanged_inputs_reuse_every_recipe_with_identical_tables(checkout, monkeypatch):
    first, counts = build(checkout, "first")
    assert counts == (3, 0)
    with monkeypatch.context() as m:  # a reused recipe is not even enumerated (its outline is kept)
        m.setattr("compat.recipes.enumerate_recipe", lambda *_a: pytest.fail("enumerated"))
        again, counts = build(checkout, "again")  # a fresh database: the cache is what is reused
    assert counts == (0, 3)
    assert tables(again) == tables(first) == tables(full(checkout, "full", monkeypatch))


def test_an_edited_recipe_alone_is_judged_again(checkout, monkeypatch):
    build(checkout, "first")
    widget = checkout["recipes"] / "models" / "acme" / "Widget.yaml"
    widget.write_text(
        widget.read_text().replace('"--max-model-len", "4096"', '"--max-model-len", "8192"')
    )
    edited, counts = build(checkout, "edited")
    assert counts == (1, 2)
    assert tables(edited) == tables(full(checkout, "full", monkeypatch))


def test_a_strategy_file_change_judges_every_recipe_again(checkout):
    build(checkout, "first")
    strategy = checkout["recipes"] / "strategies" / "single_node_tp.yaml"
    strategy.write_text(strategy.read_text() + "\n# a comment is a change too\n")
    assert build(checkout, "after")[1] == (3, 0)


def test_a_data_file_or_code_change_judges_every_recipe_again(checkout, tmp_path, monkeypatch):
    from compat import resources, reuse

    build(checkout, "first")
    data = tmp_path / "data"
    shutil.copytree(resources.data_dir(), data)
    before = reuse.project_hash()
    monkeypatch.setattr(resources, "data_dir", lambda: data)
    (data / "model_configs.yaml").write_text((data / "model_configs.yaml").read_text() + "\n")
    reuse.project_hash.cache_clear()
    try:
        assert reuse.project_hash() != before  # data/ is part of the project's version
    finally:
        reuse.project_hash.cache_clear()
    monkeypatch.setattr(reuse, "project_hash", lambda: "another version of compat")
    assert build(checkout, "after")[1] == (3, 0)


def test_changed_model_facts_judge_again_only_the_recipes_that_read_them(checkout, monkeypatch):
    build(checkout, "first")
    # acme/Widget-eagle, Widget's EAGLE draft checkpoint, was unknown; now a config says what it is.
    draft = checkout["hf"] / "acme" / "Widget-eagle"
    draft.mkdir()
    (draft / "config.json").write_text(
        json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama"})
    )
    after, counts = build(checkout, "after")
    assert counts == (1, 2)
    assert tables(after) == tables(full(checkout, "full", monkeypatch))


def test_recipes_judged_in_workers_give_the_tables_of_one_process(checkout, monkeypatch):
    import os

    from compat import blocks, workers

    alone = full(checkout, "alone", monkeypatch)
    monkeypatch.setattr(workers, "MIN_PARALLEL", 2)
    monkeypatch.setattr(workers, "cpus", lambda: 2)
    log = checkout["tmp"] / "judged-by"

    def judge_recipe(j, path, combos):  # notes which process judged each recipe
        with log.open("a") as fh:
            fh.write(f"{os.getpid()}\n")
        return blocks.judge_recipe(j, path, combos)

    monkeypatch.setattr(workers, "judge_recipe", judge_recipe)
    parallel = full(checkout, "parallel", monkeypatch)
    pids = log.read_text().split()
    assert len(pids) == 3 and str(os.getpid()) not in pids  # every recipe judged in a worker
    assert tables(parallel) == tables(alone)


def test_a_failing_worker_leaves_its_recipes_to_the_parent(checkout, monkeypatch):
    import os

    from compat import blocks, workers

    alone = full(checkout, "alone", monkeypatch)
    parent = os.getpid()
    monkeypatch.setattr(workers, "MIN_PARALLEL", 2)
    monkeypatch.setattr(workers, "cpus", lambda: 2)

    def judge_recipe(j, path, combos):
        if os.getpid() != parent:
            raise RuntimeError("worker fails (test)")
        return blocks.judge_recipe(j, path, combos)

    monkeypatch.setattr(workers, "judge_recipe", judge_recipe)
    assert tables(full(checkout, "fallback", monkeypatch)) == tables(alone)


def test_workers_fork_with_sigint_and_sigterm_held():
    """A worker terminated before it set its own handlers must not run the parent's (the CLI's
    SIGTERM handler raises SystemExit, which would unwind a copy of the parent's stack)."""
    import os
    import signal

    from compat.forking import signals_held

    with signals_held():
        pid = os.fork()
        if pid == 0:
            held = signal.pthread_sigmask(signal.SIG_BLOCK, [])
            os._exit(0 if {signal.SIGINT, signal.SIGTERM} <= held else 1)
    _pid, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert signal.SIGTERM not in signal.pthread_sigmask(signal.SIG_BLOCK, [])
