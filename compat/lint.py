"""`compat lint -- vllm serve MODEL [ARGS...]`: any serve command line, judged like a recipe's.

The pre-flight check a vLLM user without a GPU has no other way to run: the command
is judged by the same engine as every synthesized one (`compat.verdict.engine.Judge`:
vLLM's own argument handling, parser names, PP/EP, the speculative chain, runtime
gates, model facts through the usual resolver) at every release scanned into the
database, or at the `--vllm` releases given (scanned on demand when the database does
not hold them). A `--config FILE` the command names is read as vLLM reads it.

When the command is blocked at an older release and works at a newer one, the first
working release is found by bisection over the releases on the package index between
them (as `compat bisect`, scanning only the releases it visits; sdists and facts are
cached); each argument finding gets the first release that accepts it the same way.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compat import db as dbm
from compat.errors import UserError
from compat.recipes import Combination, parse_serve_args
from compat.verdict.engine import Finding, Judge, Outcome
from compat.verdict.shell import ShellVars

Progress = Callable[[str], None]
WORKING = ("ok", "warning")


@dataclass
class ReleaseVerdict:
    version: str
    status: str
    findings: list[Finding] = field(default_factory=list)  # the non-ok steps, in order
    judged: bool = True  # False: visited only by the bisection


@dataclass
class LintResult:
    command: list[str]
    model: str
    releases: list[ReleaseVerdict] = field(default_factory=list)  # the releases judged, oldest first
    works_from: str | None = None
    works_note: str = ""
    accepted_from: dict[tuple[str, ...], str] = field(default_factory=dict)  # finding key -> first release

    @property
    def exit_code(self) -> int:
        return 0 if all(r.status == "ok" for r in self.releases) else 1


def split_command(command: list[str]) -> list[str]:
    """The argv after `vllm serve`, or a UserError naming what is wrong with the command."""
    if not command or not any(c.strip() for c in command):
        raise UserError("empty command: give it after `--`, e.g. compat lint -- vllm serve MODEL --tp 2",
                        where="compat lint")
    if len(command) == 1 and " " in command[0].strip():
        command = command[0].split()  # quoted as one argument: split like a shell would (no quoting)
    head = command[0].rsplit("/", 1)[-1]
    if head != "vllm" or len(command) < 2 or command[1] != "serve":
        shown = " ".join(command[:3])
        raise UserError(f"not a `vllm serve` command: {shown!r} (lint judges `vllm serve MODEL [ARGS...]`)",
                        where="compat lint")
    return command


def config_loader(command: list[str]) -> Callable[[str], Any] | None:
    """Read the `--config` YAML once, as vLLM does (yaml.safe_load); bad files are bad input."""
    if "--config" not in command:
        return None
    i = command.index("--config")
    if i + 1 >= len(command):
        return None  # vLLM's own error ("No config file specified!") is the finding
    path = Path(command[i + 1])
    if path.suffix.lstrip(".") not in ("yaml", "yml"):
        return None  # vLLM rejects the extension itself
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError("no such file", where=f"--config {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read: {exc}", where=f"--config {path}") from None
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserError(f"invalid YAML: {problem}{where}", where=f"--config {path}") from None
    if data is not None and not isinstance(data, dict):
        raise UserError(f"must be a mapping of option names to values, not {type(data).__name__}",
                        where=f"--config {path}")
    return lambda _p: data


class _Releases:
    """Knowledge per release: the database's rows, or a release scanned on demand into a temp db."""

    def __init__(self, db_path: Path | None, progress: Progress | None, srcs: list[str] | None = None) -> None:
        from compat.sources import tree_from_path
        from compat.sources.pypi import version_key

        self.say = progress or (lambda _m: None)
        self.engine = dbm.reading(db_path) if db_path is not None else None
        self.in_db: list[str] = []
        self.origin: dict[str, str] = {}
        if self.engine is not None:
            _cols, rows = dbm.query(self.engine, "select version, origin from release")
            self.in_db = sorted((r[0] for r in rows), key=version_key)
            self.origin = {r[0]: r[1] for r in rows}
        self.local = {}  # --vllm-src trees, judged from a fresh scan
        for src in srcs or []:
            t = tree_from_path(src)
            self.local[t.version] = t
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._extra = None
        self.trees: dict[str, Any] = {}
        self.knowledge: dict[str, Any] = {}

    def shell(self) -> ShellVars:
        if self.engine is None:
            return ShellVars()
        try:
            with self.engine.connect() as conn:
                return ShellVars.from_rows(dbm.dict_rows(conn, "select pattern, file, line from shell_variable"))
        except Exception:  # an older database without the table
            return ShellVars()

    def tree(self, version: str) -> Any:
        """The release's source: a --vllm-src tree, else the index's sdist (cached); a database
        release scanned from a local tree has no source here unless given again with --vllm-src."""
        if version in self.local:
            return self.local[version]
        if version in self.origin and self.origin[version] != "pypi":
            self.trees.setdefault(version, None)
        if version not in self.trees:
            from compat.sources import tree_from_index

            try:
                self.trees[version] = tree_from_index(version, progress=self.say)
            except UserError as exc:
                self.say(f"lint: source of vLLM {version} unavailable ({exc.message}); judged from the database only")
                self.trees[version] = None
        return self.trees[version]

    def get(self, version: str) -> Any:
        from compat.verdict.knowledge import load_knowledge

        if version in self.knowledge:
            return self.knowledge[version]
        if version in self.in_db and version not in self.local:
            k = load_knowledge(self.engine, version, self.tree(version))
        else:
            from compat.scan import release_facts, write_facts

            tree = self.tree(version)
            if tree is None:
                raise UserError(f"release {version!r} is neither in the database nor available", where="--vllm")
            if self._extra is None:
                self._tmp = tempfile.TemporaryDirectory(prefix="compat-lint-")
                self._extra = dbm.engine_for(Path(self._tmp.name) / "lint.db")
                dbm.init_schema(self._extra)
            self.say(f"lint: scanning vLLM {version}")
            facts, _ = release_facts(tree, self.say)
            write_facts(self._extra, facts)
            k = load_knowledge(self._extra, version, tree)
        self.knowledge[version] = k
        return k

    def close(self) -> None:
        if self._extra is not None:
            self._extra.dispose()
        if self.engine is not None:
            self.engine.dispose()
        if self._tmp is not None:
            self._tmp.cleanup()


def lint(command: list[str], db_path: Path | None, versions: list[str] | None = None, platform: str = "cuda",
         hf_config_dir: Path | None = None, allow_hub: bool = False, search: bool = True,
         progress: Progress | None = None, srcs: list[str] | None = None) -> LintResult:
    """Judge one `vllm serve` command at every release of the database (or `versions`)."""
    from compat.hf import ModelResolver
    from compat.sources.pypi import version_key

    argv = split_command(command)
    loader = config_loader(argv)
    if platform not in ("cuda", "rocm"):
        raise UserError(f"unknown platform {platform!r} (cuda, rocm)", where="--platform")
    if db_path is not None and not Path(db_path).is_file():
        if not versions and not srcs:
            raise UserError("no such database (run `compat build` or `compat scan` first, or give --vllm)",
                            where=str(db_path))
        db_path = None
    rel = _Releases(db_path, progress, srcs)
    try:
        targets = sorted(set(versions or []) | set(rel.local) or set(rel.in_db), key=version_key)
        if not targets:
            raise UserError("the database holds no scanned release (run `compat scan --vllm V`)", where=str(db_path))
        for v in targets:
            rel.get(v)
        trees = [t for t in (rel.tree(v) for v in targets) if t is not None]
        models = ModelResolver(hf_config_dir=hf_config_dir, allow_hub=allow_hub, trees=trees)
        model = _model_of(argv, rel.get(targets[-1]))
        combo = Combination(recipe="", model_id=model, variant="", strategy="", feature="", mode="", hardware="",
                            platform=platform, argvs=(("", tuple(argv)),), vllm_pin="", docker_pin=None,
                            gated=False, omni="--omni" in argv, problems=())
        judge = _Judged(rel, models, rel.shell(), loader, combo)
        result = LintResult(argv, model)
        for v in targets:
            o = judge(v)
            result.releases.append(ReleaseVerdict(v, o.status, [f for f in o.findings if f.status != "ok"]))
        _works_from(result, targets, judge, search, rel.say)
        if search:
            _accepted_from(result, targets, judge)
        return result
    finally:
        rel.close()


class _Judged:
    """The command's verdict per release, judged once each."""

    def __init__(self, rel: _Releases, models: Any, shell: ShellVars, loader: Any, combo: Combination) -> None:
        self.rel, self.models, self.shell, self.loader, self.combo = rel, models, shell, loader, combo
        self.outcomes: dict[str, Outcome] = {}

    def __call__(self, version: str) -> Outcome:
        if version not in self.outcomes:
            j = Judge(self.rel.get(version), self.models, shell=self.shell)
            j.config_loader = self.loader
            self.outcomes[version] = j.judge(self.combo)
        return self.outcomes[version]


def _model_of(argv: list[str], k: Any) -> str:
    args = parse_serve_args(argv)
    if args.model:
        return args.model
    default = next((json.loads(v["default"]) for v in k.values if v["flag"] == "--model"), None)
    return default if isinstance(default, str) else ""


def _span(lo: str, hi: str) -> list[str]:
    """Final releases on the index from lo to hi (both included), oldest first."""
    from compat.sources.pypi import version_key, versions_on_index

    available = versions_on_index()
    return [v for v in available if version_key(lo) <= version_key(v) <= version_key(hi)
            and not any(t in v for t in ("rc", "a", "b", "dev", "post"))]


def _first(span: list[str], good: Callable[[str], bool]) -> str:
    """Bisection: span[0] is bad, span[-1] good; the first good release (assumed to stay good)."""
    lo, hi = 0, len(span) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if good(span[mid]):
            hi = mid
        else:
            lo = mid
    return span[hi]


def _works_from(result: LintResult, targets: list[str], judge: _Judged, search: bool, say: Progress) -> None:
    statuses = [(v, judge(v).status) for v in targets]
    working = [v for v, s in statuses if s in WORKING]
    if not working:
        result.works_note = f"works at none of the releases judged ({targets[0]} .. {targets[-1]})"
        return
    first = working[0]
    before = [v for v, s in statuses if s not in WORKING and targets.index(v) < targets.index(first)]
    if not before:
        result.works_from = first
        result.works_note = f"works at {first}, the oldest release judged"
        return
    last_bad = before[-1]
    if not search:
        result.works_from = first
        result.works_note = f"first working release judged (releases between {last_bad} and {first} not searched)"
        return
    try:
        span = _span(last_bad, first)
    except UserError as exc:
        result.works_from = first
        result.works_note = f"first working release judged; the index is unavailable ({exc.message})"
        return
    if len(span) <= 2:
        result.works_from = first
        result.works_note = f"no release between {last_bad} (not working) and {first}"
        return
    say(f"lint: bisecting {len(span) - 2} releases between {last_bad} and {first}")
    found = _first(span, lambda v: judge(v).status in WORKING)
    result.works_from = found
    below = span[span.index(found) - 1]
    result.works_note = f"first working release on the index (bisected; {below}: {judge(below).status})"
    for v in [v for v in span if v in judge.outcomes and v not in targets]:
        o = judge(v)
        result.releases.append(ReleaseVerdict(v, o.status, [f for f in o.findings if f.status != "ok"],
                                              judged=False))


def _accepted_from(result: LintResult, targets: list[str], judge: _Judged) -> None:
    """Each blocked argument finding at the oldest release: the first release without it."""
    oldest = judge(targets[0])
    keys = [f.key for f in oldest.findings if f.key and f.status == "blocked" and f.stage == "argument"]
    for key in dict.fromkeys(keys):
        def gone(v: str, key: tuple[str, ...] = key) -> bool:
            return not any(f.key == key for f in judge(v).findings)
        later = [v for v in targets if gone(v)]
        if not later:
            continue
        first = later[0]
        before = [v for v in targets if targets.index(v) < targets.index(first)]
        try:
            span = _span(before[-1], first)
        except UserError:
            result.accepted_from[key] = first
            continue
        result.accepted_from[key] = _first(span, gone) if len(span) > 2 else first


def render(r: LintResult) -> str:
    """One line per finding and release, then where the command works."""
    lines = []
    for rv in sorted(r.releases, key=lambda x: _key(x.version)):
        tag = "" if rv.judged else " (visited by the search)"
        if not rv.findings or rv.status == "ok":
            lines.append(f"{rv.version}{tag}: ok")
            continue
        for f in rv.findings:
            msg = f.message.strip().splitlines()[0] if f.message.strip() else ""
            accepted = r.accepted_from.get(f.key) if f.key else None
            parts = [f"{rv.version}{tag}: {f.status}: {f.step}"]
            if msg:
                parts.append(f"vLLM: {msg}")
            if accepted:
                parts.append(f"accepted from {accepted}")
            ev = "; ".join(e for e in f.evidence if e)
            if ev:
                parts.append(ev)
            lines.append(" | ".join(parts))
    if r.works_from:
        lines.append(f"works from {r.works_from}: {r.works_note}")
    else:
        lines.append(r.works_note)
    return "\n".join(lines) + "\n"


def as_json(r: LintResult) -> str:
    return json.dumps({
        "command": r.command, "model": r.model, "works_from": r.works_from, "works_note": r.works_note,
        "releases": [{"version": x.version, "status": x.status, "judged": x.judged,
                      "findings": [{"status": f.status, "step": f.step, "message": f.message,
                                    "evidence": f.evidence, "stage": f.stage,
                                    "accepted_from": r.accepted_from.get(f.key) if f.key else None}
                                   for f in x.findings]}
                     for x in sorted(r.releases, key=lambda x: _key(x.version))],
    }, indent=1)


def _key(v: str) -> tuple:
    from compat.sources.pypi import version_key

    return version_key(v)
