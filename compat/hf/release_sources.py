"""Model-fact sources that come from released packages, shared by `compat build` and `compat lint`.

Facts about a model id do not depend on the release judged, so both read every source available:
the newest vLLM release's docs and test registry, and the newest transformers wheel's documented
checkpoints (each downloaded once, sha256-checked, cached by hash).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Progress = Callable[[str], None]


def transformers_checkpoints(say: Progress) -> Any:
    """The newest transformers wheel's documented checkpoints (cached); None, said, when
    neither the package index nor the cache has it."""
    import zipfile

    from compat.errors import UserError
    from compat.hf.transformers_docs import load_checkpoints

    try:
        return load_checkpoints()
    except (UserError, OSError, ValueError, zipfile.BadZipFile) as exc:
        say(f"model facts: transformers wheel not available ({getattr(exc, 'message', exc)})")
        return None


def newest_tree(trees: dict[str, Any], say: Progress) -> list[Any]:
    """The newest release on the index, for model facts only (its docs and test registry).

    Facts about a model id do not depend on the release judged, so the resolver reads
    every source available; the newest release knows the newest models. Downloaded and
    extracted (cached), never scanned. Offline with nothing cached: skipped, said.
    """
    from compat.errors import UserError
    from compat.sources import tree_from_index
    from compat.sources.pypi import versions_on_index

    try:
        newest = versions_on_index()[-1]
        if newest in trees:
            return []
        return [tree_from_index(newest)]
    except (UserError, IndexError) as exc:
        say(f"model facts: newest release not available ({getattr(exc, 'message', exc)})")
        return []
