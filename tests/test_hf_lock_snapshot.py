"""On the recipes snapshot and real releases: a build from the local Hub and a pinned, offline build
from the lock give the same verdicts and drafts.

The local Hub (tests/fake_hub.py) serves, for each id, one of the real tiny configs in
tests/data/hf_configs whose model_type matches what the offline sources say (so vLLM's
hf_config_override really runs on MTP configs, on the lock's subset the second time), a
generic Llama config otherwise, a gated repo for some ids and nothing for others. It
measures the pipeline, not model truth.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fake_hub import FakeHub

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
CONFIGS = HERE / "data" / "hf_configs"
TOKEN = "hf_SENTINELsnapshot0123456789"
GENERIC = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_attention_heads": 32,
           "num_key_value_heads": 8}


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "compat.cli", *args], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert TOKEN not in r.stdout + r.stderr
    return r


def table(db: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(db) as con:
        return con.execute(sql).fetchall()


def test_lock_reproduces_the_hub_build_offline(tmp_path, snapshot, vllm_tree):
    from compat.api import recipe_model_ids
    from compat.hf import ModelResolver
    from compat.recipes import enumerate_repo, load_repo

    trees = [vllm_tree("0.23.0"), vllm_tree("0.33.0")]
    ids = recipe_model_ids(enumerate_repo(load_repo(snapshot)).combinations)
    tiny = {}
    for d in sorted(CONFIGS.iterdir()):
        cfg = json.loads((d / "config.json").read_text())
        tiny.setdefault(cfg.get("model_type"), cfg)
    offline = ModelResolver(trees=trees)
    versions = ["--vllm", "0.23.0", "--vllm", "0.33.0"]
    with FakeHub() as hub:
        served = {"tiny": 0}
        for i, mid in enumerate(ids):
            if i % 17 == 5:
                continue  # not on the Hub: stays with the offline sources
            cfg = tiny.get(offline.resolve(mid).model_type)
            served["tiny"] += cfg is not None
            hub.add(mid, cfg or GENERIC, token=TOKEN if i % 11 == 3 else None)
        assert served["tiny"] >= 10
        env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
        env.update(HF_ENDPOINT=hub.endpoint, HF_TOKEN=TOKEN, HF_HUB_CACHE=str(tmp_path / "hf"),
                   HF_HOME=str(tmp_path / "home"))
        online, pinned, lock = tmp_path / "online.db", tmp_path / "pinned.db", tmp_path / "lock.json"
        run(["build", "--recipes", str(snapshot), *versions, "--allow-hub", "--db", str(online)], env)
        run(["models", "lock", "--recipes", str(snapshot), *versions, "-o", str(lock)], env)
    gone = dict(env, HF_HUB_OFFLINE="1", HF_ENDPOINT="http://127.0.0.1:9", HF_HUB_CACHE=str(tmp_path / "none"))
    run(["build", "--recipes", str(snapshot), *versions, "--facts-lock", str(lock), "--db", str(pinned)], gone)

    verdicts = ("SELECT vllm_version, platform, hardware, recipe, variant, strategy, feature, mode, status, "
                "message, reason, chain, evidence FROM verdict ORDER BY 1,2,3,4,5,6,7,8")
    drafts = "SELECT * FROM v_draft ORDER BY 1,2,3,4,5,6"
    assert table(pinned, verdicts) == table(online, verdicts)
    assert table(pinned, drafts) == table(online, drafts)
    mtp = table(online, "SELECT count(*) FROM draft_mapping d JOIN model_fact f ON d.detail LIKE "
                        "'%hf_config_override%(model ' || f.model_id || ')' WHERE d.method='mtp' AND f.source='hub'")
    assert mtp[0][0] > 0  # vLLM's hf_config_override ran on hub configs, and on the lock's subset
    facts = table(online, "SELECT source, count(*), sum(revision != '') FROM model_fact GROUP BY 1")
    by_source = {s: (n, revs) for s, n, revs in facts}
    assert by_source["hub"][0] == by_source["hub"][1] > 200  # every hub fact has its commit
    doc = json.loads(lock.read_text())
    assert doc["sources"]["transformers"] and set(doc["sources"]["vllm"]) >= {"0.23.0", "0.33.0"}
    for path in (online, pinned, lock):
        assert TOKEN.encode() not in path.read_bytes()
