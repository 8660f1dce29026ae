#!/usr/bin/env python3
"""Write every distinct argv a vllm-compat build synthesized, for serve_args.py.

    python tools/golden/export_argvs.py --db compat.db -o argvs.json

Reads the build database (table `command`: one JSON `[[role, argv], ...]` per
combination; table `verdict` for which combinations vLLM-Omni serves). Output:
`{"argvs": [{"argv": [...], "omni": bool}, ...]}`, sorted, each argv once; an
argv is `omni` when every combination that synthesizes it is served by
vLLM-Omni (`meta.tasks: omni`), whose CLI is not vLLM's.

Standard library only: it runs with any python3, no vllm-compat install needed.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys

OMNI_REASON = "served by vLLM-Omni"


def export(db: str) -> list[dict]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    omni_of: dict[int, bool] = {}
    for command_id, reason in con.execute("select command_id, reason from verdict"):
        is_omni = (reason or "").startswith(OMNI_REASON)
        omni_of[command_id] = omni_of.get(command_id, True) and is_omni
    seen: dict[tuple[str, ...], bool] = {}
    for command_id, text in con.execute("select id, argv from command"):
        for _role, argv in json.loads(text):
            key = tuple(argv)
            omni = omni_of.get(command_id, False)
            seen[key] = seen.get(key, True) and omni
    con.close()
    return [{"argv": list(a), "omni": o} for a, o in sorted(seen.items())]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", required=True, help="database written by `compat build`")
    ap.add_argument("-o", "--out", required=True, help="output JSON file")
    args = ap.parse_args()
    rows = export(args.db)
    with open(args.out, "w") as fh:
        json.dump({"argvs": rows}, fh, separators=(",", ":"))
        fh.write("\n")
    print(f"wrote {args.out}: {len(rows)} argvs ({sum(r['omni'] for r in rows)} omni)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
