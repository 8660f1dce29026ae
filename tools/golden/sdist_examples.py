#!/usr/bin/env python3
"""Unpack the `examples/` directory of a vLLM sdist, the cwd for serve_args.py.

    python tools/golden/sdist_examples.py VERSION DEST   # prints DEST/vllm-VERSION

Recipes pass `--chat-template examples/tool_chat_template_*.jinja`: paths inside
vLLM's docker image (whose working directory holds the repository's examples/),
not on this machine. vLLM resolves them against the working directory, so the
golden run starts in a directory holding exactly that release's examples/.
The sdist comes from the index's JSON simple API (PEP 691; `COMPAT_INDEX_URL`), sha256-checked (a copy already in the
vllm-compat cache, `$COMPAT_CACHE/sdists/<sha256>.tar.gz`, is used as is).
Only `examples/` is unpacked: a `vllm/` directory there would shadow the install.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tarfile
import urllib.request

INDEX = os.environ.get("COMPAT_INDEX_URL", "https://pypi.org/simple")


def sdist_path(version: str, dest: str) -> str:
    req = urllib.request.Request(f"{INDEX}/vllm/", headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        files = json.load(r)["files"]
    name = f"vllm-{version}.tar.gz"
    sdists = [f for f in files if f["filename"] == name]
    if not sdists:
        raise SystemExit(f"{name} is not on {INDEX}")
    url, sha = sdists[0]["url"], sdists[0]["hashes"]["sha256"]
    cache = os.environ.get("COMPAT_CACHE") or os.path.expanduser("~/.cache/vllm-compat")
    cached = os.path.join(cache, "sdists", f"{sha}.tar.gz")
    if os.path.isfile(cached):
        return cached
    path = os.path.join(dest, f"vllm-{version}.tar.gz")
    h = hashlib.sha256()
    with urllib.request.urlopen(url, timeout=300) as r, open(path, "wb") as out:
        while chunk := r.read(1 << 20):
            h.update(chunk)
            out.write(chunk)
    if h.hexdigest() != sha:
        os.unlink(path)
        raise SystemExit(f"sha256 mismatch for {url}")
    return path


def main() -> int:
    version, dest = sys.argv[1], sys.argv[2]
    os.makedirs(dest, exist_ok=True)
    root = os.path.join(dest, f"vllm-{version}")
    with tarfile.open(sdist_path(version, dest), "r:gz") as tf:
        members = [m for m in tf.getmembers()
                   if m.name.split("/", 2)[1:2] == ["examples"] and (m.isfile() or m.isdir())]
        tf.extractall(dest, members=members, filter="data")
    print(root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
