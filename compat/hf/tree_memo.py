"""What model facts read of a release's source, cached on disk per release.

Model facts read every judged release's tests registry, config registry and model files
(a text scan of several hundred files per release): a few seconds a build, every build, for
answers that depend only on the release's source and on the code reading it. Each answer is
JSON, cached under the tree's fingerprint (the sdist hash, or a stat hash of a local tree)
and a hash of compat/hf and the tree reader.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

from compat.sources.tree import VllmTree


@lru_cache(maxsize=1)
def _code_hash() -> str:
    here = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for f in [*sorted(here.glob("*.py")), here.parent / "sources" / "tree.py"]:
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def memo(tree: VllmTree, name: str, compute: Callable[[], Any]) -> Any:
    """`compute()` (JSON values only) of `tree`, from the cache when it holds it."""
    from compat.sources.pypi import cache_dir

    path = cache_dir() / "hf-trees" / f"{tree.fingerprint()}-{name}-{_code_hash()}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    value = compute()
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".memo-", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(value, fh)
        os.replace(tmp, path)
    except OSError:
        pass  # not cached: computed again next time
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
    return value
