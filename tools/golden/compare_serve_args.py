#!/usr/bin/env python3
"""Compare vllm-compat's argument replay with a serve-args golden file, as if the release's
argv rewrite were verified.

    python3 -m tools.golden.compare_serve_args 0.11.0 [--examples 3] [--json out.json]
    python3 tools/golden/compare_serve_args.py 0.11.0

Runs from a vllm-compat checkout (its `compat` package), on `tests/golden/serve-args-VER.json.gz`
and the release's sdist (the vllm-compat cache). Per non-omni row it applies the checks of
tests/test_serve_args_golden.py (same rules, same order) with the release's `argv_rewrite`
shape treated as verified (data/argv_rewrites.yaml is not read for it), and classifies each
disagreement:

* `ok-where-vLLM-rejects`: vLLM rejects the argv, the replay has no blocked finding;
* `blocked-where-vLLM-accepts`: vLLM accepts, the replay has a finding (its status is shown);
* `message-differs`: both reject, at a different stage, exception or message;
* `verdict-not-blocked`: both reject, but the verdict of a command made of the argv is not blocked;
* `parsed-value`: vLLM parsed the argv, and a parsed value differs from the replay's.

Disagreements are grouped by cause (kind, vLLM's stage/exception/message head with quoted
values masked, and the replay's step head) with a few example argvs each. Exit status 0 when
every row agrees.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# tests/conftest.py's snapshot (beside the checkout), or beside the directory of worktrees
SNAPSHOTS = (REPO.parent / "shared" / "recipes-snapshot", REPO.parent.parent / "shared" / "recipes-snapshot")
GOLDEN = REPO / "tests" / "golden"

_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_NUMBER = re.compile(r"\b\d+(\.\d+)?\b")


def _filled(message: str) -> str:
    """The replay's message with `$NAME` as the harness filled it (serve_args.shell_value): the
    same convention as tests/test_serve_args_golden.py."""
    return re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?",
                  lambda m: "29550" if m.group(1).upper().endswith("PORT") else "10.0.0.1", message)


def norm(message: str) -> str:
    return "\n".join(line.rstrip() for line in message.strip().split("\n")
                     if not line.strip().startswith("For further information visit"))


def mask(text: str, limit: int = 110) -> str:
    """A message head with quoted values and numbers masked: the cause, not the instance."""
    text = _NUMBER.sub("N", _QUOTED.sub("'…'", norm(text).split("\n")[0]))
    return text if len(text) <= limit else text[:limit] + "…"


_ARG_ERROR = re.compile(r"error: (argument [^:]+: [^:'0-9]+?)(?::|$)")
_SHELL_FILLED = re.compile(r"(?<![\w.])(10\.0\.0\.1|29550)(?![\w.])")


def what(stage: str, exc: str, message: str) -> str:
    """The kind of rejection, without the instance: `parse argument --x: invalid choice`,
    `parse unrecognized arguments`, `api_server KeyError invalid tool call parser`, ..."""
    text = norm(message)
    if exc == "SystemExit":
        if "error: unrecognized arguments" in text:
            return f"{stage} unrecognized arguments"
        m = _ARG_ERROR.search(text)
        if m:
            return f"{stage} {m.group(1).strip()}"
    if exc == "KeyError":
        return f"{stage} KeyError {text.strip(chr(39)).split(':')[0]}"
    return f"{stage} {exc}: {mask(text, 70)}"


def text_difference(vllm: str, replay: str, model: str | None = None) -> str:
    """How two messages of the same kind differ."""
    a, b = norm(vllm), norm(replay)
    if model and "unrecognized arguments: " in b:
        without = b.replace(f"unrecognized arguments: {model} ", "unrecognized arguments: ")
        if without != b and text_difference(a, without) != "the text":
            return "the model id, which the replay also lists as unrecognized (it has no `model_tag` positional)"
    # serve_args.py fills a shell placeholder as the user's shell would (shell_value); the
    # replay keeps `$NAME`
    filled = re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?",
                    lambda m: "29550" if m.group(1).upper().endswith("PORT") else "10.0.0.1", b)
    if filled == a:
        return "a shell placeholder only: vLLM prints the value the harness filled in, the replay `$NAME`"
    lists = re.compile(r"\{ ?([^{}]*?) ?\}")

    def ordered(text: str) -> str:
        return lists.sub(lambda m: ",".join(sorted(m.group(1).split(","))), text)

    if ordered(a) == ordered(filled):
        return "the order of the names listed in `{ ... }` only"
    return "the text"


def load_knowledge(version: str):
    from compat.scan import release_facts
    from compat.sources.pypi import cache_dir, tree_from_index
    from compat.verdict.knowledge import knowledge_from_facts

    tree = tree_from_index(version, cache=cache_dir())
    facts, _ = release_facts(tree)
    notes = json.loads((facts.get("release") or {}).get("notes") or "[]")
    return knowledge_from_facts(version, tree, facts, notes)


def treat_as_verified(k) -> str:
    """Make the engine treat this release's argv rewrite shape as verified (this process only)."""
    import compat.verdict.engine as engine

    shape = k.release_facts.get("argv_rewrite")
    sha = shape.get("sha") if isinstance(shape, dict) else None
    if not sha:
        raise SystemExit(f"vLLM {k.version} has no argv_rewrite fact")
    verified = engine._verified_rewrites() | {sha}
    engine._verified_rewrites = lambda: verified
    return sha


def compare(version: str, golden_path: Path, snapshot: Path) -> tuple[dict, list[dict]]:
    sys.path.insert(0, str(REPO / "tests"))
    from test_serve_args_golden import _value_differences

    from compat.hf import ModelResolver
    from compat.recipes import Combination
    from compat.verdict.arguments import check_arguments
    from compat.verdict.engine import Judge, argv_rewrite_verified
    from compat.verdict.shell import read_placeholders

    with gzip.open(golden_path, "rt", encoding="utf-8") as fh:
        doc = json.load(fh)
    k = load_knowledge(version)
    sha = treat_as_verified(k)
    assert argv_rewrite_verified(k)
    shell = read_placeholders(snapshot)
    judge = Judge(k, ModelResolver(trees=[k.tree]), shell=shell)
    rows = [r for r in doc["rows"] if not r[1]]
    same_python = tuple(int(x) for x in doc["python"].split(".")[:2]) == sys.version_info[:2]
    defaults = k.serve_parser.defaults
    out: list[dict] = []
    counts = collections.Counter(rows=len(rows))
    for argv, _omni, _vars, stage, exc, message, values in rows:
        findings = judge.arguments(argv) or []
        blocked = [f for f in findings if f.status == "blocked"]
        result = check_arguments(k, argv, shell)
        first = next((f for f in result.findings if f.status == "blocked"), None)
        shown = " ".join(argv)
        model = argv[2] if len(argv) > 2 and not argv[2].startswith("-") else None

        def mask(text: str, limit: int = 110, model=model) -> str:
            """mask(), with the argv's model id shown as <model> (a cause, not an instance)."""
            return globals()["mask"](text.replace(model, "<model>") if model else text, limit)

        def what(stage: str, exc: str, message: str, model=model) -> str:
            return globals()["what"](stage, exc, message.replace(model, "<model>") if model else message)

        bad: list[dict] = []
        if stage != "parse" and result.namespace is not None:
            for dest, (want, got) in _value_differences(values, result.namespace, defaults).items():
                bad.append({"kind": "parsed-value", "cause": f"{dest}: vLLM {want!r}, vllm-compat {got!r}",
                            "argv": shown})
        if stage == "ok":
            counts["vllm_accepts"] += 1
            if findings:
                f = findings[0]
                bad.append({"kind": "blocked-where-vLLM-accepts" if f.status == "blocked"
                            else f"{f.status}-where-vLLM-accepts",
                            "cause": f"replay: {mask(f.step, 90)}", "argv": shown,
                            "replay": f"{f.status} {f.step[:300]}"})
        else:
            counts["vllm_rejects"] += 1
            vllm_said = f"{stage} {exc}: {mask(message)}"
            if not blocked or first is None:
                bad.append({"kind": "ok-where-vLLM-rejects", "cause": f"vLLM {what(stage, exc, message)}; replay "
                            f"{', '.join(sorted({mask(f.step, 80) for f in findings})) or 'nothing'}", "argv": shown,
                            "vllm": f"{stage} {exc}: {norm(message)[:300]}",
                            "replay": [f"{f.status} {f.step[:200]}" for f in findings] or "nothing"})
            elif (same_python and norm(_filled(blocked[0].message)) != norm(message)) or (first.stage, first.exception) != (
                    stage, exc):
                ours = what(first.stage, first.exception, blocked[0].message)
                theirs = what(stage, exc, message)
                cause = (f"same kind ({theirs}), differs in {text_difference(message, blocked[0].message, model)}"
                         if ours == theirs else f"vLLM {theirs} | replay {ours}")
                bad.append({"kind": "message-differs", "cause": cause,
                            "argv": shown, "vllm": f"{stage} {exc}: {norm(message)[:300]}",
                            "replay": f"{first.stage} {first.exception}: {norm(blocked[0].message)[:300]}"})
            else:
                combo = Combination(recipe="", model_id=argv[2], variant="", strategy="", feature="", mode="",
                                    hardware="", platform="cuda", argvs=(("", tuple(argv)),), vllm_pin="",
                                    docker_pin=None, gated=False, omni=False, problems=())
                status = judge.judge(combo).status
                if status != "blocked":
                    bad.append({"kind": "verdict-not-blocked", "cause": f"verdict {status}; vLLM {vllm_said}",
                                "argv": shown})
        if bad:
            counts["disagree"] += 1
            out.extend(bad)
        else:
            counts["agree"] += 1
    summary = {"vllm_version": version, "argv_rewrite": sha, "golden": str(golden_path.relative_to(REPO)),
               "golden_python": doc["python"], "messages_compared": same_python, **counts,
               "by_kind": dict(collections.Counter(d["kind"] for d in out))}
    return summary, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("version")
    ap.add_argument("--golden", help="golden file (default tests/golden/serve-args-VERSION.json.gz)")
    ap.add_argument("--examples", type=int, default=3, help="example argvs per cause")
    ap.add_argument("--json", help="also write every disagreement to this JSON file")
    ap.add_argument("--snapshot", type=Path, help="recipes snapshot (default: beside the checkout, as the tests)")
    args = ap.parse_args()
    snapshot = args.snapshot or next((p for p in SNAPSHOTS if (p / "taxonomy.yaml").is_file()), None)
    if snapshot is None or not (snapshot / "taxonomy.yaml").is_file():
        raise SystemExit(f"no recipes snapshot at {args.snapshot or ' or '.join(map(str, SNAPSHOTS))}")
    sys.path.insert(0, str(REPO))
    golden = Path(args.golden) if args.golden else GOLDEN / f"serve-args-{args.version}.json.gz"
    summary, out = compare(args.version, golden.resolve(), snapshot)
    print(json.dumps(summary, indent=1))
    groups: dict[tuple[str, str], list[dict]] = collections.defaultdict(list)
    for d in out:
        groups[(d["kind"], d["cause"])].append(d)
    for (kind, cause), items in sorted(groups.items(), key=lambda kv: (kv[0][0], -len(kv[1]), kv[0][1])):
        print(f"\n[{kind}] x{len(items)}: {cause}")
        for d in items[:args.examples]:
            print(f"   {d['argv']}")
            for key in ("vllm", "replay"):
                if key in d and d is items[0]:
                    print(f"      {key}: {d[key]}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"summary": summary, "disagreements": out}, fh, indent=1)
    return 0 if summary["rows"] == summary.get("agree", 0) else 1


if __name__ == "__main__":
    sys.exit(main())
