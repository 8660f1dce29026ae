"""The one editor of recipe files: planned fix edits written as text, every other byte kept.

Recipes are hand-written and lean on comments, quoting and block scalars (the `guide: |`
section), so an edit changes only the lines it means to, at positions taken from PyYAML's
node marks:

- a scalar is replaced in place (its quoting style kept, a trailing comment kept);
- a list is narrowed by deleting the lines of the items it drops, and widened by inserting
  lines for the items it gains, so a comment between items, or after a kept item, stays
  where the maintainer wrote it; a flow list (`[a, b]`) is rewritten within its brackets;
- a new key is inserted into its parent mapping after a named sibling, with the file's
  own indentation; a key is deleted with its value's lines;
- one item of an args list is replaced in place (a spelling), or split into two items.

Every result is checked before it is returned, three ways: it parses to exactly
`edits.apply(data, ...)`; every line it adds is an edited key, an edited item or one of the
edits' own comments; every line it removes is a dropped item, a deleted key or a value
replaced; and every comment of the old text survives, except one written on a line of an
item or key the edit removes. A result that fails is never returned: `EditError` says why.
"""

from __future__ import annotations

import difflib
import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from compat.fix.edits import Edit, apply

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
#: libyaml's composer when PyYAML has it (a tenth of the time). Its marks carry no usable
#: index, so offsets are taken from (line, column), which both composers agree on.
_ComposeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_PLAIN_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_YAML_WORDS = {"y", "yes", "n", "no", "true", "false", "on", "off", "null", "~"}


class EditError(Exception):
    """The file cannot be edited safely; the message says why."""


@dataclass(frozen=True)
class Indent:
    """A file's block indentation: nested mapping keys and `- ` items, relative to the parent key."""

    mapping: int = 2
    offset: int = 2  # columns from the parent key to the `-` of its list items


@dataclass
class EditOutcome:
    text: str
    changed: list[str] = field(default_factory=list)  # the edited paths, dotted


# --------------------------------------------------------------------------- reading


def load_data(text: str) -> Any:
    return yaml.load(text, Loader=_Loader)


def _compose(text: str) -> yaml.Node | None:
    return yaml.compose(text, Loader=_ComposeLoader)


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _key_value(mapping: yaml.MappingNode, key: str) -> tuple[yaml.Node, yaml.Node] | None:
    for k, v in mapping.value:
        if isinstance(k, yaml.ScalarNode) and k.value == key:
            return k, v
    return None


def detect_indent(text: str) -> Indent:
    """The most common mapping indent and list-item offset of the file's block collections."""
    try:
        root = _compose(text)
    except yaml.YAMLError:
        return Indent()
    maps: Counter[int] = Counter()
    offsets: Counter[int] = Counter()

    def walk(node: yaml.Node) -> None:
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if isinstance(v, yaml.MappingNode) and not v.flow_style and v.value:
                    first = v.value[0][0]
                    if first.start_mark.line > k.start_mark.line:
                        maps[first.start_mark.column - k.start_mark.column] += 1
                elif (
                    isinstance(v, yaml.SequenceNode)
                    and not v.flow_style
                    and v.value
                    and v.start_mark.line > k.start_mark.line
                ):
                    offsets[v.start_mark.column - k.start_mark.column] += 1
                walk(v)
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                walk(item)

    if root is not None:
        walk(root)
    mapping = maps.most_common(1)[0][0] if maps else 2
    offset = offsets.most_common(1)[0][0] if offsets else 2
    return Indent(mapping=mapping if mapping > 0 else 2, offset=max(offset, 0))


def _block_scalar_lines(root: yaml.Node | None) -> set[int]:
    """Lines inside block scalars (`|`, `>`): their `#` is text, not a comment."""
    out: set[int] = set()
    todo = [root] if root is not None else []
    while todo:
        node = todo.pop()
        if isinstance(node, yaml.ScalarNode):
            if node.style in ("|", ">"):
                out.update(range(node.start_mark.line + 1, node.end_mark.line + 1))
        elif isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                todo += [k, v]
        elif isinstance(node, yaml.SequenceNode):
            todo += node.value
    return out


def _comment_of(line: str) -> str | None:
    """The comment on one line (from its `#`), or None: a `#` starts one at the line's start or
    after a space, outside quotes."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
            continue
        if ch in "'\"" and (i == 0 or line[i - 1] in " \t[{,:-"):
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[i:].rstrip()
    return None


def comments(text: str) -> list[tuple[int, str]]:
    """(line index, comment) of every comment in a YAML text, block scalars' text aside."""
    try:
        skip = _block_scalar_lines(_compose(text))
    except yaml.YAMLError:
        skip = set()
    out = []
    for i, line in enumerate(text.splitlines()):
        if i in skip:
            continue
        c = _comment_of(line)
        if c is not None:
            out.append((i, c))
    return out


# --------------------------------------------------------------------------- writing values


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _scalar_text(value: Any, style: str | None = None) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return str(value)
    text = str(value)
    if style == "'" and "'" not in text and "\n" not in text:
        return f"'{text}'"
    if style == '"' or not (_PLAIN_ID.match(text) and text.lower() not in _YAML_WORDS):
        return json.dumps(text, ensure_ascii=False)
    return text


def _flow_text(values: Sequence[Any]) -> str:
    return "[" + ", ".join(_scalar_text(v) for v in values) + "]"


def _comment_lines(comment: str, col: int, nl: str) -> list[str]:
    return [f"{' ' * col}# {_one_line(comment)}{nl}"] if comment else []


def _is_comment_or_blank(line: str) -> bool:
    s = line.strip()
    return not s or s.startswith("#")


def _node_at(root: yaml.Node, path: Sequence[str]) -> tuple[yaml.Node | None, yaml.Node]:
    """(key node, value node) at `path`; KeyError when a key is absent, EditError when a parent
    is not a mapping."""
    node: yaml.Node = root
    key: yaml.Node | None = None
    for part in path:
        if not isinstance(node, yaml.MappingNode):
            raise EditError(f"{'.'.join(path)}: a parent is not a mapping")
        kv = _key_value(node, part)
        if kv is None:
            raise KeyError(part)
        key, node = kv
    return key, node


def _last_line(node: yaml.Node) -> int:
    """The last line a node's text occupies. A block collection's end mark sits where the next
    token starts, so its last child decides; a block scalar's sits at column 0 of the next line."""
    if isinstance(node, yaml.SequenceNode) and not node.flow_style and node.value:
        return _last_line(node.value[-1])
    if isinstance(node, yaml.MappingNode) and not node.flow_style and node.value:
        return _last_line(node.value[-1][1])
    end = node.end_mark
    return end.line if end.column > 0 else end.line - 1


# --------------------------------------------------------------------------- one edit


class _Text:
    """A file's lines being edited, and what the edit's check may accept."""

    def __init__(self, text: str) -> None:
        self.nl = _newline(text)
        self.lines = text.splitlines(keepends=True)
        root = _compose(text)
        if root is None:
            raise EditError("the file is empty")
        self.root: yaml.Node = root

    def text(self) -> str:
        return "".join(self.lines)

    def offset(self, mark: Any) -> int:
        """The character offset of a node mark in `text()` (the lines as composed)."""
        return sum(len(line) for line in self.lines[: mark.line]) + mark.column

    def insert(self, at: int, block: list[str]) -> None:
        at = min(at, len(self.lines))
        if at == len(self.lines) and self.lines and not self.lines[-1].endswith(("\n", "\r")):
            self.lines[-1] += self.nl
        self.lines[at:at] = block


def _set_list(
    t: _Text, key: yaml.Node, seq: yaml.SequenceNode, target: list[Any], comment: str
) -> None:
    """A block list set to `target`: drop the lines of items it loses, insert lines for items it
    gains; kept items keep their lines (and comments). Items out of order are rewritten in place
    of the first, each kept item with its own line."""
    items = list(seq.value)
    old = [str(n.value) if isinstance(n, yaml.ScalarNode) else None for n in items]
    if None in old or any(_last_line(n) != n.start_mark.line for n in items):
        raise EditError(f"{key.value}: items that are not one-line scalars; edit it by hand")
    first = items[0].start_mark.line
    dash = t.lines[first][: len(t.lines[first]) - len(t.lines[first].lstrip())]
    fresh = {str(v): f"{dash}- {_scalar_text(v)}{t.nl}" for v in target}
    line_of = {o: t.lines[n.start_mark.line] for o, n in zip(old, items, strict=True)}
    kept = [o for o in old if o in fresh]
    in_order = kept == [str(v) for v in target if str(v) in line_of]
    if in_order:
        # Walk the target, inserting each new item after the line of the item before it.
        out = list(t.lines)
        drop = {n.start_mark.line for o, n in zip(old, items, strict=True) if o not in fresh}
        inserts: dict[int, list[str]] = {}
        anchor = first  # insert before the first item until a kept item is passed
        after = False
        for v in target:
            s = str(v)
            if s in line_of:
                anchor = items[old.index(s)].start_mark.line
                after = True
            else:
                inserts.setdefault(anchor + (1 if after else 0), []).append(fresh[s])
        rebuilt: list[str] = []
        for i, line in enumerate(out):
            rebuilt += inserts.get(i, [])
            if i not in drop:
                rebuilt.append(line)
        rebuilt += inserts.get(len(out), [])
        t.lines = rebuilt
    else:
        block = [line_of.get(str(v), fresh[str(v)]) for v in target]
        item_lines = {n.start_mark.line for n in items}
        t.lines = (
            [ln for i, ln in enumerate(t.lines[:first])]
            + block
            + [ln for i, ln in enumerate(t.lines) if i >= first and i not in item_lines]
        )
    _comment_above(t, key, comment)


def _comment_above(t: _Text, key: yaml.Node, comment: str) -> None:
    """The edit's one-line comment above its key (the key's line has not moved: edits below it
    only touch later lines)."""
    t.insert(key.start_mark.line, _comment_lines(comment, key.start_mark.column, t.nl))


def _replace_span(t: _Text, node: yaml.Node, new: str) -> None:
    text = t.text()
    a, b = t.offset(node.start_mark), t.offset(node.end_mark)
    if a == b:  # an empty value (`key:`): write after the colon
        new = " " + new
    t.lines = (text[:a] + new + text[b:]).splitlines(keepends=True)


def _replace_item(t: _Text, e: Edit, key: yaml.Node | None, node: yaml.Node | None) -> None:
    if not isinstance(node, yaml.SequenceNode) or key is None:
        raise EditError(f"{e.where}: not a list")
    item = next(
        (n for n in node.value if isinstance(n, yaml.ScalarNode) and n.value == e.old), None
    )
    if item is None:
        raise EditError(f"{e.where}: no item {e.old!r}")
    parts = e.value if isinstance(e.value, list) else [e.value]
    text = t.text()
    a = t.offset(item.start_mark)
    if len(parts) > 1 and not node.flow_style:
        dash = text.rfind("-", 0, a)  # the item's own "- ", so the new items line up with it
        pad = " " * (dash - text.rfind("\n", 0, dash) - 1)
        new = f"{t.nl}{pad}- ".join(_scalar_text(v, item.style) for v in parts)
    else:
        new = ", ".join(_scalar_text(v, item.style) for v in parts)
    _replace_span(t, item, new)
    _comment_above(t, key, e.comment)


def _delete_key(t: _Text, e: Edit, key: yaml.Node | None, node: yaml.Node | None) -> None:
    if key is None or node is None:
        return  # already gone: a second apply is a no-op
    start, end = key.start_mark.line, _last_line(node)
    if (
        node.end_mark.column > 0
        and t.lines[end][node.end_mark.column :].strip() not in ("",)
        and _comment_of(t.lines[end][node.end_mark.column :]) is None
    ):
        raise EditError(f"{e.where}: shares its last line with other content; edit it by hand")
    # The key's own lines go; a comment line among them is the maintainer's and stays.
    t.lines = [
        ln
        for i, ln in enumerate(t.lines)
        if not (start <= i <= end and not _is_comment_or_blank(ln))
    ]
    if e.comment:
        t.insert(start, _comment_lines(e.comment, key.start_mark.column, t.nl))


def _add_key(t: _Text, e: Edit) -> None:
    try:
        pkey, parent = _node_at(t.root, e.path[:-1]) if e.path[:-1] else (None, t.root)
    except KeyError as exc:
        raise EditError(f"{e.where}: no mapping {exc} to add the key to") from None
    if not isinstance(parent, yaml.MappingNode) or parent.flow_style or not parent.value:
        raise EditError(f"{'.'.join(e.path[:-1])}: not a non-empty block mapping; edit it by hand")
    col = parent.value[0][0].start_mark.column
    sibling = _key_value(parent, e.after) if e.after else None
    if sibling is not None:
        end = sibling[1].end_mark
        at = end.line if end.column == 0 else end.line + 1
        # a block scalar or nested block ends where the next key starts; back over trailing blanks
        while at - 1 > sibling[0].start_mark.line and _is_comment_or_blank(t.lines[at - 1]):
            at -= 1
    else:
        at = parent.value[0][0].start_mark.line
        parent_line = pkey.start_mark.line if pkey is not None else -1
        while at - 1 > parent_line and _is_comment_or_blank(t.lines[at - 1]):
            at -= 1
    value = _flow_text(e.value) if isinstance(e.value, list) else _scalar_text(e.value)
    t.insert(at, _comment_lines(e.comment, col, t.nl) + [f"{' ' * col}{e.path[-1]}: {value}{t.nl}"])


def _edit_one(text: str, e: Edit) -> str:
    t = _Text(text)
    try:
        key, node = _node_at(t.root, e.path)
    except KeyError:
        key = node = None
    if e.op == "replace_item":
        _replace_item(t, e, key, node)
    elif e.op == "delete":
        _delete_key(t, e, key, node)
    elif key is None or node is None:
        _add_key(t, e)
    elif (
        isinstance(e.value, list)
        and isinstance(node, yaml.SequenceNode)
        and not node.flow_style
        and node.value
    ):
        if not e.value:
            raise EditError(
                f"{e.where}: refusing to write an empty list over a block list; edit it by hand"
            )
        _set_list(t, key, node, list(e.value), e.comment)
    else:
        if isinstance(node, yaml.MappingNode):
            raise EditError(f"{e.where}: is a mapping; edit it by hand")
        if (
            isinstance(node, yaml.SequenceNode)
            and node.flow_style
            and not isinstance(e.value, list)
        ):
            raise EditError(f"{e.where}: is a list; edit it by hand")
        new = (
            _flow_text(e.value)
            if isinstance(e.value, list)
            else _scalar_text(e.value, getattr(node, "style", None))
        )
        _replace_span(t, node, new)
        _comment_above(t, key, e.comment)
    return t.text()


# --------------------------------------------------------------------------- the check


def _removed_ok(line: str, edits: Sequence[Edit], old_items: set[str]) -> bool:
    """May this old line be removed (or rewritten) by `edits`?"""
    s = line.strip()
    if s.startswith("-") and s[1:].split(" #")[0].strip().strip("'\"") in old_items:
        return True
    head = s.split(":", 1)[0].strip().strip("'\"")
    return head in {e.path[-1] for e in edits}


def _added_ok(line: str, edits: Sequence[Edit], values: set[str]) -> bool:
    s = line.strip()
    if s.startswith("#"):
        return True  # which comments may appear is checked with the comments
    if s.split(":", 1)[0].strip().strip("'\"") in {e.path[-1] for e in edits}:
        return True
    if s.startswith("- ") and s[2:].split(" #")[0].strip().strip("'\"") in values:
        return True
    return any(v and v in s for v in values)  # an args item rewritten in place


def _check(old: str, new: str, want: Any, edits: Sequence[Edit]) -> None:
    """Raise EditError unless `new` is `old` with exactly `edits` made (see the module doc)."""
    try:
        got = load_data(new)
    except yaml.YAMLError as exc:
        raise EditError(f"the edited file does not parse: {_one_line(str(exc))}") from None
    if got != want:
        raise EditError("the edited file does not parse to the original data plus the fixes")
    values = {
        str(v)
        for e in edits
        for v in (e.value if isinstance(e.value, list) else [e.value])
        if e.op != "delete"
    }
    dropped = _dropped_items(old, edits)
    old_items = (
        {str(e.old) for e in edits if e.op == "replace_item"} | dropped | _listed_items(old, edits)
    )
    old_lines, new_lines = old.splitlines(), new.splitlines()
    removed: list[int] = []
    sm = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            continue
        for i in range(i1, i2):
            if not _removed_ok(old_lines[i], edits, old_items) and not _is_comment_or_blank(
                old_lines[i]
            ):
                raise EditError(
                    f"the edit would remove or rewrite an unrelated line: {old_lines[i]!r}"
                )
            removed.append(i)
        for line in new_lines[j1:j2]:
            if not _added_ok(line, edits, values):
                raise EditError(f"the edit would add an unexpected line: {line!r}")
    _check_comments(
        old, new, edits, {i for i in removed if _on_removed(old_lines[i], edits, dropped)}
    )


def _old_lists(old: str, edits: Sequence[Edit]) -> list[tuple[Edit, list[Any]]]:
    data = load_data(old)
    out = []
    for e in edits:
        node = data
        for part in e.path:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, list):
            out.append((e, node))
    return out


def _listed_items(old: str, edits: Sequence[Edit]) -> set[str]:
    """Items of the lists the edits set (a reordered list rewrites their lines)."""
    return {str(v) for e, items in _old_lists(old, edits) if e.op == "set" for v in items}


def _dropped_items(old: str, edits: Sequence[Edit]) -> set[str]:
    """Items of lists the edits set or delete that the new value no longer holds."""
    out: set[str] = set()
    for e, items in _old_lists(old, edits):
        keep = {str(v) for v in e.value} if isinstance(e.value, list) and e.op == "set" else set()
        out |= {str(v) for v in items if str(v) not in keep}
    return out


def _on_removed(line: str, edits: Sequence[Edit], dropped: set[str]) -> bool:
    """Is this old line one the edits take away (a dropped item, a deleted key), so that a comment
    written on it goes with it?"""
    s = line.strip()
    if s.startswith("-"):
        return s[1:].split(" #")[0].strip().strip("'\"") in dropped
    head = s.split(":", 1)[0].strip().strip("'\"")
    return head in {e.path[-1] for e in edits if e.op == "delete"}


def _check_comments(old: str, new: str, edits: Sequence[Edit], removed: set[int]) -> None:
    """Every old comment survives, but one on a line the edit takes away (a dropped item, a
    deleted key); the only new comments are the edits' own."""
    lines = old.splitlines()
    before = Counter(c for _i, c in comments(old))
    gone = Counter(
        c for i, c in comments(old) if i in removed and not lines[i].lstrip().startswith("#")
    )
    after = Counter(c for _i, c in comments(new))
    own = Counter(f"# {_one_line(e.comment)}" for e in edits if e.comment)
    lost = (before - gone) - after
    if lost:
        raise EditError(f"the edit would lose the comment {next(iter(lost))!r}")
    extra = (after - before) - own
    if extra:
        raise EditError(f"the edit would add the comment {next(iter(extra))!r}")


# --------------------------------------------------------------------------- entry point


def edit_recipe_text(text: str, edits: Sequence[Edit], want: Any) -> EditOutcome:
    """Apply fix edits to a recipe's text; `want` is `edits.apply(data, edits)`.

    Raises EditError when the edits cannot be made safely (see the module doc).
    """
    new = text
    e: Edit | None = None
    try:
        for e in edits:
            data = load_data(new)
            if apply(data, [e]) == data:
                continue  # already made: a second apply writes nothing, its comment included
            new = _edit_one(new, e)
    except yaml.YAMLError as exc:
        where = e.where if e is not None else "the file"
        raise EditError(f"YAML error while locating {where}: {_one_line(str(exc))}") from None
    _check(text, new, want, edits)
    return EditOutcome(text=new, changed=[e.where for e in edits])
