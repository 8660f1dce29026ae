"""A recipe edit as data: what the fix stage plans, re-judges, stores and finally writes.

An edit is a path into the recipe's YAML mapping and the value it gets. The same edit
is applied to the parsed data (to re-judge the fix through the synthesis replay before
anything is written) and to the file's text (by the writer, whose result is checked to
parse to exactly `apply(data, edits)`), so what was verified is what lands.
"""

from __future__ import annotations

import copy
import json
from dataclasses import asdict, dataclass
from typing import Any, Literal

Op = Literal["set", "replace_item", "delete"]


class EditConflict(ValueError):
    """The data does not have the shape an edit expects (the file changed, or a bad plan)."""


@dataclass(frozen=True)
class Edit:
    """Set `path` to `value` (op `set`), replace the string `old` by `value` in the list at `path`
    (op `replace_item`; a list `value` splits the item into several), or remove the key at `path`
    (op `delete`, `value` unused).

    A `set` on a key that does not exist yet inserts it into its (existing) parent mapping,
    right after the sibling key `after` when there is one, else first. `comment` is the
    one-line note written above the key (cause and release evidence).
    """

    op: Op
    path: tuple[str, ...]
    value: Any
    old: Any = None
    after: str | None = None
    comment: str = ""

    def to_json(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Edit:
        return cls(
            op=raw["op"],
            path=tuple(raw["path"]),
            value=raw["value"],
            old=raw.get("old"),
            after=raw.get("after"),
            comment=raw.get("comment", ""),
        )

    @property
    def where(self) -> str:
        return ".".join(self.path)


def dumps(edits: list[Edit]) -> str:
    return json.dumps([e.to_json() for e in edits])


def loads(text: str) -> list[Edit]:
    return [Edit.from_json(r) for r in json.loads(text or "[]")]


def parent_of(data: Any, path: tuple[str, ...]) -> dict[str, Any]:
    node = data
    for key in path[:-1]:
        if not isinstance(node, dict) or not isinstance(node.get(key), dict):
            raise EditConflict(f"{'.'.join(path[:-1])}: not a mapping in the recipe")
        node = node[key]
    if not isinstance(node, dict):
        raise EditConflict(f"{'.'.join(path[:-1]) or 'top level'}: not a mapping in the recipe")
    return node


def apply(data: Any, edits: list[Edit]) -> Any:
    """`data` with `edits` applied (a deep copy; key order as the text editor writes it)."""
    out = copy.deepcopy(data)
    for e in edits:
        parent = parent_of(out, e.path)
        key = e.path[-1]
        if e.op == "replace_item":
            items = parent.get(key)
            parts = e.value if isinstance(e.value, list) else [e.value]
            if isinstance(items, list) and e.old not in items and _contains_run(items, parts):
                continue  # already replaced: a second apply changes nothing
            if not isinstance(items, list) or e.old not in items:
                raise EditConflict(f"{e.where}: no item {e.old!r} to replace")
            out_items: list[Any] = []
            for item in items:
                if item != e.old:
                    out_items.append(item)
                elif isinstance(e.value, list):  # one item split into several
                    out_items.extend(e.value)
                else:
                    out_items.append(e.value)
            parent[key] = out_items
        elif e.op == "delete":
            parent.pop(key, None)  # already gone: a second apply changes nothing
        elif key in parent:
            parent[key] = copy.deepcopy(e.value)
        else:
            entries = list(parent.items())
            keys = [k for k, _ in entries]
            pos = keys.index(e.after) + 1 if e.after in keys else 0
            entries.insert(pos, (key, copy.deepcopy(e.value)))
            parent.clear()
            parent.update(entries)
    return out


def _contains_run(items: list[Any], run: list[Any]) -> bool:
    n = len(run)
    return any(items[i : i + n] == run for i in range(len(items) - n + 1))
