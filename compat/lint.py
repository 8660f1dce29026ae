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

import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compat import store
from compat.errors import UserError
from compat.recipes import Combination, parse_serve_args
from compat.verdict.engine import Finding, Judge
from compat.verdict.shell import ShellVars

Progress = Callable[[str], None]


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
    releases: list[ReleaseVerdict] = field(
        default_factory=list
    )  # the releases judged, oldest first
    works_from: str | None = None
    works_note: str = ""
    accepted_from: dict[str, str] = field(
        default_factory=dict
    )  # argument finding key -> first release accepting it

    @property
    def exit_code(self) -> int:
        return 0 if all(r.status == "ok" for r in self.releases) else 1


def split_command(command: list[str]) -> list[str]:
    """The argv after `vllm serve`, or a UserError naming what is wrong with the command."""
    if not command or not any(c.strip() for c in command):
        raise UserError(
            "empty command: give it after `--`, e.g. compat lint -- vllm serve MODEL --tp 2",
            where="compat lint",
        )
    if len(command) == 1 and " " in command[0].strip():
        command = command[
            0
        ].split()  # quoted as one argument: split like a shell would (no quoting)
    head = command[0].rsplit("/", 1)[-1]
    if command[0].startswith("-") and "vllm" in command:
        # typer hands an option lint does not know, written before `--`, to the command
        raise UserError(
            f"no such option: {command[0]} (lint's own options come before `--`, the serve "
            "command after it: compat lint --vllm V -- vllm serve MODEL --config FILE)",
            where="compat lint",
        )
    if head != "vllm" or len(command) < 2 or command[1] != "serve":
        shown = " ".join(command[:3])
        raise UserError(
            f"not a `vllm serve` command: {shown!r} (lint judges `vllm serve MODEL [ARGS...]`)",
            where="compat lint",
        )
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
        raise UserError(
            f"must be a mapping of option names to values, not {type(data).__name__}",
            where=f"--config {path}",
        )
    return lambda _p: data


class _Facts:
    """Knowledge per release: the database's rows, or a release scanned on demand."""

    def __init__(
        self, db_path: Path | None, progress: Progress | None, srcs: list[str] | None = None
    ) -> None:
        from compat.sources import tree_from_path
        from compat.vocab import release_key

        self.say = progress or (lambda _m: None)
        self._open = contextlib.ExitStack()
        self.db = (
            self._open.enter_context(store.open_store(db_path)) if db_path is not None else None
        )
        self.in_db: list[str] = []
        self.origin: dict[str, str] = {}
        if self.db is not None:
            rows = self.db.dicts("select version, origin from release")
            self.in_db = sorted((r["version"] for r in rows), key=release_key)
            self.origin = {r["version"]: r["origin"] for r in rows}
        self.local = {}  # --vllm-src trees, judged from a fresh scan
        for src in srcs or []:
            t = tree_from_path(src)
            self.local[t.version] = t
        self.trees: dict[str, Any] = {}

    def shell(self) -> ShellVars:
        """The placeholders the build's recipes checkout defines (none without a database)."""
        if self.db is None or not self.db.has_table(
            "shell_variable"
        ):  # none, or written before it existed
            return ShellVars()
        return ShellVars.from_rows(self.db.dicts("select pattern, file, line from shell_variable"))

    def tree(self, version: str) -> Any:
        """The release's source: a --vllm-src tree, else the index's sdist (cached); a database
        release scanned from a local tree has no source here unless given again with --vllm-src."""
        if version in self.local:
            return self.local[version]
        if version in self.origin and self.origin[version] != "pypi":
            return None
        if version not in self.trees:
            from compat.sources import tree_from_index

            try:
                self.trees[version] = tree_from_index(version, progress=self.say)
            except UserError as exc:
                self.say(
                    f"lint: source of vLLM {version} unavailable ({exc.message}); judged from the database only"
                )
                self.trees[version] = None
        return self.trees[version]

    def knowledge(self, version: str) -> Any:
        from compat.verdict.knowledge import knowledge_from_facts, load_knowledge

        if self.db is not None and version in self.in_db and version not in self.local:
            return load_knowledge(self.db, version, self.tree(version))
        from compat.scan import release_facts

        tree = self.tree(version)
        if tree is None:
            raise UserError(
                f"release {version!r} is neither in the database nor available", where="--vllm"
            )
        self.say(f"lint: scanning vLLM {version}")
        facts, _ = release_facts(tree, self.say)
        notes = json.loads((facts.get("release") or {}).get("notes") or "[]")
        return knowledge_from_facts(version, tree, facts, notes)

    def close(self) -> None:
        self._open.close()


def expand_config(argv: list[str], data: Any) -> list[str]:
    """The argv with its `--config` file's options spliced in as vLLM does it, so every release
    (also those the search scans) judges the same command; vLLM's own errors are left to it."""
    from compat.verdict.arguments import PreprocessError, pull_config

    try:
        return ["vllm", *pull_config(["serve", *argv[2:]], lambda _p: data)]
    except PreprocessError:
        return argv


def _models(
    facts: _Facts,
    targets: list[str],
    trees: list[Any],
    hf_config_dir: Path | None,
    allow_hub: bool,
    lock: Any,
) -> Any:
    """The model resolver of `compat build`, with the same sources in the same order: the lock,
    local configs, the Hub, curated entries, the releases' test registries and docs (the newest on
    the index too) and the transformers wheel. Judging local trees only stays offline, as a build."""
    from compat.hf import ModelResolver
    from compat.hf.release_sources import newest_tree, transformers_checkpoints

    online = any(v not in facts.local and facts.origin.get(v, "pypi") == "pypi" for v in targets)
    extra = newest_tree({t.version: t for t in trees}, facts.say) if online else []
    return ModelResolver(
        hf_config_dir=hf_config_dir,
        allow_hub=allow_hub,
        trees=trees + extra,
        lock=lock,
        checkpoints=transformers_checkpoints(facts.say) if online else None,
    )


def lint(
    command: list[str],
    db_path: Path | None,
    versions: list[str] | None = None,
    platform: str = "cuda",
    hf_config_dir: Path | None = None,
    allow_hub: bool = False,
    search: bool = True,
    progress: Progress | None = None,
    srcs: list[str] | None = None,
    facts_lock: Path | None = None,
) -> LintResult:
    """Judge one `vllm serve` command at every release of the database (or `versions`)."""
    from compat.verdict.releases import ReleasePool
    from compat.vocab import release_key

    argv = split_command(command)
    loader = config_loader(argv)
    if loader is not None:
        argv = expand_config(argv, loader(""))
    if platform not in ("cuda", "rocm"):
        raise UserError(f"unknown platform {platform!r} (cuda, rocm)", where="--platform")
    from compat.hf.lock import read_lock

    lock = read_lock(facts_lock) if facts_lock is not None else None  # bad input before any work
    if db_path is not None and not Path(db_path).is_file():
        if not versions and not srcs:
            raise UserError(
                "no such database (run `compat build` or `compat scan` first, or give --vllm)",
                where=str(db_path),
            )
        db_path = None
    facts = _Facts(db_path, progress, srcs)
    try:
        targets = sorted(
            set(versions or []) | set(facts.local) or set(facts.in_db), key=release_key
        )
        if not targets:
            raise UserError(
                "the database holds no scanned release (run `compat scan --vllm V`)",
                where=str(db_path),
            )
        knowledge = {v: facts.knowledge(v) for v in targets}
        trees = [t for t in (facts.tree(v) for v in targets) if t is not None]
        models = _models(facts, targets, trees, hf_config_dir, allow_hub, lock)
        shell = facts.shell()
        judges = {v: Judge(k, models, shell=shell) for v, k in knowledge.items()}
        pool = ReleasePool(
            judges, models, index=_index() if search else None, progress=progress, shell=shell
        )
        model = _model_of(argv, knowledge[targets[-1]])
        combo = _combination(argv, model, platform)
        result = LintResult(argv, model)
        for v in targets:
            o = pool.outcome(v, combo)
            assert o is not None  # every target has its judge in the pool
            result.releases.append(ReleaseVerdict(v, o.status, [f for f in o.findings if f.shown]))
        _works_from(result, targets, pool, combo, search)
        if search:
            _accepted_from(result, targets[0], pool, combo)
        for v in [v for v in pool.judges if v not in targets]:  # releases the searches visited
            o = pool.outcome(v, combo)
            if o is not None:
                result.releases.append(
                    ReleaseVerdict(v, o.status, [f for f in o.findings if f.shown], judged=False)
                )
        return result
    finally:
        facts.close()


def _combination(argv: list[str], model: str, platform: str) -> Combination:
    """The command as the one combination the judges see (no recipe, variant or hardware)."""
    return Combination(
        recipe="",
        model_id=model,
        variant="",
        strategy="",
        feature="",
        mode="",
        hardware="",
        platform=platform,
        argvs=(("", tuple(argv)),),
        vllm_pin="",
        docker_pin=None,
        gated=False,
        omni="--omni" in argv,
        problems=(),
    )


def _accepted_from(result: LintResult, oldest: str, pool: Any, combo: Combination) -> None:
    """For each argument the oldest release blocks, the first newer release that accepts it."""
    outcome = pool.outcome(oldest, combo)
    assert outcome is not None
    for f in outcome.findings:
        if f.key.startswith("arg:") and f.status == "blocked" and f.key not in result.accepted_from:
            first = pool.first_without(oldest, combo, f.key)
            if first:
                result.accepted_from[f.key] = first


def _index() -> list[str] | None:
    """Releases on the package index (cached answer offline), or None when unreachable."""
    from compat.sources.pypi import versions_on_index

    try:
        return versions_on_index()
    except UserError:
        return None


def _model_of(argv: list[str], k: Any) -> str:
    args = parse_serve_args(argv)
    if args.model:
        return args.model
    default = next((json.loads(v["default"]) for v in k.values if v["flag"] == "--model"), None)
    return default if isinstance(default, str) else ""


def _works_from(
    result: LintResult, targets: list[str], pool: Any, combo: Combination, search: bool
) -> None:
    from compat.verdict.releases import STARTS

    statuses = {v: pool.outcome(v, combo).status for v in targets}
    if statuses[targets[0]] in STARTS:
        result.works_from = targets[0]
        result.works_note = f"works at {targets[0]}, the oldest release judged"
        return
    if not search:
        later = [v for v in targets if statuses[v] in STARTS]
        result.works_from = later[0] if later else None
        result.works_note = (
            "first working release judged (the index not searched)"
            if later
            else f"works at none of the releases judged ({targets[0]} .. {targets[-1]})"
        )
        return
    first = pool.first_working(targets[0], [combo])
    basis = "the index" if pool.exhaustive else "the releases judged (index unreachable)"
    if first is None:
        result.works_note = f"works at no release after {targets[0]} on {basis}"
        return
    result.works_from = first
    before = [v for v in pool.releases if release_before(v, first)]
    below = before[-1] if before else targets[0]
    o = pool.outcome(below, combo)
    result.works_note = (
        f"first working release on {basis} (bisected; {below}: {o.status if o else 'unknown'})"
    )


def release_before(a: str, b: str) -> bool:
    from compat.vocab import release_key

    return release_key(a) < release_key(b)


def render(r: LintResult) -> str:
    """One line per finding and release, then where the command works."""
    lines = []
    for rv in sorted(r.releases, key=lambda x: _key(x.version)):
        tag = "" if rv.judged else " (visited by the search)"
        if not rv.findings or rv.status == "ok":
            lines.append(f"{rv.version}{tag}: ok")
            # a note decides nothing, but says what an ok did not check (values, at an unverified rewrite)
            lines += [f"{rv.version}{tag}: note: {f.step}" for f in rv.findings if f.note]
            continue
        for f in rv.findings:
            msg = " / ".join(
                line.strip()
                for line in f.message.strip().splitlines()
                if line.strip() and not line.strip().startswith("For further information")
            )
            accepted = r.accepted_from.get(f.key) if f.key else None
            parts = [f"{rv.version}{tag}: {f.tag}: {f.step}"]
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
    return json.dumps(
        {
            "command": r.command,
            "model": r.model,
            "works_from": r.works_from,
            "works_note": r.works_note,
            "releases": [
                {
                    "version": x.version,
                    "status": x.status,
                    "judged": x.judged,
                    "findings": [
                        {
                            "status": f.tag,
                            "step": f.step,
                            "message": f.message,
                            "evidence": f.evidence,
                            "stage": f.stage,
                            "accepted_from": r.accepted_from.get(f.key) if f.key else None,
                        }
                        for f in x.findings
                    ],
                }
                for x in sorted(r.releases, key=lambda x: _key(x.version))
            ],
        },
        indent=1,
    )


def _key(v: str) -> tuple:
    from compat.vocab import release_key

    return release_key(v)
