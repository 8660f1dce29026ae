"""config.json files on disk: an HF cache (`--hf-config-dir ~/.cache/huggingface/hub`) or a plain tree.

Layouts tried, in order, for `org/name`:

* HF cache: `models--org--name/snapshots/<rev>/config.json` (also under `hub/`).
  The snapshot `refs/main` points at wins; else the newest snapshot that has a
  config.json (by the file's modification time).
* Plain: `org/name/config.json`.

Provenance is the path relative to the directory given, so no machine path leaks
into rows.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any


def _cache_dirs(root: Path, model_id: str) -> list[Path]:
    folder = "models--" + model_id.replace("/", "--")
    return [root / folder, root / "hub" / folder]


def _snapshot_config(repo: Path) -> Path | None:
    snaps = repo / "snapshots"
    if not snaps.is_dir():
        return None
    ref = repo / "refs" / "main"
    if ref.is_file():
        rev = ref.read_text(encoding="utf-8").strip()
        cand = snaps / rev / "config.json"
        if rev and cand.is_file():
            return cand
    configs = [p / "config.json" for p in snaps.iterdir() if (p / "config.json").is_file()]
    if not configs:
        return None
    return max(configs, key=lambda p: (p.stat().st_mtime_ns, p.parent.name))


def find_config(root: Path, model_id: str) -> Path | None:
    try:
        return _find_config(root, model_id)
    except (OSError, ValueError):  # an id no file can have: too long, NUL bytes, ...
        return None


def _find_config(root: Path, model_id: str) -> Path | None:
    for repo in _cache_dirs(root, model_id):
        found = _snapshot_config(repo)
        if found:
            return found
    plain = root.joinpath(*model_id.split("/")) / "config.json"
    if plain.is_file():
        return plain
    return None


def load_local(root: Path, model_id: str) -> tuple[dict[str, Any] | None, str, str | None]:
    """(config dict or None, provenance path relative to root, why it could not be used)."""
    path = find_config(root, model_id)
    if path is None:
        return None, "", None
    rel = path.relative_to(root).as_posix()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, rel, f"local {rel} is unreadable: {exc}"
    if not isinstance(data, dict):
        return None, rel, f"local {rel} is not a JSON object"
    return data, rel, None


_SNAPSHOT = re.compile(r"(?:^|/)snapshots/([0-9a-f]{40})/")


def snapshot_revision(rel: str) -> str | None:
    """The commit sha of an HF-cache snapshot path (`models--o--n/snapshots/<sha>/config.json`)."""
    m = _SNAPSHOT.search(rel)
    return m.group(1) if m else None
