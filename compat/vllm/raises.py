"""Inventory of error messages about parallelism and speculative decoding in one vLLM release.

Walks every `raise`, `assert cond, msg` and `unsupported.append("...")` /
`reasons.append` / `blockers.append` in `vllm/**/*.py` and keeps those whose
message mentions a parallel / speculative / connector / hybrid keyword
(`KEYWORDS`). Each message is flattened into a template: string constants, f-strings
(`{expr}` holes), `+` concatenation, implicit concatenation (already one constant in
the AST), `%` formatting and `.format` (receiver kept), and a message held in a
local variable assigned earlier in the same function. Each site carries file, line,
exception type, the enclosing `if` tests (innermost last; `else` branches as
`not (test)`) and the enclosing function.

The inventory is for review and diffing between releases (research §8.3): a new or
vanished message is a hint that a curated gate in data/gates.yaml needs a look.

Speed: a cheap text prefilter finds `raise`/`assert`/`.append(` statements whose own
text (or, for a message held in a variable, the text just before) contains a
keyword; only files with such a statement are parsed (through `tree.parse`, so the
parse is shared with other stages), and only statements are walked.
"""

from __future__ import annotations

import ast
import gc
import re
import time
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from dataclasses import dataclass, field

from compat.sources.tree import VllmTree

# Keywords, matched case-insensitively on word-ish boundaries: the match must start a
# word (start, non-letter before it, or a CamelCase hump such as `KVConnector`); the
# short ones (pp, mtp, dcp) must also end one (`PP>1`, `pp_size`, `MTPModel`, but not
# `supported` or `app`). `.` in a keyword stands for any one character
# (`context_parallel`, `context parallel`, `ContextParallel` is handled by the hump rule
# on the first letter only, so `context.parallel` also matches `Context-Parallel`).
KEYWORDS = (
    "pipeline",
    "pp",
    "specul",
    "draft",
    "eagle",
    "mtp",
    "dflash",
    "dspark",
    "dcp",
    "context.parallel",
    "expert.parallel",
    "data.parallel",
    "nixl",
    "connector",
    "hybrid",
    "mamba",
    "encoder",
)
_SHORT = {"pp", "mtp", "dcp"}
_KW_RE = re.compile("|".join(KEYWORDS))  # applied to lower-cased text (much faster than re.I)

# lists whose `.append("...")` records an unsupported feature / failure reason
_LIST_NAME_RE = re.compile(r"^(?:\w+_)?(?:unsupported|reasons|blockers)$")
_TRIGGERS = ("raise", "assert", ".append(")


@dataclass
class RaiseSite:
    file: str
    line: int
    kind: str  # "raise" | "assert" | "append"
    exception: str | None  # "ValueError", "AssertionError" for assert, None for append
    template: str  # flattened message, `{expr}` holes; "" when there is no message
    keywords: list[str]  # matched keywords, lower-case, as written in KEYWORDS
    condition: str | None  # innermost enclosing `if` test
    conditions: list[str] = field(default_factory=list)  # outermost first
    function: str | None = None  # qualname of the enclosing def: "ParallelConfig.__post_init__"
    list_name: str | None = None  # for appends: "unsupported"
    end_line: int | None = None


@dataclass
class RaiseInventory:
    version: str
    sites: list[RaiseSite]
    files_total: int
    files_parsed: int
    seconds: float
    unparsable: list[str] = field(default_factory=list)

    def templates(self) -> set[str]:
        return {s.template for s in self.sites}

    def by_file(self, rel: str) -> list[RaiseSite]:
        return [s for s in self.sites if s.file == rel]

    def find(self, text: str) -> list[RaiseSite]:
        """Sites whose template contains `text` (holes in `text` match any hole)."""
        pat = template_regex(text)
        return [s for s in self.sites if pat.search(s.template)]


# --------------------------------------------------------------------------- keywords


def match_keywords(text: str) -> list[str]:
    """Keywords of KEYWORDS found in `text` with the boundary rules above (deduplicated)."""
    out: list[str] = []
    n = len(text)
    for m in _KW_RE.finditer(text.lower()):
        i, j = m.span()
        if i > 0 and text[i - 1].isalpha():
            cur = text[i]
            hump = cur.isupper() and (
                text[i - 1].islower() or (j - i > 1 and text[i + 1].islower())
            )
            if not hump:
                continue
        word = m.group().lower()
        if word in _SHORT and j < n and text[j].isalpha() and not text[j].isupper():
            continue
        key = next(k for k in KEYWORDS if re.fullmatch(k, word))
        if key not in out:
            out.append(key)
    return out


# --------------------------------------------------------------------------- templates


def flatten_message(node: ast.expr | None, resolve_name=None) -> str:
    """Message template of an expression: constants kept, everything else a `{expr}` hole."""
    if node is None:
        return ""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else "{" + repr(node.value) + "}"
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            elif isinstance(v, ast.FormattedValue):
                parts.append("{" + ast.unparse(v.value) + "}")
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return flatten_message(node.left, resolve_name) + flatten_message(node.right, resolve_name)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and _stringish(node.left):
        left = flatten_message(node.left, resolve_name)
        args = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
        it = iter(args)

        def sub(m: re.Match) -> str:
            if m.group() == "%%":
                return "%"
            a = next(it, None)
            return "{" + (ast.unparse(a) if a is not None else "?") + "}"

        return re.sub(r"%%|%[-#0 +]*\d*(?:\.\d+)?[sdrifgxXeEc]", sub, left)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
        and _stringish(node.func.value)
    ):
        return flatten_message(node.func.value, resolve_name)
    if isinstance(node, ast.Name) and resolve_name is not None:
        got = resolve_name(node)
        if got is not None:
            return got
    return "{" + ast.unparse(node) + "}"


def _stringish(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _stringish(node.left) or _stringish(node.right)
    return False


def constant_text(template: str) -> str:
    """The template with its `{...}` holes removed: what keyword matching looks at."""
    return _HOLE_RE.sub(" ", template)


_HOLE_RE = re.compile(r"\{[^{}]*(?:\{[^{}]*\}[^{}]*)*\}")


def template_regex(text: str) -> re.Pattern:
    """Regex for `text` where each `{...}` hole matches any hole (or any text)."""
    pieces = _HOLE_RE.split(text)
    return re.compile(r".*?".join(re.escape(p) for p in pieces), re.DOTALL)


# --------------------------------------------------------------------------- prefilter


_SPAN_CHARS_RE = re.compile(r"[()\[\]{}\n]")


def _statement_span(text: str, i: int, cap: int = 3000) -> int:
    """End offset of the logical statement starting at `i` (bracket-balanced, capped).

    Only brackets and newlines matter, so the regex jumps between them (the prefilter runs
    on every file of the release; a loop over each character was a third of it).
    """
    depth = 0
    n = min(len(text), i + cap)
    for m in _SPAN_CHARS_RE.finditer(text, i, n):
        c = m.group()
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth = max(0, depth - 1)
        elif depth == 0 and text[m.start() - 1] != "\\":
            return m.start()
    return n


_VAR_MSG_RE = re.compile(
    r"(?:raise\s+[\w.]+\(\s*|assert\s[^\n]*,\s*|\.append\(\s*)[A-Za-z_]\w*\s*\)?\s*$"
)


def _is_word_at(text: str, i: int, word: str) -> bool:
    before = text[i - 1] if i else " "
    after = text[i + len(word)] if i + len(word) < len(text) else " "
    return not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_")


def prefilter(text: str) -> bool:
    """Could this file hold a keyword message in a raise/assert/append? (cheap, no parse)"""
    if not any(t in text for t in _TRIGGERS):
        return False
    for trig in _TRIGGERS:
        i = text.find(trig)
        while i != -1:
            ok = trig.startswith(".") or _is_word_at(text, i, trig)
            if ok:
                end = _statement_span(text, i)
                span = text[i:end]
                if match_keywords(span):
                    return True
                if _VAR_MSG_RE.match(span) and match_keywords(text[max(0, i - 1500) : i]):
                    return True  # message built in a variable just before
            i = text.find(trig, i + 1)
    return False


# --------------------------------------------------------------------------- walking


class _Walker:
    """Statement-only walk; enclosing `if` tests are kept as nodes and unparsed on emit."""

    def __init__(self, rel: str) -> None:
        self.rel = rel
        self.sites: list[RaiseSite] = []

    def walk_module(self, mod: ast.Module) -> None:
        self._stmts(mod.body, (), [], None)

    # conds: tuple of (test node | str, negated)
    def _stmts(
        self, body: Iterable[ast.stmt], conds: tuple, scope: list[str], fn: ast.AST | None
    ) -> None:
        for st in body:
            self._stmt(st, conds, scope, fn)

    def _stmt(self, st: ast.stmt, conds: tuple, scope: list[str], fn: ast.AST | None) -> None:
        if isinstance(st, ast.If):
            self._stmts(st.body, conds + ((st.test, False),), scope, fn)
            self._stmts(st.orelse, conds + ((st.test, True),), scope, fn)
        elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self._stmts(st.body, (), scope + [st.name], st)
        elif isinstance(st, ast.ClassDef):
            self._stmts(st.body, (), scope + [st.name], None)
        elif isinstance(st, ast.Raise):
            self._raise(st, conds, scope, fn)
        elif isinstance(st, ast.Assert):
            if st.msg is not None:
                self._emit(
                    st, "assert", "AssertionError", st.msg, conds + ((st.test, True),), scope, fn
                )
        elif isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
            call = st.value
            f = call.func
            if isinstance(f, ast.Attribute) and f.attr == "append" and call.args:
                owner = (
                    f.value.attr
                    if isinstance(f.value, ast.Attribute)
                    else (f.value.id if isinstance(f.value, ast.Name) else None)
                )
                if owner and _LIST_NAME_RE.match(owner):
                    self._emit(st, "append", None, call.args[0], conds, scope, fn, list_name=owner)
        elif isinstance(
            st,
            (
                ast.Expr,
                ast.Assign,
                ast.AugAssign,
                ast.AnnAssign,
                ast.Return,
                ast.Import,
                ast.ImportFrom,
                ast.Pass,
                ast.Delete,
                ast.Global,
                ast.Nonlocal,
                ast.Break,
                ast.Continue,
            ),
        ):
            return
        else:
            for name in ("body", "orelse", "finalbody"):
                sub = getattr(st, name, None)
                if isinstance(sub, list):
                    self._stmts(sub, conds, scope, fn)
            for h in getattr(st, "handlers", None) or ():
                self._stmts(h.body, conds, scope, fn)
            for c in getattr(st, "cases", None) or ():
                self._stmts(c.body, conds + ((f"case {ast.unparse(c.pattern)}", False),), scope, fn)

    def _raise(self, st: ast.Raise, conds, scope, fn) -> None:
        exc = st.exc
        if exc is None:
            return  # bare re-raise
        if isinstance(exc, ast.Call):
            msg = (
                exc.args[0]
                if exc.args
                else next(
                    (k.value for k in exc.keywords if k.arg in ("msg", "message", "detail")), None
                )
            )
            func = exc.func
        else:
            msg, func = None, exc
        self._emit(st, "raise", func, msg, conds, scope, fn)

    def _emit(
        self,
        st: ast.stmt,
        kind: str,
        exc,
        msg: ast.expr | None,
        conds,
        scope,
        fn,
        list_name: str | None = None,
    ) -> None:
        if msg is None:
            return
        resolver = _local_resolver(fn, st.lineno) if fn is not None else None
        template = flatten_message(msg, resolver)
        kws = match_keywords(constant_text(template))
        if not kws:
            return
        texts = []
        for test, negated in conds:
            t = test if isinstance(test, str) else ast.unparse(test)
            texts.append(f"not ({t})" if negated else t)
        self.sites.append(
            RaiseSite(
                file=self.rel,
                line=st.lineno,
                kind=kind,
                exception=exc if isinstance(exc, str) or exc is None else ast.unparse(exc),
                template=template,
                keywords=kws,
                condition=texts[-1] if texts else None,
                conditions=texts,
                function=".".join(scope) or None,
                list_name=list_name,
                end_line=getattr(st, "end_lineno", None),
            )
        )


def _local_resolver(fn: ast.AST, before_line: int) -> Callable[[ast.Name], str | None]:
    """Resolve a Name to the string template last assigned to it before `before_line`."""

    def resolve(name: ast.Name) -> str | None:
        last: ast.expr | None = None
        extra: list[ast.AugAssign] = []
        for node in ast.walk(fn):
            if getattr(node, "lineno", before_line) >= before_line:
                continue
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == name.id
            ):
                if last is None or node.lineno > last.lineno:
                    last, extra = node.value, []
                    last.lineno = node.lineno
            elif (
                isinstance(node, ast.AugAssign)
                and isinstance(node.op, ast.Add)
                and isinstance(node.target, ast.Name)
                and node.target.id == name.id
            ):
                extra.append(node)
        if last is None or not _stringish(last):
            return None
        text = flatten_message(last)
        for aug in sorted(extra, key=lambda a: a.lineno):
            if aug.lineno > last.lineno:
                text += flatten_message(aug.value)
        return text

    return resolve


# --------------------------------------------------------------------------- entry points


@contextmanager
def no_gc():
    """Pause the cyclic GC while parsing many files, then freeze what survived.

    Hundreds of cached ASTs are millions of live objects: with the GC on, every
    generation-2 collection re-traverses them and a whole-tree scan gets ~8x slower;
    merely re-enabling it afterwards costs one full traversal (~2-3 s on 0.33).
    `gc.freeze()` moves the survivors (mostly the tree's AST cache) to the permanent
    generation: they are still freed by reference counting when the tree goes away,
    only the cycle detector stops re-scanning them. ASTs hold no reference cycles.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.freeze()
            gc.enable()


def scan_file(tree: VllmTree, rel: str) -> list[RaiseSite]:
    mod = tree.parse(rel)
    if mod is None:
        return []
    w = _Walker(rel)
    w.walk_module(mod)
    return w.sites


def scan_raises(
    tree: VllmTree, under: str = "vllm", files: list[str] | None = None
) -> RaiseInventory:
    """All keyword-matching raise/assert/append messages below `under` (or in `files`, a
    sorted part of them: each file's sites depend on that file alone)."""
    t0 = time.perf_counter()
    files = tree.py_files(under) if files is None else files
    sites: list[RaiseSite] = []
    parsed = 0
    bad: list[str] = []
    with no_gc():
        for rel in files:
            text = tree.read(rel)
            if not text or not prefilter(text):
                continue
            parsed += 1
            if tree.parse(rel) is None:
                bad.append(rel)
                continue
            sites.extend(scan_file(tree, rel))
    return RaiseInventory(tree.version, sites, len(files), parsed, time.perf_counter() - t0, bad)


def diff_inventories(old: RaiseInventory, new: RaiseInventory) -> dict[str, list[RaiseSite]]:
    """Messages added / removed between two releases (by (exception, template))."""
    ok = {(s.exception, s.template) for s in old.sites}
    nk = {(s.exception, s.template) for s in new.sites}
    return {
        "added": [s for s in new.sites if (s.exception, s.template) not in ok],
        "removed": [s for s in old.sites if (s.exception, s.template) not in nk],
    }
