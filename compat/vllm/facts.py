"""All static facts of one release, as rows for the database (see compat.db tables)."""

from __future__ import annotations

import json
from pathlib import Path
from collections.abc import Callable
from typing import Any

from compat.errors import LayoutError
from compat.sources.tree import VllmTree
from compat.vllm.capabilities import FLAGS, analyze_release
from compat.vllm.registry import read_registry
from compat.vllm.scope import ModuleIndex


def _b(v: bool | None) -> int | None:
    return None if v is None else int(bool(v))


def capability_rows(tree: VllmTree, platforms: tuple[str, ...], index: ModuleIndex) -> tuple[list[dict], Any]:
    entries = read_registry(tree)
    caps, rules = analyze_release(tree, entries, platforms, index)
    rows = []
    for c in caps:
        row = {
            "platform": c.platform, "arch": c.arch, "category": c.category,
            "registry_module": c.registry_module, "registry_class": c.registry_class,
            "class_path": c.class_path, "file": c.file, "line": c.line, "status": c.status,
            "reason": c.reason, "evidence": json.dumps(c.evidence, sort_keys=True),
            "mro_path": json.dumps(c.mro),
        }
        row.update({f: _b(c.flags.get(f)) for f in FLAGS})
        rows.append(row)
    return rows, rules


def raise_rows_of(tree: VllmTree) -> list[dict]:
    from compat.vllm.raises import scan_raises


    return [{"file": s.file, "line": s.line, "exception": s.exception or "",
             "template": s.template, "condition": s.condition or ""} for s in scan_raises(tree).sites]


def _raise_rows_at(root: str, version: str) -> list[dict]:
    """Worker: the raise inventory of a tree, computed in a process of its own."""
    return raise_rows_of(VllmTree(root=Path(root), version=version, origin="src"))


# Raise inventories being computed by a worker process, by id(tree).
_PENDING: dict[int, Any] = {}


def _raise_rows(tree: VllmTree) -> list[dict]:
    pending = _PENDING.pop(id(tree), None)
    if pending is not None:
        try:
            return pending.get(timeout=600)
        except Exception:  # the worker failed: compute here instead
            pass
    return raise_rows_of(tree)


def release_row(tree: VllmTree, pp_rule: str | None, notes: list[str]) -> dict[str, Any]:
    """The `release` row of a tree's facts (the scan adds the analyzer hash it cached them under)."""
    return {
        "version": tree.version, "origin": tree.origin, "sha256": tree.sha256,
        "fingerprint": tree.fingerprint(), "commit_id": tree.commit, "pp_rule": pp_rule,
        "notes": json.dumps(notes),
    }


def compute(tree: VllmTree, platforms: tuple[str, ...],
            progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    say = progress or (lambda _m: None)
    index = ModuleIndex(tree)
    # The raise inventory parses ~300 files nothing else needs; with a second core it runs
    # in a forked worker while this process resolves classes, drafts and flags.
    pool = _start_raise_worker(tree)
    try:
        say(f"{tree.version}: registry and capabilities")
        caps, rules = capability_rows(tree, platforms, index)
        notes = list(rules.notes)
        facts: dict[str, Any] = {"arch_capability": caps}
        say(f"{tree.version}: speculative decoding")
        spec, spec_notes = speculative_rows(tree, platforms, caps)
        facts.update(spec)
        notes += spec_notes
        for name, fn in _EXTRA_STAGES:
            say(f"{tree.version}: {name}")
            try:
                rows, stage_notes = fn(tree, platforms, index)
            except LayoutError as exc:
                rows, stage_notes = {}, [f"{name}: {exc.line()}"]
            facts.update(rows)
            notes += stage_notes
        facts["release"] = release_row(tree, rules.pp_rule, notes)
        return facts
    finally:
        if pool is not None:
            _PENDING.pop(id(tree), None)
            pool.terminate()
            pool.join()


def _quiet_worker() -> None:
    """Signals are the parent's to handle (it terminates the worker): no worker traceback,
    and none of the parent's handlers (e.g. the CLI's SIGTERM message) run in the fork."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _start_raise_worker(tree: VllmTree) -> Any:
    import multiprocessing
    import os

    if (os.cpu_count() or 1) < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return None
    try:
        pool = multiprocessing.get_context("fork").Pool(1, initializer=_quiet_worker)
    except OSError:
        return None
    _PENDING[id(tree)] = pool.apply_async(_raise_rows_at, (str(tree.root), tree.version))
    return pool


# (name, fn(tree, platforms, index) -> ({table: rows}, notes)); filled as stages land.
_EXTRA_STAGES: list[tuple[str, Callable[..., tuple[dict[str, list[dict]], list[str]]]]] = []


def _override_targets(fn_node) -> list[dict]:
    """Stub target configs for every model_type / architecture hf_config_override tests."""
    import ast as _ast

    types_, archs = set(), set()
    for node in _ast.walk(fn_node):
        if not isinstance(node, _ast.Compare):
            continue
        left = _ast.unparse(node.left)
        consts = [c.value for comp in node.comparators for c in _ast.walk(comp)
                  if isinstance(c, _ast.Constant) and isinstance(c.value, str)]
        if left.endswith("model_type"):
            types_.update(consts)
        elif "architecture" in left:
            archs.update(consts)
    out = [{"model_type": t, "architectures": ["UnknownForCausalLM"], "num_nextn_predict_layers": 1}
           for t in sorted(types_)]
    out += [{"model_type": "unknown", "architectures": [a], "num_nextn_predict_layers": 1}
            for a in sorted(archs)]
    return out


def speculative_rows(tree: VllmTree, platforms: tuple[str, ...], caps: list[dict]) -> tuple[dict, list[str]]:
    from compat.sources.tree import SPECULATIVE
    from compat.vllm.speculative import OverrideRunner, accepted_methods, draft_parallel_facts

    notes: list[str] = []
    methods = accepted_methods(tree)
    if not methods:
        notes.append(f"speculative: no SpeculativeMethod Literal in {SPECULATIVE}")
    method_rows = [{"method": m.method, "canonical": m.canonical, "kind": m.kind,
                    "file": SPECULATIVE, "line": m.line} for m in methods]
    dp = draft_parallel_facts(tree)
    dp_rows = []
    for m in sorted({m.canonical for m in methods}):
        if dp is None:
            dp_rows.append({"method": m, "pp_source": "unknown", "ep_source": "unknown",
                            "file": SPECULATIVE, "line": 0, "detail": "create_draft_parallel_config not found"})
        else:
            dp_rows.append({"method": m, "pp_source": dp.pp_source(m),
                            "ep_source": dp.ep_from_create if dp.pp_source(m) not in ("target_config", "none") else (
                                "target" if dp.pp_source(m) == "target_config" else "off"),
                            "file": SPECULATIVE, "line": dp.line_for(m),
                            "detail": "; ".join(dp.notes)})
    runner = OverrideRunner(tree)
    by_arch = {(c["platform"], c["arch"]): c for c in caps}
    draft_rows = []
    if runner.available:
        inherits = dp.inherits_pp("mtp") if dp else None
        for cfg in _override_targets(runner.fn):
            res = runner.run(cfg)
            for p in platforms:
                draft_arch = res.architectures[0] if res.architectures else ""
                cap = by_arch.get((p, draft_arch)) if res.changed else None
                draft_rows.append({
                    "platform": p, "target_model_type": cfg["model_type"],
                    "target_arch": cfg["architectures"][0], "method": "mtp",
                    "draft_arch": draft_arch if res.changed else "",
                    "draft_class": cap["class_path"] if cap else "",
                    "draft_supports_pp": cap["supports_pp"] if cap else None,
                    "draft_inherits_pp": None if inherits is None else int(inherits),
                    "status": res.status if res.changed or res.status != "ok" else "unchanged",
                    "detail": res.detail, "file": SPECULATIVE, "line": res.line or runner.line,
                })
    else:
        notes.append("speculative: hf_config_override not found")
    return {"spec_method": method_rows, "draft_parallel": dp_rows, "draft_mapping": draft_rows}, notes


def surface_rows(tree: VllmTree, platforms: tuple[str, ...], index: ModuleIndex) -> tuple[dict, list[str]]:
    """CLI flags (and dotted sub-keys), parser names, the raise inventory, gate anchors."""
    from compat.vllm.cli_surface import extract_cli
    from compat.vllm.gates import (check_gates, extract_aux_over_pp_classes, extract_lse_impls,
                                   load_rules)
    from compat.vllm.parsers import extract_parsers

    notes: list[str] = []
    cli = extract_cli(tree)
    if cli.status != "ok":
        notes.append(f"cli: {cli.status}: {cli.reason}")
    flag_rows = [{"flag": f.flag, "kind": f.kind, "canonical": f.canonical, "value_type": f.value_type,
                  "file": f.file, "line": f.line} for f in cli.flags] if cli.status != "unknown" else []
    for flag, keys in sorted(cli.subkeys.items()):
        src = cli.subkey_sources.get(flag)
        for key in sorted(keys):
            flag_rows.append({"flag": f"{flag}.{key}", "kind": "subkey", "canonical": flag,
                              "value_type": "", "file": (src.file if src else "") or "",
                              "line": (src.line if src else 0) or 0})
    value_rows, config_rows = cli_value_rows(tree, cli) if cli.status != "unknown" else ([], [])
    parsers = extract_parsers(tree)
    parser_rows = []
    for ps in (parsers.tool, parsers.reasoning):
        if ps.status != "ok":
            notes.append(f"{ps.kind} parsers: {ps.reason}")
            continue
        for n in ps.names:
            parser_rows.append({"kind": n.kind, "name": n.name, "module": n.module or "",
                                "class_name": n.class_name or "", "file": n.file, "line": n.line})
    raise_rows = _raise_rows(tree)
    rules = {r.id: r for r in load_rules()}
    gate_rows = []
    for g in check_gates(tree, list(rules.values())):
        r = rules[g.rule_id]
        gate_rows.append({"rule_id": g.rule_id, "status": g.status, "effect": r.effect, "message": r.message,
                          "file": g.file or "", "line": g.line or 0, "reason": g.reason or ""})
    attr_rows, release_rows = [], []
    scans = (extract_lse_impls(tree), extract_aux_over_pp_classes(tree))
    # Which scans succeeded: no rows for an attribute means "none set it" only when its scan ran.
    release_rows.append({"key": "class_attr_scans", "value": json.dumps({x.attr: x.status for x in scans}),
                         "file": "", "line": 0})
    for scan in scans:
        if scan.status != "ok":
            notes.append(f"{scan.attr}: {scan.reason}")
            continue
        for c in scan.classes:
            attr_rows.append({"attr": scan.attr, "class_name": c.class_name, "file": c.file,
                              "line": c.line, "value": c.value, "via": c.via})
    release_rows.append(runner_default(tree))
    release_rows.append(requirements_fact(tree))
    release_rows.append(chat_template_files(tree))
    from compat.vllm.cli_surface import argv_rewrite_shape, inverse_prefixes

    shape = argv_rewrite_shape(tree)
    release_rows.append({"key": "argv_rewrite", "value": json.dumps(shape),
                         "file": shape["file"] if shape else "", "line": shape["line"] if shape else 0})
    inverse = inverse_prefixes(tree)
    release_rows.append({"key": "boolean_inverse_prefixes", "value": json.dumps(inverse),
                         "file": inverse["file"] if inverse else "", "line": inverse["line"] if inverse else 0})
    return {"cli_flag": flag_rows, "cli_value": value_rows, "config_field": config_rows,
            "parser_name": parser_rows, "raise_message": raise_rows,
            "gate_status": gate_rows, "class_attr_fact": attr_rows, "release_fact": release_rows}, notes


def cli_value_rows(tree: VllmTree, cli: Any) -> tuple[list[dict], list[dict]]:
    """argparse's view of every option (`cli_value`) and the config classes JSON flags name."""
    from dataclasses import asdict

    from compat.vllm.cli_surface import SymbolResolver
    from compat.vllm.config_schema import ROOT_ALSO, extract_config_schema

    strings: dict[str, list[str]] = {}  # what add_argument receives; --no-x forms argparse derives
    for f in cli.flags:
        if f.kind in ("long", "short"):
            strings.setdefault(f.canonical, []).append(f.flag)
    rows = []
    seen: set[str] = set()
    for f in cli.flags:
        if f.kind != "long" or f.canonical in seen or f.spec is None:
            continue
        seen.add(f.canonical)
        rows.append(_value_row(f.canonical, strings[f.canonical], f.spec, f.file, f.line))
    for dest, spec, file, line in cli.positionals:
        rows.append(_value_row(dest, [], spec, file, line))
    r = SymbolResolver(tree)
    roots = []
    for src in cli.subkey_sources.values():
        if src.status == "ok" and src.file:
            cls = r.resolve_class(src.file, src.json_class)
            if cls is not None:
                roots.append(cls)
    for name in ROOT_ALSO:
        cls = r.find_class_anywhere(name)
        if cls is not None:
            roots.append(cls)
    config_rows = [asdict(c) for c in extract_config_schema(r, roots)]
    return rows, config_rows


def _value_row(flag: str, option_strings: list[str], spec: Any, file: str, line: int) -> dict:
    return {
        "flag": flag, "option_strings": json.dumps(option_strings), "dest": spec.dest,
        "action": spec.action, "nargs": "" if spec.nargs is None else str(spec.nargs),
        "const": json.dumps(spec.const), "type": spec.type or "", "parse": int(spec.parse),
        "optional": int(spec.optional), "callable_src": spec.callable_src, "json_class": spec.json_class or "",
        "choices": json.dumps(spec.choices), "metavar_only": int(spec.metavar_only),
        "choices_file": spec.choices_file, "choices_line": spec.choices_line,
        "default": json.dumps(spec.default if not isinstance(spec.default, (set, tuple)) else list(spec.default)),
        "default_kind": spec.default_kind, "unknown": spec.unknown, "file": file, "line": line,
    }


def chat_template_files(tree: VllmTree) -> dict:
    """Chat template files a `--chat-template PATH` can name: the release's examples/ (present
    in vLLM's docker image, whose working directory is the repository root) and the built-in
    templates next to `vllm/transformers_utils/chat_templates/registry.py`."""
    import os

    files: list[str] = []
    for base in ("examples", "vllm/transformers_utils/chat_templates"):
        root = tree.root / base
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for fn in sorted(filenames):
                rel = os.path.relpath(os.path.join(dirpath, fn), tree.root).replace(os.sep, "/")
                if fn.endswith(".jinja"):
                    files.append(rel)
    value = {"files": files} if (tree.root / "examples").is_dir() else {"files": None}
    return {"key": "chat_template_files", "value": json.dumps(value), "file": "examples", "line": 0}


def runner_default(tree: VllmTree) -> dict:
    """How `VllmConfig.use_v2_model_runner` picks the runner when nothing forces it.

    `{"mode": "restricted", "archs": [...]}`: V2 only for those architectures (dense,
    unquantized), as in 0.23/0.24; `{"mode": "v2"}`: V2 unless an unsupported feature is
    present, as in 0.33; `{"mode": "unknown"}` otherwise.
    """
    import ast as _ast

    rel = "vllm/config/vllm.py"
    mod = tree.parse(rel)
    value: dict = {"mode": "unknown"}
    line = 0
    if mod is not None:
        archs = None
        for st in mod.body:
            if (isinstance(st, _ast.Assign) and isinstance(st.targets[0], _ast.Name)
                    and st.targets[0].id == "DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES"):
                node = st.value.args[0] if isinstance(st.value, _ast.Call) and st.value.args else st.value
                try:
                    archs = sorted(_ast.literal_eval(node))
                except (ValueError, SyntaxError, TypeError):
                    archs = None
        default_src = ""
        for node in _ast.walk(mod):
            if isinstance(node, _ast.FunctionDef) and node.name == "_is_default_v2_model_runner_model":
                default_src = "\n".join(tree.lines(rel)[node.lineno - 1: node.end_lineno])
        for node in _ast.walk(mod):
            if isinstance(node, _ast.FunctionDef) and node.name == "use_v2_model_runner":
                line = node.lineno
                src = "\n".join(tree.lines(rel)[node.lineno - 1: node.end_lineno])
                if "_is_default_v2_model_runner_model()" in src:
                    value = ({"mode": "restricted", "archs": archs,
                              "requires_dense": "not model_config.is_moe" in default_src,
                              "requires_unquantized": "is_quantized" in default_src}
                             if archs and default_src else {"mode": "unknown"})
                elif "_get_v2_model_runner_unsupported_features()" in src:
                    value = {"mode": "v2"}
                break
    return {"key": "runner_default", "value": json.dumps(value), "file": rel, "line": line}


_EXTRA_STAGES.append(("flags, parsers, raises, gates", surface_rows))


def requirements_fact(tree: VllmTree) -> dict:
    """Packages a default install of the release brings (requirements/common.txt + cuda.txt).

    Gates such as "suffix decoding needs arctic_inference" depend on an optional package;
    when it is not among these, a stock install lacks it.
    """
    import re

    names: set[str] = set()
    found = False
    for rel in ("requirements/common.txt", "requirements/cuda.txt"):
        text = tree.read(rel)
        if text is None:
            continue
        found = True
        for line in text.splitlines():
            m = re.match(r"\s*([A-Za-z0-9_.\-]+)", line)
            if m and not line.lstrip().startswith(("#", "-")):
                names.add(m.group(1).lower().replace("_", "-"))
    value = {"packages": sorted(names)} if found else {"packages": None}
    return {"key": "requirements", "value": json.dumps(value), "file": "requirements/common.txt", "line": 0}
