"""The HF Hub through the real huggingface_hub client, pointed at a local resolve API (tests/fake_hub.py).

Client level: every failure kind is its own reason naming the id, the commit sha is
recorded, the HF cache answers offline. Product level (the installed CLI in a
subprocess, HF_ENDPOINT / HF_TOKEN / HF_HUB_OFFLINE / HF_HUB_CACHE in its environment):
a build from the hub, a lock, an offline build from the lock with the same verdicts,
and a sentinel token that appears in no database, lock or log line. Mistakes that are
refused before any Hub is asked (a bad lock, a usage error) run in-process.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat.hf import ModelResolver
from compat.hf.hub import HubClient
from tests import cli_kit
from tests.fake_hub import FakeHub, Repo, sha_of

HERE = Path(__file__).resolve().parent
MINIMAL = HERE / "fixtures" / "recipes" / "minimal"
MINITREE = HERE / "fixtures" / "minitrees" / "mini_current"
TOKEN = "hf_SENTINELtoken0123456789abcdefXYZ"
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_attention_heads": 8,
         "num_key_value_heads": 2, "num_hidden_layers": 4}


def client(hub: FakeHub, tmp_path: Path, **kw) -> HubClient:
    kw.setdefault("token", False)
    return HubClient(endpoint=hub.endpoint, cache_dir=tmp_path / "hf-cache", timeout=1, **kw)


# -- client: one reason per failure kind ---------------------------------------------------


def test_config_by_repo_and_revision(tmp_path):
    with FakeHub() as hub:
        repo = hub.add("acme/Open", LLAMA)
        res = client(hub, tmp_path).fetch("acme/Open")
        pinned = client(hub, tmp_path).fetch("acme/Open", revision=repo.commit)
        wrong = client(hub, tmp_path / "other").fetch("acme/Open", revision=sha_of("nope"))
    assert (res.kind, res.revision, res.config) == ("ok", repo.commit, LLAMA)
    assert res.url.endswith(f"/acme/Open/resolve/{repo.commit}/config.json")
    assert (pinned.kind, pinned.revision) == ("ok", repo.commit)
    assert wrong.kind == "not_found" and "acme/Open has no such revision" in wrong.reason
    # the HF cache is laid out the way huggingface_hub writes it
    snap = tmp_path / "hf-cache" / "models--acme--Open" / "snapshots" / repo.commit / "config.json"
    assert json.loads(snap.read_text()) == LLAMA
    assert (tmp_path / "hf-cache" / "models--acme--Open" / "refs" / "main").read_text() == repo.commit


def test_each_failure_has_its_own_reason_naming_the_id(tmp_path):
    with FakeHub() as hub:
        hub.add("acme/Gated", LLAMA, token=TOKEN)
        hub.add("acme/Slow", LLAMA, delay=3)
        hub.add("acme/NotJson", b"<html>rate limited</html>")
        hub.repos["acme/NoConfig"] = Repo({}, sha_of("empty"))
        ids = ["acme/Gated", "acme/Missing", "acme/NoConfig", "acme/Slow", "acme/NotJson"]
        anonymous = client(hub, tmp_path).fetch_many(ids, progress=False)
        with_token = client(hub, tmp_path / "t", token=TOKEN).fetch("acme/Gated")
        wrong_token = client(hub, tmp_path / "w", token="hf_wrong").fetch("acme/Gated")
    kinds = {mid: r.kind for mid, r in anonymous.items()}
    assert kinds == {"acme/Gated": "gated", "acme/Missing": "not_found", "acme/NoConfig": "no_config",
                     "acme/Slow": "timeout", "acme/NotJson": "invalid_json"}
    reasons = [r.reason for r in anonymous.values()]
    assert len(set(reasons)) == len(reasons)
    for mid, r in anonymous.items():
        assert mid in r.reason and r.config is None
    assert "HTTP 401" in anonymous["acme/Gated"].reason
    assert (wrong_token.kind, "HTTP 403" in wrong_token.reason) == ("gated", True)
    assert with_token.kind == "ok" and with_token.config == LLAMA
    assert TOKEN not in " ".join(reasons + [wrong_token.reason or ""])


def test_fetches_run_concurrently(tmp_path):
    with FakeHub() as hub:
        for i in range(8):
            hub.add(f"acme/Slowish-{i}", LLAMA, delay=0.5)
        import time

        t0 = time.perf_counter()
        res = client(hub, tmp_path, workers=8).fetch_many([f"acme/Slowish-{i}" for i in range(8)],
                                                           progress=False)
        took = time.perf_counter() - t0
    assert all(r.kind == "ok" for r in res.values())
    assert took < 8 * 0.5 * 2  # two delayed requests per id; serial would take 8 s


def _hand_made_cache(root: Path, model_id: str, config: dict, commit: str) -> None:
    """An HF cache as huggingface_hub writes it: blobs/<etag>, snapshots/<sha>/config.json -> blob, refs/main."""
    repo = root / ("models--" + model_id.replace("/", "--"))
    body = json.dumps(config).encode()
    blob = repo / "blobs" / sha_of(body.decode())
    blob.parent.mkdir(parents=True)
    blob.write_bytes(body)
    snap = repo / "snapshots" / commit
    snap.mkdir(parents=True)
    (snap / "config.json").symlink_to(os.path.relpath(blob, snap))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)


def test_hf_cache_offline_resolves_without_network(tmp_path):
    commit = sha_of("cached")
    _hand_made_cache(tmp_path / "hub", "acme/Cached", LLAMA, commit)
    hub = HubClient(endpoint="http://127.0.0.1:9", cache_dir=tmp_path / "hub", offline=True)
    res = hub.fetch("acme/Cached")
    assert (res.kind, res.revision, res.config) == ("ok", commit, LLAMA)
    miss = hub.fetch("acme/NotCached")
    assert miss.kind == "offline" and "acme/NotCached" in miss.reason
    facts = ModelResolver(allow_hub=True, hub=hub).resolve("acme/Cached")
    assert (facts.source, facts.architecture, facts.revision) == ("hub", "LlamaForCausalLM", commit)
    # --hf-config-dir reads the same cache, and records the snapshot's revision too
    local = ModelResolver(hf_config_dir=tmp_path / "hub").resolve("acme/Cached")
    assert (local.source, local.revision) == ("local", commit)


def test_unreachable_hub_falls_back_to_the_cache(tmp_path):
    commit = sha_of("cached")
    _hand_made_cache(tmp_path / "hub", "acme/Cached", LLAMA, commit)
    res = HubClient(endpoint="http://127.0.0.1:9", cache_dir=tmp_path / "hub", offline=False,
                    timeout=1).fetch("acme/Cached")
    assert (res.kind, res.revision) == ("ok", commit)


# -- the product: CLI in a subprocess, huggingface_hub configured by its environment ---------


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compat.cli", *args], capture_output=True,
                          text=True, env=env, timeout=300)


def verdicts(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as con:
        return con.execute("SELECT vllm_version, platform, hardware, recipe, variant, strategy, feature, "
                           "mode, status, message, reason FROM v_verdict ORDER BY 1,2,3,4,5,6,7,8").fetchall()


@contextlib.contextmanager
def _hub_env(base: Path, cache: Path) -> Iterator[tuple[FakeHub, dict[str, str]]]:
    with FakeHub() as hub:
        hub.add("acme/Widget", {**LLAMA, "num_nextn_predict_layers": 1}, token=TOKEN)  # gated
        hub.add("acme/Gadget", b"{not json")
        hub.add("acme/Widget-eagle", {"architectures": ["EagleLlamaForCausalLM"], "model_type": "eagle"})
        env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
        env.update(HF_ENDPOINT=hub.endpoint, HF_TOKEN=TOKEN, HF_HUB_CACHE=str(base / "hf-cache"),
                   HF_HOME=str(base / "hf-home"), COMPAT_CACHE=str(cache))
        yield hub, env


@pytest.fixture()
def hub_env(tmp_path, isolated_cache):
    with _hub_env(tmp_path, isolated_cache) as found:
        yield found


@pytest.fixture(scope="module")
def good_lock(tmp_path_factory) -> dict:
    """A lock of the minimal recipes written by `compat models lock` from the local Hub."""
    base = tmp_path_factory.mktemp("good-lock")
    lock = base / "model-facts.lock.json"
    with _hub_env(base, base / "cache") as (_hub, env):
        r = run(["models", "lock", "--recipes", str(MINIMAL), "--vllm-src", f"{MINITREE}=0.0.1",
                 "-o", str(lock)], env)
    assert r.returncode == 0, r.stderr
    return json.loads(lock.read_text())


def test_build_lock_and_offline_rebuild_from_the_lock(tmp_path, hub_env):
    hub, env = hub_env
    src = ["--vllm-src", f"{MINITREE}=0.0.1"]
    online = tmp_path / "online.db"
    r = run(["build", "--recipes", str(MINIMAL), *src, "--allow-hub", "--db", str(online)], env)
    assert r.returncode == 0, r.stderr
    lock = tmp_path / "model-facts.lock.json"
    r2 = run(["models", "lock", "--recipes", str(MINIMAL), *src, "-o", str(lock)], env)
    assert r2.returncode == 0, r2.stderr
    doc = json.loads(lock.read_text())
    widget = doc["models"]["acme/Widget"]
    assert (widget["source"], widget["revision"]) == ("hub", hub.repos["acme/Widget"].commit)
    assert widget["facts"]["architectures"] == ["LlamaForCausalLM"]
    assert widget["config"]["num_nextn_predict_layers"] == 1
    assert "num_hidden_layers" not in widget["config"] or "num_hidden_layers" in doc["config_keys"]
    assert "acme/Widget-eagle" in doc["models"]  # draft checkpoints are locked too
    gadget = doc["models"]["acme/Gadget"]
    assert gadget["status"] == "unknown" and "config.json of acme/Gadget is not valid JSON" in gadget["reason"]

    # Offline, the Hub gone: the lock alone reproduces every verdict.
    offline_env = dict(env, HF_HUB_OFFLINE="1", HF_ENDPOINT="http://127.0.0.1:9",
                       HF_HUB_CACHE=str(tmp_path / "empty-cache"))
    pinned = tmp_path / "pinned.db"
    r3 = run(["build", "--recipes", str(MINIMAL), *src, "--facts-lock", str(lock), "--db", str(pinned)],
             offline_env)
    assert r3.returncode == 0, r3.stderr
    assert verdicts(pinned) == verdicts(online)
    with sqlite3.connect(pinned) as con:
        rev = con.execute("SELECT revision FROM model_fact WHERE model_id='acme/Widget'").fetchone()[0]
    assert rev == hub.repos["acme/Widget"].commit

    # The sentinel token is nowhere: databases, the lock, any output.
    for path in (online, pinned, lock):
        assert TOKEN.encode() not in path.read_bytes()
    for proc in (r, r2, r3):
        assert TOKEN not in proc.stdout + proc.stderr
    assert f"Bearer {TOKEN}" in hub.seen_auth  # it was sent, to the Hub only


def test_outdated_names_the_ids_that_moved(tmp_path, hub_env):
    hub, env = hub_env
    lock = tmp_path / "model-facts.lock.json"
    src = ["--vllm-src", f"{MINITREE}=0.0.1"]
    assert run(["models", "lock", "--recipes", str(MINIMAL), *src, "-o", str(lock)], env).returncode == 0
    same = run(["models", "outdated", "--lock", str(lock)], env)
    assert same.returncode == 0 and "0 changed" in same.stdout, same.stdout + same.stderr
    hub.add("acme/Widget", {**LLAMA, "num_nextn_predict_layers": 2}, token=TOKEN)  # a new commit
    moved = run(["models", "outdated", "--lock", str(lock), "--format", "json"], env)
    assert moved.returncode == 1, moved.stderr
    rows = {r["model_id"]: r for r in json.loads(moved.stdout)}
    assert rows["acme/Widget"]["state"] == "changed"
    assert rows["acme/Widget"]["upstream"] == hub.repos["acme/Widget"].commit
    assert rows["acme/Widget-eagle"]["state"] == "unchanged"
    assert TOKEN not in moved.stdout + moved.stderr


def test_relock_of_an_unchanged_checkout_changes_nothing(tmp_path, hub_env):
    _hub, env = hub_env
    lock = tmp_path / "model-facts.lock.json"
    src = ["--vllm-src", f"{MINITREE}=0.0.1"]
    assert run(["models", "lock", "--recipes", str(MINIMAL), *src, "-o", str(lock)], env).returncode == 0
    doc = json.loads(lock.read_text())
    for e in doc["models"].values():
        e["date"] = "2020-01-01"
    lock.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    before = lock.read_text()
    assert run(["models", "lock", "--recipes", str(MINIMAL), *src, "-o", str(lock)], env).returncode == 0
    assert lock.read_text() == before


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d.update(lock_version=7), "field lock_version"),
        (lambda d: d["models"]["acme/Widget"].update(revision="main"), "field models/acme/Widget/revision"),
        (lambda d: d["models"]["acme/Widget"]["facts"].update(num_experts="many"),
         "field models/acme/Widget/facts/num_experts"),
        (lambda d: d["models"].update({"not an id": {}}), "field models"),
    ],
)
def test_bad_lock_is_one_line_naming_file_and_field(tmp_path, isolated_cache, good_lock, mutate, field):
    lock = tmp_path / "model-facts.lock.json"
    src = ["--vllm-src", f"{MINITREE}=0.0.1"]
    doc = copy.deepcopy(good_lock)
    mutate(doc)
    lock.write_text(json.dumps(doc))
    db = tmp_path / "x.db"
    r = cli_kit.run("build", "--recipes", str(MINIMAL), *src, "--facts-lock", str(lock), "--db", str(db))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and str(lock) in lines[0] and field in lines[0], r.stderr
    assert not db.exists()


def test_lock_that_is_not_json(tmp_path, isolated_cache):
    lock = tmp_path / "broken.lock.json"
    lock.write_text('{"lock_version": 1,')
    r = cli_kit.run("build", "--recipes", str(MINIMAL), "--vllm-src", f"{MINITREE}=0.0.1", "--facts-lock",
                    str(lock), "--db", str(tmp_path / "x.db"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "not valid JSON (line 1" in r.stderr


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["models"], "compat models: missing command (lock, outdated)"),
        (["models", "outdated", "--lock", "no-such.lock.json"], "no-such.lock.json: cannot read the facts lock"),
        (["models", "outdated", "--format", "yaml"], "unknown format 'yaml'"),
        (["models", "lock"], "Missing option '--recipes'"),
    ],
)
def test_models_usage_mistakes_are_one_line_exit_2(tmp_path, args, text):
    r = cli_kit.run(*args, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and text in r.stderr, r.stderr
