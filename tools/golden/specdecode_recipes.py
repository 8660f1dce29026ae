#!/usr/bin/env python3
"""Record what vLLM does with the recipes' `--speculative-config` values.

Run with the python of a virtualenv that has the vLLM release installed (see README.md,
"specdecode-recipes files"):

    $VENV/bin/python tools/golden/specdecode_recipes.py \
        --configs tests/data/hf_configs --out tests/golden [--platform cuda] [--jobs 2]

Each case is one `vllm serve` argv on local config.json directories (no weights, no hub):

    vllm serve <hf_configs>/<target> --skip-tokenizer-init --pipeline-parallel-size <pp>
        --speculative-config '<json>'          (or the dotted form the recipes also use:
        --speculative-config.method mtp --speculative-config.num_speculative_tokens 1)

with `model` inside the JSON pointing at another tiny config directory. In a fresh
interpreter per case, the release's own code runs these stages in order; the first one
that raises is the case's `stage`, its exception and message are recorded:

1. `parse`: the `vllm` CLI parser with its `serve` subcommand, as `vllm/entrypoints/cli/main.py`
   builds it (`serve_args.build_parser`), then `ServeSubcommand.validate`;
2. `engine_args`: `AsyncEngineArgs.from_cli_args`;
3. `target_model_config`: `EngineArgs.create_model_config()`;
4. `parallel_config`: `ParallelConfig(pipeline_parallel_size=pp, distributed_executor_backend="mp")`;
5. `speculative_config`: `EngineArgs.create_speculative_config(target, parallel)`, i.e.
   `SpeculativeConfig(**parsed dict, target_model_config=..., target_parallel_config=...)`
   (pydantic validation, `__post_init__`, `_verify_args` and the model validators);
6. `engine_config`: `EngineArgs.create_engine_config()` on a second parse of the same argv:
   the whole `VllmConfig`, with its own speculative-decoding checks;
7. `drafter`: the proposer/speculator selection of the model runner that starts (see below).

Model runner columns (`runner`, `v1_drafter`, `v2_drafter`):

* `runner`: which engine / model runner starts by default, evaluated with the release's own
  code: `vllm.envs.VLLM_USE_V1` where it exists (V0 or V1), then
  `VllmConfig.use_v2_model_runner` on the built `VllmConfig` where that property exists,
  else `vllm.envs.VLLM_USE_V2_MODEL_RUNNER` (V1 or V2).
* `v1_drafter`: the `if/elif` chain in `GPUModelRunner.__init__`
  (vllm/v1/worker/gpu_model_runner.py) that picks `NgramProposer`, `EagleProposer`, ... and ends in
  `raise ValueError("Unknown speculative decoding method ...")`. The chain is taken from the
  installed file with `ast` and each test expression is evaluated (compiled from that file's
  source, with the module's own globals) against the case's `SpeculativeConfig`; the result
  names the class the branch constructs, or the exception its `else` raises, with file:line.
  The proposers themselves are not constructed (they need a GPU).
* `v2_drafter`: the same for `init_speculator` in vllm/v1/worker/gpu/spec_decode/__init__.py
  (Model Runner V2), where that file exists.
  A test that cannot be evaluated here is reported with `how: "from_source"` and the line.

The platform: `--platform cuda` (the default, what make_golden.sh uses) installs vLLM's CUDA
platform without a GPU as modelinfo.py does (stub libcuda.so.1 from lib.sh on
LD_LIBRARY_PATH; an imaginary A100). `vllm.config.vllm.HAS_TRITON` is set to True before
the engine config is built, as on a GPU machine (without an active driver Triton reports
itself unusable and `use_v2_model_runner` would fall back to V1 for that reason alone).

Output: `<out>/specdecode-recipes-<vllm version>.json`.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import concurrent.futures
import contextlib
import importlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
MESSAGE_LIMIT = 500

CHILD_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_LOGGING_LEVEL": "ERROR",
    "TOKENIZERS_PARALLELISM": "false",
}
# Runner selection must see each release's defaults.
UNSET_ENV = ("VLLM_USE_V1", "VLLM_USE_V2_MODEL_RUNNER")

# Every method name any of the releases run here accepts (their SpeculativeMethod Literal,
# MTP aliases included), plus spellings seen in the recipes. Each release also records its
# own accepted list (accepted_methods).
ALL_METHODS = [
    "ngram", "[ngram]", "ngram_gpu", "medusa", "mlp_speculator", "draft_model", "suffix",
    "custom_class", "eagle", "eagle3", "extract_hidden_states", "dflash", "dspark", "mtp",
    "bailing_hybrid_mtp", "bailing_hybrid_v3_mtp", "deepseek_mtp", "dots3_note_mtp", "ernie_mtp",
    "exaone4_5_mtp", "exaone_moe_mtp", "gemma4_mtp", "glm4_moe_lite_mtp", "glm4_moe_mtp",
    "glm5_next_mtp", "glm_ocr_mtp", "hy_v3_mtp", "hy_v4_mtp", "inkling_mtp", "kimi_k3_mtp",
    "longcat_flash_mtp", "mimo_mtp", "mimo_v2_mtp", "minimax_m3_mtp", "nemotron_h_mtp",
    "pangu_ultra_moe_mtp", "qwen3_5_mtp", "qwen3_next_mtp", "qwen4_exp_mtp", "step3p5_mtp",
    "step5_mtp",
]
# Which draft each non-MTP method gets in the "every accepted method" group.
METHOD_DRAFTS = {
    "eagle": ("llama-tiny", "llama-eagle-draft-tiny"),
    "eagle3": ("llama-tiny", "llama-eagle3-draft-tiny"),
    "draft_model": ("llama-tiny", "llama-draft-tiny"),
    "dflash": ("qwen3-tiny", "qwen3-dflash-draft-tiny"),
    "dspark": ("qwen3-tiny", "qwen3-dspark-draft-tiny"),
}


def _case(group, target, spec, pp=1, form="json", note=""):
    return {"group": group, "target": target, "spec": spec, "pp": pp, "form": form, "note": note}


def build_cases() -> list[dict]:
    """The matrix. `spec` is the --speculative-config value; a `model` names a directory
    under tests/data/hf_configs."""
    cases: list[dict] = []

    def recipe(target, spec, form="json", note=""):
        for pp in (1, 2):
            cases.append(_case("recipe", target, spec, pp, form, note))

    # -- the recipes' own values (method, num_speculative_tokens, extra keys), each on a
    #    tiny config of the recipe's target family; pp 1 and 2
    for n in (1, 2, 3, 4, 5, 8):
        recipe("deepseek-v3-tiny", {"method": "mtp", "num_speculative_tokens": n},
               note="mtp without model: DeepSeek-V3.2 / Hy3 / Inkling / Intern-S2 ... recipes")
    recipe("glm5-tiny", {"method": "mtp", "num_speculative_tokens": 5}, note="GLM-5.2 recipes")
    recipe("glm5-tiny", {"method": "mtp", "num_speculative_tokens": 3}, form="dotted",
           note="GLM-5 recipes: --speculative-config.method mtp --speculative-config.num_speculative_tokens 3")
    recipe("glm45-tiny", {"method": "mtp", "num_speculative_tokens": 1}, form="dotted",
           note="GLM-4.5/4.6/4.7 recipes, dotted form")
    recipe("qwen3-next-tiny", {"method": "qwen3_next_mtp", "num_speculative_tokens": 2},
           note="Qwen3-Next recipes")
    recipe("qwen3-5-moe-tiny", {"method": "mtp", "num_speculative_tokens": 1}, note="Qwen3.5 recipes")
    recipe("qwen3-5-moe-tiny", {"method": "mtp", "num_speculative_tokens": 3}, note="Qwen3.5 recipes")
    recipe("qwen3-5-moe-tiny", {"method": "qwen3_5_mtp", "num_speculative_tokens": 3, "enforce_eager": True},
           note="Qwen3.8-27B recipe (Ascend spelling)")
    recipe("nemotron-h-tiny", {"method": "mtp", "num_speculative_tokens": 3, "moe_backend": "triton"},
           note="Nemotron-3.5 / Qwen3.6 recipes: extra key moe_backend")
    recipe("step3p5-tiny", {"method": "step3p5_mtp", "num_speculative_tokens": 1}, note="Step-3.5-Flash")
    recipe("ernie45-moe-tiny", {"method": "ernie_mtp", "model": "ernie45-moe-tiny", "num_speculative_tokens": 1},
           note="ERNIE-4.5 recipes pass the target itself as model")
    recipe("deepseek-v3-tiny", {"method": "eagle3", "model": "kimi-eagle3-mla-draft-tiny", "num_speculative_tokens": 3},
           note="Kimi-K2.5/2.6 recipes: lightseekorg/kimi-k2.x-eagle3-mla")
    recipe("gpt-oss-tiny", {"method": "eagle3", "model": "gpt-oss-eagle3-draft-tiny", "num_speculative_tokens": 7,
                            "draft_tensor_parallel_size": 1}, note="gpt-oss recipes: nvidia/gpt-oss-120b-Eagle3-v3")
    recipe("llama-tiny", {"method": "eagle3", "model": "llama-speculator.eagle3-tiny", "num_speculative_tokens": 3},
           note="Llama-3.1 recipes: RedHatAI speculators-format eagle3 draft")
    recipe("llama-tiny", {"method": "eagle", "model": "llama-eagle-draft-tiny", "num_speculative_tokens": 3,
                          "max_model_len": "2048"},
           note="Mistral-Small-4 / Medium-3.5 recipes: eagle with a string max_model_len (recipe: \"65536\", "
                "scaled to the tiny configs' 4096 positions)")
    for n in (15, 7, 3):
        recipe("qwen3-tiny", {"method": "dflash", "model": "qwen3-dflash-draft-tiny", "num_speculative_tokens": n},
               note="DFlash recipes (Laguna / Muse Glimmer: 15, Laguna-XS.2: 7, Nemotron-3.5: 3)")
    recipe("qwen3-tiny", {"method": "dflash", "model": "qwen3-dflash-draft-tiny", "num_speculative_tokens": 3,
                          "attention_backend": "FLASHINFER"}, note="Nemotron-3.5 DFlash recipe keys")
    recipe("qwen3-tiny", {"method": "dflash", "model": "qwen3-speculator.dflash-tiny", "num_speculative_tokens": 7},
           note="Laguna-XS.2 recipe: speculators-format dflash draft")
    for n in (7, 3):
        recipe("qwen3-tiny", {"method": "dspark", "model": "qwen3-dspark-draft-tiny", "num_speculative_tokens": n},
               note="DSpark recipes with a draft (GLM-5.2 / Nemotron-3.5)")
    recipe("qwen3-tiny", {"method": "dspark", "model": "qwen3-dspark-draft-tiny", "num_speculative_tokens": 8,
                          "draft_sample_method": "probabilistic", "rejection_sample_method": "block"},
           note="Kimi-K3 DSpark recipe keys")
    recipe("deepseek-v4-tiny", {"method": "dspark", "num_speculative_tokens": 7, "draft_sample_method": "probabilistic"},
           note="DeepSeek-V4 DSpark recipes: no model (weights inside the target)")
    recipe("deepseek-v4-tiny", {"method": "dspark", "num_speculative_tokens": 5, "draft_sample_method": "probabilistic",
                                "attention_backend": "B12X_MLA_SPARSE"}, note="DeepSeek-V4 DSpark recipe keys")
    recipe("deepseek-v4-tiny", {"method": "mtp", "num_speculative_tokens": 2}, note="DeepSeek-V4 mtp recipes")
    recipe("gemma4-tiny", {"model": "gemma4-assistant-tiny", "num_speculative_tokens": 4},
           note="Gemma 4 recipes: no method, an -assistant draft")
    recipe("gemma4-tiny", {"model": "gemma4-assistant-tiny", "num_speculative_tokens": 2},
           note="Gemma 4 E2B recipe")

    # -- method absent: what vLLM detects from the draft (name, architecture, model_type)
    for target, draft, n in (("llama-tiny", "llama-draft-tiny", 4),
                             ("llama-tiny", "llama-eagle-draft-tiny", 3),
                             ("llama-tiny", "llama-eagle3-draft-tiny", 3),
                             ("llama-tiny", "llama-speculator.eagle3-tiny", 3),
                             ("deepseek-v3-tiny", "kimi-eagle3-mla-draft-tiny", 3),
                             ("deepseek-v3-tiny", "deepseek-v3-tiny", 1),
                             ("qwen3-tiny", "qwen3-dflash-draft-tiny", 15),
                             ("qwen3-tiny", "qwen3-dspark-draft-tiny", 7)):
        cases.append(_case("no_method", target, {"model": draft, "num_speculative_tokens": n}))
    cases.append(_case("no_method", "llama-tiny", {"model": "[ngram]", "num_speculative_tokens": 3}))
    cases.append(_case("no_method", "llama-tiny", {"num_speculative_tokens": 3},
                       note="neither method nor model"))

    # -- every method name, model absent: which methods take the target as the draft
    for method in ALL_METHODS:
        target = "deepseek-v3-tiny" if method.endswith("_mtp") or method == "mtp" else \
            METHOD_DRAFTS.get(method, ("llama-tiny", None))[0]
        cases.append(_case("method_no_model", target, {"method": method, "num_speculative_tokens": 1}))
    # ... and with the draft each needs
    for method, (target, draft) in METHOD_DRAFTS.items():
        cases.append(_case("method_with_model", target, {"method": method, "model": draft,
                                                          "num_speculative_tokens": 1}))
    # MTP aliases on their own family's target (the alias does not pick the draft)
    for target, method in (("glm45-tiny", "glm4_moe_mtp"), ("qwen3-next-tiny", "qwen3_next_mtp"),
                           ("nemotron-h-tiny", "nemotron_h_mtp"), ("ernie45-moe-tiny", "ernie_mtp"),
                           ("qwen3-5-moe-tiny", "qwen3_5_mtp"), ("step3p5-tiny", "step3p5_mtp"),
                           ("glm5-tiny", "deepseek_mtp"), ("qwen3-tiny", "mtp"), ("llama-tiny", "mtp")):
        cases.append(_case("method_no_model", target, {"method": method, "num_speculative_tokens": 1}))

    # -- values the validators see: num_speculative_tokens absent / 0 / negative / a string,
    #    n_predict defaults and divisibility, spellings
    def v(target, spec, note=""):
        cases.append(_case("validator", target, spec, note=note))

    v("deepseek-v3-tiny", {"method": "mtp"}, "mtp, no model, no num_speculative_tokens")
    v("deepseek-v3-tiny", {"method": "mtp", "model": "deepseek-v3-tiny"},
      "mtp with the target as model and no num_speculative_tokens (n_predict default)")
    v("deepseek-v3-tiny", {"model": "deepseek-v3-tiny"}, "no method, target as model, no num_speculative_tokens")
    v("deepseek-v3-nomtp-tiny", {"method": "mtp", "num_speculative_tokens": 1}, "no num_nextn_predict_layers")
    v("deepseek-v3-nomtp-tiny", {"method": "mtp", "model": "deepseek-v3-nomtp-tiny"},
      "no num_nextn_predict_layers, no num_speculative_tokens")
    for n in (2, 3, 4):
        v("deepseek-v3-mtp2-tiny", {"method": "mtp", "num_speculative_tokens": n}, "n_predict 2")
    v("deepseek-v3-mtp2-tiny", {"method": "mtp", "model": "deepseek-v3-mtp2-tiny"}, "n_predict 2, default")
    v("deepseek-v3-tiny", {"method": "mtp", "num_speculative_tokens": 0})
    v("deepseek-v3-tiny", {"method": "mtp", "num_speculative_tokens": -1})
    v("deepseek-v3-tiny", {"method": "mtp", "num_speculative_tokens": "3"}, "a string")
    v("llama-tiny", {"method": "eagle3", "model": "llama-eagle3-draft-tiny"}, "no num_speculative_tokens")
    v("llama-tiny", {"method": "eagle3", "model": "llama-speculator.eagle3-tiny"},
      "speculators draft carries speculative_tokens 3")
    v("llama-tiny", {"method": "draft_model", "model": "llama-draft-tiny"}, "no num_speculative_tokens")
    v("llama-tiny", {"method": "ngram"}, "no num_speculative_tokens")
    v("llama-tiny", {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 2, "prompt_lookup_min": 4})
    v("qwen3-tiny", {"method": "dflash", "model": "qwen3-dflash-draft-tiny"}, "no num_speculative_tokens")
    v("qwen3-tiny", {"method": "dspark", "model": "qwen3-dspark-draft-tiny"}, "no num_speculative_tokens")
    v("deepseek-v4-tiny", {"method": "dspark"}, "no model, no num_speculative_tokens")
    v("deepseek-v3-tiny", {"method": "dspark", "num_speculative_tokens": 7}, "dspark on a non-V4 target")
    v("deepseek-v3-tiny", {"method": "eagle3", "model": "kimi-eagle3-mla-v3type-draft-tiny", "num_speculative_tokens": 3},
      "an Eagle3 MLA draft whose config says model_type deepseek_v3")
    v("llama-tiny", {"method": "MTP", "num_speculative_tokens": 1}, "upper-case spelling")
    v("llama-tiny", {"method": "eagle-3", "model": "llama-eagle3-draft-tiny", "num_speculative_tokens": 1},
      "hyphenated spelling")
    v("llama-tiny", {"method": "eagle3", "model": "llama-eagle3-draft-tiny", "num_speculative_tokens": 3,
                     "tensor_parallel_size": 1}, "tensor_parallel_size instead of draft_tensor_parallel_size")
    v("llama-tiny", {"method": "eagle3", "model": "llama-eagle3-draft-tiny", "num-speculative-tokens": 3},
      "hyphenated key")

    seen: set[str] = set()
    out = []
    for c in cases:
        c["id"] = case_id(c)
        if c["id"] in seen:
            continue
        seen.add(c["id"])
        c["draft"] = c["spec"].get("model") if c["spec"].get("model") not in ("[ngram]",) else None
        c["argv"] = argv_for(c, None)
        out.append(c)
    return out


def case_id(c: dict) -> str:
    return f"{c['target']} pp={c['pp']} {c['form']} {json.dumps(c['spec'], sort_keys=True)}"


def argv_for(case: dict, configs_dir: str | None) -> list[str]:
    """The serve argv; with configs_dir None, ids stay directory names (the recorded form)."""
    def path(name):
        return name if configs_dir is None else os.path.join(configs_dir, name)

    spec = dict(case["spec"])
    if "model" in spec and spec["model"] != "[ngram]":
        spec["model"] = path(spec["model"])
    argv = ["vllm", "serve", path(case["target"]), "--skip-tokenizer-init",
            "--pipeline-parallel-size", str(case["pp"])]
    if case["form"] == "dotted":
        for key, value in spec.items():
            argv += [f"--speculative-config.{key}", value if isinstance(value, str) else json.dumps(value)]
    else:
        argv += ["--speculative-config", json.dumps(spec)]
    return argv


# --------------------------------------------------------------------------
# child: one case inside the vLLM venv
# --------------------------------------------------------------------------

class Ctx:
    configs_dir = ""


def clean(text: str) -> str:
    text = text.replace(Ctx.configs_dir, "<hf_configs>").replace(sys.prefix, "<venv>")
    return text[:MESSAGE_LIMIT]


def _original(exc: BaseException) -> BaseException | None:
    """The exception a pydantic validator raised (pydantic wraps it in a ValidationError and
    keeps it, with its traceback, in errors()[0]['ctx']['error'])."""
    try:
        errs = exc.errors()  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 (not a pydantic error)
        return None
    if errs and isinstance(errs[0], dict):
        orig = (errs[0].get("ctx") or {}).get("error")
        if isinstance(orig, BaseException):
            return orig
    return None


def raise_site(exc: BaseException) -> str | None:
    """The innermost vllm/ frame (of the original exception inside a pydantic ValidationError),
    else the innermost site-packages frame."""
    target = _original(exc) or exc
    frames = traceback.extract_tb(target.__traceback__) if target.__traceback__ else []
    if not frames:
        frames = traceback.extract_tb(exc.__traceback__)
    fallback = None
    for frame in reversed(frames):
        path = frame.filename.replace(os.sep, "/")
        if "/site-packages/" in path:
            rel = f"{path.split('/site-packages/', 1)[1]}:{frame.lineno}"
            if rel.startswith("vllm/"):
                return rel
            fallback = fallback or rel
    return fallback


def exc_fields(exc: BaseException) -> dict:
    out = {"exception": type(exc).__name__, "message": clean(str(exc)), "raised_at": raise_site(exc)}
    orig = _original(exc)
    if orig is not None:
        out["inner_exception"] = type(orig).__name__
    else:
        try:
            errs = exc.errors()  # type: ignore[attr-defined]
            if errs:
                out["pydantic_error"] = {"type": errs[0].get("type"),
                                         "loc": [str(x) for x in errs[0].get("loc", ())]}
        except Exception:  # noqa: BLE001
            pass
    return out


def rel_site(path: str) -> str:
    path = path.replace(os.sep, "/")
    return path.split("/site-packages/", 1)[1] if "/site-packages/" in path else path


def build_parser():
    """The `vllm` CLI parser with its `serve` subcommand, as vllm/entrypoints/cli/main.py
    builds it (serve_args.build_parser, with the pre-0.11 home of FlexibleArgumentParser;
    serve_args itself is not imported: it turns HF_HUB_OFFLINE off)."""
    import importlib.metadata

    sys.argv[0] = "vllm"
    import vllm.entrypoints.cli.serve as serve_mod

    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:
        from vllm.utils import FlexibleArgumentParser
    parser = FlexibleArgumentParser(description="vLLM CLI")
    parser.add_argument("-v", "--version", action="version", version=importlib.metadata.version("vllm"))
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    cmds = {}
    for cmd in serve_mod.cmd_init():
        cmd.subparser_init(subparsers).set_defaults(dispatch_function=cmd.cmd)
        cmds[cmd.name] = cmd
    return parser, cmds["serve"]


def parse_argv(parser, serve_cmd, argv):
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = parser.parse_args(argv[1:])
    except SystemExit as exc:
        text = err.getvalue()
        at = text.find(": error: ")
        msg = text[text.rfind("\n", 0, at) + 1:].strip() if at >= 0 else f"exit {exc.code}: {text.strip()}"
        raise ArgparseExit(msg) from None
    serve_cmd.validate(args)
    if getattr(args, "model_tag", None) is not None:
        args.model = args.model_tag  # what ServeSubcommand.cmd does before dispatching
    return args


class ArgparseExit(Exception):
    """argparse printed an error and exited (SystemExit 2)."""


def spec_from_traceback(exc: BaseException, spec_cls):
    tb, found = exc.__traceback__, None
    while tb is not None:
        cand = tb.tb_frame.f_locals.get("self")
        if spec_cls is not None and isinstance(cand, spec_cls):
            found = cand
        tb = tb.tb_next
    return found


def draft_fields(spec) -> dict:
    out = {"resolved_method": getattr(spec, "method", None),
           "resolved_num_speculative_tokens": getattr(spec, "num_speculative_tokens", None)}
    dmc = getattr(spec, "draft_model_config", None)
    if dmc is not None and not isinstance(dmc, dict):
        archs = getattr(dmc, "architectures", None) or []
        out["draft_arch"] = archs[0] if archs else None
        out["draft_model_type"] = getattr(getattr(dmc, "hf_config", None), "model_type", None)
        model = getattr(dmc, "model", None)
        if isinstance(model, str):
            out["draft_model"] = clean(model)
    dpc = getattr(spec, "draft_parallel_config", None)
    if dpc is not None and not isinstance(dpc, dict):
        out["draft_pp"] = dpc.pipeline_parallel_size
    return out


# --- the model runners' drafter selection, evaluated from the installed source ---------

def _callee(node: ast.AST) -> str | None:
    call = getattr(node, "value", None)
    if isinstance(call, ast.Call):
        f = call.func
        return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
    return None


def _find_func(tree: ast.Module, qualname: str):
    node: ast.AST = tree
    for part in qualname.split("."):
        node = next((n for n in getattr(node, "body", [])
                     if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == part), None)
        if node is None:
            return None
    return node


def _chain_head(func, marker: str):
    """The outermost `if` whose elif/else chain contains the raise with `marker`."""
    for node in ast.walk(func):
        if not isinstance(node, ast.If):
            continue
        cur = node
        while True:
            if cur.orelse and len(cur.orelse) == 1 and isinstance(cur.orelse[0], ast.If):
                cur = cur.orelse[0]
                continue
            break
        tail = cur.orelse or []
        if any(marker in ast.unparse(s) for s in tail if isinstance(s, ast.Raise)):
            return node
    # init_speculator style: `if ...: return X` chain followed by a bare raise
    for node in ast.walk(func):
        if isinstance(node, ast.If) and marker in ast.unparse(node):
            return node
    return None


def evaluate_chain(module_name: str, qualname: str, marker: str, ns: dict,
                   whole_function: bool = False) -> dict:
    """Walk the drafter selection of `qualname` in the installed `module_name`: from the
    if/elif chain ending in the raise with `marker` (or, with whole_function, the function's
    whole body), evaluating each `if` test and each plain local assignment
    (`architectures = speculative_config.draft_model_config.architectures`) with the
    module's globals and the case's objects, until a branch constructs a class (reported
    as `selected`) or raises (`raises`)."""
    spec = importlib.util.find_spec(module_name)
    if spec is None or spec.origin is None:
        return {"how": "absent", "detail": f"{module_name} not in this release"}
    path = spec.origin
    src = open(path).read()
    tree = ast.parse(src)
    func = _find_func(tree, qualname)
    if func is None:
        return {"how": "absent", "detail": f"{qualname} not in {rel_site(path)}"}
    head = _chain_head(func, marker) if not whole_function else func
    where = rel_site(path)
    if head is None:
        return {"how": "from_source", "detail": f"no chain ending in {marker!r} in {where}:{func.lineno}"}
    try:
        glb = dict(importlib.import_module(module_name).__dict__)
        how = "evaluated"
    except BaseException as exc:  # noqa: BLE001
        glb = {"__builtins__": builtins}
        how = "evaluated_without_module_globals"
        ns = dict(ns, _import_error=f"{type(exc).__name__}: {clean(str(exc))[:200]}")

    def walk(stmts):
        for stmt in stmts:
            if isinstance(stmt, ast.If):
                expr = ast.Expression(stmt.test)
                ast.fix_missing_locations(expr)
                try:
                    val = eval(compile(expr, path, "eval"), glb, ns)  # the release's own test
                except BaseException as exc:  # noqa: BLE001
                    return {"how": "from_source", "at": f"{where}:{stmt.lineno}",
                            "test": ast.unparse(stmt.test)[:200],
                            "detail": f"not evaluable here: {type(exc).__name__}: {clean(str(exc))[:200]}"}
                r = walk(stmt.body if val else stmt.orelse)
                if r is not None:
                    if "branch" not in r:
                        r["branch"] = f"{where}:{stmt.lineno}" if val else r.get("branch")
                    return r
            elif isinstance(stmt, ast.Raise):
                exc_src = ast.unparse(stmt.exc) if stmt.exc is not None else "raise"
                return {"how": how, "outcome": "error", "raises": exc_src[:300], "at": f"{where}:{stmt.lineno}"}
            elif isinstance(stmt, (ast.Assign, ast.Return, ast.Expr)):
                name = _callee(stmt)
                if name and (name[0].isupper() or name.startswith("create_")):
                    return {"how": how, "outcome": "ok", "selected": name, "at": f"{where}:{stmt.lineno}"}
                if isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets):
                    mod = ast.Module(body=[stmt], type_ignores=[])
                    try:
                        exec(compile(mod, path, "exec"), glb, ns)  # a local the next tests read
                    except BaseException:  # noqa: BLE001 (a test reading it reports from_source)
                        pass
        return None

    res = walk(head.body if whole_function else [head]) or {"how": how, "outcome": "none", "detail": "no branch constructs a drafter"}
    if "_import_error" in ns:
        res["import_error"] = ns["_import_error"]
    return res


class _Stub:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def runner_fields(vllm_config, spec) -> dict:
    from vllm import envs

    out: dict = {}
    env_names = set(getattr(envs, "environment_variables", {}) or {})
    if "VLLM_USE_V1" in env_names:
        use_v1 = bool(envs.VLLM_USE_V1)
        out["runner"] = "V1" if use_v1 else "V0"
        out["runner_how"] = "vllm.envs.VLLM_USE_V1 (unset: the release's default)"
        if not use_v1:
            return out
    try:
        from vllm.config import VllmConfig
    except ImportError:
        VllmConfig = None
    prop = getattr(VllmConfig, "use_v2_model_runner", None) if VllmConfig else None
    if isinstance(prop, property):
        if vllm_config is None:
            out["runner"] = None
            out["runner_how"] = "VllmConfig.use_v2_model_runner (no VllmConfig: engine_config failed)"
        else:
            try:
                out["runner"] = "V2" if vllm_config.use_v2_model_runner else "V1"
                out["runner_how"] = "VllmConfig.use_v2_model_runner on the built VllmConfig"
            except BaseException as exc:  # noqa: BLE001
                out["runner"] = None
                out["runner_how"] = "VllmConfig.use_v2_model_runner raised"
                out["runner_error"] = exc_fields(exc)
    elif "VLLM_USE_V2_MODEL_RUNNER" in env_names:
        out["runner"] = "V2" if envs.VLLM_USE_V2_MODEL_RUNNER else "V1"
        out["runner_how"] = "vllm.envs.VLLM_USE_V2_MODEL_RUNNER (unset: the release's default)"
    elif "runner" not in out:
        out["runner"] = "V1"
        out["runner_how"] = "no V0 switch and no V2 model runner in this release"
    if spec is None:
        return out
    vc = vllm_config if vllm_config is not None else _Stub(speculative_config=spec)
    self_stub = _Stub(speculative_config=spec, vllm_config=vc, device="cuda")
    ns = {"self": self_stub, "speculative_config": spec, "vllm_config": vc}
    out["v1_drafter"] = evaluate_chain("vllm.v1.worker.gpu_model_runner", "GPUModelRunner.__init__",
                                       "Unknown speculative decoding method", dict(ns))
    out["v2_drafter"] = evaluate_chain("vllm.v1.worker.gpu.spec_decode", "init_speculator",
                                       "not supported yet", dict(ns), whole_function=True)
    return out


def accepted_methods() -> list[str] | None:
    from typing import Literal, get_args, get_origin

    try:
        mod = importlib.import_module("vllm.config.speculative")
    except ImportError:
        return None
    lit = getattr(mod, "SpeculativeMethod", None)
    if lit is None:
        return None
    out: list[str] = []

    def flat(t):
        for a in get_args(t):
            if isinstance(a, str):
                out.append(a)
            elif get_origin(a) is Literal or get_args(a):
                flat(a)
    flat(lit)
    return sorted(set(out))


def config_known(case: dict) -> dict:
    """Is each config's model_type known to the installed transformers or vLLM's own config
    registry? (An unknown one makes vLLM's verdict about this environment.)"""
    from transformers import CONFIG_MAPPING

    try:
        from vllm.transformers_utils.config import _CONFIG_REGISTRY
    except ImportError:
        _CONFIG_REGISTRY = {}
    out = {}
    for role, name in (("target", case["target"]), ("draft", case.get("draft"))):
        if not name:
            continue
        with open(os.path.join(Ctx.configs_dir, name, "config.json")) as f:
            raw = json.load(f)
        mt = raw.get("model_type")
        if mt is None and "speculators_model_type" in raw:
            mt = "speculators"
        out[role] = mt in CONFIG_MAPPING or mt in _CONFIG_REGISTRY
    return out


_PREPARED: list[str] = []


def prepare(platform: str) -> None:
    """Install the platform and import what every case needs (once per interpreter)."""
    if _PREPARED:
        return
    for k in UNSET_ENV:
        os.environ.pop(k, None)
    for k, v in CHILD_ENV.items():
        os.environ.setdefault(k, v)
    if platform != "auto":
        sys.path.insert(0, HERE)
        from modelinfo import force_platform

        force_platform(platform)
    try:
        import vllm.config.vllm as vllm_config_mod

        if hasattr(vllm_config_mod, "HAS_TRITON"):
            vllm_config_mod.HAS_TRITON = True  # as on a GPU machine (module docstring)
    except ImportError:
        pass
    import transformers  # noqa: F401
    import vllm.engine.arg_utils
    import vllm.entrypoints.cli.serve  # noqa: F401
    # The modules whose drafter chains are evaluated (module imports only, no case state).
    for mod in ("vllm.v1.worker.gpu_model_runner", "vllm.v1.worker.gpu.spec_decode"):
        try:
            importlib.import_module(mod)
        except BaseException:  # noqa: BLE001 (reported per case by evaluate_chain)
            pass
    _PREPARED.append(platform)


def run_case(case: dict, platform: str) -> dict:
    out = {k: case[k] for k in ("id", "group", "target", "draft", "spec", "pp", "form", "note", "argv")}
    import transformers

    out["transformers"] = transformers.__version__
    with open(os.path.join(Ctx.configs_dir, case["target"], "config.json")) as f:
        raw = json.load(f)
    out["target_model_type"] = raw.get("model_type")
    out["target_arch"] = (raw.get("architectures") or [None])[0]
    out["config_known"] = config_known(case)
    for key in ("resolved_method", "resolved_num_speculative_tokens", "draft_arch", "draft_model_type",
                "draft_pp", "exception", "message", "raised_at", "runner", "v1_drafter", "v2_drafter"):
        out[key] = None

    prepare(platform)
    from vllm.engine.arg_utils import AsyncEngineArgs

    try:
        from vllm.config import ParallelConfig, SpeculativeConfig
    except ImportError:  # pragma: no cover
        ParallelConfig = SpeculativeConfig = None

    argv = argv_for(case, Ctx.configs_dir)
    stage = "parse"
    spec = vllm_config = None
    try:
        parser, serve_cmd = build_parser()
        args = parse_argv(parser, serve_cmd, argv)
        parsed = getattr(args, "speculative_config", None)
        out["parsed_speculative_config"] = json.loads(clean(json.dumps(parsed, default=str))) \
            if parsed is not None else None
        stage = "engine_args"
        engine_args = AsyncEngineArgs.from_cli_args(args)
        stage = "target_model_config"
        target = engine_args.create_model_config()
        stage = "parallel_config"
        parallel = ParallelConfig(pipeline_parallel_size=case["pp"], distributed_executor_backend="mp")
        try:
            target.verify_with_parallel_config(parallel)
            out["target_pp_check"] = {"outcome": "ok"}
        except BaseException as exc:  # noqa: BLE001
            out["target_pp_check"] = {"outcome": "error", **exc_fields(exc)}
        stage = "speculative_config"
        try:
            spec = engine_args.create_speculative_config(target, parallel)
        except BaseException as exc:
            partial = spec_from_traceback(exc, SpeculativeConfig)
            if partial is not None:
                out.update(draft_fields(partial))
            raise
        out.update(draft_fields(spec))
        stage = "engine_config"
        engine_args2 = AsyncEngineArgs.from_cli_args(parse_argv(parser, serve_cmd, argv))
        vllm_config = engine_args2.create_engine_config()
        if vllm_config.speculative_config is not None:
            spec = vllm_config.speculative_config
            out["engine_resolved_method"] = spec.method
        stage = "drafter"
        out.update(runner_fields(vllm_config, spec))
        chosen = {"V1": "v1_drafter", "V2": "v2_drafter"}.get(out.get("runner"))
        result = out.get(chosen) if chosen else None
        if result is not None and result.get("outcome") == "error":
            out.update(outcome="error", stage="drafter", exception="drafter_selection",
                       message=clean(result.get("raises", "")), raised_at=result.get("at"))
            return out
        out.update(outcome="ok", stage="ok")
    except BaseException as exc:  # noqa: BLE001: every failure is data
        if isinstance(exc, KeyboardInterrupt):
            raise
        fields = exc_fields(exc)
        if isinstance(exc, ArgparseExit):
            fields.update(exception="SystemExit", raised_at="argparse")
        out.update(outcome="error", stage=stage, **fields)
        if stage in ("speculative_config", "engine_config", "parse"):
            try:
                out.update({k: v for k, v in runner_fields(None, None).items() if k.startswith("runner")})
            except BaseException:  # noqa: BLE001
                pass
    return out


def child_main(case_json: str, platform: str) -> int:
    for k in UNSET_ENV:
        os.environ.pop(k, None)
    for k, v in CHILD_ENV.items():
        os.environ.setdefault(k, v)
    case = json.loads(case_json)
    try:
        result = run_case(case, platform)
    except BaseException as exc:  # noqa: BLE001
        result = dict(case, outcome="harness_error", **exc_fields(exc),
                      traceback=clean(traceback.format_exc(limit=8)))
    sys.stdout.flush()
    print("@@RESULT@@" + json.dumps(result, sort_keys=True, default=str), flush=True)
    return 0


# --------------------------------------------------------------------------
# parent
# --------------------------------------------------------------------------

def spawn(case: dict, configs_dir: str, platform: str, env: dict, timeout: int) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--configs", configs_dir, "--platform", platform,
           "--run-case", json.dumps(case)]
    t0 = time.time()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return dict(case, outcome="harness_error", exception="TimeoutExpired", message=f"> {timeout}s")
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("@@RESULT@@"):
            result = json.loads(line[len("@@RESULT@@"):])
            break
    else:
        result = dict(case, outcome="harness_error", exception=f"exit {proc.returncode}",
                      message=(proc.stderr or "")[-MESSAGE_LIMIT:])
    print(f"{case['id'][:110]:<110} -> {result.get('outcome')} {result.get('stage')} "
          f"{result.get('exception') or ''} ({time.time() - t0:.0f}s)", file=sys.stderr, flush=True)
    return result


def run_forked(cases: list[dict], platform: str, jobs: int, timeout: int) -> list[dict]:
    """Each case in a child forked from this interpreter after the common imports (prepare):
    the same isolation as a fresh interpreter per case (nothing a case does reaches the next),
    without paying vLLM's import for every case."""
    import select
    import signal

    prepare(platform)
    results: dict[int, dict] = {}
    running: dict[int, tuple[int, int, float, bytes]] = {}  # pid -> (index, read fd, start, data)
    todo = list(enumerate(cases))
    while todo or running:
        while todo and len(running) < jobs:
            i, case = todo.pop(0)
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:  # child
                os.close(r)
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 1)
                os.dup2(devnull, 2)
                try:
                    res = run_case(case, platform)
                except BaseException as exc:  # noqa: BLE001
                    res = dict(case, outcome="harness_error", **exc_fields(exc),
                               traceback=clean(traceback.format_exc(limit=8)))
                data = json.dumps(res, sort_keys=True, default=str).encode()
                with os.fdopen(w, "wb") as fh:
                    fh.write(data)
                os._exit(0)
            os.close(w)
            running[pid] = (i, r, time.time(), b"")
        fds = {v[1]: pid for pid, v in running.items()}
        ready, _, _ = select.select(list(fds), [], [], 1.0)
        for fd in ready:
            pid = fds[fd]
            i, r, t0, data = running[pid]
            chunk = os.read(fd, 1 << 20)
            if chunk:
                running[pid] = (i, r, t0, data + chunk)
                continue
            os.close(fd)
            os.waitpid(pid, 0)
            del running[pid]
            try:
                res = json.loads(data)
            except ValueError:
                res = dict(cases[i], outcome="harness_error", exception="no result",
                           message="the forked child exited without a result")
            results[i] = res
            print(f"{cases[i]['id'][:110]:<110} -> {res.get('outcome')} {res.get('stage')} "
                  f"{res.get('exception') or ''} ({time.time() - t0:.0f}s)", file=sys.stderr, flush=True)
        for pid, (i, r, t0, _data) in list(running.items()):
            if time.time() - t0 > timeout:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                os.close(r)
                del running[pid]
                results[i] = dict(cases[i], outcome="harness_error", exception="TimeoutExpired",
                                  message=f"> {timeout}s")
    return [results[i] for i in range(len(cases))]


def header(platform: str) -> dict:
    import importlib.metadata as md

    doc = {"python": sys.version.split()[0]}
    for dist in ("vllm", "torch", "transformers", "pydantic"):
        try:
            doc[dist] = md.version(dist)
        except md.PackageNotFoundError:
            doc[dist] = None
    doc["vllm_version"] = doc.pop("vllm")
    doc["platform"] = platform
    return doc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", required=True, help="directory of <name>/config.json")
    ap.add_argument("--out", help="output directory")
    ap.add_argument("--platform", default="cuda", choices=("cuda", "auto"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--only", action="append",
                    help="substring of case ids to run (repeatable; merges into an existing file)")
    ap.add_argument("--list", action="store_true", help="print the case ids and exit")
    ap.add_argument("--cache-root", help="VLLM_CACHE_ROOT to use (and keep) instead of a fresh temporary "
                    "one: vLLM's model-inspection cache, reusable between runs of the same venv")
    ap.add_argument("--spawn", action="store_true",
                    help="a fresh interpreter per case instead of a fork of one that imported vLLM")
    ap.add_argument("--run-case", help=argparse.SUPPRESS)
    args = ap.parse_args()
    Ctx.configs_dir = os.path.abspath(args.configs)
    if args.run_case:
        return child_main(args.run_case, args.platform)
    cases = build_cases()
    if args.list:
        for c in cases:
            print(c["id"])
        print(f"{len(cases)} cases", file=sys.stderr)
        return 0
    if not args.out:
        ap.error("--out is required")
    doc = header(args.platform)
    path = os.path.join(args.out, f"specdecode-recipes-{doc['vllm_version']}.json")
    previous = {}
    if args.only:
        cases = [c for c in cases if any(o in c["id"] for o in args.only)]
        if os.path.exists(path):
            with open(path) as f:
                previous = {c["id"]: c for c in json.load(f)["cases"]}
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="golden-vllm-cache-") as tmp_cache:
        cache_root = args.cache_root or tmp_cache
        env = {k: v for k, v in os.environ.items() if k not in UNSET_ENV}
        env.update(CHILD_ENV)
        # Fresh model-inspection cache (vLLM caches under $VLLM_CACHE_ROOT/modelinfos).
        env["VLLM_CACHE_ROOT"] = cache_root
        probe = subprocess.run([sys.executable, "-c",
                                "import json,sys; sys.path.insert(0, %r); import specdecode_recipes as s; "
                                "print(json.dumps(s.accepted_methods()))" % HERE],
                               env=env, capture_output=True, text=True)
        try:
            doc["accepted_methods"] = json.loads(probe.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            doc["accepted_methods"] = None
        if args.spawn:
            with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
                results = list(pool.map(lambda c: spawn(c, Ctx.configs_dir, args.platform, env, args.timeout),
                                        cases))
        else:
            os.environ.clear()
            os.environ.update(env)
            # pp=1 cases first: the pp=2 twin of a case then finds the model-inspection cache
            # warm instead of inspecting the same classes concurrently (order of the output
            # is the matrix order either way).
            order = sorted(range(len(cases)), key=lambda i: (cases[i]["pp"], i))
            ran = run_forked([cases[i] for i in order], args.platform, args.jobs, args.timeout)
            results = [None] * len(cases)
            for i, r in zip(order, ran):
                results[i] = r
    if previous:
        for r in results:
            previous[r["id"]] = r
        order = {c["id"]: i for i, c in enumerate(build_cases())}
        results = sorted(previous.values(), key=lambda r: order.get(r["id"], 1 << 30))
    doc["case_count"] = len(results)
    doc["cases"] = results
    os.makedirs(args.out, exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f, sort_keys=True, indent=1)
        f.write("\n")
    counts: dict[str, int] = {}
    for r in results:
        key = f"{r.get('outcome')}:{r.get('stage')}"
        counts[key] = counts.get(key, 0) + 1
    print(f"wrote {path}: {len(results)} cases {counts}, {time.time() - started:.0f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
