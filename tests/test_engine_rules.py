"""The engine's rules as input/output tables: one argv, one release, one model -> status and finding.

Every rule has a row where it fires and a row where it must not, so switching any rule
off (target PP, draft PP, method legality, EP needs MoE, unknown flags, parser names)
fails this file, not only the slow end-to-end tests.
"""

from __future__ import annotations

import json

import pytest

from compat.recipes import Combination
from compat.verdict.engine import Judge
from tests.engine_kit import MODELS, release

EAGLE3 = json.dumps({"method": "eagle3", "model": "acme/eagle3-nopp", "num_speculative_tokens": 2})
EAGLE3_PP = json.dumps({"method": "eagle3", "model": "acme/eagle3-pp", "num_speculative_tokens": 2})
DSPARK = json.dumps({"method": "dspark", "model": "acme/eagle3-pp"})
EAGLE3_UNREG = json.dumps({"method": "eagle3", "model": "acme/eagle3-unregistered", "num_speculative_tokens": 2})
NGRAM = json.dumps({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 4})


def combo(model: str, *args: str) -> Combination:
    return Combination(recipe="models/acme/x.yaml", model_id=model, variant="default", strategy="s",
                       feature="", mode="", hardware="", platform="cuda",
                       argvs=(("", ("vllm", "serve", model, *args)),), vllm_pin="0.1.0", docker_pin=None,
                       gated=False, omni=False, problems=())


# (rule, release options, model, args, expected status, finding key that must be present or None)
CASES = [
    ("target_pp fires", {}, "acme/dense-nopp", ("--pipeline-parallel-size", "2"), "blocked", "target_pp"),
    ("target_pp quiet at PP 1", {}, "acme/dense-nopp", ("--tensor-parallel-size", "8"), "ok", None),
    ("target_pp quiet on a PP class", {}, "acme/dense-pp", ("--pipeline-parallel-size", "2"), "ok", None),
    ("draft_pp fires", {}, "acme/moe-pp", ("--pipeline-parallel-size", "2", "--speculative-config", EAGLE3),
     "blocked", "draft_pp:eagle3"),
    ("draft_pp quiet when the draft PP is forced to 1", {"draft_pp": "one"}, "acme/moe-pp",
     ("--pipeline-parallel-size", "2", "--speculative-config", EAGLE3), "ok", None),
    ("draft_pp quiet on a PP draft", {}, "acme/moe-pp",
     ("--pipeline-parallel-size", "2", "--speculative-config", EAGLE3_PP), "ok", None),
    ("draft_pp quiet at PP 1", {}, "acme/moe-pp", ("--speculative-config", EAGLE3), "ok", None),
    ("draft class unregistered, at PP 1 too", {}, "acme/moe-pp", ("--speculative-config", EAGLE3_UNREG),
     "unknown", None),
    ("method legality fires", {}, "acme/moe-pp", ("--speculative-config", DSPARK), "blocked", "spec_method:dspark"),
    ("method legality quiet", {"methods": ("eagle3", "ngram", "dspark")}, "acme/moe-pp",
     ("--speculative-config", NGRAM), "ok", None),
    ("ep needs moe fires", {}, "acme/dense-pp", ("--enable-expert-parallel",), "blocked", "ep_moe"),
    ("ep needs moe quiet on moe", {}, "acme/moe-pp", ("--enable-expert-parallel",), "ok", None),
    ("ep unknown experts", {}, "acme/experts-unknown", ("--enable-expert-parallel",), "unknown", None),
    ("unknown flag fires", {"drop": ("--nnodes",)}, "acme/moe-pp", ("--nnodes", "2"), "blocked", "flag:--nnodes"),
    ("known flag quiet", {}, "acme/moe-pp", ("--nnodes", "2"), "ok", None),
    ("tool parser fires", {}, "acme/moe-pp", ("--enable-auto-tool-choice", "--tool-call-parser", "nope"),
     "blocked", "parser:tool:nope"),
    ("tool parser checked only with auto tool choice", {}, "acme/moe-pp", ("--tool-call-parser", "nope"), "ok", None),
    ("model unresolved", {}, "acme/who-knows", ("--tensor-parallel-size", "8"), "unknown", None),
]


@pytest.mark.parametrize("rule,opts,model,args,status,key", CASES, ids=[c[0] for c in CASES])
def test_rule(rule: str, opts: dict, model: str, args: tuple[str, ...], status: str, key: str | None) -> None:
    o = Judge(release("0.1.0", **opts), MODELS).judge(combo(model, *args))
    assert o.status == status, (rule, o.chain)
    if key is not None:
        assert ("blocked", key) in o.keys, (rule, o.keys)


def test_finding_keys_are_release_independent() -> None:
    """The same failure has the same key at every release (what bisection and causes compare)."""
    a = Judge(release("0.1.0", drop=("--nnodes",)), MODELS).judge(combo("acme/moe-pp", "--nnodes", "2"))
    b = Judge(release("0.9.0", drop=("--nnodes",)), MODELS).judge(combo("acme/moe-pp", "--nnodes", "2"))
    assert a.keys == b.keys and a.chain != b.chain  # the wording names the release; the key does not


def test_a_verdict_decided_without_the_config_never_marks_that_step_ok() -> None:
    """vLLM lists the id under several architectures that all agree: the step is a note, not [ok]."""
    from compat.hf.facts import ModelFacts
    from tests.engine_kit import Models

    class Candidates(Models):
        def resolve(self, model_id: str) -> ModelFacts:
            if model_id == "acme/two-archs":
                return ModelFacts(model_id, "unknown", reason="no config", candidates=("NoPPModel", "NoPPModel"))
            return super().resolve(model_id)

    o = Judge(release("0.1.0"), Candidates(MODELS.known)).judge(
        combo("acme/two-archs", "--pipeline-parallel-size", "2"))
    assert o.status == "blocked"
    unresolved = [s for s in o.chain if "model config of acme/two-archs unresolved" in s]
    assert unresolved and all(s.startswith("[note] ") for s in unresolved), o.chain


class _FailingOverride:
    """hf_config_override as the sandbox would report vLLM raising on the config it was given."""

    available = True

    def run(self, config: dict) -> object:
        from types import SimpleNamespace

        return SimpleNamespace(status="error", detail="ValueError: The checkpoint does not contain MTP weights.",
                               model_type=None, architectures=(), line=0)


@pytest.mark.parametrize("nextn,status", [(None, "unknown"), (0, "blocked")])
def test_mtp_error_on_a_config_rebuilt_without_its_mtp_layers_is_unknown(nextn: int | None, status: str) -> None:
    """Facts without a config.json and without the MTP layer count cannot tell vLLM's error about
    a missing field from one about a missing model part; a known count of 0 can."""
    from dataclasses import replace

    from tests.engine_kit import Models

    class WithNextn(Models):
        def resolve(self, model_id: str):
            return replace(super().resolve(model_id), num_nextn_predict_layers=nextn)

    k = release("0.1.0", methods=("mtp", "ngram"))
    k._runner = _FailingOverride()
    k.mtp_types = {"mtp"}
    o = Judge(k, WithNextn(MODELS.known)).judge(combo("acme/moe-pp", "--speculative-config",
                                                       json.dumps({"method": "mtp", "num_speculative_tokens": 1})))
    assert o.status == status, o.chain
