"""Static verdicts vs real vLLM on the recipes' speculative-decoding configs.

tests/golden/specdecode-recipes-<ver>.json (tools/golden/specdecode_recipes.py) holds what each
release does with `vllm serve <tiny target> --pipeline-parallel-size pp --speculative-config ...`
for the methods, num_speculative_tokens values and drafts the recipes use, every method name the
releases accept, and values the validators reject. tools/golden/compare_specdecode.py prints the
comparison with the engine; this test keeps it from getting worse: every case the engine agrees
on today must keep agreeing (vLLM error <-> blocked, vLLM ok <-> ok or warning; a block only by a
startup gate, a check past the stages the golden run executes, is not compared). The cases it
disagrees on today are listed in tests/data/specdecode_recipes_known.json (written by
`compare_specdecode.py --write-known`; tools/golden/README.md names the vLLM mechanism behind
each class); one that starts agreeing needs no change here.
"""

from __future__ import annotations

import importlib.util
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
pytestmark = pytest.mark.slow

_spec = importlib.util.spec_from_file_location(
    "compare_specdecode", HERE.parent / "tools" / "golden" / "compare_specdecode.py")
compare = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compare)

KNOWN_PATH = HERE / "data" / "specdecode_recipes_known.json"  # compare_specdecode.py --write-known


def _doc(version: str) -> dict:
    path = GOLDEN / f"specdecode-recipes-{version}.json"
    if not path.is_file():
        pytest.skip(f"no {path.name} (run tools/golden/make_specdecode_recipes.sh {version})")
    return json.loads(path.read_text())


@pytest.mark.parametrize("version", ["0.7.3", "0.17.0", "0.25.0", "0.33.0"])
def test_recipes_speculative_configs_agree_with_vllm(version, vllm_tree, tmp_path):
    doc = _doc(version)
    known = set(json.loads(KNOWN_PATH.read_text()).get(version, [])) if KNOWN_PATH.is_file() else set()
    tree = vllm_tree(version)
    db = tmp_path / "c.db"
    api.scan([version], [], False, db)
    with open_store(db) as facts:
        judge = Judge(load_knowledge(facts, version, tree), ModelResolver(hf_config_dir=compare.lay_out(tmp_path)))
    compared, new = 0, []
    for case in doc["cases"]:
        if case.get("outcome") not in ("ok", "error") or compare.env_limited(case):
            continue
        argv = compare.command(case)
        combo = Combination(recipe="", model_id=argv[2], variant="", strategy="", feature="", mode="",
                            hardware="", platform="cuda", argvs=(("", tuple(argv)),), vllm_pin="",
                            docker_pin=None, gated=False, omni=False, problems=())
        out = judge.judge(combo)
        compared += 1
        cls = compare.classify(case["outcome"], out.status, out)
        if cls is not None and cls != "s" and case["id"] not in known:
            new.append(f"({cls}) {case['id']}: vllm {case['outcome']} at {case.get('stage')} "
                       f"({case.get('exception')}: {(case.get('message') or '')[:100]}) vs {out.status}: "
                       f"{out.message[:100]}")
    assert compared >= 50
    assert not new, "\n".join(new)
