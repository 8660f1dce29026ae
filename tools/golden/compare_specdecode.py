#!/usr/bin/env python3
"""Compare vLLM's own verdicts on speculative-decoding commands with vllm-compat's.

    python3 tools/golden/compare_specdecode.py tests/golden/specdecode-recipes-0.33.0.json [...]
        [--json report.json] [--db compat.db]

For each case of a `specdecode-recipes-<ver>.json` file (tools/golden/specdecode_recipes.py) the
same command is judged by the project's engine at that release, as `compat lint --vllm <ver>
--hf-config-dir DIR -- vllm serve ...` does (compat.lint's building blocks, built once per
release instead of once per command): the tiny configs are laid out as
`DIR/golden/<name>/config.json`, so the model ids in the command are `golden/<name>`.

vLLM's verdict is the case's `outcome` (first failing stage among parse, engine_args,
target_model_config, parallel_config, speculative_config, engine_config, drafter); compat's is
the lint status (ok / warning count as starting). Printed: agreement per release, then
every disagreement in classes

  (a) vLLM raises, compat says ok or warning
  (b) vLLM raises, compat says unknown
  (c) vLLM accepts, compat blocks
  (d) vLLM accepts, compat says unknown

and apart, (s): vLLM accepts, compat blocks only on a startup gate (a check vLLM makes at model
load or engine start, which the golden run does not reach; not counted as a disagreement).

and, apart, the cases left out of the agreement: those whose target or draft config the
golden venv's transformers (pinned from the release's own test requirements) does not know
(`env`), since vLLM's verdict there is about the environment, not the command.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
CONFIGS = REPO / "tests" / "data" / "hf_configs"
ORG = "golden"
STARTS = ("ok", "warning")


def lay_out(tmp: Path) -> Path:
    root = tmp / "hf"
    for d in sorted(CONFIGS.iterdir()):
        if (d / "config.json").is_file():
            (root / ORG / d.name).mkdir(parents=True)
            shutil.copy(d / "config.json", root / ORG / d.name / "config.json")
    return root


def command(case: dict) -> list[str]:
    """The case's argv with the config directory names as `golden/<name>` model ids."""
    names = {p.name for p in CONFIGS.iterdir()}
    argv = list(case["argv"])
    argv[2] = f"{ORG}/{argv[2]}"
    out = []
    for i, a in enumerate(argv):
        if i > 0 and argv[i - 1] == "--speculative-config":
            spec = json.loads(a)
            if spec.get("model") in names:
                spec["model"] = f"{ORG}/{spec['model']}"
            a = json.dumps(spec)
        elif i > 0 and argv[i - 1] == "--speculative-config.model" and a in names:
            a = f"{ORG}/{a}"
        out.append(a)
    return out


def env_limited(case: dict) -> str | None:
    """Why vLLM's verdict is about the golden environment, if it is: a target or draft
    config whose model_type the venv's transformers (pinned from the release's own test
    requirements) and vLLM's config registry do not know, when vLLM fails at or after it."""
    known = case.get("config_known") or {}
    unknown = [role for role, ok in known.items() if ok is False]
    if unknown and case.get("outcome") == "error" and case.get("stage") in (
            "target_model_config", "speculative_config", "engine_config"):
        return f"{'/'.join(unknown)} model_type unknown to transformers {case.get('transformers')}"
    return None


class Judges:
    """compat's engine per release, built once (what compat.lint.lint builds per command)."""

    def __init__(self, hf_dir: Path, db: Path | None) -> None:
        from compat.lint import _Facts

        self.hf_dir = hf_dir
        self.facts = _Facts(db, lambda m: print(m, file=sys.stderr))
        self.pools: dict = {}

    def pool(self, version: str):
        if version not in self.pools:
            from compat.lint import _models
            from compat.verdict.engine import Judge
            from compat.verdict.releases import ReleasePool

            k = self.facts.knowledge(version)
            tree = self.facts.tree(version)
            models = _models(self.facts, [version], [tree] if tree is not None else [], self.hf_dir, False, None)
            shell = self.facts.shell()
            self.pools[version] = ReleasePool({version: Judge(k, models, shell=shell)}, models, index=None,
                                              shell=shell)
        return self.pools[version]

    def judge(self, version: str, argv: list[str]):
        from compat.recipes import Combination

        combo = Combination(recipe="", model_id=argv[2], variant="", strategy="", feature="", mode="",
                            hardware="", platform="cuda", argvs=(("", tuple(argv)),), vllm_pin="",
                            docker_pin=None, gated=False, omni=False, problems=())
        return self.pool(version).outcome(version, combo)


def startup_only(outcome) -> bool:
    """compat blocks only on startup gates (`gates.yaml` rules with effect startup_error): checks
    vLLM makes at model load or engine start (e.g. the V2 runner's aux-hidden-states relay over
    PP, eagle3_utils.py), past the stages the golden run executes (it stops after choosing the
    drafter class, without loading a model)."""
    blocking = [f for f in outcome.findings if f.status == "blocked"]
    return bool(blocking) and all(f.stage == "startup" and "gate:" in f.key for f in blocking)


def classify(gold: str, ours: str, outcome=None) -> str | None:
    if gold == "ok" and ours == "blocked" and outcome is not None and startup_only(outcome):
        return "s"
    if gold == "error" and ours in STARTS:
        return "a"
    if gold == "error" and ours == "unknown":
        return "b"
    if gold == "ok" and ours == "blocked":
        return "c"
    if gold == "ok" and ours == "unknown":
        return "d"
    return None


CLASS_TEXT = {"a": "vLLM raises, compat says ok/warning", "b": "vLLM raises, compat says unknown",
              "c": "vLLM accepts, compat blocks", "d": "vLLM accepts, compat says unknown",
              "s": "vLLM accepts up to the drafter, compat blocks on a startup gate past it (not compared)"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("golden", nargs="+", type=Path)
    ap.add_argument("--db", type=Path, help="a compat database holding the releases (default: scan on demand)")
    ap.add_argument("--json", type=Path, help="write every row here")
    ap.add_argument("--quiet", action="store_true", help="only the summary lines")
    ap.add_argument("--write-known", type=Path,
                    help="write the disagreeing case ids per release (the test's known list) here")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="compare-specdecode-") as tmp:
        judges = Judges(lay_out(Path(tmp)), args.db)
        for path in args.golden:
            doc = json.loads(path.read_text())
            version = doc["vllm_version"]
            for case in doc["cases"]:
                if case.get("outcome") not in ("ok", "error"):
                    continue
                argv = command(case)
                o = judges.judge(version, argv)
                blocking = [f for f in o.findings if f.status == o.status and f.status not in STARTS]
                cfg = o.config_status
                rows.append({
                    "version": version, "id": case["id"], "group": case["group"], "argv": argv,
                    "vllm": case["outcome"], "vllm_stage": case.get("stage"),
                    "vllm_exception": case.get("exception"), "vllm_message": (case.get("message") or "")[:300],
                    "vllm_raised_at": case.get("raised_at"), "runner": case.get("runner"),
                    "compat": o.status, "compat_config_status": o.config_status,
                    "compat_message": (o.message or "")[:300],
                    "compat_steps": [f"[{f.status}/{f.stage}] {f.step}" for f in blocking][:4],
                    "env": env_limited(case),
                    "class": None if env_limited(case) else classify(case["outcome"], o.status, o),
                    # compat's verdict from its argument and config steps only (its startup gates
                    # replay vLLM code past engine_config, which the golden run does not reach)
                    "config_class": None if env_limited(case) else classify(case["outcome"], cfg),
                    "compat_stages": sorted({f.stage for f in blocking}),
                })
    by_version: dict[str, list] = defaultdict(list)
    for r in rows:
        by_version[r["version"]].append(r)
    for version, rs in by_version.items():
        judged = [r for r in rs if not r["env"]]
        agree = sum(1 for r in judged if r["class"] is None)
        beyond = sum(1 for r in judged if r["class"] == "s")
        judged = [r for r in judged if r["class"] != "s"]
        classes = Counter(r["class"] for r in judged if r["class"])
        gold = Counter(r["vllm"] for r in judged)
        cfg_agree = sum(1 for r in judged if r["config_class"] is None)
        print(f"{version}: {len(rs)} cases, {len(rs) - len(judged) - beyond} env-limited, {beyond} startup-gate "
              f"only (s), {len(judged)} compared "
              f"(vLLM {gold.get('ok', 0)} ok / {gold.get('error', 0)} error): agreement {agree}/{len(judged)}"
              f" ({100 * agree / max(1, len(judged)):.1f}%); " +
              ", ".join(f"({c}) {n}" for c, n in sorted(classes.items())) +
              f"; config-stage verdict only: {cfg_agree}/{len(judged)}")
    if not args.quiet:
        for version, rs in by_version.items():
            for cls in ("a", "b", "c", "d", "s"):
                hits = [r for r in rs if r["class"] == cls]
                if not hits:
                    continue
                print(f"\n== {version} ({cls}) {CLASS_TEXT[cls]}: {len(hits)}")
                for r in hits:
                    print(f"  {r['id']}")
                    print(f"     vLLM  : {r['vllm']} at {r['vllm_stage']} {r['vllm_exception'] or ''} "
                          f"{r['vllm_raised_at'] or ''}: {r['vllm_message'][:200]}")
                    print(f"     compat: {r['compat']} (config-stage {r['compat_config_status']}; blocking "
                          f"stages {','.join(r['compat_stages']) or '-'}): {r['compat_message'][:200]}")
                    for s in r["compat_steps"]:
                        print(f"             {s[:200]}")
            env = [r for r in rs if r["env"]]
            if env:
                print(f"\n== {version} env-limited (not compared): {len(env)}")
                for r in env:
                    print(f"  {r['id']}: {r['env']} (compat: {r['compat']})")
    if args.write_known:
        known: dict[str, list[str]] = {}
        if args.write_known.exists():
            known = json.loads(args.write_known.read_text())
        for version, rs in by_version.items():
            known[version] = sorted(r["id"] for r in rs if r["class"] and r["class"] != "s")
        args.write_known.write_text(json.dumps(dict(sorted(known.items())), indent=1) + "\n")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
