"""Write `features.<feature>.strategies` allowlists into recipe files, changing nothing else.

Recipes are hand-written and lean on comments, quoting and block scalars (the
`guide: |` section), so an edit must leave every byte it does not mean to touch
alone. Two editors do that:

- `ruamel`: a ruamel.yaml round-trip (preserve_quotes, no line wrapping, the
  file's own mapping and sequence indentation). Used only when loading and
  dumping the file *unchanged* reproduces it byte for byte; many recipes do not
  (trailing spaces on otherwise blank lines inside `guide: |`, a list indented
  differently from the rest of its file), and for those ruamel would rewrite
  lines nobody asked it to.
- `lines`: a minimal text insertion at positions taken from PyYAML's node marks.
  The fallback for files ruamel cannot round-trip, and for any ruamel result that
  fails the checks below.

Every result, whichever editor made it, is checked before it is returned: the
file must parse (PyYAML) to exactly the original data plus the new allowlists,
with `strategies` placed right after `description`, and the diff may only add
comment lines and allowlist lines (and remove entries of an allowlist it
narrows). A result that fails is never returned: `EditError` says why.
"""

from __future__ import annotations

import copy
import json
import difflib
import io
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

Method = Literal["ruamel", "lines"]

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
#: Node marks with character indexes (the C composer's marks carry no usable index).
_ComposeLoader = yaml.SafeLoader
_PLAIN_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_YAML_WORDS = {"y", "yes", "n", "no", "true", "false", "on", "off", "null", "~"}


class EditError(Exception):
    """The file cannot be edited safely; the message says why."""


@dataclass(frozen=True)
class Indent:
    """A file's block indentation: nested mapping keys and `- ` items, relative to the parent key."""

    mapping: int = 2
    offset: int = 2  # columns from the parent key to the `-` of its list items


@dataclass(frozen=True)
class AllowlistEdit:
    """Set `features.<feature>.strategies` to `strategies`, with `comment` lines (no `#`) above it."""

    feature: str
    strategies: tuple[str, ...]
    comment: tuple[str, ...] = ()


@dataclass
class EditOutcome:
    text: str
    method: Method | None  # None when nothing needed changing
    changed: list[str] = field(default_factory=list)  # features whose allowlist was written
    notes: list[str] = field(default_factory=list)  # why the fallback editor was used, if it was


# --------------------------------------------------------------------------- helpers


def load_data(text: str) -> Any:
    return yaml.load(text, Loader=_Loader)


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
        root = yaml.compose(text, Loader=_ComposeLoader)
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


def _ruamel(indent: Indent) -> YAML:
    y = YAML(typ="rt")
    y.preserve_quotes = True
    y.width = 1 << 30  # never re-wrap long strings
    y.indent(mapping=indent.mapping, sequence=indent.offset + 2, offset=indent.offset)
    return y


def _ruamel_dump(y: YAML, data: Any) -> str:
    buf = io.StringIO()
    y.dump(data, buf)
    return buf.getvalue()


def roundtrip_identical(text: str, indent: Indent | None = None) -> bool:
    """Whether ruamel (set up for this file) loads and dumps `text` unchanged, byte for byte."""
    try:
        y = _ruamel(indent or detect_indent(text))
        return _ruamel_dump(y, y.load(text)) == text
    except Exception:  # noqa: BLE001 - any ruamel failure means "use the other editor"
        return False


def choose_method(text: str) -> Method:
    """The editor `edit_allowlists(method="auto")` starts with for this file."""
    return "ruamel" if roundtrip_identical(text) else "lines"


def _item_text(strategy: str) -> str:
    if _PLAIN_ID.match(strategy) and strategy.lower() not in _YAML_WORDS:
        return strategy
    return '"' + strategy.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _comment_text(line: str) -> str:
    return " ".join(line.split())


# --------------------------------------------------------------------------- planning


@dataclass
class _Plan:
    edit: AllowlistEdit
    existing: list[Any] | None  # the current list, or None when the key is absent


def _plan(data: Any, edits: Sequence[AllowlistEdit]) -> list[_Plan]:
    if not isinstance(data, dict):
        raise EditError("the top level is not a mapping")
    features = data.get("features")
    plans = []
    for edit in edits:
        if not edit.strategies:
            raise EditError(
                f"features.{edit.feature}: refusing to write an empty allowlist (the synthesizer "
                "treats `strategies: []` as no gate at all)"
            )
        feat = features.get(edit.feature) if isinstance(features, dict) else None
        if not isinstance(feat, dict):
            raise EditError(f"features.{edit.feature}: no such feature mapping in the file")
        current = feat.get("strategies")
        if "strategies" in feat and not isinstance(current, list):
            raise EditError(
                f"features.{edit.feature}.strategies: is a {type(current).__name__}, not a list; "
                "edit it by hand"
            )
        if current is not None and list(current) == list(edit.strategies):
            continue  # already what we want: idempotent no-op
        plans.append(_Plan(edit, list(current) if "strategies" in feat else None))
    return plans


def _expected(data: Any, plans: Sequence[_Plan]) -> Any:
    want = copy.deepcopy(data)
    for p in plans:
        feat = want["features"][p.edit.feature]
        if "strategies" in feat:
            feat["strategies"] = list(p.edit.strategies)
        else:
            keys = list(feat)
            pos = keys.index("description") + 1 if "description" in keys else 0
            items = list(feat.items())
            items.insert(pos, ("strategies", list(p.edit.strategies)))
            feat.clear()
            feat.update(items)
    return want


# --------------------------------------------------------------------------- checks


def _verify(old: str, new: str, data: Any, plans: Sequence[_Plan]) -> None:
    """Raise EditError unless `new` is `old` plus exactly the planned allowlists."""
    try:
        got = load_data(new)
    except yaml.YAMLError as exc:
        raise EditError(f"the edited file does not parse: {exc}") from None
    want = _expected(data, plans)
    if got != want:
        raise EditError("the edited file does not parse to the original data plus the allowlists")
    for p in plans:
        if list(got["features"][p.edit.feature]) != list(want["features"][p.edit.feature]):
            raise EditError(f"features.{p.edit.feature}: key order changed")
    allowed_items = {_item_text(s) for p in plans for s in p.edit.strategies}
    old_items = {str(s) for p in plans for s in (p.existing or [])}
    old_lines, new_lines = old.splitlines(), new.splitlines()
    sm = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            continue
        for line in old_lines[i1:i2]:
            s = line.strip()
            item = s[1:].strip().strip("'\"") if s.startswith("-") else None
            if not (item in old_items or s.startswith("strategies:")):
                raise EditError(f"the edit would remove or rewrite an unrelated line: {line!r}")
        for line in new_lines[j1:j2]:
            s = line.strip()
            if s.startswith(("#", "strategies:")):
                continue
            if s.startswith("- ") and s[2:].strip() in allowed_items:
                continue
            raise EditError(f"the edit would add an unexpected line: {line!r}")


# --------------------------------------------------------------------------- ruamel editor


def _edit_ruamel(text: str, data: Any, plans: Sequence[_Plan], indent: Indent) -> str:
    y = _ruamel(indent)
    doc = y.load(text)
    for p in plans:
        feat = doc["features"][p.edit.feature]
        if not isinstance(feat, CommentedMap):
            raise EditError(f"features.{p.edit.feature}: not a block mapping")
        col = feat.lc.key(next(iter(feat)))[1] if len(feat) else 0
        comment = "\n".join(_comment_text(c) for c in p.edit.comment) or None
        if p.existing is not None:
            seq = feat["strategies"]
            if not isinstance(seq, CommentedSeq):
                raise EditError(f"features.{p.edit.feature}.strategies: not a list")
            target = list(p.edit.strategies)
            for i in reversed(range(len(seq))):
                if seq[i] not in target:
                    del seq[i]
            if list(seq) != target:
                del seq[:]
                seq.extend(target)
            if comment:
                feat.yaml_set_comment_before_after_key("strategies", before=comment, indent=col)
            continue
        seq = CommentedSeq(list(p.edit.strategies))
        seq.fa.set_block_style()
        keys = list(feat)
        pos = keys.index("description") + 1 if "description" in keys else 0
        moved = None
        if pos:
            # Comment lines below `description:` belong to the key after it; ruamel
            # stores them on `description`, so move them below the new list.
            slot = feat.ca.items.get("description")
            if slot and len(slot) > 2 and slot[2] is not None:
                moved, slot[2] = slot[2], None
        feat.insert(pos, "strategies", seq)
        if comment:
            feat.yaml_set_comment_before_after_key("strategies", before=comment, indent=col)
        if moved is not None:
            seq.ca.items[len(seq) - 1] = [moved, None]
    return _ruamel_dump(y, doc)


# --------------------------------------------------------------------------- line editor


def _feature_node(root: yaml.Node, feature: str) -> tuple[yaml.Node, yaml.MappingNode]:
    if not isinstance(root, yaml.MappingNode):
        raise EditError("the top level is not a mapping")
    kv = _key_value(root, "features")
    if kv is None or not isinstance(kv[1], yaml.MappingNode):
        raise EditError("no `features` mapping")
    fkv = _key_value(kv[1], feature)
    if fkv is None or not isinstance(fkv[1], yaml.MappingNode):
        raise EditError(f"features.{feature}: not a mapping")
    if fkv[1].flow_style:
        raise EditError(f"features.{feature}: a flow mapping; edit it by hand")
    return fkv


def _is_comment_or_blank(line: str) -> bool:
    s = line.strip()
    return not s or s.startswith("#")


def _edit_lines_one(text: str, plan: _Plan, indent: Indent) -> str:
    nl = _newline(text)
    root = yaml.compose(text, Loader=_ComposeLoader)
    fkey, fmap = _feature_node(root, plan.edit.feature)
    lines = text.splitlines(keepends=True)
    target = list(plan.edit.strategies)
    existing = _key_value(fmap, "strategies")
    if existing is not None:
        skey, seq = existing
        col = skey.start_mark.column
        comment = [f"{' ' * col}# {_comment_text(c)}{nl}" for c in plan.edit.comment]
        if not isinstance(seq, yaml.SequenceNode):
            raise EditError(f"features.{plan.edit.feature}.strategies: not a list")
        if seq.flow_style or not seq.value:
            flow = "[" + ", ".join(_item_text(s) for s in target) + "]"
            a, b = seq.start_mark.index, seq.end_mark.index
            if text[a:b].strip() in ("", "null", "~"):
                raise EditError(
                    f"features.{plan.edit.feature}.strategies: empty value; edit it by hand"
                )
            text = text[:a] + flow + text[b:]
            lines = text.splitlines(keepends=True)
        else:
            items = seq.value
            kept = [str(n.value) for n in items if str(n.value) in target]
            drop_lines: set[int] = set()
            if kept == target:
                for n in items:
                    if str(n.value) not in target:
                        drop_lines.update(range(n.start_mark.line, n.end_mark.line + 1))
                lines = [ln for i, ln in enumerate(lines) if i not in drop_lines]
            else:
                first, last = items[0].start_mark.line, items[-1].end_mark.line
                dash = " " * seq.start_mark.column
                block = [f"{dash}- {_item_text(s)}{nl}" for s in target]
                lines = lines[:first] + block + lines[last + 1 :]
        at = skey.start_mark.line
        return "".join(lines[:at] + comment + lines[at:])
    desc = _key_value(fmap, "description")
    if desc is not None:
        dkey, dval = desc
        col = dkey.start_mark.column
        end = dval.end_mark
        at = end.line if end.column == 0 else end.line + 1
    else:
        col = (
            fmap.value[0][0].start_mark.column
            if fmap.value
            else fkey.start_mark.column + indent.mapping
        )
        at = fmap.value[0][0].start_mark.line if fmap.value else fkey.start_mark.line + 1
        while at - 1 > fkey.start_mark.line and _is_comment_or_blank(lines[at - 1]):
            at -= 1
    at = min(at, len(lines))
    if at == len(lines) and lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += nl
    pad = " " * col
    block = [f"{pad}# {_comment_text(c)}{nl}" for c in plan.edit.comment]
    block.append(f"{pad}strategies:{nl}")
    block += [f"{pad}{' ' * indent.offset}- {_item_text(s)}{nl}" for s in target]
    return "".join(lines[:at] + block + lines[at:])


def _edit_lines(text: str, plans: Sequence[_Plan], indent: Indent) -> str:
    for plan in plans:
        text = _edit_lines_one(text, plan, indent)
    return text


# --------------------------------------------------------------------------- entry point


def edit_allowlists(
    text: str, edits: Sequence[AllowlistEdit], *, method: Method | Literal["auto"] = "auto"
) -> EditOutcome:
    """Apply `edits` to a recipe's text; `method` forces an editor (tests) or picks one ("auto").

    Allowlists that already equal their target are left alone (a re-run is a no-op).
    Raises EditError when no editor can make the change safely.
    """
    try:
        data = load_data(text)
    except yaml.YAMLError as exc:
        raise EditError(f"YAML syntax error: {exc}") from None
    plans = _plan(data, edits)
    if not plans:
        return EditOutcome(text=text, method=None)
    indent = detect_indent(text)
    changed = [p.edit.feature for p in plans]
    notes: list[str] = []
    if method in ("auto", "ruamel"):
        if roundtrip_identical(text, indent):
            try:
                new = _edit_ruamel(text, data, plans, indent)
                _verify(text, new, data, plans)
                return EditOutcome(text=new, method="ruamel", changed=changed)
            except EditError as exc:
                notes.append(f"ruamel edit rejected ({exc}); used the line editor")
            except Exception as exc:  # noqa: BLE001 - ruamel internals; the line editor still works
                notes.append(
                    f"ruamel edit failed ({type(exc).__name__}: {exc}); used the line editor"
                )
        else:
            notes.append(
                "ruamel does not round-trip this file byte-identically; used the line editor"
            )
        if method == "ruamel":
            raise EditError(notes[-1])
    try:
        new = _edit_lines(text, plans, indent)
    except yaml.YAMLError as exc:
        raise EditError(f"YAML error while locating the feature: {exc}") from None
    _verify(text, new, data, plans)
    return EditOutcome(text=new, method="lines", changed=changed, notes=notes)


# --------------------------------------------------------------------------- generic edits
#
# The fix stage's edits (compat.fix.edits.Edit): a scalar or a list set at any mapping path
# (`min_vllm_version`, `docker_image`, `features.<f>.strategies`, `modes.<m>.variants`), or
# one string of an args list replaced (a spelling). The same two editors, the same rule:
# the result must parse to exactly `edits.apply(data, ...)`, and nothing else may change.


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


def _node_at(root: yaml.Node, path: Sequence[str]) -> tuple[yaml.Node | None, yaml.Node]:
    """(key node, value node) at `path`; raises EditError when a parent is not a mapping."""
    node, key = root, None
    for part in path:
        if not isinstance(node, yaml.MappingNode):
            raise EditError(f"{'.'.join(path)}: a parent is not a mapping")
        kv = _key_value(node, part)
        if kv is None:
            raise KeyError(part)
        key, node = kv
    return key, node


def _comment_lines(comment: str, col: int, nl: str) -> list[str]:
    return [f"{' ' * col}# {_comment_text(comment)}{nl}"] if comment else []


def _edit_lines_generic(text: str, e: Any, indent: Indent) -> str:
    nl = _newline(text)
    root = yaml.compose(text, Loader=_ComposeLoader)
    lines = text.splitlines(keepends=True)
    try:
        key, node = _node_at(root, e.path)
    except KeyError:
        key = node = None
    if e.op == "replace_item":
        if not isinstance(node, yaml.SequenceNode):
            raise EditError(f"{e.where}: not a list")
        item = next((n for n in node.value if isinstance(n, yaml.ScalarNode) and n.value == e.old), None)
        if item is None:
            raise EditError(f"{e.where}: no item {e.old!r}")
        a, b = item.start_mark.index, item.end_mark.index
        parts = e.value if isinstance(e.value, list) else [e.value]
        if len(parts) > 1 and not node.flow_style:
            dash = text.rfind("-", 0, a)  # the item's own "- ", so the new items line up with it
            pad = " " * (dash - text.rfind("\n", 0, dash) - 1)
            new = f"{nl}{pad}- ".join(_scalar_text(v, item.style) for v in parts)
        else:
            new = ", ".join(_scalar_text(v, item.style) for v in parts)
        text = text[:a] + new + text[b:]
        at, col = key.start_mark.line, key.start_mark.column
        lines = text.splitlines(keepends=True)
        return "".join(lines[:at] + _comment_lines(e.comment, col, nl) + lines[at:])
    if node is not None:  # the key exists: replace its value in place
        col = key.start_mark.column
        if isinstance(e.value, list) and isinstance(node, yaml.SequenceNode) and not node.flow_style \
                and node.value:
            first, last = node.value[0].start_mark.line, node.value[-1].end_mark.line
            dash = " " * node.start_mark.column
            block = [f"{dash}- {_scalar_text(v)}{nl}" for v in e.value]
            lines = lines[:first] + block + lines[last + 1:]
        else:
            if isinstance(node, yaml.MappingNode):
                raise EditError(f"{e.where}: is a mapping; edit it by hand")
            a, b = node.start_mark.index, node.end_mark.index
            new = _flow_text(e.value) if isinstance(e.value, list) else _scalar_text(
                e.value, getattr(node, "style", None))
            if a == b:  # an empty value (`key:`): write after the colon
                new = " " + new
            text = text[:a] + new + text[b:]
            lines = text.splitlines(keepends=True)
        at = key.start_mark.line
        return "".join(lines[:at] + _comment_lines(e.comment, col, nl) + lines[at:])
    # A new key in an existing block mapping.
    try:
        pkey, parent = _node_at(root, e.path[:-1]) if e.path[:-1] else (None, root)
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
        while at - 1 > sibling[0].start_mark.line and _is_comment_or_blank(lines[at - 1]):
            at -= 1
    else:
        at = parent.value[0][0].start_mark.line
        parent_line = pkey.start_mark.line if pkey is not None else -1
        while at - 1 > parent_line and _is_comment_or_blank(lines[at - 1]):
            at -= 1
    at = min(at, len(lines))
    if at == len(lines) and lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += nl
    value = _flow_text(e.value) if isinstance(e.value, list) else _scalar_text(e.value)
    block = _comment_lines(e.comment, col, nl) + [f"{' ' * col}{e.path[-1]}: {value}{nl}"]
    return "".join(lines[:at] + block + lines[at:])


def _edit_ruamel_generic(text: str, edits: Sequence[Any], indent: Indent) -> str:
    y = _ruamel(indent)
    doc = y.load(text)
    for e in edits:
        parent = doc
        for part in e.path[:-1]:
            parent = parent[part]
        if not isinstance(parent, CommentedMap):
            raise EditError(f"{e.where}: parent is not a block mapping")
        key = e.path[-1]
        if e.op == "replace_item":
            seq = parent[key]
            i = list(seq).index(e.old)
            style = type(seq[i]) if isinstance(seq[i], str) else str  # keeps its quoting
            parts = e.value if isinstance(e.value, list) else [e.value]
            seq[i:i + 1] = [style(v) for v in parts]
        else:
            value: Any = e.value
            if isinstance(value, list):
                old = parent.get(key)
                value = CommentedSeq(list(value))
                if isinstance(old, CommentedSeq) and old.fa.flow_style() is False and len(old):
                    value.fa.set_block_style()
                else:
                    value.fa.set_flow_style()
            elif isinstance(value, str) and isinstance(parent.get(key), str):
                value = type(parent[key])(value)  # keep the scalar's quoting style
            if key in parent:
                parent[key] = value
            else:
                keys = list(parent)
                pos = keys.index(e.after) + 1 if e.after in keys else 0
                parent.insert(pos, key, value)
        if e.comment:
            col = parent.lc.key(next(iter(parent)))[1] if len(parent) else 0
            parent.yaml_set_comment_before_after_key(key, before=_comment_text(e.comment), indent=col)
    return _ruamel_dump(y, doc)


def _verify_generic(old: str, new: str, want: Any, edits: Sequence[Any]) -> None:
    """The edited text parses to `want`, and every changed line is an edited key, item or comment."""
    try:
        got = load_data(new)
    except yaml.YAMLError as exc:
        raise EditError(f"the edited file does not parse: {' '.join(str(exc).split())}") from None
    if got != want:
        raise EditError("the edited file does not parse to the original data plus the fixes")
    keys = {e.path[-1] for e in edits}
    values = set()
    for e in edits:
        for v in (e.value if isinstance(e.value, list) else [e.value]):
            values.add(str(v))
    old_lines, new_lines = old.splitlines(), new.splitlines()
    sm = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for tag, _i1, _i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            continue
        for line in new_lines[j1:j2]:
            s = line.strip()
            if s.startswith("#") or s.split(":", 1)[0].strip() in keys:
                continue
            if s.startswith("- ") and s[2:].strip().strip("'\"") in values:
                continue
            if any(v in s for v in values):  # an args item rewritten in place
                continue
            raise EditError(f"the edit would add an unexpected line: {line!r}")


def edit_recipe_text(text: str, edits: Sequence[Any], want: Any,
                     *, method: Method | Literal["auto"] = "auto") -> EditOutcome:
    """Apply fix edits to a recipe's text; `want` is `edits.apply(data, edits)`.

    ruamel when the file round-trips byte-identically, else the line editor; either result
    must pass `_verify_generic`, or EditError says why no editor could do it safely.
    """
    indent = detect_indent(text)
    notes: list[str] = []
    if method in ("auto", "ruamel"):
        if roundtrip_identical(text, indent):
            try:
                new = _edit_ruamel_generic(text, edits, indent)
                _verify_generic(text, new, want, edits)
                return EditOutcome(text=new, method="ruamel", changed=[e.where for e in edits])
            except EditError as exc:
                notes.append(f"ruamel edit rejected ({exc}); used the line editor")
            except Exception as exc:  # noqa: BLE001 - ruamel internals; the line editor still works
                notes.append(f"ruamel edit failed ({type(exc).__name__}: {exc}); used the line editor")
        else:
            notes.append("ruamel does not round-trip this file byte-identically; used the line editor")
        if method == "ruamel":
            raise EditError(notes[-1])
    new = text
    try:
        for e in edits:
            new = _edit_lines_generic(new, e, indent)
    except yaml.YAMLError as exc:
        raise EditError(f"YAML error while locating {e.where}: {' '.join(str(exc).split())}") from None
    _verify_generic(text, new, want, edits)
    return EditOutcome(text=new, method="lines", changed=[e.where for e in edits], notes=notes)
