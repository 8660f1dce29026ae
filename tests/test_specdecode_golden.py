"""Static verdicts vs vLLM's own config check (tools/golden/specdecode.py run on the real release).

Each golden case is ModelConfig + ParallelConfig(pipeline_parallel_size=pp) + SpeculativeConfig
built by the installed release on local config.json files (tests/data/hf_configs). We judge the
equivalent `vllm serve` argv with the same config files and require the same outcome:
vLLM error <-> blocked, vLLM ok <-> ok or warning.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compat import api
from compat.store import open_store
from compat.hf import ModelResolver
from compat.recipes import Combination
from compat.verdict.engine import Judge
from compat.verdict.knowledge import load_knowledge

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden"
CONFIGS = HERE / "data" / "hf_configs"
pytestmark = pytest.mark.slow


def _cases(version: str) -> list[dict]:
    path = GOLDEN / f"specdecode-{version}.json"
    if not path.is_file():
        pytest.skip(f"no {path.name} (run tools/golden/make_golden.sh {version})")
    return json.loads(path.read_text())["cases"]


def _argv(case: dict) -> tuple[str, ...]:
    spec: dict = {"method": case["method"], "num_speculative_tokens": 1}
    if case.get("draft"):
        spec["model"] = case["draft"]
    return ("vllm", "serve", case["target"], "--pipeline-parallel-size", str(case["pp"]),
            "--speculative-config", json.dumps(spec))


@pytest.mark.parametrize("version", ["0.23.0", "0.33.0"])
def test_static_verdicts_equal_vllm_config_check(version, vllm_tree, tmp_path):
    cases = _cases(version)
    tree = vllm_tree(version)
    db = tmp_path / "c.db"
    api.scan([version], [], False, db)
    with open_store(db) as facts:
        judge = Judge(load_knowledge(facts, version, tree), ModelResolver(hf_config_dir=CONFIGS))
    mismatches, compared = [], 0
    for case in cases:
        if case.get("outcome") not in ("ok", "error") or case.get("skipped"):
            continue
        c = Combination(recipe="golden", model_id=case["target"], variant="default", strategy="",
                        feature="spec_decoding", mode=case["method"], hardware="", platform="cuda",
                        argvs=(("", _argv(case)),), vllm_pin=version, docker_pin=None, gated=False,
                        omni=False, problems=())
        out = judge.judge(c)
        expected = "blocked" if case["outcome"] == "error" else "ok"
        # The golden check stops at config validation; startup-time gates are not in it.
        got = "ok" if out.config_status == "warning" else out.config_status
        compared += 1
        if got != expected:
            mismatches.append(f"{case['target']} {case['method']} pp={case['pp']} draft={case.get('draft')}: "
                              f"vllm {case['outcome']} ({case.get('exception')}: {(case.get('message') or '')[:80]}) "
                              f"vs static {out.status}: {out.reason}")
    assert compared >= 20
    assert not mismatches, "\n".join(mismatches)
