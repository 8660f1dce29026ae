"""All static facts of one release, as rows for the database (see compat.db tables)."""

from __future__ import annotations

import contextlib
import gc
import json
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, cast

from compat.errors import LayoutError
from compat.forking import child_signals, reap, signals_held
from compat.sources.tree import VllmTree, speculative_file

if TYPE_CHECKING:
    from compat.vllm.cli_surface import CliSurface
    from compat.vllm.parsers import Parsers
    from compat.vllm.scope import ModuleIndex

# The analysis modules are imported where they are used: after the fork, each worker
# loads (and, without bytecode caches, compiles) only its share's, at the same time.


def _b(v: bool | None) -> int | None:
    return None if v is None else int(bool(v))


def capability_rows(
    tree: VllmTree, platforms: tuple[str, ...], index: ModuleIndex
) -> tuple[list[dict], Any]:
    from compat.vllm.capabilities import FLAGS, analyze_release
    from compat.vllm.registry import read_registry

    entries = read_registry(tree)
    caps, rules = analyze_release(tree, entries, platforms, index)
    rows = []
    for c in caps:
        row = {
            "platform": c.platform,
            "arch": c.arch,
            "category": c.category,
            "registry_module": c.registry_module,
            "registry_class": c.registry_class,
            "class_path": c.class_path,
            "file": c.file,
            "line": c.line,
            "status": c.status,
            "reason": c.reason,
            "evidence": json.dumps(c.evidence, sort_keys=True),
            "mro_path": json.dumps(c.mro),
        }
        row.update({f: _b(c.flags.get(f)) for f in FLAGS})
        rows.append(row)
    return rows, rules


def raise_rows_of(tree: VllmTree, files: list[str] | None = None) -> list[dict]:
    """The raise inventory (compat.vllm.raises) of the tree, or of some of its files."""
    from compat.vllm.raises import scan_raises

    return [
        {
            "file": s.file,
            "line": s.line,
            "exception": s.exception or "",
            "template": s.template,
            "condition": s.condition or "",
        }
        for s in scan_raises(tree, files=files).sites
    ]


def release_row(tree: VllmTree, pp_rule: str | None, notes: list[str]) -> dict[str, Any]:
    """The `release` row of a tree's facts (the scan adds the analyzer hash it cached them under)."""
    return {
        "version": tree.version,
        "origin": tree.origin,
        "sha256": tree.sha256,
        "fingerprint": tree.fingerprint(),
        "commit_id": tree.commit,
        "pp_rule": pp_rule,
        "notes": json.dumps(notes),
    }


#: Where the model classes live: the capability stage parses most of these files, so their
#: raise inventory is best taken after it, from the same parses.
MODEL_DIRS = ("vllm/model_executor/models/", "vllm/models/")

Say = Callable[[str], None]


def compute(
    tree: VllmTree, platforms: tuple[str, ...], progress: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Every fact table of the release.

    Parsing is most of the cost, and a parsed module cannot be handed between processes
    for less than parsing it again, so the work is split by what each part parses: the
    model share (capabilities and drafts) and the surface share (flags, parsers, gates,
    class attributes). The raise inventory is a queue of files both take chunks from when
    their own part is done, the model files last: by then the model share has parsed
    them, and the surface share takes some only when it would otherwise sit idle. With
    two cores the shares run in forked workers (see _in_workers), else one after the
    other here. Either way the rows are the same and in the same order.
    """
    say = progress or (lambda _m: None)
    files = tree.py_files("vllm")
    queued = [f for f in files if not f.startswith(MODEL_DIRS)] + [
        f for f in files if f.startswith(MODEL_DIRS)
    ]
    with rare_young_collections():
        shares = _in_workers(tree, platforms, queued, say)
        if shares is None:
            queue = RaiseQueue(queued)
            shares = (
                _model_share(tree, platforms, queue, say),
                _surface_share(tree, platforms, queue, say),
            )
    models, surface = shares
    facts: dict[str, Any] = {**models["facts"], **surface["facts"]}
    if surface["raises_kept"]:
        order = {f: i for i, f in enumerate(files)}
        facts["raise_message"] = sorted(
            models["raises"] + surface["raises"], key=lambda r: order[r["file"]]
        )
    facts["release"] = release_row(tree, models["pp_rule"], models["notes"] + surface["notes"])
    return facts


@contextlib.contextmanager
def rare_young_collections(threshold: int = 100_000) -> Iterator[None]:
    """Fewer passes of the cyclic garbage collector while a release's modules are parsed.

    ast.parse allocates millions of nodes that all live until the facts are computed, and
    at the default threshold (700 allocations) the collector walks them again and again:
    at 0.33.0 those passes were 2.6 s of the 4.7 s model share (measured with gc disabled).
    The nodes form no reference cycles, so collecting less often frees nothing later; the
    forked workers inherit the setting.
    """
    old = gc.get_threshold()
    gc.set_threshold(max(old[0], threshold), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)


class RaiseQueue:
    """Files whose raise inventory is still to be taken, claimed a chunk at a time by whichever
    share is free; with forked workers the position is an integer in shared memory."""

    CHUNK = 4  # small: the last claims decide how long one share waits for the other

    def __init__(self, files: list[str], position: Any = None) -> None:
        self.files = files
        self._shared = position
        self._local = 0

    def claim(self) -> list[str]:
        if self._shared is None:
            i, self._local = self._local, self._local + self.CHUNK
        else:
            with self._shared.get_lock():
                i = self._shared.value
                self._shared.value = i + self.CHUNK
        return self.files[i : i + self.CHUNK]

    def drain(self, tree: VllmTree) -> list[dict]:
        rows: list[dict] = []
        while chunk := self.claim():
            rows += raise_rows_of(tree, chunk)
        return rows


def _model_share(
    tree: VllmTree, platforms: tuple[str, ...], queue: RaiseQueue, say: Say
) -> dict[str, Any]:
    from compat.vllm.scope import ModuleIndex

    index = ModuleIndex(tree)
    say(f"{tree.version}: registry and capabilities")
    caps, rules = capability_rows(tree, platforms, index)
    say(f"{tree.version}: speculative decoding")
    spec, spec_notes = speculative_rows(tree, platforms, caps)
    return {
        "facts": {"arch_capability": caps, **spec},
        "notes": list(rules.notes) + spec_notes,
        "pp_rule": rules.pp_rule,
        "raises": queue.drain(tree),
    }


def _surface_share(
    tree: VllmTree, platforms: tuple[str, ...], queue: RaiseQueue, say: Say
) -> dict[str, Any]:
    from compat.vllm.scope import ModuleIndex

    index = ModuleIndex(tree)
    facts: dict[str, Any] = {}
    notes: list[str] = []
    # The raise inventory was part of the surface stage: a release whose surface cannot be
    # read keeps none, as before.
    kept = True
    for name, fn in _EXTRA_STAGES:
        say(f"{tree.version}: {name}")
        try:
            rows, stage_notes = fn(tree, platforms, index)
        except LayoutError as exc:
            rows, stage_notes = {}, [f"{name}: {exc.line()}"]
            kept = kept and fn is not surface_rows
        facts.update(rows)
        notes += stage_notes
    return {"facts": facts, "notes": notes, "raises": queue.drain(tree), "raises_kept": kept}


def cpu_count() -> int:
    """The cores this process may run on (its affinity on Linux)."""
    import os

    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _in_workers(
    tree: VllmTree, platforms: tuple[str, ...], queued: list[str], say: Say
) -> tuple[dict, dict] | None:
    """Both shares in forked workers; None when there is one core, no fork, or a worker
    failed (the caller then computes here, and a real error surfaces as itself).

    The workers are those of share_workers() when this process opened it, else two forked
    for this release alone. Progress is relayed through the pipes, so only this process calls
    `say`. The parent holds no parsed module, so nothing hundreds of MB large is freed here.
    """
    import multiprocessing

    if cpu_count() < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return None
    if multiprocessing.current_process().daemon:
        return None  # a daemonic process (a judging worker) may not have children
    kept = _KEPT
    if kept is not None and kept.owner == os.getpid():
        return kept.run(tree, platforms, queued, say)
    once = _SharePool()
    try:
        return once.run(tree, platforms, queued, say)
    finally:
        once.close()


_KEPT: _SharePool | None = None


@contextlib.contextmanager
def share_workers() -> Iterator[None]:
    """Within, every release this process scans goes to the same two share workers (forked at
    the first scan), and each keeps the modules it parsed for the release before: a file whose
    text is unchanged is not parsed again. Parsing is most of a scan, and consecutive releases
    share about 60 % of their files. A process forked inside (a judging worker) forks its own
    workers per release, as outside."""
    global _KEPT
    outer, _KEPT = _KEPT, _SharePool()
    try:
        yield
    finally:
        kept, _KEPT = _KEPT, outer
        kept.close()


class _SharePool:
    """The two share workers (forked at the first run) and the pipes to them."""

    def __init__(self) -> None:
        self.owner = os.getpid()
        self.workers: list[tuple[Any, Any]] = []
        self.position: Any = None
        self.broken = False
        self.retiring = False

    def _start(self) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("fork")
        self.position = ctx.Value("i", 0)
        with signals_held():
            for share in (_model_share, _surface_share):
                mine, theirs = ctx.Pipe()
                proc = ctx.Process(target=_serve, args=(share, theirs, self.position), daemon=True)
                self.workers.append((proc, mine))
                proc.start()
                theirs.close()

    def run(
        self, tree: VllmTree, platforms: tuple[str, ...], queued: list[str], say: Say
    ) -> tuple[dict, dict] | None:
        """Both shares of one release, or None (and no further use) if a worker failed."""
        if self.broken:
            return None
        if self.retiring:  # a worker is over its memory limit: fresh ones for this release
            self.close()
            self.retiring = False
        result = None
        try:
            if not self.workers:
                self._start()
            self.position.value = 0
            for _proc, conn in self.workers:
                conn.send((tree.bare(), platforms, queued))
            result = self._collect(say)
        except OSError:  # no processes or pipes to be had
            pass
        if result is None:
            self.close()
            self.broken = True
        return result

    def _collect(self, say: Say) -> tuple[dict, dict] | None:
        import multiprocessing.connection
        import time

        results: dict[int, dict[str, Any]] = {}
        pending = {conn: i for i, (_proc, conn) in enumerate(self.workers)}
        deadline = time.monotonic() + 600
        while pending:
            ready = multiprocessing.connection.wait(
                list(pending), timeout=max(0.0, deadline - time.monotonic())
            )
            if not ready:
                return None  # a worker hangs
            for obj in ready:
                conn = cast(multiprocessing.connection.Connection, obj)  # one of `pending`
                try:
                    kind, payload = conn.recv()
                except EOFError:
                    return None  # a worker died
                if kind == "say":
                    say(payload)
                elif kind == "done":
                    results[pending.pop(conn)], retire = payload
                    self.retiring = self.retiring or retire
                else:
                    return None
        return results[0], results[1]

    def close(self) -> None:
        for proc, conn in self.workers:
            conn.close()
            reap(proc)
        self.workers = []


#: A kept share worker larger than this (resident MiB) after a release is replaced. The model
#: share of the largest release keeps about 800 MiB.
RETIRE_MIB = 2048


def _resident_mib() -> float:
    """This process's resident set now (Linux; elsewhere its peak so far)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _serve(share: Callable[..., dict], conn: Any, position: Any) -> None:
    """A share worker: runs `share` on each release it is sent until its pipe closes; each
    result goes back through `conn`. It keeps the modules parsed for the last release, for
    the next (VllmTree.reuse).

    Signals are the parent's to handle (it terminates the worker): no worker traceback, and
    none of the parent's handlers (e.g. the CLI's SIGTERM message) run in the fork. It ends
    with os._exit: its heap (the parsed modules) is the OS's to reclaim, it holds no file,
    and the stdio buffers it inherited are the parent's to flush.
    """
    child_signals()
    code = 0
    parsed: dict[str, Any] = {}
    try:
        while True:
            try:
                tree, platforms, queued = conn.recv()
            except EOFError:
                break  # the parent is done
            tree.reuse = parsed
            queue = RaiseQueue(queued, position)
            result = share(tree, platforms, queue, lambda msg: conn.send(("say", msg)))
            parsed = tree.parsed_by_text()
            tree.drop_parsed()
            del tree, queue
            # Garbage in reference cycles is not collected here (the collector would walk
            # every kept module after each release); a worker that has grown past the limit
            # says so with its result, and the parent forks fresh ones for the next release.
            retire = _resident_mib() > RETIRE_MIB
            conn.send(("done", (result, retire)))
            del result
            if retire:
                break
    except BaseException as exc:  # noqa: BLE001 (the parent recomputes; this only reports)
        code = 1
        try:
            conn.send(("failed", repr(exc)))
        except Exception:  # noqa: BLE001
            pass
    finally:
        conn.close()
        os._exit(code)


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
        consts = [
            c.value
            for comp in node.comparators
            for c in _ast.walk(comp)
            if isinstance(c, _ast.Constant) and isinstance(c.value, str)
        ]
        if left.endswith("model_type"):
            types_.update(consts)
        elif "architecture" in left:
            archs.update(consts)
    out = [
        {"model_type": t, "architectures": ["UnknownForCausalLM"], "num_nextn_predict_layers": 1}
        for t in sorted(types_)
    ]
    out += [
        {"model_type": "unknown", "architectures": [a], "num_nextn_predict_layers": 1}
        for a in sorted(archs)
    ]
    return out


def speculative_rows(
    tree: VllmTree, platforms: tuple[str, ...], caps: list[dict]
) -> tuple[dict, list[str]]:
    from compat.vllm.speculative import OverrideRunner, accepted_methods, draft_parallel_facts

    home = speculative_file(tree)  # where this release defines SpeculativeConfig
    notes: list[str] = []
    methods = accepted_methods(tree)
    if not methods:
        notes.append(f"speculative: no SpeculativeMethod Literal in {home}")
    method_rows = [
        {
            "method": m.method,
            "canonical": m.canonical,
            "kind": m.kind,
            "file": home,
            "line": m.line,
        }
        for m in methods
    ]
    dp = draft_parallel_facts(tree)
    dp_rows = []
    for m in sorted({m.canonical for m in methods}):
        if dp is None:
            dp_rows.append(
                {
                    "method": m,
                    "pp_source": "unknown",
                    "ep_source": "unknown",
                    "file": home,
                    "line": 0,
                    "detail": "create_draft_parallel_config not found",
                }
            )
        else:
            dp_rows.append(
                {
                    "method": m,
                    "pp_source": dp.pp_source(m),
                    "ep_source": dp.ep_from_create
                    if dp.pp_source(m) not in ("target_config", "none")
                    else ("target" if dp.pp_source(m) == "target_config" else "off"),
                    "file": home,
                    "line": dp.line_for(m),
                    "detail": "; ".join(dp.notes),
                }
            )
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
                draft_rows.append(
                    {
                        "platform": p,
                        "target_model_type": cfg["model_type"],
                        "target_arch": cfg["architectures"][0],
                        "method": "mtp",
                        "draft_arch": draft_arch if res.changed else "",
                        "draft_class": cap["class_path"] if cap else "",
                        "draft_supports_pp": cap["supports_pp"] if cap else None,
                        "draft_inherits_pp": None if inherits is None else int(inherits),
                        "status": res.status if res.changed or res.status != "ok" else "unchanged",
                        "detail": res.detail,
                        "file": home,
                        "line": res.line or runner.line,
                    }
                )
    else:
        notes.append("speculative: hf_config_override not found")
    return {
        "spec_method": method_rows,
        "draft_parallel": dp_rows,
        "draft_mapping": draft_rows,
    }, notes


def surface_rows(
    tree: VllmTree, platforms: tuple[str, ...], index: ModuleIndex
) -> tuple[dict, list[str]]:
    """CLI flags (and dotted sub-keys), parser names, gate anchors (the raise inventory is
    taken by both shares, see compute)."""
    from compat.vllm.cli_surface import extract_cli
    from compat.vllm.parsers import extract_parsers

    notes: list[str] = []
    cli = extract_cli(tree)
    if cli.status != "ok":
        notes.append(f"cli: {cli.status}: {cli.reason}")
    flag_rows = _flag_rows(cli)
    parsers = extract_parsers(tree)
    registered = {
        ps.kind: [n.name for n in ps.names]
        for ps in (parsers.tool, parsers.reasoning)
        if ps.status == "ok"
    }
    value_rows, config_rows = (
        cli_value_rows(tree, cli, registered) if cli.status != "unknown" else ([], [])
    )
    parser_rows = _parser_rows(parsers, notes)
    gate_rows = _gate_rows(tree)
    attr_rows, scans_row = _class_attr_rows(tree, notes)
    release_rows = [
        scans_row,
        runner_default(tree),
        reasoning_parser_lookups(tree),
        requirements_fact(tree),
        serve_command(tree),
        chat_template_files(tree),
        *_speculative_release_rows(tree),
        *_argv_parser_rows(tree),
    ]
    return {
        "cli_flag": flag_rows,
        "cli_value": value_rows,
        "config_field": config_rows,
        "parser_name": parser_rows,
        "gate_status": gate_rows,
        "class_attr_fact": attr_rows,
        "release_fact": release_rows,
    }, notes


def _flag_rows(cli: CliSurface) -> list[dict]:
    """Every option string (none when the extraction is unknown), then the dotted sub-keys."""
    flag_rows = (
        [
            {
                "flag": f.flag,
                "kind": f.kind,
                "canonical": f.canonical,
                "value_type": f.value_type,
                "file": f.file,
                "line": f.line,
            }
            for f in cli.flags
        ]
        if cli.status != "unknown"
        else []
    )
    for flag, keys in sorted(cli.subkeys.items()):
        src = cli.subkey_sources.get(flag)
        for key in sorted(keys):
            flag_rows.append(
                {
                    "flag": f"{flag}.{key}",
                    "kind": "subkey",
                    "canonical": flag,
                    "value_type": "",
                    "file": (src.file if src else "") or "",
                    "line": (src.line if src else 0) or 0,
                }
            )
    return flag_rows


def _parser_rows(parsers: Parsers, notes: list[str]) -> list[dict]:
    """Tool and reasoning parser names; a kind whose registry was not found is noted."""
    parser_rows = []
    for ps in (parsers.tool, parsers.reasoning):
        if ps.status != "ok":
            notes.append(f"{ps.kind} parsers: {ps.reason}")
            continue
        for n in ps.names:
            parser_rows.append(
                {
                    "kind": n.kind,
                    "name": n.name,
                    "module": n.module or "",
                    "class_name": n.class_name or "",
                    "file": n.file,
                    "line": n.line,
                }
            )
    return parser_rows


def _gate_rows(tree: VllmTree) -> list[dict]:
    """Each curated gate rule: whether its anchors hold in this release."""
    from compat.vllm.gates import check_gates, load_rules

    rules = {r.id: r for r in load_rules()}
    gate_rows = []
    for g in check_gates(tree, list(rules.values())):
        r = rules[g.rule_id]
        gate_rows.append(
            {
                "rule_id": g.rule_id,
                "status": g.status,
                "effect": r.effect,
                "message": r.message,
                "file": g.file or "",
                "line": g.line or 0,
                "reason": g.reason or "",
            }
        )
    return gate_rows


def _class_attr_rows(tree: VllmTree, notes: list[str]) -> tuple[list[dict], dict]:
    """The classes that set a scanned attribute, and the release row saying which scans ran: no
    rows for an attribute means "none set it" only when its scan ran."""
    from compat.vllm.gates import (
        extract_aux_over_pp_classes,
        extract_lse_impls,
        extract_top_tokens_classes,
    )

    scans = (
        extract_lse_impls(tree),
        extract_aux_over_pp_classes(tree),
        extract_top_tokens_classes(tree),
    )
    scans_row = {
        "key": "class_attr_scans",
        "value": json.dumps({x.attr: x.status for x in scans}),
        "file": "",
        "line": 0,
    }
    attr_rows = []
    for scan in scans:
        if scan.status != "ok":
            notes.append(f"{scan.attr}: {scan.reason}")
            continue
        for c in scan.classes:
            attr_rows.append(
                {
                    "attr": scan.attr,
                    "class_name": c.class_name,
                    "file": c.file,
                    "line": c.line,
                    "value": c.value,
                    "via": c.via,
                }
            )
    return attr_rows, scans_row


def _speculative_release_rows(tree: VllmTree) -> list[dict]:
    """SpeculativeConfig's own rules as release facts: the key rewrite before it is built, what
    __post_init__ does without a draft model, the fields _verify_args refuses, and how it
    settles num_speculative_tokens."""
    from compat.vllm.spec_tokens import token_count_rule
    from compat.vllm.speculative import forbidden_fields, spec_key_normalization, without_model_rule

    return [
        dict(row, value=json.dumps(row["value"]))
        for row in (
            spec_key_normalization(tree),
            without_model_rule(tree),
            forbidden_fields(tree),
            token_count_rule(tree),
        )
    ]


def _argv_parser_rows(tree: VllmTree) -> list[dict]:
    """The release rows of FlexibleArgumentParser: its argv rewrite and its --enable/--disable
    pairs."""
    from compat.vllm.cli_surface import argv_rewrite_shape, inverse_prefixes

    shape = argv_rewrite_shape(tree)
    inverse = inverse_prefixes(tree)
    return [
        {
            "key": "argv_rewrite",
            "value": json.dumps(shape),
            "file": shape["file"] if shape else "",
            "line": shape["line"] if shape else 0,
        },
        {
            "key": "boolean_inverse_prefixes",
            "value": json.dumps(inverse),
            "file": inverse["file"] if inverse else "",
            "line": inverse["line"] if inverse else 0,
        },
    ]


def cli_value_rows(
    tree: VllmTree, cli: Any, registered: dict[str, list[str]] | None = None
) -> tuple[list[dict], list[dict]]:
    """argparse's view of every option (`cli_value`) and the config classes JSON flags name.

    `registered`: parser names by kind, in registration order, for choices built from a
    parser registry (compat.vllm.cli_choices)."""
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
        spec = f.spec
        if spec.choices_registry:
            names = (registered or {}).get(spec.choices_registry)
            spec.choices = list(names) if names is not None else None
            if names is None:
                spec.unknown = (
                    f"choices: the {spec.choices_registry} parsers of this release are unknown"
                )
        rows.append(_value_row(f.canonical, strings[f.canonical], spec, f.file, f.line))
    for dest, spec, file, line in cli.positionals:
        rows.append(_value_row(dest, [], spec, file, line))
    r = SymbolResolver(tree)
    roots = []
    for src in cli.subkey_sources.values():
        if src.status == "ok" and src.file:
            cls = r.resolve_class(src.file, src.json_class)
            if cls is not None:
                roots.append(cls)
    for f in cli.flags:  # `type=CompilationConfig.from_cli` (before 0.10): the class it builds
        src = f.spec.callable_src if f.spec is not None and f.spec.type == "callable" else ""
        owner = src.split(".")[0] if src.count(".") == 1 else ""
        cls = r.resolve_class(f.file, owner) if owner else None
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
        "flag": flag,
        "option_strings": json.dumps(option_strings),
        "dest": spec.dest,
        "action": spec.action,
        "nargs": "" if spec.nargs is None else str(spec.nargs),
        "const": json.dumps(spec.const),
        "type": spec.type or "",
        "parse": int(spec.parse),
        "optional": int(spec.optional),
        "callable_src": spec.callable_src,
        "json_class": spec.json_class or "",
        "choices": json.dumps(spec.choices),
        "metavar_only": int(spec.metavar_only),
        "choices_file": spec.choices_file,
        "choices_line": spec.choices_line,
        "default": json.dumps(
            spec.default if not isinstance(spec.default, (set, tuple)) else list(spec.default)
        ),
        "default_kind": spec.default_kind,
        "unknown": spec.unknown,
        "file": file,
        "line": line,
    }


def chat_template_files(tree: VllmTree) -> dict:
    """Chat template files a `--chat-template PATH` can name: the release's examples/ (present
    in vLLM's docker image, whose working directory is the repository root) and the built-in
    templates next to `vllm/transformers_utils/chat_templates/registry.py`."""
    files: list[str] = []
    for base in ("examples", "vllm/transformers_utils/chat_templates"):
        files += [rel for rel in tree.files(base) if rel.endswith(".jinja")]
    value = {"files": files} if tree.is_dir("examples") else {"files": None}
    return {"key": "chat_template_files", "value": json.dumps(value), "file": "examples", "line": 0}


def reasoning_parser_lookups(tree: VllmTree) -> dict:
    """Where, outside the API server, the release looks a reasoning parser up by name.

    A headless node never runs the API server's checks; it builds the engine config, and
    runs an engine core when it serves data-parallel ranks. `{"config": [file:line...],
    "engine_core": [file:line...]}`: calls of `get_reasoning_parser(` under vllm/config or
    vllm/engine (building the config) and under vllm/v1 (the engine core).
    """
    import re

    found: dict[str, list[str]] = {"config": [], "engine_core": []}
    for rel in tree.py_files("vllm"):
        where = (
            "config"
            if rel.startswith(("vllm/config/", "vllm/engine/"))
            else "engine_core"
            if rel.startswith("vllm/v1/")
            else None
        )
        if where is None:
            continue
        text = tree.read(rel) or ""
        for m in re.finditer(r"\.get_reasoning_parser\(", text):
            found[where].append(f"{rel}:{text.count(chr(10), 0, m.start()) + 1}")
    return {"key": "reasoning_parser_lookups", "value": json.dumps(found), "file": "", "line": 0}


def runner_default(tree: VllmTree) -> dict:
    """Which engine and model runner start when nothing forces them, read from the release.

    - `{"mode": "v0"}`: the V0 engine by default (`VLLM_USE_V1` defaults to "0" in envs.py);
    - `{"mode": "v1_or_v0"}`: V1 by default, but the release still has V0 and
      `EngineArgs._is_v1_supported_oracle` falls back to it for what V1 lacks (which engine
      runs is then undecided here);
    - `{"mode": "v1"}`: V1 only (V0 removed); a V2 runner, if present, is only opt-in;
    - `{"mode": "restricted", "archs": [...]}`: V2 only for those architectures (dense,
      unquantized), as in 0.23/0.24; `{"mode": "v2"}`: V2 unless an unsupported feature is
      present, as in 0.33; `{"mode": "unknown"}` otherwise.
    """
    found = _v2_runner_default(tree)
    if found is not None:
        return found
    value, rel, line = _engine_default(tree)
    return {"key": "runner_default", "value": json.dumps(value), "file": rel, "line": line}


def _engine_default(tree: VllmTree) -> tuple[dict, str, int]:
    """(mode, file, line) of a release without `VllmConfig.use_v2_model_runner`."""
    import re

    envs = tree.read("vllm/envs.py") or ""
    m = re.search(
        r'"VLLM_USE_V1":\s*lambda:\s*bool\(int\(os\.getenv\("VLLM_USE_V1",\s*"([01])"\)\)\)', envs
    )
    has_v0 = tree.exists("vllm/worker/model_runner.py")
    has_v1 = tree.exists("vllm/v1/worker/gpu_model_runner.py")
    line = envs.count("\n", 0, m.start()) + 1 if m else 0
    if has_v0 and m and m.group(1) == "0":
        return {"mode": "v0"}, "vllm/envs.py", line
    if has_v0 and m and m.group(1) == "1":
        args = tree.read("vllm/engine/arg_utils.py") or ""
        i = args.find("def _is_v1_supported_oracle")
        oracle_line = args.count("\n", 0, i) + 1 if i >= 0 else 0
        return (
            {"mode": "v1_or_v0", "oracle": "vllm/engine/arg_utils.py" if i >= 0 else ""},
            "vllm/engine/arg_utils.py" if i >= 0 else "vllm/envs.py",
            oracle_line or line,
        )
    if not has_v0 and has_v1:
        v2 = re.search(r'os\.getenv\(\s*"VLLM_USE_V2_MODEL_RUNNER",\s*"([01])"\s*\)', envs)
        if v2 and v2.group(1) == "1":  # a V2 runner on by default, without use_v2_model_runner
            return {"mode": "unknown"}, "vllm/envs.py", envs.count("\n", 0, v2.start()) + 1
        return {"mode": "v1"}, "vllm/v1/worker/gpu_model_runner.py", 1
    return {"mode": "unknown"}, "vllm/envs.py", line


def _v2_runner_default(tree: VllmTree) -> dict | None:
    """The runner_default row of a release whose VllmConfig has `use_v2_model_runner` (else None)."""
    import ast as _ast

    rel = "vllm/config/vllm.py"
    mod = tree.parse(rel)
    if mod is None:
        return None
    archs = None
    for st in mod.body:
        if (
            isinstance(st, _ast.Assign)
            and isinstance(st.targets[0], _ast.Name)
            and st.targets[0].id == "DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES"
        ):
            listed = (
                st.value.args[0] if isinstance(st.value, _ast.Call) and st.value.args else st.value
            )
            try:
                archs = sorted(_ast.literal_eval(listed))
            except (ValueError, SyntaxError, TypeError):
                archs = None
    default_src = ""
    for node in _ast.walk(mod):
        if isinstance(node, _ast.FunctionDef) and node.name == "_is_default_v2_model_runner_model":
            default_src = "\n".join(tree.lines(rel)[node.lineno - 1 : node.end_lineno])
    for node in _ast.walk(mod):
        if isinstance(node, _ast.FunctionDef) and node.name == "use_v2_model_runner":
            src = "\n".join(tree.lines(rel)[node.lineno - 1 : node.end_lineno])
            value: dict = {"mode": "unknown"}
            if "_is_default_v2_model_runner_model()" in src:
                if archs and default_src:
                    value = {
                        "mode": "restricted",
                        "archs": archs,
                        "requires_dense": "not model_config.is_moe" in default_src,
                        "requires_unquantized": "is_quantized" in default_src,
                    }
            elif "_get_v2_model_runner_unsupported_features()" in src:
                value = {"mode": "v2"}
            return {
                "key": "runner_default",
                "value": json.dumps(value),
                "file": rel,
                "line": node.lineno,
            }
    return None


_EXTRA_STAGES.append(("flags, parsers, raises, gates", surface_rows))


#: The modules the `vllm` console script runs, newest first (0.8 on; 0.5-0.7).
CLI_MAINS = ("vllm/entrypoints/cli/main.py", "vllm/scripts.py")
OPENAI_SERVER = "vllm/entrypoints/openai/api_server.py"


def serve_command(tree: VllmTree) -> dict:
    """Whether the release installs a `vllm` command: `{"module": file}` for the module its
    console script runs; `{"module": null, "server": file}` when none of them exists but the
    OpenAI server module does (0.4.x: the wheel declares no console script, the server was
    `python -m vllm.entrypoints.openai.api_server`, and `vllm serve` is "command not found");
    `{"module": null, "server": null}` when the tree shows neither (undecided)."""
    rel = next((m for m in CLI_MAINS if tree.exists(m)), None)
    server = OPENAI_SERVER if tree.exists(OPENAI_SERVER) else None
    return {
        "key": "serve_command",
        "value": json.dumps({"module": rel, "server": server}),
        "file": rel or server or "",
        "line": 1 if rel or server else 0,
    }


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
    return {
        "key": "requirements",
        "value": json.dumps(value),
        "file": "requirements/common.txt",
        "line": 0,
    }
