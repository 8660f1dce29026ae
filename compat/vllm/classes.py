"""A static object model of vLLM classes: C3 MRO and class-level attribute lookup.

vLLM's capability checks are `getattr(cls, name)`, `isinstance(cls, SomeProtocol)`
(attribute *presence* on the class object) and `inspect.signature(cls.forward)`.
All three reduce to: walk the MRO, find the first class body that binds a name.
Classes outside the tree are opaque, except `torch.nn.Module`, whose `forward`
(`_forward_unimplemented(self, *input)`) and `__init__(self, *args, **kwargs)`
decide checks for classes that never define them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field

from compat.vllm.scope import ClassRef, External, ModuleIndex, Unresolved

NN_MODULE = {"torch.nn.Module", "torch.nn.modules.module.Module"}

# Names typing excludes from protocol members (typing._SPECIAL_NAMES and friends).
_NON_MEMBERS = {
    "__abstractmethods__",
    "__annotations__",
    "__dict__",
    "__doc__",
    "__init__",
    "__module__",
    "__new__",
    "__slots__",
    "__subclasshook__",
    "__weakref__",
    "__class_getitem__",
    "__parameters__",
    "__orig_bases__",
    "__orig_class__",
    "_is_protocol",
    "_is_runtime_protocol",
    "__protocol_attrs__",
    "__non_callable_proto_members__",
    "__type_params__",
    "__qualname__",
    "__match_args__",
    "__static_attributes__",
    "__firstlineno__",
}
_PROTOCOL_ROOTS = {"typing.Protocol", "typing_extensions.Protocol"}


def _class_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of a class body, those under `if`/`else` in place (body, then orelse).
    A module-level generator: a nested function that calls itself is a reference cycle, and
    its Members (and their nodes) then outlived the release in a worker that scans many."""
    for st in body:
        if isinstance(st, ast.If):
            yield from _class_level(st.body)
            yield from _class_level(st.orelse)
        else:
            yield st


@dataclass(frozen=True)
class Member:
    """One class-body binding: a def, a value assignment, or a bare annotation."""

    name: str
    kind: str  # def | value | annotation
    owner: str  # class path or external qualname
    file: str | None
    line: int | None
    node: ast.AST | None = None


@dataclass(frozen=True)
class Params:
    """The shape of a signature, enough to replay `inspect.signature` checks."""

    names: tuple[tuple[str, str], ...]  # (name, kind) in order; kinds as in inspect

    @classmethod
    def of(cls, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Params:
        a = fn.args
        out: list[tuple[str, str]] = []
        out += [(p.arg, "POSITIONAL_ONLY") for p in a.posonlyargs]
        out += [(p.arg, "POSITIONAL_OR_KEYWORD") for p in a.args]
        if a.vararg:
            out.append((a.vararg.arg, "VAR_POSITIONAL"))
        out += [(p.arg, "KEYWORD_ONLY") for p in a.kwonlyargs]
        if a.kwarg:
            out.append((a.kwarg.arg, "VAR_KEYWORD"))
        return cls(tuple(out))

    def supports_kw(self, kw: str) -> bool:
        """vLLM's `supports_kw(fn, kw)` with its defaults (var-kwargs allowed)."""
        if not self.names:
            return False
        for name, kind in self.names:
            if name == kw and kind in ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD", "KEYWORD_ONLY"):
                return True
        last_name, last_kind = self.names[-1]
        return last_kind == "VAR_KEYWORD" and last_name != kw


# nn.Module as vLLM's checks see it.
_NN_MODULE_MEMBERS = {
    "forward": Params((("self", "POSITIONAL_OR_KEYWORD"), ("input", "VAR_POSITIONAL"))),
    "__init__": Params(
        (("self", "POSITIONAL_OR_KEYWORD"), ("args", "VAR_POSITIONAL"), ("kwargs", "VAR_KEYWORD"))
    ),
    "__call__": None,
    "load_state_dict": None,
    "named_parameters": None,
    "to": None,
}


@dataclass
class ClassModel:
    """One resolved class with its linearized MRO."""

    ref: ClassRef
    mro: list[ClassRef | External]
    unresolved_bases: list[str] = field(default_factory=list)
    mro_ok: bool = True

    def names(self) -> list[str]:
        return [c.path if isinstance(c, ClassRef) else c.qualname for c in self.mro]


class ClassResolver:
    """Builds ClassModels on top of a ModuleIndex, for one platform."""

    def __init__(self, index: ModuleIndex, platform: str) -> None:
        self.index = index
        self.platform = platform
        self._models: dict[ClassRef, ClassModel] = {}
        self._members: dict[ClassRef, dict[str, Member]] = {}

    def model(self, ref: ClassRef, _stack: tuple[ClassRef, ...] = ()) -> ClassModel:
        if ref in self._models:
            return self._models[ref]
        node = self.index.classdef(ref)
        env = self.index.synthetic.get(ref, (None, None))[1]
        bases: list[ClassRef | External] = []
        unresolved: list[str] = []
        for b in node.bases:
            r = self.index.resolve_expr(ref.module, b, self.platform, env=env)
            if isinstance(r, (ClassRef, External)):
                if isinstance(r, ClassRef) and (r == ref or r in _stack):
                    unresolved.append(f"{ast.unparse(b)} (cyclic)")
                    continue
                bases.append(r)
            else:
                unresolved.append(f"{ast.unparse(b)}: {getattr(r, 'reason', r)}")
        seqs: list[list[ClassRef | External]] = []
        ok = True
        for base in bases:
            if isinstance(base, ClassRef):
                bm = self.model(base, _stack + (ref,))
                ok = ok and bm.mro_ok
                seqs.append(list(bm.mro))
            else:
                seqs.append([base])
        seqs.append(list(bases))
        merged = _c3_merge(seqs)
        if merged is None:
            ok = False
            merged = []
            for s in seqs[:-1]:
                for c in s:
                    if c not in merged:
                        merged.append(c)
        model = ClassModel(ref=ref, mro=[ref] + merged, unresolved_bases=unresolved, mro_ok=ok)
        self._models[ref] = model
        return model

    def members(self, ref: ClassRef) -> dict[str, Member]:
        """Names bound at class level in this class body (and late `Cls.x = ...`)."""
        if ref in self._members:
            return self._members[ref]
        node = self.index.classdef(ref)
        out: dict[str, Member] = {}
        for st in _class_level(node.body):
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out[st.name] = Member(st.name, "def", ref.path, ref.file, st.lineno, st)
            elif isinstance(st, ast.Assign):
                for t in st.targets:
                    for n in _target_names(t):
                        out[n] = Member(n, "value", ref.path, ref.file, st.lineno, st.value)
            elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                kind = "value" if st.value is not None else "annotation"
                if kind == "annotation" and st.target.id in out:
                    continue
                out[st.target.id] = Member(
                    st.target.id, kind, ref.path, ref.file, st.lineno, st.value
                )
        scope = self.index.scope(ref.module)
        if scope is not None and ref not in self.index.synthetic:
            for n, v in scope.late_attrs.get(ref.name, {}).items():
                out.setdefault(
                    n, Member(n, "value", ref.path, ref.file, getattr(v, "lineno", None), v)
                )
        self._members[ref] = out
        return out

    def lookup(
        self, model: ClassModel, name: str, *, include_annotations: bool = False
    ) -> Member | None:
        """First binding of `name` along the MRO, as `getattr(cls, name)` finds it."""
        for c in model.mro:
            if isinstance(c, External):
                if c.qualname in NN_MODULE and name in _NN_MODULE_MEMBERS:
                    return Member(name, "def", c.qualname, None, None, None)
                continue
            m = self.members(c).get(name)
            if m is None:
                continue
            if m.kind == "annotation" and not include_annotations:
                continue
            return m
        return None

    def params(self, member: Member) -> Params | None:
        if isinstance(member.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return Params.of(member.node)
        if member.owner in NN_MODULE:
            return _NN_MODULE_MEMBERS.get(member.name)
        return None

    def protocol_members(self, proto: ClassModel) -> set[str]:
        """Members `isinstance(x, Proto)` checks: every name bound in protocol bodies."""
        names: set[str] = set()
        for c in proto.mro:
            if isinstance(c, External):
                continue
            cm = self.model(c)
            if not self.is_protocol(cm):
                continue
            names |= {n for n in self.members(c) if n not in _NON_MEMBERS}
        return names

    def is_protocol(self, model: ClassModel) -> bool:
        """A class is a Protocol when `Protocol` is among its direct bases."""
        node = self.index.classdef(model.ref)
        env = self.index.synthetic.get(model.ref, (None, None))[1]
        for b in node.bases:
            r = self.index.resolve_expr(model.ref.module, b, self.platform, env=env)
            if isinstance(r, External) and r.qualname in _PROTOCOL_ROOTS:
                return True
        return False


def _target_names(t: ast.expr) -> list[str]:
    if isinstance(t, ast.Name):
        return [t.id]
    if isinstance(t, (ast.Tuple, ast.List)):
        return [n for e in t.elts for n in _target_names(e)]
    return []


def _c3_merge(seqs: list[list]) -> list | None:
    seqs = [list(s) for s in seqs if s]
    out: list = []
    while seqs:
        for s in seqs:
            head = s[0]
            if not any(head in other[1:] for other in seqs):
                break
        else:
            return None
        out.append(head)
        seqs = [[c for c in s if c != head] or [] for s in seqs]
        seqs = [s for s in seqs if s]
    return out


__all__ = ["ClassModel", "ClassResolver", "Member", "Params", "Unresolved"]
