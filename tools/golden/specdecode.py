#!/usr/bin/env python3
"""Record which speculative-decoding + pipeline-parallel configs vLLM accepts.

Run with the python of a virtualenv that has the vLLM release installed:

    $VENV/bin/python tools/golden/specdecode.py \
        --configs tests/data/hf_configs --out tests/golden [--jobs 2]

This is the config-level check from the recipes bug report: for each case it
builds

    ModelConfig(model=<target dir>, skip_tokenizer_init=True)
    ParallelConfig(pipeline_parallel_size=pp, distributed_executor_backend="mp")
    SpeculativeConfig(method=..., num_speculative_tokens=1, model=<draft dir or None>,
                      target_model_config=..., target_parallel_config=...)

and records whether vLLM accepts it, and if not, the exception. Only local
``config.json`` directories are used (no weights, no hub access). Each case
runs in a fresh interpreter so no state leaks between cases.

Output: ``<out>/specdecode-<vllm version>.json`` with
``{"vllm_version", "platform", "transformers", "cases": [...]}``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback

# (target config dir, [(method, draft config dir or None), ...])
# Directory names double as the "target" / "draft" names in the output.
MATRIX: list[tuple[str, list[tuple[str, str | None]]]] = [
    ("deepseek-v3-tiny", [("mtp", None), ("ngram", None),
                          ("extract_hidden_states", None), ("suffix", None)]),
    ("glm5-tiny", [("mtp", None), ("ngram", None),
                   ("extract_hidden_states", None), ("suffix", None)]),
    ("glm45-tiny", [("mtp", None), ("ngram", None),
                    ("extract_hidden_states", None), ("suffix", None)]),
    ("qwen3-next-tiny", [("mtp", None), ("ngram", None),
                         ("extract_hidden_states", None), ("suffix", None)]),
    ("nemotron-h-tiny", [("mtp", None), ("ngram", None),
                         ("extract_hidden_states", None), ("suffix", None)]),
    ("llama-tiny", [("eagle", "llama-eagle-draft-tiny"),
                    ("eagle3", "llama-eagle3-draft-tiny"),
                    ("eagle3", "llama-eagle-draft-tiny"),
                    ("ngram", None),
                    ("draft_model", "llama-draft-tiny"),
                    # vLLM switches method draft_model to eagle when the draft
                    # path contains "eagle-" (name-based auto-detection).
                    ("draft_model", "llama-eagle-draft-tiny"),
                    ("extract_hidden_states", None),
                    ("suffix", None)]),
    ("qwen3-tiny", [("ngram", None), ("draft_model", "qwen3-draft-tiny"),
                    ("extract_hidden_states", None), ("suffix", None)]),
    # A target without SupportsPP: ngram reuses the target config as draft.
    ("mamba2-tiny", [("ngram", None)]),
]
PP_SIZES = (1, 2)
NUM_SPECULATIVE_TOKENS = 1
MESSAGE_LIMIT = 400

CHILD_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_LOGGING_LEVEL": "WARNING",
    "TOKENIZERS_PARALLELISM": "false",
}


def iter_cases():
    for target, methods in MATRIX:
        for method, draft in methods:
            for pp in PP_SIZES:
                yield {"target": target, "method": method, "pp": pp, "draft": draft}


# --------------------------------------------------------------------------
# child: run one case inside the vLLM venv
# --------------------------------------------------------------------------

def _raise_site(exc: BaseException, site_root: str) -> str | None:
    """'vllm/config/model.py:1204' for the innermost frame inside vllm."""
    tb = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(tb):
        path = frame.filename.replace(os.sep, "/")
        marker = "/site-packages/"
        if marker in path:
            rel = path.split(marker, 1)[1]
            return f"{rel}:{frame.lineno}"
    return None


def _exc_fields(exc: BaseException, configs_dir: str, prefix: str = "") -> dict:
    msg = str(exc).replace(configs_dir, "<hf_configs>").replace(sys.prefix, "<venv>")
    return {
        f"{prefix}exception": type(exc).__name__,
        f"{prefix}message": msg[:MESSAGE_LIMIT],
        f"{prefix}raised_at": _raise_site(exc, configs_dir),
    }


def _known_model_type(model_type: str) -> bool:
    from transformers import CONFIG_MAPPING

    if model_type in CONFIG_MAPPING:
        return True
    try:
        from vllm.transformers_utils.config import _CONFIG_REGISTRY

        return model_type in _CONFIG_REGISTRY
    except Exception:
        return False


def run_case(case: dict, configs_dir: str) -> dict:
    import transformers

    out = dict(case)
    target_dir = os.path.join(configs_dir, case["target"])
    with open(os.path.join(target_dir, "config.json")) as f:
        raw = json.load(f)
    out["target_model_type"] = raw.get("model_type")
    out["target_arch"] = (raw.get("architectures") or [None])[0]
    out["transformers"] = transformers.__version__
    out["num_speculative_tokens"] = NUM_SPECULATIVE_TOKENS
    for key in ("draft_arch", "draft_pp", "draft_model_type", "resolved_method"):
        out[key] = None

    if not _known_model_type(raw.get("model_type", "")):
        out.update(outcome="skipped", exception=None, raised_at=None,
                   message=(f"model_type {raw.get('model_type')!r} is unknown to "
                            f"transformers {transformers.__version__} and to vLLM's "
                            "own config registry"))
        return out

    from vllm.config import ModelConfig, ParallelConfig, SpeculativeConfig
    from vllm.platforms import current_platform

    out["platform"] = getattr(current_platform, "device_type", "") or \
        type(current_platform).__name__.replace("Platform", "").lower()

    stage = "target_model_config"
    try:
        target = ModelConfig(model=target_dir, skip_tokenizer_init=True)
        stage = "parallel_config"
        parallel = ParallelConfig(pipeline_parallel_size=case["pp"],
                                  distributed_executor_backend="mp")
    except BaseException as exc:
        out.update(outcome="error", stage=stage, **_exc_fields(exc, configs_dir))
        return out

    # The target's own PP gate (VllmConfig.__post_init__ calls this); kept
    # separate from the speculative-config outcome.
    try:
        target.verify_with_parallel_config(parallel)
        out["target_pp_check"] = {"outcome": "ok"}
    except BaseException as exc:
        out["target_pp_check"] = {"outcome": "error", **_exc_fields(exc, configs_dir)}

    kwargs = dict(method=case["method"], num_speculative_tokens=NUM_SPECULATIVE_TOKENS,
                  target_model_config=target, target_parallel_config=parallel)
    if case["draft"] is not None:
        kwargs["model"] = os.path.join(configs_dir, case["draft"])
    try:
        spec = SpeculativeConfig(**kwargs)
    except BaseException as exc:
        out.update(outcome="error", stage="speculative_config",
                   **_exc_fields(exc, configs_dir))
        # When a validator rejects the config, the draft configs were often
        # already built: take them from the SpeculativeConfig being validated.
        partial = _spec_from_traceback(exc, SpeculativeConfig)
        if partial is not None:
            _record_draft(out, partial)
        return out

    out.update(outcome="ok", exception=None, message=None, raised_at=None,
               stage="speculative_config")
    _record_draft(out, spec)
    return out


def _spec_from_traceback(exc: BaseException, spec_cls):
    tb = exc.__traceback__
    found = None
    while tb is not None:
        candidate = tb.tb_frame.f_locals.get("self")
        if isinstance(candidate, spec_cls):
            found = candidate
        tb = tb.tb_next
    return found


def _record_draft(out: dict, spec) -> None:
    out["resolved_method"] = getattr(spec, "method", None)
    dmc = getattr(spec, "draft_model_config", None)
    if dmc is not None and not isinstance(dmc, dict):
        archs = getattr(dmc, "architectures", None) or []
        out["draft_arch"] = archs[0] if archs else None
        hf_config = getattr(dmc, "hf_config", None)
        out["draft_model_type"] = getattr(hf_config, "model_type", None)
    dpc = getattr(spec, "draft_parallel_config", None)
    if dpc is not None and not isinstance(dpc, dict):
        out["draft_pp"] = dpc.pipeline_parallel_size


def child_main(case_json: str, configs_dir: str) -> int:
    case = json.loads(case_json)
    try:
        result = run_case(case, configs_dir)
    except BaseException as exc:  # should not happen; keep the sweep going
        result = dict(case, outcome="harness_error",
                      **_exc_fields(exc, configs_dir),
                      traceback=traceback.format_exc(limit=8))
    sys.stdout.flush()
    print("@@RESULT@@" + json.dumps(result, sort_keys=True), flush=True)
    return 0


# --------------------------------------------------------------------------
# parent: fan out one subprocess per case
# --------------------------------------------------------------------------

def spawn(case: dict, configs_dir: str, env: dict, timeout: int) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--configs", configs_dir,
           "--run-case", json.dumps(case)]
    t0 = time.time()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return dict(case, outcome="harness_error", exception="TimeoutExpired",
                    message=f"case exceeded {timeout}s")
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("@@RESULT@@"):
            result = json.loads(line[len("@@RESULT@@"):])
            break
    else:
        tail = (proc.stderr or "")[-MESSAGE_LIMIT:]
        result = dict(case, outcome="harness_error", exception=f"exit {proc.returncode}",
                      message=tail)
    print(f"{case['target']:>16} {case['method']:<22} pp={case['pp']} "
          f"draft={case['draft']} -> {result.get('outcome')} "
          f"{result.get('exception') or ''} ({time.time() - t0:.0f}s)",
          file=sys.stderr, flush=True)
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", required=True, help="directory of <name>/config.json")
    ap.add_argument("--out", help="output directory")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=900, help="seconds per case")
    ap.add_argument("--only-target", nargs="*", help="restrict to these targets")
    ap.add_argument("--merge", action="store_true",
                    help="replace matching cases in an existing output file")
    ap.add_argument("--run-case", help=argparse.SUPPRESS)
    args = ap.parse_args()
    configs_dir = os.path.abspath(args.configs)

    if args.run_case:
        for k, v in CHILD_ENV.items():
            os.environ.setdefault(k, v)
        return child_main(args.run_case, configs_dir)

    if not args.out:
        ap.error("--out is required")

    import importlib.metadata as md

    vllm_version = md.version("vllm")
    transformers_version = md.version("transformers")
    cases = list(iter_cases())
    if args.only_target:
        cases = [c for c in cases if c["target"] in set(args.only_target)]

    started = time.time()
    with tempfile.TemporaryDirectory(prefix="golden-vllm-cache-") as cache_root:
        env = dict(os.environ)
        env.update(CHILD_ENV)
        # Fresh modelinfo cache: vLLM inspects model classes in a subprocess
        # and caches the result under $VLLM_CACHE_ROOT/modelinfos.
        env["VLLM_CACHE_ROOT"] = cache_root
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            results = list(pool.map(lambda c: spawn(c, configs_dir, env, args.timeout),
                                    cases))

    path = os.path.join(args.out, f"specdecode-{vllm_version}.json")
    if args.merge and os.path.exists(path):
        with open(path) as f:
            doc = json.load(f)
        key = lambda c: (c["target"], c["method"], c["pp"], c["draft"])  # noqa: E731
        new = {key(c): c for c in results}
        doc["cases"] = [new.pop(key(c), c) for c in doc["cases"]] + list(new.values())
    else:
        platforms = sorted({r["platform"] for r in results if r.get("platform")})
        doc = {
            "vllm_version": vllm_version,
            "platform": platforms[0] if len(platforms) == 1 else platforms,
            "transformers": transformers_version,
            "num_speculative_tokens": NUM_SPECULATIVE_TOKENS,
            "cases": results,
        }
    os.makedirs(args.out, exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f, sort_keys=True, indent=1)
        f.write("\n")
    counts: dict[str, int] = {}
    for r in doc["cases"]:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    print(f"wrote {path}: {len(doc['cases'])} cases {counts}, "
          f"{time.time() - started:.0f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
