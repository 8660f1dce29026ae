"""The engine judges every node of a deployment (workers too), evaluating gate rules once per context."""

from __future__ import annotations

from pathlib import Path

import pytest

from compat import api
from compat.store import open_store
from compat.hf import ModelResolver
from compat.recipes import Combination
from compat.sources import tree_from_path
from compat.verdict import gates as vgates
from compat.verdict.engine import Judge
from compat.verdict.knowledge import Knowledge, load_knowledge

HERE = Path(__file__).resolve().parent
MINITREE = HERE / "fixtures" / "minitrees" / "dispatch"
HF = HERE / "fixtures" / "hardening" / "hf"
FLAGS = (
    "--tensor-parallel-size",
    "--pipeline-parallel-size",
    "--nnodes",
    "--node-rank",
    "--master-addr",
    "--headless",
    "--enable-expert-parallel",
)
HEAD = (
    "vllm",
    "serve",
    "acme/PP",
    "--tensor-parallel-size",
    "8",
    "--pipeline-parallel-size",
    "2",
    "--nnodes",
    "2",
    "--node-rank",
    "0",
    "--master-addr",
    "$HEAD_IP",
)
WORKER = HEAD[:-3] + ("1", "--master-addr", "$HEAD_IP", "--headless")


@pytest.fixture()
def knowledge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Knowledge:
    monkeypatch.setenv("COMPAT_CACHE", str(tmp_path / "cache"))
    db = tmp_path / "mini.db"
    api.scan([], [f"{MINITREE}=0.0.1"], False, db)
    with open_store(db) as facts:
        k = load_knowledge(facts, "0.0.1", tree_from_path(f"{MINITREE}=0.0.1"))
    for flag in FLAGS:
        value_type = "bool" if flag in ("--headless", "--enable-expert-parallel") else "str"
        k.flags[flag] = {
            "canonical": flag,
            "value_type": value_type,
            "file": "vllm/x.py",
            "line": 1,
        }
    for r in vgates.rules():
        k.gates[r.id] = {
            "rule_id": r.id,
            "status": "verified",
            "file": "vllm/x.py",
            "line": 1,
            "effect": r.effect,
            "message": r.message,
        }
    return k


def _combo(*argvs: tuple[str, tuple[str, ...]]) -> Combination:
    return Combination(
        recipe="models/acme/PP.yaml",
        model_id="acme/PP",
        variant="default",
        strategy="multi_node_tp_pp",
        feature="",
        mode="",
        hardware="",
        platform="cuda",
        argvs=argvs,
        vllm_pin="0.0.1",
        docker_pin=None,
        gated=False,
        omni=False,
        problems=(),
    )


def test_a_flag_only_the_worker_passes_is_judged(knowledge: Knowledge) -> None:
    del knowledge.flags["--headless"]
    judge = Judge(knowledge, ModelResolver(hf_config_dir=HF))
    head_only = judge.judge(_combo(("", HEAD)))
    both = judge.judge(_combo(("", HEAD), ("worker 1", WORKER)))
    assert not any("--headless" in step for step in head_only.chain)
    assert both.status == "blocked"
    assert "[blocked] worker 1: flag --headless does not exist in vLLM 0.0.1" in both.chain
    assert both.message == "vllm serve: error: unrecognized arguments: --headless"


def test_gate_rules_run_once_for_nodes_sharing_a_context(
    knowledge: Knowledge, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[dict] = []
    real = vgates.apply

    def counting(k: Knowledge, ctx: dict) -> list:
        calls.append(ctx)
        return real(k, ctx)

    monkeypatch.setattr(vgates, "apply", counting)
    models = ModelResolver(hf_config_dir=HF)
    combo = _combo(("", HEAD), ("worker 1", WORKER))
    shared = Judge(knowledge, models).judge(combo)
    assert len(calls) == 1  # head and worker: the same parallel layout, one evaluation
    fresh = [Judge(knowledge, models).judge(_combo(item)) for item in combo.argvs]
    assert len(calls) == 3
    # the cached evaluation gives each node the findings it gets alone
    assert shared.chain == [*fresh[0].chain, *[s for s in fresh[1].chain if "worker 1: " in s]]


def test_model_checks_run_once_per_layout(
    knowledge: Knowledge, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nodes differing only in which node they are share the model checks; roles do not."""
    judge = Judge(knowledge, ModelResolver(hf_config_dir=HF))
    calls: list[str] = []
    real = Judge._model

    def counting(self: Judge, c: Combination, args, facts) -> list:
        calls.append(c.model_id)
        return real(self, c, args, facts)

    monkeypatch.setattr(Judge, "_model", counting)
    nodes = judge.judge(_combo(("", HEAD), ("worker 1", WORKER)))
    assert len(calls) == 1
    other = HEAD[:4] + ("4",) + HEAD[5:]  # another tensor-parallel size: another layout
    judge.judge(_combo(("", HEAD), ("worker 1", other)))
    assert len(calls) == 3
    assert [s for s in nodes.chain if s.startswith("[ok] worker 1: ")] == [
        s.replace("[ok] ", "[ok] worker 1: ", 1) for s in nodes.chain
        if s.startswith("[ok] ") and "worker 1: " not in s
    ]


def test_a_worker_finding_key_carries_its_role(knowledge: Knowledge) -> None:
    """Keys identify a finding across releases; the same check on two nodes is two findings."""
    from dataclasses import replace

    judge = Judge(knowledge, ModelResolver(hf_config_dir=HF))
    nopp = [tuple("acme/NoPP" if a == "acme/PP" else a for a in argv) for argv in (HEAD, WORKER)]
    both = judge.judge(replace(_combo(("", nopp[0]), ("worker 1", nopp[1])), model_id="acme/NoPP"))
    assert both.status == "blocked"
    keys = [key for status, key in both.keys if status == "blocked"]
    assert keys == ["target_pp", "worker 1: target_pp"]  # no PP in the target, on each node
def test_causes_judge_each_omission_once_for_every_node(knowledge: Knowledge) -> None:
    """A finding every node repeats is explained by one re-judging per element, not one per node."""
    from dataclasses import replace

    from compat.verdict.cause import candidates, causes

    judge = Judge(knowledge, ModelResolver(hf_config_dir=HF))
    bogus = ("--bogus-flag", "1")
    combo = replace(_combo(("", HEAD + bogus), ("worker 1", WORKER + bogus)),
                    sources=("model.base_args", "strategy"))
    outcome = judge.judge(combo)
    assert [s for s in outcome.chain if "--bogus-flag" in s] == [
        "[blocked] flag --bogus-flag does not exist in vLLM 0.0.1",
        "[blocked] worker 1: flag --bogus-flag does not exist in vLLM 0.0.1"]

    def render(c: Combination, omit: frozenset[str]) -> Combination:
        if "model.base_args" not in omit:
            return c
        return replace(c, argvs=tuple((r, a[: -len(bogus)]) for r, a in c.argvs))

    judged: list[Combination] = []
    real = judge.judge

    def counting(c: Combination):
        judged.append(c)
        return real(c)

    judge.judge = counting  # type: ignore[method-assign]
    found = causes(combo, outcome, judge, render, lambda key: False)
    assert {x.element for x in found} == {"model.base_args"}
    tried = candidates(combo)
    assert len(judged) == tried.index("model.base_args") + 1  # once per element, both nodes
