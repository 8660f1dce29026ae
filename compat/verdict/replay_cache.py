"""What the argument replay finds in a release's source, kept across processes.

`ServeRules` and `ReleaseRewrite` find the release functions they run by following the
release's imports, which parses whole modules: a tenth of a second per release, and a build
that judges one recipe meets a dozen releases (works_from's bisection). What they find is a
function of the release's source and this project's code, so it is cached under
`$COMPAT_CACHE/replay`, keyed on the sdist hash and `compat.jsoncache.project_hash`, and written
atomically. Only releases from the package index are cached (a local tree has no content
hash, only file stats).

The functions are kept as exact ASTs (every node, field and location) in JSON, not pickle:
a cache restored in CI is data, never code. On load the replay compiles them through the
sandbox as when found (its attribute checks included), so a cached function runs exactly
as a found one.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Callable
from typing import Any

#: Bump when the shape of an entry changes.
VERSION = "2"  # 2: argv_rewrite entries keep their shape
_CONSTANTS: dict[str, Callable[[Any], Any]] = {
    "bytes": lambda v: v.encode("latin-1"),
    "complex": lambda v: complex(*v),
    "Ellipsis": lambda _v: ...,
}


def cached(tree: Any, kind: str, find: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """`find()` (a JSON-able dict; ASTs inside go through `to_doc`/`from_doc`), read from the
    cache when `tree` is an index release whose `kind` entry was written before."""
    from compat.jsoncache import JsonCache, project_hash
    from compat.sources.pypi import cache_dir

    sha = getattr(tree, "sha256", None)
    if not sha:
        return find()
    key = hashlib.sha256(f"{kind}\0{VERSION}\0{sha}\0{project_hash()}".encode()).hexdigest()
    store = JsonCache(cache_dir() / "replay")
    doc = store.read(key)
    if isinstance(doc, dict) and doc.get("kind") == kind:
        try:
            return from_doc(doc["found"])
        except (KeyError, TypeError, ValueError, AttributeError):
            pass  # not one this version wrote: found again, and rewritten
    found = find()
    store.write(key, {"kind": kind, "found": to_doc(found)})
    return found


def to_doc(value: Any) -> Any:
    """`value` (ASTs, lists, tuples, dicts with str keys, constants) as JSON values."""
    if isinstance(value, ast.AST):
        doc: dict[str, Any] = {"_": type(value).__name__}
        for f in value._fields:
            if hasattr(value, f):
                doc[f] = to_doc(getattr(value, f))
        attrs = {a: getattr(value, a) for a in value._attributes if hasattr(value, a)}
        if attrs:
            doc["@"] = attrs
        return doc
    if isinstance(value, list):
        return [to_doc(v) for v in value]
    if isinstance(value, tuple):
        return {"$": "tuple", "v": [to_doc(v) for v in value]}
    if isinstance(value, dict):
        return {"$": "dict", "v": {k: to_doc(v) for k, v in value.items()}}
    if isinstance(value, bytes):
        return {"$": "bytes", "v": value.decode("latin-1")}
    if isinstance(value, complex):
        return {"$": "complex", "v": [value.real, value.imag]}
    if value is ...:
        return {"$": "Ellipsis", "v": None}
    if value is None or isinstance(value, (str, int, float)):
        return value
    raise TypeError(f"not cacheable: {type(value).__name__}")


def from_doc(doc: Any) -> Any:
    """The value `to_doc` wrote (ValueError: a node type this Python's ast does not have)."""
    if isinstance(doc, list):
        return [from_doc(v) for v in doc]
    if not isinstance(doc, dict):
        return doc
    if "$" in doc:
        kind, v = doc["$"], doc["v"]
        if kind == "tuple":
            return tuple(from_doc(x) for x in v)
        if kind == "dict":
            return {k: from_doc(x) for k, x in v.items()}
        return _CONSTANTS[kind](v)
    cls = getattr(ast, doc["_"], None)
    if not (isinstance(cls, type) and issubclass(cls, ast.AST)):
        raise ValueError(f"not an AST node type: {doc['_']!r}")
    node = cls()
    for f, v in doc.items():
        if f == "@":
            for a, x in v.items():
                setattr(node, a, x)
        elif f != "_":
            setattr(node, f, from_doc(v))
    return node
