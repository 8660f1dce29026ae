#!/usr/bin/env python3
"""Record the console scripts each vLLM release's wheel declares (its entry_points.txt).

    python3 tools/golden/console_scripts.py 0.4.2 0.6.2 0.8.0 [--out tests/golden/console-scripts.json]

Downloads the release's wheel from the package index (pip download --no-deps, into a temporary
directory removed afterwards) and reads `*.dist-info/entry_points.txt`. Whether a release has a
`vllm` command at all (0.4.x has none) is what compat.vllm.facts.serve_command reads from the
source; tests/test_serve_command_golden.py compares the two. Existing entries are kept; the
ones named are replaced.
"""

from __future__ import annotations

import argparse
import configparser
import hashlib
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def record(version: str, work: Path) -> dict:
    dest = work / version
    subprocess.run(
        [sys.executable, "-m", "pip", "download", f"vllm=={version}", "--no-deps", "--only-binary=:all:",
         "--python-version", "3.11", "-d", str(dest), "-q"],
        check=True,
    )
    wheel = next(dest.glob("vllm-*.whl"))
    with zipfile.ZipFile(wheel) as z:
        names = [n for n in z.namelist() if n.endswith(".dist-info/entry_points.txt")]
        scripts: dict[str, str] = {}
        if names:
            cp = configparser.ConfigParser()
            cp.read_string(z.read(names[0]).decode())
            if cp.has_section("console_scripts"):
                scripts = dict(cp.items("console_scripts"))
    return {
        "wheel": wheel.name,
        "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
        "console_scripts": scripts,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("versions", nargs="+")
    ap.add_argument("--out", type=Path, default=REPO / "tests" / "golden" / "console-scripts.json")
    args = ap.parse_args()
    doc = json.loads(args.out.read_text()) if args.out.exists() else {"releases": {}}
    with tempfile.TemporaryDirectory(prefix="vllm-wheels-") as tmp:
        for v in args.versions:
            print(f"vLLM {v}: downloading the wheel", file=sys.stderr)
            doc["releases"][v] = record(v, Path(tmp))
    doc["releases"] = dict(sorted(doc["releases"].items(), key=lambda kv: [int(p) if p.isdigit() else p for p in kv[0].split(".")]))
    doc["made_by"] = "tools/golden/console_scripts.py"
    tmp_out = args.out.with_suffix(".tmp")
    tmp_out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    tmp_out.replace(args.out)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
