"""What a config class's `__post_init__` raises, read from the release (issue 16, mechanism 4).

pydantic runs a dataclass's `__post_init__` after validating its fields, so a check written
there (`KVTransferConfig`: a `kv_connector` without a `kv_role`) rejects the JSON value while
the flag is parsed. Every raise of the method is recorded as a check: the condition guarding
it, as an expression over the instance's fields (`if COND: raise E(msg)`, and `for x in
self.f: if COND(x): raise` as `any(COND(x) for x in self.f)`), the message, and the fields
it reads. A raise whose guard cannot be written so (nested deeper, or after the method set a
field it reads) keeps `cond: null`.

Conditions are answered three-valued (`evaluate`): field values (the JSON value over the
defaults), constants, `get_args(<Literal alias>)` with the alias resolved from the release,
`len`, `any`/`all` over generators, and `is_torch_equal_or_newer(v)` against the torch the
release's requirements pin; anything else is undecided. A check that holds is pydantic's
"Value error"; one left undecided counts only when it reads a field the value sets: vLLM
constructs every config class with its defaults on every start, so a check reading only
defaults does not fire.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from typing import Any

from packaging.version import InvalidVersion, Version

from compat.vllm.cli_surface import ClassInfo, SymbolResolver


class Undecided(Exception):
    """A value the condition needs is not known here."""


class _Stopped(Exception):
    """The replay reached an earlier raise: that check fires, the later one is not reached."""


class Raises(Exception):
    """Evaluating the condition raises, in vLLM as here: the operands are known, and Python's
    operator refuses them (`None > 1`, TypeError), on a path vLLM certainly takes."""


def post_init_checks(r: SymbolResolver, cls: ClassInfo) -> list[dict[str, Any]]:
    """The checks of the class's own `__post_init__` (see the module doc), in source order."""
    fn = next(
        (
            st
            for st in cls.node.body
            if isinstance(st, ast.FunctionDef) and st.name == "__post_init__"
        ),
        None,
    )
    if fn is None:
        return []
    aliases = _literal_aliases(r, cls.file)
    out: list[dict[str, Any]] = []
    assigned: set[str] = set()
    prelude: list[ast.stmt] = []  # earlier statements that set fields, replayed before a check
    opaque: set[str] = set()  # fields set by a statement the replay cannot follow
    for st in fn.body:
        guards = {rid: (c, pre, path) for rid, c, pre, path in _guards(st)}
        raises = [n for n in ast.walk(st) if isinstance(n, ast.Raise)]
        for node in raises:
            cond, on_path, path = guards.get(id(node), (None, [], []))
            if cond is not None and _self_reads(cond) & opaque:
                cond = None
            reads = sorted(_self_reads(cond if cond is not None else st))
            used = {
                n.args[0].id
                for part in (st, *prelude)
                for n in ast.walk(part)
                if isinstance(n, ast.Call)
                and n.args
                and isinstance(n.args[0], ast.Name)
                and n.args[0].id in aliases
            }
            message = (
                ast.unparse(node.exc.args[0])
                if isinstance(node.exc, ast.Call) and node.exc.args
                else ""
            )
            exception = ast.unparse(node.exc.func) if isinstance(node.exc, ast.Call) else ""
            check: dict[str, Any] = {
                "kind": "post_init",
                "mode": "after",
                "func": "__post_init__",
                "cond": ast.unparse(cond) if cond is not None else None,
                "message": message,
                "exception": exception,
                "reads": reads,
                "aliases": {a: aliases[a] for a in sorted(used)},
                "file": cls.file,
                "line": node.lineno,
            }
            if check["cond"] and "is_torch_equal_or_newer(" in check["cond"]:
                check["torch"] = _release_torch(r)
            setting = [ast.unparse(p) for p in prelude if _self_assigns(p) & set(reads)]
            if cond is not None and (setting or on_path):
                # the tests on the way, each after the statements before it (offsets into prelude)
                check["prelude"] = setting + [ast.unparse(p) for p in on_path]
                check["path"] = [[ast.unparse(c), len(setting) + k] for c, k in path]
            members = {}
            for part in [cond, *(p for p in prelude if _self_assigns(p) & set(reads))]:
                if part is not None:
                    members.update(_enum_members(r, cls.file, part))
            if members:
                check["enums"] = members
            out.append(check)
        sets = _self_assigns(st)
        if sets and _replayable(st):
            prelude.append(st)
        elif sets:
            opaque |= sets
        assigned |= sets
    return out


def _enum_members(r: SymbolResolver, rel: str, cond: ast.AST) -> dict[str, list[Any]]:
    """`Enum.MEMBER` references of a condition: "Enum.MEMBER" -> [member name, member value]."""
    out: dict[str, list[Any]] = {}
    for n in ast.walk(cond):
        if not (
            isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id != "self"
        ):
            continue
        found = r.resolve(rel, n.value.id)
        if found is None or not isinstance(found[1], ast.ClassDef):
            continue
        for st in found[1].body:
            if (
                isinstance(st, ast.Assign)
                and len(st.targets) == 1
                and isinstance(st.targets[0], ast.Name)
                and st.targets[0].id == n.attr
            ):
                try:
                    out[f"{n.value.id}.{n.attr}"] = [n.attr, ast.literal_eval(st.value)]
                except (ValueError, SyntaxError):
                    pass
    return out


def _release_torch(r: SymbolResolver) -> str | None:
    """The torch the release's CUDA requirements pin (what a stock install brings)."""
    for rel in ("requirements/cuda.txt", "requirements-cuda.txt"):
        text = r.tree.read(rel)
        if text:
            return torch_pin(text)
    return None


def _replayable(st: ast.stmt) -> bool:
    """Can the replay follow this statement: assignments of fields, `if` over them, logging?"""
    if isinstance(st, (ast.Assign, ast.AnnAssign)):
        targets = st.targets if isinstance(st, ast.Assign) else [st.target]
        return all(
            isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
            for t in targets
        )
    if isinstance(st, ast.If):
        return all(_replayable(x) for x in [*st.body, *st.orelse])
    if isinstance(st, ast.Raise):  # an earlier check firing: the replay stops there
        return True
    if isinstance(st, ast.Expr) and isinstance(
        st.value, ast.Call
    ):  # logger.warning(...), a no-op here
        return _tail(st.value.func) in (
            "warning",
            "warning_once",
            "info",
            "info_once",
            "debug",
            "warn",
        )
    return isinstance(st, ast.Pass)


def _guards(st: ast.stmt) -> list[tuple[int, ast.expr, list[ast.stmt], list[tuple[ast.expr, int]]]]:
    """(id of a raise, the condition under which it is reached, the statements on the way that
    set fields, the tests on the way each with how many of those statements precede it) for the
    raises of a statement under a chain of `if`/`elif`/`else` (the
    conjunction of the tests on the way, an `else` negating its test), and of
    `for x in self.f: if COND(x): raise` (as `any(...)`)."""
    if (
        isinstance(st, ast.For)
        and not st.orelse
        and len(st.body) == 1
        and isinstance(st.target, ast.Name)
    ):
        out: list[tuple[int, ast.expr, list[ast.stmt], list[tuple[ast.expr, int]]]] = []
        for rid, cond, pre, _path in _guards(st.body[0]):
            if pre:
                continue
            gen = ast.GeneratorExp(cond, [ast.comprehension(st.target, st.iter, [], 0)])
            anyof = ast.Call(ast.Name("any", ast.Load()), [gen], [])
            out.append((rid, anyof, [], [(anyof, 0)]))
        return out
    return [
        (rid, _conjunction([c for c, _k in conds]), pre, conds)
        for rid, conds, pre in _paths([st], [], [])
    ]


def _paths(
    block: list[ast.stmt],
    conds: list[tuple[ast.expr, int]],
    pre: list[ast.stmt],
    blocked: frozenset[str] = frozenset(),
) -> list[tuple[int, list[tuple[ast.expr, int]], list[ast.stmt]]]:
    """Raises of a block with the tests leading to them (each with how many statements of `pre`
    ran before it) and `pre`, the replayable statements that set fields on the way. A raise is
    left out when a statement the replay cannot follow (`blocked`) sets a field a test reads (the
    replay runs each test after the statements of `pre` before it, as vLLM does)."""
    out: list[tuple[int, list[tuple[ast.expr, int]], list[ast.stmt]]] = []
    pre, opaque = list(pre), set(blocked)
    for st in block:
        if isinstance(st, ast.Raise):
            if not any(_self_reads(c) & opaque for c, _k in conds):
                out.append((id(st), conds, pre))
        elif isinstance(st, ast.If):
            out += _paths(st.body, [*conds, (st.test, len(pre))], pre, frozenset(opaque))
            out += _paths(
                st.orelse,
                [*conds, (ast.UnaryOp(ast.Not(), st.test), len(pre))],
                pre,
                frozenset(opaque),
            )
        sets = _self_assigns(st)
        if sets and _replayable(st):
            pre.append(st)
        elif sets:
            opaque |= sets
    return out


def _conjunction(conds: list[ast.expr]) -> ast.expr:
    if not conds:
        return ast.Constant(True)
    return conds[0] if len(conds) == 1 else ast.BoolOp(ast.And(), list(conds))


def _self_reads(node: ast.AST | None) -> set[str]:
    return _self_attrs(node, ast.Load) if node is not None else set()


def _self_assigns(node: ast.AST) -> set[str]:
    return _self_attrs(node, ast.Store)


def _self_attrs(node: ast.AST, ctx: type[ast.expr_context]) -> set[str]:
    """The `self.x` attributes `node` reads (ast.Load) or assigns (ast.Store)."""
    return {
        n.attr
        for n in ast.walk(node)
        if isinstance(n, ast.Attribute)
        and isinstance(n.value, ast.Name)
        and n.value.id == "self"
        and isinstance(n.ctx, ctx)
    }


def _literal_aliases(r: SymbolResolver, rel: str) -> dict[str, list[Any]]:
    """Module-level `Name = Literal[...]` aliases visible in `rel` (its own and imported ones)."""
    out: dict[str, list[Any]] = {}
    mod = r.tree.parse(rel)
    if mod is None:
        return out
    names = {
        st.targets[0].id
        for st in mod.body
        if isinstance(st, ast.Assign)
        and len(st.targets) == 1
        and isinstance(st.targets[0], ast.Name)
    }
    for st in mod.body:
        if isinstance(st, ast.ImportFrom):
            names |= {a.asname or a.name for a in st.names}
    for name in names:
        values = _literal_values(r, rel, name)
        if values is not None:
            out[name] = values
    return out


def _literal_values(r: SymbolResolver, rel: str, name: str, depth: int = 0) -> list[Any] | None:
    found = r.resolve(rel, name)
    if found is None or depth > 3:
        return None
    file, node = found
    value = getattr(node, "value", None) if isinstance(node, (ast.Assign, ast.AnnAssign)) else node
    if isinstance(value, ast.Subscript) and _tail(value.value) == "Literal":
        elts = value.slice.elts if isinstance(value.slice, ast.Tuple) else [value.slice]
        out: list[Any] = []
        for e in elts:  # typing flattens nested Literals and drops repeats, in order
            if isinstance(e, ast.Name):
                inner = _literal_values(r, file, e.id, depth + 1)
                if inner is None:
                    return None
                out += [v for v in inner if v not in out]
                continue
            try:
                v = ast.literal_eval(e)
            except (ValueError, SyntaxError):
                return None
            if v not in out:
                out.append(v)
        return out
    if isinstance(value, ast.Name):
        return _literal_values(r, file, value.id, depth + 1)
    return None


def _tail(node: ast.expr) -> str:
    return (
        node.attr
        if isinstance(node, ast.Attribute)
        else node.id
        if isinstance(node, ast.Name)
        else ""
    )


# --------------------------------------------------------------------------- judging

_CMP = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Is: lambda a, b: a is b,
    ast.IsNot: lambda a, b: a is not b,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
}


@lru_cache(maxsize=1 << 12)
def _parsed(text: str, mode: str) -> Any:
    """A recorded condition or statement, parsed once (the replay reads its nodes, never
    changes them): a build evaluates the same few hundred for every argv."""
    return ast.parse(text, mode=mode)


def evaluate(
    check: dict[str, Any], fields: dict[str, Any], torch: str | None = None
) -> bool | None:
    """Does the check's condition hold for these field values? None: undecided."""
    holds, _raised = evaluate_detail(check, fields, torch)
    return holds


def evaluate_detail(
    check: dict[str, Any], fields: dict[str, Any], torch: str | None = None
) -> tuple[bool | None, str | None]:
    """(holds, what vLLM raises while evaluating the condition itself, e.g. a TypeError)."""
    if not check.get("cond"):
        return None, None
    env = _Env(fields, check.get("aliases", {}), torch, check.get("enums", {}))
    try:
        prelude = check.get("prelude", [])
        path = check.get("path")
        if not path:
            env.run(prelude)
            return env.truth(_parsed(check["cond"], "eval").body), None
        ran, undecided = 0, False
        for cond, k in path:  # as vLLM runs it: the statements before a test, then the test
            env.run(prelude[ran:k])
            ran = max(ran, k)
            t = env.truth(_parsed(cond, "eval").body)
            if t is False:
                return False, None
            undecided = undecided or t is None
        return (None if undecided else True), None
    except Undecided:
        return None, None
    except _Stopped:
        return False, None  # an earlier check fires, said by itself
    except Raises as exc:
        return True, str(exc)


class _Member:
    """An enum member as a JSON value meets it: equal to its value, or to its name."""

    def __init__(self, name: str, value: Any) -> None:
        self.name, self.value = name, value

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _Member):
            return bool(other.value == self.value)
        return bool(other == self.value or other == self.name)

    def __hash__(self) -> int:
        return hash(self.value)


class _Env:
    def __init__(
        self,
        fields: dict[str, Any],
        aliases: dict[str, list[Any]],
        torch: str | None,
        enums: dict[str, list[Any]] | None = None,
    ) -> None:
        self.fields, self.aliases, self.torch = dict(fields), aliases, torch
        self.enums = enums or {}
        self.local: dict[str, Any] = {}

    def run(self, statements: list[str]) -> None:
        """Replay recorded statements on the fields; a field set where the replay cannot tell
        how becomes undecided (missing)."""
        for text in statements:
            for st in _parsed(text, "exec").body:
                self.step(st)

    def step(self, st: ast.stmt) -> None:
        if isinstance(st, ast.Raise):
            raise _Stopped
        if isinstance(st, (ast.Assign, ast.AnnAssign)):
            targets = st.targets if isinstance(st, ast.Assign) else [st.target]
            for t in targets:
                if isinstance(t, ast.Attribute):
                    try:
                        self.fields[t.attr] = self.value(st.value) if st.value is not None else None
                    except Undecided:
                        self.fields.pop(t.attr, None)
        elif isinstance(st, ast.If):
            try:
                taken = self.truth(st.test)
            except Undecided:
                taken = None
            if taken is None:
                for f in _self_assigns(st):
                    self.fields.pop(f, None)
                return
            for x in st.body if taken else st.orelse:
                self.step(x)

    def truth(self, n: ast.expr) -> bool | None:
        """Three-valued: a False conjunct decides an `and`, a True disjunct an `or`."""
        if isinstance(n, ast.BoolOp):
            # Python's order: a known False (`and`) or True (`or`) stops it; a raise counts
            # only when every operand before it is known, so that vLLM surely reaches it
            stop = isinstance(n.op, ast.Or)
            seen_none = False
            for v in n.values:
                try:
                    t = self.truth(v)
                except Undecided:
                    t = None
                except Raises:
                    if seen_none:
                        return None
                    raise
                if t is stop:
                    return stop
                seen_none = seen_none or t is None
            return None if seen_none else not stop
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
            t = self.truth(n.operand)
            return None if t is None else not t
        return bool(self.value(n))

    def value(self, n: ast.expr) -> Any:
        if isinstance(n, ast.Constant):
            return n.value
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self":
            if n.attr not in self.fields:
                raise Undecided(n.attr)
            return self.fields[n.attr]
        if (
            isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name)
            and f"{n.value.id}.{n.attr}" in self.enums
        ):
            name, value = self.enums[f"{n.value.id}.{n.attr}"]
            return _Member(name, value)
        if isinstance(n, ast.Name):
            if n.id in self.local:
                return self.local[n.id]
            if n.id in self.aliases:
                return tuple(self.aliases[n.id])
            raise Undecided(n.id)
        if isinstance(n, (ast.Tuple, ast.List, ast.Set)):
            return tuple(self.value(e) for e in n.elts)
        if isinstance(n, ast.Subscript):
            base, idx = self.value(n.value), self.value(n.slice)
            try:
                return base[idx]
            except (TypeError, IndexError, KeyError):
                raise Undecided(ast.unparse(n)) from None
        if isinstance(n, ast.Compare):
            left = self.value(n.left)
            for op, right_node in zip(n.ops, n.comparators, strict=True):
                right = self.value(right_node)
                try:
                    if not _CMP[type(op)](left, right):
                        return False
                except TypeError as exc:
                    if isinstance(left, _Member) or isinstance(right, _Member):
                        raise Undecided(ast.unparse(n)) from None
                    raise Raises(f"TypeError: {exc}") from None
                except KeyError:
                    raise Undecided(ast.unparse(n)) from None
                left = right
            return True
        if isinstance(n, (ast.BoolOp, ast.UnaryOp)):
            t = self.truth(n)
            if t is None:
                raise Undecided(ast.unparse(n))
            return t
        if isinstance(n, ast.Call):
            return self.call(n)
        raise Undecided(type(n).__name__)

    def call(self, n: ast.Call) -> Any:
        name = n.func.id if isinstance(n.func, ast.Name) else ""
        if name == "get_args" and n.args:
            return self.value(n.args[0])
        if name == "len" and n.args:
            try:
                return len(self.value(n.args[0]))
            except TypeError:
                raise Undecided("len") from None
        if name in ("any", "all") and n.args and isinstance(n.args[0], ast.GeneratorExp):
            return self.reduce(name, n.args[0])
        if name == "is_torch_equal_or_newer" and n.args and isinstance(n.args[0], ast.Constant):
            if self.torch is None:
                raise Undecided("the release's torch")
            try:
                return Version(self.torch) >= Version(str(n.args[0].value))
            except InvalidVersion:
                raise Undecided("torch version") from None
        raise Undecided(ast.unparse(n))

    def reduce(self, name: str, gen: ast.GeneratorExp) -> bool:
        comp = gen.generators[0]
        if len(gen.generators) != 1 or comp.ifs or not isinstance(comp.target, ast.Name):
            raise Undecided("generator")
        items = self.value(comp.iter)
        if items is None:
            items = ()
        results = []
        for item in items:
            self.local[comp.target.id] = item
            results.append(self.truth(gen.elt))
        self.local.pop(comp.target.id, None)
        if name == "any":
            if True in results:
                return True
            if None in results:
                raise Undecided("any")
            return False
        if False in results:
            return False
        if None in results:
            raise Undecided("all")
        return True


def render(check: dict[str, Any], fields: dict[str, Any]) -> str:
    """The raised message as vLLM formats it (f-string holes over the fields and aliases)."""
    text = check.get("message") or ""
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return text
    if isinstance(node, ast.Constant):
        return str(node.value)
    if not isinstance(node, ast.JoinedStr):
        return text
    env = _Env(fields, check.get("aliases", {}), None)
    parts = []
    for v in node.values:
        if isinstance(v, ast.Constant):
            parts.append(str(v.value))
        elif isinstance(v, ast.FormattedValue):
            try:
                parts.append(str(env.value(v.value)))
            except Undecided:
                parts.append("{" + ast.unparse(v.value) + "}")
    return "".join(parts)


def torch_pin(requirements_text: str) -> str | None:
    """The torch version a release's requirements pin (`torch==2.9.0`), if any."""
    m = re.search(r"^torch\s*==\s*([0-9][\w.+]*)", requirements_text, flags=re.MULTILINE)
    return m.group(1) if m else None
