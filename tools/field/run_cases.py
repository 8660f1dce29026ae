#!/usr/bin/env python3
"""Judge every field case (tests/field/cases.yaml) with compat lint at the case's release.

Each case is a `vllm serve` command a reporter ran at a stated vLLM release, with the
startup outcome quoted from the report. This runs the project's lint in-process
(compat.api.lint, the index not searched, no Hub access: the resolver's offline sources
only) and prints one row per case:

    id | release | expected | compat | compat message | agree

then the summary that drives the engine work: failures caught (blocked), failures
judged ok, failures judged unknown (or warning), working commands judged blocked.

    python3 tools/field/run_cases.py                 # all cases, a table
    python3 tools/field/run_cases.py --case ID ...   # some cases
    python3 tools/field/run_cases.py --format json   # rows as JSON (with every finding)
    python3 tools/field/run_cases.py --validate      # schema check only

A case whose argv names a local path and carries `model_id` is judged with the id in the
path's place (the model positional, or the value of --model); nothing else is rewritten.
The first scan of a release downloads its sdist (cached in the compat cache).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "tests" / "field" / "cases.yaml"
SCHEMA = ROOT / "schema" / "field_cases.schema.json"
sys.path.insert(0, str(ROOT))


def load_cases(path: Path = CASES) -> list[dict[str, Any]]:
    """The cases, checked against the schema (and for unique ids)."""
    import jsonschema
    import yaml

    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(data), key=lambda e: list(e.path))
    if errors:
        lines = [f"  {'/'.join(str(p) for p in e.path) or '<root>'}: {e.message}" for e in errors[:20]]
        raise SystemExit(f"{path}: {len(errors)} schema violation(s)\n" + "\n".join(lines))
    ids = [c["id"] for c in data["cases"]]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise SystemExit(f"{path}: duplicate case ids: {', '.join(dupes)}")
    return data["cases"]


def lint_argv(case: dict[str, Any]) -> list[str]:
    """The argv compat judges: the reported one, with `model_id` in place of a local model path.
    An `api_server` case (the OpenAI server module, which takes `--model X`) is judged as
    `vllm serve X ...`: the same argument parser with the model as the positional."""
    argv = list(case["argv"])
    if case.get("entrypoint") == "api_server":
        argv = _model_to_positional(argv)
    model_id = case.get("model_id")
    if not model_id:
        return argv
    if len(argv) > 2 and not argv[2].startswith("-"):
        argv[2] = model_id
        return argv
    for i, a in enumerate(argv):
        if a == "--model" and i + 1 < len(argv):
            argv[i + 1] = model_id
            return argv
        if a.startswith("--model="):
            argv[i] = f"--model={model_id}"
            return argv
    return argv


def _model_to_positional(argv: list[str]) -> list[str]:
    for i, a in enumerate(argv):
        if a == "--model" and i + 1 < len(argv):
            return [*argv[:2], argv[i + 1], *argv[2:i], *argv[i + 2:]]
        if a.startswith("--model="):
            return [*argv[:2], a.removeprefix("--model="), *argv[2:i], *argv[i + 1:]]
    return argv


def _one_line(text: str, limit: int) -> str:
    lines = [ln.strip() for ln in (text or "").strip().splitlines()
             if ln.strip() and not ln.strip().startswith("For further information")]
    s = " / ".join(lines)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def judge(case: dict[str, Any]) -> dict[str, Any]:
    """Run compat lint on the case at its release; the verdict and the finding that decided it."""
    from compat.api import lint

    argv = lint_argv(case)
    version = case["vllm_version"]
    row: dict[str, Any] = {"id": case["id"], "release": version, "expected": case["outcome"],
                           "stage": case["stage"], "argv_judged": argv}
    t0 = time.monotonic()
    try:
        result = lint(argv, None, [version], search=False, progress=lambda _m: None)
    except SystemExit:
        raise
    except Exception as exc:  # a crash is a result too: report it, do not stop the table
        if "neither in the database nor available" in str(exc):  # not on the package index
            row.update(status="n/a", finding="release unavailable", findings=[],
                       message=f"vLLM {version} is not on the package index: {exc}")
            row["seconds"] = round(time.monotonic() - t0, 1)
            return row
        row.update(status="error", finding="", message=f"{type(exc).__name__}: {exc}", findings=[])
        row["seconds"] = round(time.monotonic() - t0, 1)
        return row
    rv = next((r for r in result.releases if r.version == version), None)
    if rv is None:
        row.update(status="error", finding="", message=f"release {version} not judged", findings=[])
        return row
    findings = [{"status": f.status, "step": f.step, "message": f.message, "stage": f.stage,
                 "evidence": [e for e in f.evidence if e]} for f in rv.findings]
    if case.get("entrypoint") == "api_server" and any(
            getattr(f, "key", "") == "arg:no-vllm-command" for f in rv.findings):
        # the reporter's launcher exists there, `vllm serve` does not: compat judges the latter
        row.update(status="n/a", findings=findings, seconds=round(time.monotonic() - t0, 1),
                   finding="out of scope", message=f"vLLM {version} has no `vllm serve`; the case ran "
                   "python -m vllm.entrypoints.openai.api_server")
        return row
    deciding = next((f for f in findings if f["status"] == rv.status), None)
    row.update(status=rv.status, findings=findings, seconds=round(time.monotonic() - t0, 1),
               finding=deciding["step"] if deciding else "",
               message=(deciding["message"] or deciding["step"]) if deciding else "")
    return row


def agreement(expected: str, status: str) -> str:
    """yes / no / unknown: does compat's verdict match the reported outcome?"""
    if status in ("error", "n/a"):
        return status
    if expected == "fails":
        return "yes" if status == "blocked" else ("no" if status == "ok" else "unknown")
    return "yes" if status in ("ok", "warning") else ("no" if status == "blocked" else "unknown")


def summary(rows: list[dict[str, Any]]) -> dict[str, int]:
    fails = [r for r in rows if r["expected"] == "fails"]
    works = [r for r in rows if r["expected"] == "works"]
    return {
        "cases": len(rows),
        "failures": len(fails),
        "working": len(works),
        "failures caught (blocked)": sum(r["status"] == "blocked" for r in fails),
        "failures judged ok": sum(r["status"] == "ok" for r in fails),
        "failures judged unknown": sum(r["status"] == "unknown" for r in fails),
        "failures judged warning": sum(r["status"] == "warning" for r in fails),
        "working judged ok/warning": sum(r["status"] in ("ok", "warning") for r in works),
        "working judged blocked": sum(r["status"] == "blocked" for r in works),
        "working judged unknown": sum(r["status"] == "unknown" for r in works),
        "out of scope (no `vllm serve` at the release, or not on the index)": sum(
            r["status"] == "n/a" for r in rows),
        "errors": sum(r["status"] == "error" for r in rows),
    }


def table(rows: list[dict[str, Any]], width: int) -> str:
    head = ["id", "release", "expected", "compat", "compat message", "agree"]
    body = [[r["id"], r["release"], r["expected"], r["status"], _one_line(r["message"], width), r["agree"]]
            for r in rows]
    widths = [max(len(str(x[i])) for x in [head, *body]) for i in range(len(head))]
    fmt = " | ".join("{:<%d}" % w for w in widths)
    out = [fmt.format(*head), "-+-".join("-" * w for w in widths)]
    out += [fmt.format(*b) for b in body]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=Path, default=CASES, help="the cases file (default: %(default)s)")
    ap.add_argument("--case", action="append", default=[], help="judge only this case id (repeatable)")
    ap.add_argument("--format", choices=("table", "json", "markdown"), default="table")
    ap.add_argument("--width", type=int, default=110, help="compat message column width (table)")
    ap.add_argument("--validate", action="store_true", help="check the cases file and stop")
    args = ap.parse_args(argv)

    cases = load_cases(args.cases)
    if args.validate:
        print(f"{args.cases}: {len(cases)} cases valid")
        return 0
    if args.case:
        unknown = sorted(set(args.case) - {c["id"] for c in cases})
        if unknown:
            raise SystemExit(f"no such case: {', '.join(unknown)}")
        cases = [c for c in cases if c["id"] in args.case]
    rows = []
    for c in cases:
        print(f"judging {c['id']} at {c['vllm_version']}", file=sys.stderr)
        row = judge(c)
        row["agree"] = agreement(row["expected"], row["status"])
        rows.append(row)
    totals = summary(rows)
    if args.format == "json":
        print(json.dumps({"rows": rows, "summary": totals}, indent=1))
    elif args.format == "markdown":
        print("| id | release | expected | compat | compat message | agree |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            msg = _one_line(r["message"], args.width).replace("|", "\\|")
            print(f"| {r['id']} | {r['release']} | {r['expected']} | {r['status']} | {msg} | {r['agree']} |")
        print()
        for k, v in totals.items():
            print(f"- {k}: {v}")
    else:
        print(table(rows, args.width))
        print()
        for k, v in totals.items():
            print(f"{k:>28}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
