"""Count a build's `unknown` rows by reason (issue 16's before/after figures).

Usage: python tools/unknown_reasons.py BUILD.db [--all-judged] [--format text|json]

Rows: the judged verdicts at each recipe's pin (pinned = 1), or every judged row with
--all-judged. Each unknown row is counted under the category of its decisive step (the first
`[unknown]` step of its chain). Besides, two figures the issue tracks for every row (any
status): rows whose chain carries the note that the release's argv rewrite is not verified,
and rows at a release that is not analysable.
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import sys
from collections import Counter
from pathlib import Path

#: (category, pattern over the decisive unknown step), first match wins.
CATEGORIES = [
    ("release not analysable", r"not analysable|unavailable"),
    ("served by vLLM-Omni", r"vLLM-Omni"),
    ("recipe problem", r"^recipe problem"),
    ("model config unresolved", r"model config of .* unresolved|not in vLLM .*registry"),
    ("argument replay on an unverified argv rewrite", r"not verified for vLLM .*argv rewrite"),
    ("gate undecided", r"^(?:[\w ]+: )?gate [\w.-]+ \(\w+\) may apply"),
    ("speculative token count (draft n_predict)", r"num_speculative_tokens"),
    ("draft checkpoint unresolved", r"draft checkpoint .* unresolved"),
    ("MTP config", r"hf_config_override|MTP layer count"),
    ("expert count unknown", r"expert count of .* unknown"),
    ("parser plugin", r"parser-plugin may register"),
    ("parsers unknown", r"parsers of vLLM .* unknown"),
    ("flag type", r"not known to be boolean"),
    ("speculative methods unknown", r"speculative methods of vLLM .* unknown"),
    ("capability unknown", r"supports_pp of .* unknown"),
    ("argument value", r"^(?:[\w ]+: )?(?:--|argument|value)"),
]
NOTE_UNVERIFIED = "is not one the argument replay is verified against"


def categorize(step: str) -> str:
    for name, pattern in CATEGORIES:
        if re.search(pattern, step):
            return name
    return "other: " + re.sub(r"\d+(\.\d+)+", "<v>", step)[:90]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("db", type=Path)
    ap.add_argument("--all-judged", action="store_true")
    ap.add_argument("--format", choices=("text", "json"), default="text")
    args = ap.parse_args(argv)
    if not args.db.is_file():
        print(f"unknown_reasons: {args.db}: no such database", file=sys.stderr)
        return 2
    con = sqlite3.connect(f"{args.db.resolve().as_uri()}?mode=ro", uri=True)
    where = "judged = 1" + ("" if args.all_judged else " AND pinned = 1")
    rows = con.execute(f"SELECT vllm_version, status, chain FROM verdict WHERE {where}").fetchall()
    by_reason: Counter[str] = Counter()
    by_status: Counter[str] = Counter()
    noted: Counter[str] = Counter()
    unanalysable = 0
    for version, status, chain in rows:
        by_status[status] += 1
        steps = json.loads(chain or "[]")
        if any(NOTE_UNVERIFIED in s for s in steps):
            noted[version] += 1
        if any("not analysable" in s for s in steps):
            unanalysable += 1
        if status == "unknown":
            step = next((s[len("[unknown] "):] for s in steps if s.startswith("[unknown] ")), "")
            by_reason[categorize(step)] += 1
    doc = {"rows": len(rows), "by_status": dict(by_status), "unknown_by_reason": dict(by_reason.most_common()),
           "unverified_rewrite_note": {"rows": sum(noted.values()), "releases": len(noted)},
           "not_analysable": unanalysable}
    if args.format == "json":
        print(json.dumps(doc, indent=1))
    else:
        print(f"{doc['rows']} rows ({', '.join(f'{k} {v}' for k, v in sorted(by_status.items()))})")
        for reason, n in by_reason.most_common():
            print(f"  {n:6d}  {reason}")
        print(f"unverified argv rewrite note: {sum(noted.values())} rows at {len(noted)} releases")
        print(f"not analysable: {unanalysable} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
