"""Capabilities per (release, platform, arch), computed the way `_ModelInfo.from_model_cls` does.

Each flag is one of the few shapes vLLM's predicates take: `getattr(model, "x", False)`
(first class-level binding along the MRO), `isinstance(model, SomeProtocol)` on the
class object (every protocol member present at class level), and `supports_kw` on
`forward`/`__init__`. Which shape a release uses is checked against that release's
own source (an anchor per predicate); a predicate whose anchor is gone yields
`unknown` for that flag rather than a guess. The PP rule is detected the same way:
0.33 added `SupportsPP in model.__mro__` to `_supports_pp_attributes`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from compat.sources.tree import INTERFACES, VllmTree
from compat.vllm.classes import ClassModel, ClassResolver, Member
from compat.vllm.registry import RegistryEntry
from compat.vllm.scope import ClassRef, ModuleIndex

INTERFACES_BASE = "vllm/model_executor/models/interfaces_base.py"
_IF_MOD = "vllm.model_executor.models.interfaces"
_IFB_MOD = "vllm.model_executor.models.interfaces_base"

# flag -> (file, function, anchor text, how to evaluate). The anchor pins the
# predicate's shape in a release; evaluation mirrors that shape.
ATTR_FLAGS: dict[str, tuple[str, str]] = {
    # flag: (function in interfaces.py, attribute read by getattr)
    "supports_multimodal": ("supports_multimodal", "supports_multimodal"),
    "supports_encoder_tp_data": ("supports_multimodal_encoder_tp_data", "supports_encoder_tp_data"),
    "is_hybrid": ("is_hybrid", "is_hybrid"),
    "has_inner_state": ("has_inner_state", "has_inner_state"),
    "is_attention_free": ("is_attention_free", "is_attention_free"),
    "supports_transcription": ("supports_transcription", "supports_transcription"),
}
PROTOCOL_FLAGS = {
    # flag: (function, protocol class it isinstance-checks for a class object)
    "supports_lora": ("_supports_lora", "_SupportsLoRAType"),
    "supports_eagle3": ("supports_eagle3", "SupportsEagle3"),
}
FLAGS = (
    "supports_pp",
    "supports_lora",
    "supports_multimodal",
    "supports_encoder_tp_data",
    "is_hybrid",
    "has_inner_state",
    "is_attention_free",
    "supports_transcription",
    "is_pooling_model",
    "is_text_generation_model",
    "supports_eagle3",
    "is_moe",
)


@dataclass
class Rules:
    """How this release's predicates are shaped; None entries mean unknown."""

    pp_rule: (
        str | None
    )  # "nominal+protocol" (0.33) | "protocol" (<=0.24) | "list" (0.6) | "none" (0.4)
    attr_flags: dict[str, str | None]
    protocol_flags: dict[str, str | None]
    vllm_model_check: bool
    pooling_attr: bool
    text_gen: (
        str | None
    )  # "protocol" (isinstance VllmModelForTextGeneration) | "callable" (compute_logits)
    notes: list[str] = field(default_factory=list)
    # "list": the architectures vllm/config.py lists in _PP_SUPPORTED_MODELS; "none": where
    # ParallelConfig refuses any PP size > 1 ("not supported yet"): (file, line) of the rule.
    pp_archs: frozenset[str] = frozenset()
    pp_where: tuple[str, int] = ("", 0)


def _config_pp_rule(tree: VllmTree) -> tuple[str | None, frozenset[str], tuple[str, int]]:
    """The PP rule of a release before interfaces.py's SupportsPP decided it (vllm/config.py)."""
    rel = "vllm/config.py"
    mod = tree.parse(rel)
    if mod is None:
        return None, frozenset(), ("", 0)
    text = tree.read(rel) or ""
    for st in mod.body:
        if (
            isinstance(st, ast.Assign)
            and len(st.targets) == 1
            and isinstance(st.targets[0], ast.Name)
            and st.targets[0].id == "_PP_SUPPORTED_MODELS"
            and "Pipeline parallelism is only supported for the following" in text
        ):
            try:
                archs = frozenset(str(a) for a in ast.literal_eval(st.value))
            except (ValueError, SyntaxError, TypeError):
                return None, frozenset(), ("", 0)
            return "list", archs, (rel, st.lineno)
    i = text.find('"Pipeline parallelism is not supported yet."')
    if i >= 0:
        return "none", frozenset(), (rel, text.count("\n", 0, i) + 1)
    return None, frozenset(), ("", 0)


def _func(mod: ast.Module | None, name: str) -> ast.FunctionDef | None:
    if mod is None:
        return None
    found = None
    for st in mod.body:
        if isinstance(st, ast.FunctionDef) and st.name == name:
            found = st  # the last def wins (overload stubs come first)
    return found


def _src(tree: VllmTree, rel: str, fn: ast.FunctionDef | None) -> str:
    if fn is None:
        return ""
    lines = tree.lines(rel)
    return "\n".join(lines[fn.lineno - 1 : fn.end_lineno or fn.lineno])


def detect_rules(tree: VllmTree) -> Rules:
    mod = tree.parse(INTERFACES)
    base = tree.parse(INTERFACES_BASE)
    notes: list[str] = []
    attrs_fn = _src(tree, INTERFACES, _func(mod, "_supports_pp_attributes"))
    inspect_fn = _src(tree, INTERFACES, _func(mod, "_supports_pp_inspect"))
    pp_rule = None
    if 'supports_kw(model_forward, "intermediate_tensors")' in inspect_fn:
        if "SupportsPP in model.__mro__" in attrs_fn and "_SupportsPPType" in attrs_fn:
            pp_rule = "nominal+protocol"
        elif "isinstance(model, _SupportsPPType)" in attrs_fn:
            pp_rule = "protocol"
    pp_archs: frozenset[str] = frozenset()
    pp_where: tuple[str, int] = ("", 0)
    if pp_rule is None:
        pp_rule, pp_archs, pp_where = _config_pp_rule(tree)
    if pp_rule is None:
        notes.append(
            "supports_pp: _supports_pp_attributes/_supports_pp_inspect not in a known shape"
        )
    attr_flags: dict[str, str | None] = {}
    for flag, (fn, attr) in ATTR_FLAGS.items():
        body = _src(tree, INTERFACES, _func(mod, fn))
        ok = f'getattr(model, "{attr}", False)' in body
        attr_flags[flag] = attr if ok else None
        if not ok:
            notes.append(f"{flag}: {fn} not found as getattr(model, {attr!r}, False)")
    protocol_flags: dict[str, str | None] = {}
    for flag, (fn, proto) in PROTOCOL_FLAGS.items():
        body = _src(tree, INTERFACES, _func(mod, fn))
        ok = f"isinstance(model, {proto})" in body
        protocol_flags[flag] = proto if ok else None
        if not ok:
            notes.append(f"{flag}: {fn} not found as isinstance(model, {proto})")
    init_fn = _src(tree, INTERFACES_BASE, _func(base, "_check_vllm_model_init"))
    emb_fn = _src(tree, INTERFACES_BASE, _func(base, "_check_vllm_model_embed_input_ids"))
    fwd_fn = _src(tree, INTERFACES_BASE, _func(base, "_check_vllm_model_forward"))
    vllm_model = (
        'supports_kw(model_init, "vllm_config")' in init_fn
        and 'getattr(model, "embed_input_ids", None)' in emb_fn
        and '("input_ids", "positions")' in fwd_fn
    )
    if not vllm_model:
        notes.append("is_vllm_model: interfaces_base checks not in a known shape")
    pool_fn = _src(tree, INTERFACES_BASE, _func(base, "is_pooling_model"))
    tg_fn = _src(tree, INTERFACES_BASE, _func(base, "is_text_generation_model"))
    return Rules(
        pp_archs=pp_archs,
        pp_where=pp_where,
        pp_rule=pp_rule,
        attr_flags=attr_flags,
        protocol_flags=protocol_flags,
        vllm_model_check=vllm_model,
        pooling_attr='getattr(model, "is_pooling_model", False)' in pool_fn,
        text_gen=(
            "protocol"
            if "isinstance(model, VllmModelForTextGeneration)" in tg_fn
            else "callable"
            if 'callable(getattr(model, "compute_logits", None))' in tg_fn
            else None
        ),
        notes=notes,
    )


@dataclass
class Capability:
    arch: str
    platform: str
    status: str  # resolved | unresolved
    reason: str
    class_path: str = ""
    class_name: str = ""
    file: str = ""
    line: int = 0
    registry_module: str = ""
    registry_class: str = ""
    category: str = ""
    flags: dict[str, bool | None] = field(default_factory=dict)
    evidence: dict[str, str] = field(default_factory=dict)
    mro: list[str] = field(default_factory=list)


def _all_of(*values: bool | None) -> bool | None:
    """Three-valued `and`: False when one is False, else None when one is unknown, else True."""
    if any(v is False for v in values):
        return False
    if any(v is None for v in values):
        return None
    return True


def _where(m: Member | None) -> str:
    if m is None:
        return "not bound on the class (default)"
    if m.file:
        return f"{m.owner} ({m.file}:{m.line})"
    return m.owner


class CapabilityAnalyzer:
    """Computes capability rows for every registry entry on one platform."""

    def __init__(self, tree: VllmTree, index: ModuleIndex, platform: str, rules: Rules) -> None:
        self.tree = tree
        self.index = index
        self.platform = platform
        self.rules = rules
        self.classes = ClassResolver(index, platform)
        self._protos: dict[str, set[str] | None] = {}

    def _proto_members(self, module: str, name: str) -> set[str] | None:
        key = f"{module}.{name}"
        if key not in self._protos:
            ref = self.index.resolve_name(module, name, self.platform)
            self._protos[key] = (
                self.classes.protocol_members(self.classes.model(ref))
                if isinstance(ref, ClassRef)
                else None
            )
        return self._protos[key]

    def _has(self, m: ClassModel, name: str) -> bool:
        return self.classes.lookup(m, name) is not None

    def _isinstance_proto(self, m: ClassModel, module: str, proto: str) -> tuple[bool | None, str]:
        members = self._proto_members(module, proto)
        if members is None:
            return None, f"protocol {proto} not found"
        missing = sorted(n for n in members if not self._has(m, n))
        if missing:
            return False, f"isinstance(cls, {proto}) fails: no class-level {', '.join(missing)}"
        return True, f"isinstance(cls, {proto}): all of {', '.join(sorted(members))} present"

    def _attr(self, m: ClassModel, name: str) -> tuple[bool | None, str]:
        mem = self.classes.lookup(m, name)
        if mem is None:
            return False, f"getattr({name}) -> default False"
        if mem.kind == "def":
            return True, f"{name} is a method of {_where(mem)}"
        val = None
        if mem.node is not None:
            try:
                val = ast.literal_eval(mem.node)
            except (ValueError, SyntaxError, TypeError):
                return None, f"{name} = {ast.unparse(mem.node)} at {_where(mem)} is not a literal"

        return bool(val), f"{name} = {val!r} at {_where(mem)}"

    def _callable(self, m: ClassModel, name: str) -> tuple[bool | None, str]:
        mem = self.classes.lookup(m, name)
        if mem is None:
            return False, f"no class-level {name}"
        if mem.kind == "def":
            return True, f"{name} defined by {_where(mem)}"
        if isinstance(mem.node, ast.Constant) and mem.node.value is None:
            return False, f"{name} = None at {_where(mem)}"
        return None, f"{name} at {_where(mem)} is a value, callability unknown"

    def _forward_kw(
        self, m: ClassModel, kw: str, method: str = "forward"
    ) -> tuple[bool | None, str]:
        mem = self.classes.lookup(m, method)
        if mem is None:
            return False, f"no {method}"
        params = self.classes.params(mem)
        if params is None:
            return None, f"{method} of {_where(mem)} is not a plain function"
        ok = params.supports_kw(kw)
        return ok, f"{method} of {_where(mem)} {'accepts' if ok else 'does not accept'} {kw}"

    def _is_vllm_model(self, m: ClassModel) -> tuple[bool | None, str]:
        if not self.rules.vllm_model_check:
            return None, "is_vllm_model shape unknown in this release"
        init_ok, why_i = self._forward_kw(m, "vllm_config", "__init__")
        emb = self.classes.lookup(m, "embed_input_ids")
        fwd_ids, why_f = self._forward_kw(m, "input_ids")
        fwd_pos, _ = self._forward_kw(m, "positions")
        parts = [init_ok, emb is not None, fwd_ids, fwd_pos]
        if any(p is False for p in parts):
            return (
                False,
                f"is_vllm_model fails: {why_i}; embed_input_ids {'present' if emb else 'missing'}; {why_f}",
            )
        if any(p is None for p in parts):
            return None, "is_vllm_model undecidable statically"
        return True, "is_vllm_model"

    def analyze(self, entry: RegistryEntry) -> Capability:
        cap = Capability(
            arch=entry.arch,
            platform=self.platform,
            status="unresolved",
            reason="",
            registry_module=entry.module,
            registry_class=entry.class_name,
            category=",".join(entry.categories),
        )
        ref = self.index.resolve_name(entry.module, entry.class_name, self.platform)
        if not isinstance(ref, ClassRef):
            cap.reason = (
                f"cannot resolve {entry.module}.{entry.class_name}: {getattr(ref, 'reason', ref)}"
            )
            cap.flags = {f: None for f in FLAGS}
            return cap
        m = self.classes.model(ref)
        cap.status = "resolved"
        cap.class_path, cap.class_name, cap.file, cap.line = ref.path, ref.name, ref.file, ref.line
        cap.mro = m.names()
        if m.unresolved_bases:
            cap.reason = "unresolved bases: " + "; ".join(m.unresolved_bases)
        flags, ev = cap.flags, cap.evidence
        r = self.rules
        flags["supports_pp"], ev["supports_pp"] = self._supports_pp(entry, m)
        for flag, attr in r.attr_flags.items():
            if attr is None:
                flags[flag], ev[flag] = None, "predicate shape unknown in this release"
            else:
                flags[flag], ev[flag] = self._attr(m, attr)
        for flag, proto in r.protocol_flags.items():
            if proto is None:
                flags[flag], ev[flag] = None, "predicate shape unknown in this release"
            else:
                flags[flag], ev[flag] = self._isinstance_proto(m, _IF_MOD, proto)
        vm = self._is_vllm_model(m)
        flags["is_pooling_model"], ev["is_pooling_model"] = self._is_pooling(m, vm)
        flags["is_text_generation_model"], ev["is_text_generation_model"] = (
            self._is_text_generation(m, vm)
        )
        moe = [
            c
            for c in m.mro
            if isinstance(c, ClassRef) and c.name == "MixtureOfExperts" and c.module == _IF_MOD
        ]
        flags["is_moe"] = bool(moe)
        ev["is_moe"] = "MixtureOfExperts in MRO" if moe else "MixtureOfExperts not in MRO"
        return cap

    def _supports_pp(self, entry: RegistryEntry, m: ClassModel) -> tuple[bool | None, str]:
        """supports_pp: the release's rule (an arch list, none at all, or the class's attributes
        (version-aware) and a forward accepting intermediate_tensors)."""
        r = self.rules
        if r.pp_rule is None:
            return None, "PP rule of this release unknown"
        if r.pp_rule in ("list", "none"):
            where = f"{r.pp_where[0]}:{r.pp_where[1]}"
            listed = entry.arch in r.pp_archs
            return listed, (
                f"[{r.pp_rule} rule] {entry.arch} {'in' if listed else 'not in'} "
                f"_PP_SUPPORTED_MODELS ({where})"
                if r.pp_rule == "list"
                else f"[none rule] ParallelConfig refuses any PP size > 1 ({where})"
            )
        nominal = any(
            isinstance(c, ClassRef) and c.name == "SupportsPP" and c.module == _IF_MOD
            for c in m.mro
        )
        proto_ok, why_p = self._isinstance_proto(m, _IF_MOD, "_SupportsPPType")
        attrs_ok = (nominal or proto_ok) if r.pp_rule == "nominal+protocol" else proto_ok
        fwd_ok, why_f = self._forward_kw(m, "intermediate_tensors")
        attrs_why = "SupportsPP in MRO" if (r.pp_rule == "nominal+protocol" and nominal) else why_p
        return _all_of(attrs_ok, fwd_ok), f"[{r.pp_rule} rule] {attrs_why}; {why_f}"

    def _is_pooling(self, m: ClassModel, vm: tuple[bool | None, str]) -> tuple[bool | None, str]:
        if not self.rules.pooling_attr:
            return None, "predicate shape unknown"
        pa, why_pa = self._attr(m, "is_pooling_model")
        return _all_of(vm[0], pa), f"{vm[1]}; {why_pa}"

    def _is_text_generation(
        self, m: ClassModel, vm: tuple[bool | None, str]
    ) -> tuple[bool | None, str]:
        if self.rules.text_gen is None:
            return None, "predicate shape unknown"
        if self.rules.text_gen == "protocol":
            tg, why_tg = self._isinstance_proto(m, _IFB_MOD, "VllmModelForTextGeneration")
        else:
            tg, why_tg = self._callable(m, "compute_logits")
        return _all_of(vm[0], tg), f"{vm[1]}; {why_tg}"


def analyze_release(
    tree: VllmTree,
    entries: list[RegistryEntry],
    platforms: tuple[str, ...],
    index: ModuleIndex | None = None,
) -> tuple[list[Capability], Rules]:
    index = index or ModuleIndex(tree)
    rules = detect_rules(tree)
    caps: list[Capability] = []
    for p in platforms:
        an = CapabilityAnalyzer(tree, index, p, rules)
        caps.extend(an.analyze(e) for e in entries)
    return caps, rules
