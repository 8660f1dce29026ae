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

EAGLE3 = json.dumps({"method": "eagle3", "model": "acme/eagle3-nopp", "num_speculative_tokens": 1})
EAGLE3_PP = json.dumps({"method": "eagle3", "model": "acme/eagle3-pp", "num_speculative_tokens": 1})
DSPARK = json.dumps({"method": "dspark", "model": "acme/eagle3-pp"})
EAGLE3_NO_COUNT = json.dumps({"method": "eagle3", "model": "acme/eagle3-pp"})
NGRAM_NO_COUNT = json.dumps({"method": "ngram", "prompt_lookup_max": 4})
EAGLE3_UNREG = json.dumps({"method": "eagle3", "model": "acme/eagle3-unregistered", "num_speculative_tokens": 1})
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
    ("token count absent fires", {}, "acme/moe-pp", ("--speculative-config", NGRAM_NO_COUNT),
     "blocked", "spec_tokens:verify_missing"),
    ("token count absent, draft config unread: unknown", {}, "acme/moe-pp",
     ("--speculative-config", EAGLE3_NO_COUNT), "unknown", None),
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


# ------------------------------------------------------------------ issue 16 mechanisms
EAGLE3_NOPP_TARGET = json.dumps({"method": "eagle3", "model": "acme/eagle3-pp", "num_speculative_tokens": 1})
LOCAL_ARGMAX = json.dumps({"method": "eagle3", "model": "acme/eagle3-pp", "num_speculative_tokens": 1,
                           "use_local_argmax_reduction": True})
LOCAL_ARGMAX_PROB = json.dumps({**json.loads(LOCAL_ARGMAX), "draft_sample_method": "probabilistic"})
LOCAL_ARGMAX_GREEDY = json.dumps({**json.loads(LOCAL_ARGMAX), "draft_sample_method": "greedy"})


def _with(k, *, runner: str | None = None, gates: tuple[str, ...] = (), lookups: dict | None = None,
          eagle3_target: bool | None = None, cap: dict | None = None, command: str | None = "vllm/scripts.py",
          server: str | None = "vllm/entrypoints/openai/api_server.py", top_tokens: tuple[str, ...] | None = None):
    """A release with the runner it starts, verified gates, where it looks reasoning parsers up, and
    the classes with `get_top_tokens` (None: not scanned)."""
    k.release_facts["serve_command"] = {"module": command, "server": server}
    if top_tokens is not None:
        k.release_facts["class_attr_scans"] = {"get_top_tokens": "ok"}
        k.class_attrs["get_top_tokens"] = [{"class_name": c, "file": "vllm/models/x.py"} for c in top_tokens]
    if runner is not None:
        k.release_facts["runner_default"] = {"mode": runner}
    for g in gates:
        k.gates[g] = {"status": "verified", "file": "vllm/v1/worker/gpu_model_runner.py", "line": 1}
    if lookups is not None:
        k.release_facts["reasoning_parser_lookups"] = lookups
    if eagle3_target is not None:
        for (_p, _a), row in k.caps.items():
            row["supports_eagle3"] = int(eagle3_target)
    for (_p, _a), row in k.caps.items():
        row.update(cap or {})
    return k


MECHANISMS = [
    # the runner read from the release decides rules conditioned on it; undecided is unknown
    ("runner v1 decides the eagle3 interface rule", dict(runner="v1", gates=("eagle3-interface-v1-runner",),
                                                          eagle3_target=False),
     ("--speculative-config", EAGLE3_NOPP_TARGET), "blocked", "gate:eagle3-interface-v1-runner"),
    ("quiet on a target with SupportsEagle3", dict(runner="v1", gates=("eagle3-interface-v1-runner",),
                                                   eagle3_target=True),
     ("--speculative-config", EAGLE3_NOPP_TARGET), "ok", None),
    ("quiet where V0 runs", dict(runner="v0", gates=("eagle3-interface-v1-runner",), eagle3_target=False),
     ("--speculative-config", EAGLE3_NOPP_TARGET), "ok", None),
    ("V1 or the V0 fallback: undecided, unknown", dict(runner="v1_or_v0", gates=("eagle3-interface-v1-runner",),
                                                       eagle3_target=False),
     ("--speculative-config", EAGLE3_NOPP_TARGET), "unknown", None),
    # a headless node never looks the tool parser up; the reasoning parser only where the release does
    ("headless node: no tool parser lookup", {}, ("--headless", "--enable-auto-tool-choice",
                                                  "--tool-call-parser", "nope"), "ok", None),
    ("headless node: reasoning looked up while building the config",
     dict(lookups={"config": ["vllm/config/reasoning.py:1"], "engine_core": []}),
     ("--headless", "--reasoning-parser", "nope"), "blocked", "parser:reasoning:nope"),
    ("headless node: reasoning not looked up", dict(lookups={"config": [], "engine_core": ["x.py:1"]}),
     ("--headless", "--reasoning-parser", "nope"), "ok", None),
    ("headless data-parallel node runs an engine core", dict(lookups={"config": [], "engine_core": ["x.py:1"]}),
     ("--headless", "--data-parallel-size", "2", "--reasoning-parser", "nope"), "blocked",
     "parser:reasoning:nope"),
    # the class decides, as vLLM tests it: SupportsLoRA, MixtureOfExperts in the MRO
    ("--enable-lora on a class without SupportsLoRA", dict(runner="v1", gates=("lora-needs-supports-lora",),
                                                          cap={"supports_lora": 0}),
     ("--enable-lora",), "blocked", "gate:lora-needs-supports-lora"),
    ("--enable-lora on a SupportsLoRA class", dict(runner="v1", gates=("lora-needs-supports-lora",),
                                                  cap={"supports_lora": 1}), ("--enable-lora",), "ok", None),
    ("--enable-eplb on a class that is not MoE", dict(runner="v1", gates=("eplb-needs-moe-class",),
                                                     cap={"is_moe": 0}),
     ("--enable-eplb",), "blocked", "gate:eplb-needs-moe-class"),
    ("--enable-eplb on a MoE class", dict(runner="v1", gates=("eplb-needs-moe-class",), cap={"is_moe": 1}),
     ("--enable-eplb",), "ok", None),
    # the chat endpoint's own check (0.6.0-0.6.2, where `vllm serve` runs no validate stage)
    ("--enable-auto-tool-choice without a parser", dict(runner="v1", gates=("auto-tool-choice-needs-parser",)),
     ("--enable-auto-tool-choice",), "blocked", "gate:auto-tool-choice-needs-parser"),
    ("--enable-auto-tool-choice with a parser", dict(runner="v1", gates=("auto-tool-choice-needs-parser",)),
     ("--enable-auto-tool-choice", "--tool-call-parser", "hermes"), "ok", None),
    # create_engine_config's enum lookup of --attention-backend, replayed with AttentionConfig's
    # validator (tests/test_post_init.py runs it at real releases): without the schema, undecided
    ("--attention-backend, AttentionConfig unknown: undecided", dict(runner="v1", gates=("attention-backend-not-in-enum",)),
     ("--attention-backend", "FLASH_ATTN"), "unknown", None),
    ("no --attention-backend: nothing to convert", dict(runner="v1", gates=("attention-backend-not-in-enum",)),
     ("-tp", "1"), "ok", None),
    # a release without the `vllm` command (0.4.x) starts no `vllm serve` at all
    ("no vllm command", dict(command=None), ("-tp", "1"), "blocked", "arg:no-vllm-command"),
    ("a tree showing neither the command nor the server decides nothing", dict(command=None, server=None),
     ("-tp", "1"), "ok", None),
    # what the drafter demands when it loads the draft: get_top_tokens() for local argmax reduction
    ("local argmax on a draft without get_top_tokens", dict(runner="v1", gates=("local-argmax-needs-top-tokens",),
                                                          top_tokens=("PPModel",)),
     ("--speculative-config", LOCAL_ARGMAX), "blocked", "gate:local-argmax-needs-top-tokens"),
    ("local argmax on a draft with get_top_tokens", dict(runner="v1", gates=("local-argmax-needs-top-tokens",),
                                                       top_tokens=("Eagle3PP",)),
     ("--speculative-config", LOCAL_ARGMAX), "ok", None),
    ("local argmax, draft methods not scanned: unknown", dict(runner="v1", gates=("local-argmax-needs-top-tokens",)),
     ("--speculative-config", LOCAL_ARGMAX), "unknown", None),
    ("no local argmax: nothing demanded", dict(runner="v1", gates=("local-argmax-needs-top-tokens",)),
     ("--speculative-config", EAGLE3_NOPP_TARGET), "ok", None),
    ("V2: local argmax with probabilistic drafts", dict(runner="v2", gates=("local-argmax-probabilistic-v2",)),
     ("--speculative-config", LOCAL_ARGMAX_PROB), "blocked", "gate:local-argmax-probabilistic-v2"),
    ("V2: local argmax with greedy drafts", dict(runner="v2", gates=("local-argmax-probabilistic-v2",)),
     ("--speculative-config", LOCAL_ARGMAX_GREEDY), "ok", None),
    ("V2: local argmax, sampling left to the default: undecided", dict(runner="v2",
                                                                      gates=("local-argmax-probabilistic-v2",)),
     ("--speculative-config", LOCAL_ARGMAX), "unknown", None),
    # an unverified argv rewrite: argparse's unique prefixes, ambiguous ones unknown
    ("a unique abbreviation is the option", {}, ("--tensor-par", "8"), "ok", None),
    ("an ambiguous abbreviation is unknown", {}, ("--data-parallel", "2"), "unknown", None),
]


@pytest.mark.parametrize("rule,opts,args,status,key", MECHANISMS, ids=[c[0] for c in MECHANISMS])
def test_mechanism(rule: str, opts: dict, args: tuple[str, ...], status: str, key: str | None) -> None:
    k = _with(release("0.1.0", methods=("eagle3", "ngram"), flags=("--attention-backend",)), **opts)
    o = Judge(k, MODELS).judge(combo("acme/dense-pp", *args))
    assert o.status == status, (rule, o.chain)
    if key is not None:
        assert ("blocked", key) in o.keys, (rule, o.keys)


@pytest.mark.parametrize("image,foreign", [
    ("eugr/spark-vllm-b12x:latest", "eugr/spark-vllm-b12x:latest"),  # a fork's build
    ("quay.io/ascend/vllm-ascend:qwen3.8-a5", "quay.io/ascend/vllm-ascend:qwen3.8-a5"),
    ("vllm/vllm-openai:v0.25.0", None),
    ("vllm/vllm-openai:qwen38", None),  # vLLM's own image, a launch tag: judged at the recipe's pin
    ("docker pull vllm/vllm-openai-rocm:nightly", None),
    ("", None),
])
def test_a_command_run_in_a_foreign_image_is_unknown(image: str, foreign: str | None) -> None:
    """Which vLLM a vendor's or a fork's image holds is unknown: its commands are not judged
    against a release (DeepSeek-V4-Flash's DGX Spark override names a backend no release has)."""
    from dataclasses import replace

    from compat.recipes.hardware import foreign_image

    assert foreign_image(image) == foreign
    c = replace(combo("acme/moe-pp", "--moe-backend", "b12x"), foreign_image=foreign_image(image))
    o = Judge(release("0.1.0"), MODELS).judge(c)
    if foreign:
        assert o.status == "unknown" and ("unknown", "foreign_image") in o.keys, o.chain
    else:
        assert ("unknown", "foreign_image") not in o.keys
