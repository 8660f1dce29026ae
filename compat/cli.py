"""The `compat` command line: a shell over compat.api, one call per command.

Here are option parsing and printing only. User errors (bad input, missing files, unknown
releases) print one line naming the file and field and exit 2; `check` exits 1 when it
has findings.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from compat import api
from compat.api import CheckFormat, ExplainFormat, FixFormat, SqlFormat, TextFormat
from compat.errors import UserError
from compat.vocab import release_key

if TYPE_CHECKING:
    from compat.fix.writer import ApplyResult

#: Click's base exception for usage errors. typer >= 0.29 vendors click (typer._click) and no
#: longer installs it, so the class is found through a typer export instead of `import click`.
CLI_USAGE_ERROR: type[Exception] = next(
    c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException"
)

app = typer.Typer(
    add_completion=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    help="Which synthesized `vllm serve` commands can start, per vLLM release.",
)
err = Console(stderr=True)
out = Console()

DbOpt = Annotated[Path, typer.Option("--db", metavar="FILE", help="SQLite database file.")]
VllmOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--vllm", metavar="VERSION", help="vLLM release from the package index (repeatable)."
    ),
]
SrcOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--vllm-src",
        metavar="PATH[=LABEL]",
        help="Local vLLM tree, PATH or PATH=LABEL (repeatable).",
    ),
]


HfDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--hf-config-dir",
        metavar="DIR",
        help="An HF cache (e.g. ~/.cache/huggingface/hub) or a folder of <org>/<name>/config.json files.",
    ),
]
AllowHubOpt = Annotated[
    bool,
    typer.Option(
        "--allow-hub",
        metavar="",
        help="Fetch config.json through huggingface_hub (HF_TOKEN or your login, HF_ENDPOINT, HF_HUB_OFFLINE, the HF cache).",
    ),
]
DryRunOpt = Annotated[
    bool,
    typer.Option("--dry-run", metavar="", help="With --apply: print unified diffs, write nothing."),
]
FactsLockOpt = Annotated[
    Path | None,
    typer.Option(
        "--facts-lock",
        metavar="FILE",
        help="Model facts lock (compat models lock): read first, offline.",
    ),
]

Choice = TypeVar("Choice", bound=StrEnum)


def _choice(kind: type[Choice]) -> Callable[[str], Choice]:
    """The parser typer calls for a --format set, before the command runs.

    A bad value is the house usage error (`error: --format: unknown format 'xml' (text,
    json)`, exit 2); typer's own enum check would print pydantic's "Value error, ..." text.
    """

    def parse(value: str) -> Choice:
        try:
            return kind(value)
        except ValueError:
            names = ", ".join(kind)
            raise UserError(f"unknown format {value!r} ({names})", where="--format") from None

    return parse


def _format_option(kind: type[StrEnum]) -> Any:
    *first, last = list(kind)
    return typer.Option(
        "--format",
        metavar="FORMAT",
        help=f"{', '.join(first)} or {last}.",
        parser=_choice(kind),
    )


TextFormatOpt = Annotated[TextFormat, _format_option(TextFormat)]
CheckFormatOpt = Annotated[CheckFormat, _format_option(CheckFormat)]
ExplainFormatOpt = Annotated[ExplainFormat, _format_option(ExplainFormat)]
FixFormatOpt = Annotated[FixFormat, _format_option(FixFormat)]
SqlFormatOpt = Annotated[SqlFormat, _format_option(SqlFormat)]

models_app = typer.Typer(
    add_completion=False,
    rich_markup_mode=None,
    invoke_without_command=True,
    help="Model facts: lock them for reproducible builds, see which changed upstream.",
)
app.add_typer(models_app, name="models")


@models_app.callback()
def _models(ctx: typer.Context) -> None:
    if ctx.invoked_subcommand is None:
        names = ", ".join(c.name or "" for c in models_app.registered_commands)
        raise UserError(
            f"missing command ({names}); see compat models --help", where="compat models"
        )


def _progress(msg: str) -> None:
    err.print(f"[dim]{msg}[/dim]")


@app.command()
def scan(
    vllm: VllmOpt = None,
    vllm_src: SrcOpt = None,
    installed: Annotated[
        bool,
        typer.Option(
            "--installed",
            metavar="",
            help="Also scan the installed vllm package (read, not imported).",
        ),
    ] = False,
    db: DbOpt = Path("compat.db"),
    no_cache: Annotated[
        bool, typer.Option("--no-cache", metavar="", help="Recompute facts even if cached.")
    ] = False,
) -> None:
    """Introspect vLLM releases statically into the database.

    Example: compat scan --vllm 0.23.0 --vllm 0.33.0 --db compat.db
    """
    if not (vllm or vllm_src or installed):
        raise UserError("give at least one --vllm, --vllm-src or --installed", where="compat scan")
    summary = api.scan(
        vllm or [], vllm_src or [], installed, db, use_cache=not no_cache, progress=_progress
    )
    t = Table(title=f"scanned into {db}")
    for col in ("release", "origin", "archs", "pp", "cached", "seconds"):
        t.add_column(col)
    for s in summary:
        t.add_row(
            s["version"],
            s["origin"],
            str(s["archs"]),
            str(s["pp"]),
            "yes" if s["cached"] else "no",
            f"{s['seconds']:.2f}",
        )
    out.print(t)


@app.command()
def sql(
    statement: Annotated[str, typer.Argument(help="A SELECT over the views in schema/views.sql.")],
    db: DbOpt = Path("compat.db"),
    format: SqlFormatOpt = SqlFormat.TABLE,
) -> None:
    """Run a read-only SQL query.

    Example: compat sql "SELECT arch FROM v_arch_capability WHERE supports_pp=0" --format json
    """
    cols, rows = api.sql(db, statement)
    if format == SqlFormat.JSON:
        sys.stdout.write(json.dumps([dict(zip(cols, r)) for r in rows], indent=1) + "\n")
    elif format == SqlFormat.CSV:
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(cols)
        w.writerows(rows)
        sys.stdout.write(buf.getvalue())
    else:
        t = Table()
        for c in cols:
            t.add_column(c)
        for r in rows:
            t.add_row(*["" if v is None else str(v) for v in r])
        out.print(t)


@app.command()
def build(
    recipes: Annotated[
        Path, typer.Option("--recipes", metavar="DIR", help="Checkout of vllm-project/recipes.")
    ],
    vllm: VllmOpt = None,
    vllm_src: SrcOpt = None,
    db: DbOpt = Path("compat.db"),
    hf_config_dir: HfDirOpt = None,
    allow_hub: AllowHubOpt = False,
    facts_lock: FactsLockOpt = None,
) -> None:
    """Scan, load recipes, resolve models and decide every combination.

    With no --vllm each recipe is judged at the release it pins; with --vllm every
    recipe is judged at exactly those releases.

    Example: compat build --recipes ../recipes --vllm 0.23.0 --vllm 0.33.0 --db compat.db
    """
    s = api.build(
        recipes,
        vllm or [],
        vllm_src or [],
        db,
        hf_config_dir,
        allow_hub,
        progress=_progress,
        facts_lock=facts_lock,
    )
    cov = s["coverage"]
    out.print(
        f"{s['combinations']} combinations, {s['verdicts']} verdict rows, releases: "
        f"{', '.join(s['releases']) or '-'} ({s['seconds']}s)"
    )
    out.print(
        f"model configs: {cov.get('resolved')}/{cov.get('total')} resolved "
        f"({', '.join(f'{k} {v}' for k, v in cov.get('by_source', {}).items())}); "
        f"{len(cov.get('unknown', []))} unknown"
    )
    for pin, why in sorted(s["unavailable"].items()):
        out.print(f"[yellow]release {pin}: {why}[/yellow]")
    t = Table(title="verdicts at the judged releases")
    statuses = ("ok", "warning", "unknown", "blocked")
    t.add_column("vllm")
    for st in statuses:
        t.add_column(st, justify="right")
    for v in sorted({v for v, _ in s["by_status"]}, key=release_key):
        t.add_row(v, *[str(s["by_status"].get((v, st), 0)) for st in statuses])
    out.print(t)


@app.command()
def check(
    db: DbOpt = Path("compat.db"),
    format: CheckFormatOpt = CheckFormat.TEXT,
    verbose: Annotated[
        bool, typer.Option("-v", "--verbose", metavar="", help="List the rows under each cause.")
    ] = False,
    upstream: Annotated[
        bool,
        typer.Option(
            "--upstream",
            metavar="",
            help="List the vLLM-side causes instead, one line each, with the command that "
            "writes each bug report.",
        ),
    ] = False,
) -> None:
    """Exit 1 when a combination the site can synthesize is blocked and not gated.

    One line per (recipe, cause, fix), then a warning line per gate whose hidden commands
    start (an ungate proposal; never exit 1 by itself); --format github writes workflow
    annotations at the recipe line of each; --format json keeps everything.

    Example: compat check --db compat.db --format github
    """
    findings = api.check(db)
    sys.stdout.write(api.render_check(findings, format, verbose, upstream))
    if findings["blocked"]:
        raise typer.Exit(1)


@app.command()
def explain(
    model: Annotated[
        str, typer.Argument(help="Recipe model id (e.g. zai-org/GLM-5.2) or recipe path.")
    ],
    strategy: Annotated[str, typer.Argument(help="Strategy id, e.g. multi_node_tp_pp.")],
    feature: Annotated[
        str, typer.Argument(help="FEATURE or FEATURE:MODE, or '' for the base command.")
    ] = "",
    vllm: Annotated[
        str | None,
        typer.Option("--vllm", metavar="VERSION", help="Release (default: the pinned one)."),
    ] = None,
    db: DbOpt = Path("compat.db"),
    format: ExplainFormatOpt = ExplainFormat.TEXT,
) -> None:
    """The causal chain behind a verdict, as a maintainer would write it in a bug report;
    --format issue writes the bug report for vLLM of a vLLM-side cause.

    Example: compat explain zai-org/GLM-5.2 multi_node_tp_pp spec_decoding:mtp --vllm 0.23.0
    """
    sys.stdout.write(api.explain(db, model, strategy, feature, vllm, format))


@app.command()
def overrides(
    db: DbOpt = Path("compat.db"),
    output: Annotated[
        Path | None,
        typer.Option(
            "-o", "--output", metavar="PATH", help="Write the YAML here instead of stdout."
        ),
    ] = None,
    apply: Annotated[
        Path | None,
        typer.Option(
            "--apply",
            metavar="DIR",
            help="Write the fixes shown into this recipes checkout (as `compat fix --apply`).",
        ),
    ] = None,
    dry_run: DryRunOpt = False,
) -> None:
    """The fix stage's plans per recipe file as YAML, with `strategy_overrides` for information;
    --apply writes exactly the fixes shown, round-trip.

    Example: compat overrides --db compat.db --apply ../recipes --dry-run
    """
    if apply is not None:
        _print_applied(api.apply_fixes(db, apply, dry_run))
        return
    text = api.overrides(db)
    if output:
        output.write_text(text)
    else:
        sys.stdout.write(text)


@app.command()
def fix(
    db: DbOpt = Path("compat.db"),
    apply: Annotated[
        Path | None,
        typer.Option("--apply", metavar="DIR", help="Write the fixes into this recipes checkout."),
    ] = None,
    dry_run: DryRunOpt = False,
    commit: Annotated[
        bool,
        typer.Option(
            "--commit",
            metavar="",
            help="With --apply: make a branch and one commit in the checkout (plain git), the "
            "message listing each fix with its cause, evidence and what the site stops emitting.",
        ),
    ] = False,
    branch: Annotated[
        str,
        typer.Option(
            "--branch", metavar="NAME", help="With --commit: the new branch (vllm-compat/fixes)."
        ),
    ] = "",
    format: FixFormatOpt = FixFormat.TEXT,
    only: Annotated[
        list[str] | None,
        typer.Option(
            "--only",
            metavar="KIND",
            help="Only these fix kinds (gate, mode_variants, pin_bump, spelling, strategy, "
            "ungate; repeatable). --apply writes ungate proposals only when named here.",
        ),
    ] = None,
) -> None:
    """The fix planned for each cause (re-judged at build time); --apply writes them round-trip;
    --commit makes them one commit on a new branch; --format markdown prints the PR body.

    Example: compat fix --db compat.db --apply ../recipes --commit --format markdown
    """
    if apply is None and (commit or format == FixFormat.MARKDOWN or branch):
        flag = "--commit" if commit else "--branch" if branch else "--format markdown"
        raise UserError("needs --apply DIR (the recipes checkout)", where=flag)
    if apply is not None:
        markdown = format == FixFormat.MARKDOWN
        res = api.apply_fixes(db, apply, dry_run, only or (), commit, branch, describe=markdown)
        _print_applied(res, format)
        return
    for recipe, fixes in api.fixes(db, only or ()).items():
        for kind, summary, edits in fixes:
            out.print(f"{recipe}: {kind}: {summary}", markup=False)
            for e in edits:
                out.print(f"    {e.where} = {e.value!r}", markup=False)


def _print_applied(res: ApplyResult, format: FixFormat = FixFormat.TEXT) -> None:
    sys.stdout.write(api.render_applied(res, format))
    err.print(
        f"{'would change' if res.dry_run else 'changed'} {len(res.changed_files)} recipe files"
        + (f"; committed {res.sha[:12]} on branch {res.branch}" if res.sha else ""),
        markup=False,
    )


@app.command()
def site(
    db: DbOpt = Path("compat.db"),
    output: Annotated[
        Path, typer.Option("-o", "--output", metavar="PATH", help="Output directory.")
    ] = Path("site-out"),
    recipes_url: Annotated[
        str,
        typer.Option(
            "--recipes-url",
            metavar="URL",
            help="Where recipe files are linked, e.g. https://github.com/vllm-project/recipes/blob/COMMIT (a cause links its recipe line).",
        ),
    ] = "https://github.com/vllm-project/recipes/blob/main",
) -> None:
    """Static HTML compatibility matrix (works from file://), plus compat.db.gz and verdicts.json.

    Example: compat site --db compat.db -o site-out
    """
    rep = api.site(db, output, recipes_url)
    out.print(f"{rep.summary()} -> {output}/index.html", markup=False, soft_wrap=True)


@app.command("diff")
def diff_cmd(
    a: Annotated[str, typer.Argument(help="Older release, e.g. 0.23.0.")],
    b: Annotated[str, typer.Argument(help="Newer release, e.g. 0.33.0.")],
    db: DbOpt = Path("compat.db"),
    format: TextFormatOpt = TextFormat.TEXT,
) -> None:
    """Capabilities, drafts, gates, new error messages, flags, parsers and verdicts that changed.

    Example: compat diff 0.23.0 0.33.0 --db compat.db
    """
    sys.stdout.write(api.render_diff(api.diff(db, a, b), format))


@app.command("bisect")
def bisect_cmd(
    model: Annotated[str, typer.Argument(help="Recipe model id or recipe path.")],
    strategy: Annotated[str, typer.Argument(help="Strategy id.")],
    feature: Annotated[
        str, typer.Argument(help="FEATURE[:MODE], or '' for the base command.")
    ] = "",
    recipes: Annotated[
        Path, typer.Option("--recipes", metavar="DIR", help="Recipes checkout.")
    ] = Path("."),
    start: Annotated[
        str | None,
        typer.Option(
            "--from", metavar="VERSION", help="First release (default: the recipe's pin)."
        ),
    ] = None,
    end: Annotated[
        str | None,
        typer.Option(
            "--to", metavar="VERSION", help="Last release (default: newest on the index)."
        ),
    ] = None,
    format: TextFormatOpt = TextFormat.TEXT,
) -> None:
    """First release where a blocked combination works, and the change that made it work.

    Example: compat bisect zai-org/GLM-5.2 multi_node_tp_pp spec_decoding:mtp --recipes ../recipes
    """
    r = api.bisect(recipes, model, strategy, feature, start, end, progress=_progress)
    sys.stdout.write(api.render_bisect(r, format))


@models_app.command("lock")
def models_lock(
    recipes: Annotated[
        Path, typer.Option("--recipes", metavar="DIR", help="Checkout of vllm-project/recipes.")
    ],
    output: Annotated[
        Path, typer.Option("-o", "--output", metavar="FILE", help="Lock file to write.")
    ] = Path("model-facts.lock.json"),
    vllm: VllmOpt = None,
    vllm_src: SrcOpt = None,
    hf_config_dir: HfDirOpt = None,
    no_hub: Annotated[
        bool, typer.Option("--no-hub", metavar="", help="Offline sources and --hf-config-dir only.")
    ] = False,
) -> None:
    """Resolve every model id the recipes use and pin the facts the verdicts read.

    Example: compat models lock --recipes ../recipes -o model-facts.lock.json
    """
    s = api.lock_models(
        recipes, output, vllm or [], vllm_src or [], hf_config_dir, not no_hub, progress=_progress
    )
    out.print(
        f"{s['ids']} model ids -> {s['output']}: "
        f"{', '.join(f'{k} {v}' for k, v in sorted(s['by_status'].items()))}; "
        f"from {', '.join(f'{k} {v}' for k, v in sorted(s['by_source'].items()))}; "
        f"{s['revisions']} with a Hub revision",
        markup=False,
    )


@models_app.command("outdated")
def models_outdated(
    lock: Annotated[
        Path, typer.Option("--lock", metavar="FILE", help="Lock file to compare.")
    ] = Path("model-facts.lock.json"),
    format: TextFormatOpt = TextFormat.TEXT,
) -> None:
    """Which locked ids changed upstream (their main branch moved); exit 1 when any did.

    Example: compat models outdated --lock model-facts.lock.json
    """
    rows = api.outdated_models(lock, progress=_progress)
    sys.stdout.write(api.render_outdated(rows, format))
    if any(r["state"] == "changed" for r in rows):
        raise typer.Exit(1)


@app.command("lint", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def lint_cmd(
    command: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="-- vllm serve MODEL [ARGS]...", help="The serve command line, after `--`."
        ),
    ] = None,
    db: DbOpt = Path("compat.db"),
    vllm: VllmOpt = None,
    vllm_src: SrcOpt = None,
    platform: Annotated[
        str, typer.Option("--platform", metavar="PLATFORM", help="cuda or rocm.")
    ] = "cuda",
    hf_config_dir: HfDirOpt = None,
    allow_hub: AllowHubOpt = False,
    facts_lock: FactsLockOpt = None,
    no_search: Annotated[
        bool,
        typer.Option(
            "--no-search", metavar="", help="Do not bisect the index for the first working release."
        ),
    ] = False,
    format: TextFormatOpt = TextFormat.TEXT,
) -> None:
    """Judge any `vllm serve` command line at every scanned release (exit codes as check).

    Example: compat lint --db compat.db -- vllm serve zai-org/GLM-5.2 -tp 8 -pp 2
    """
    r = api.lint(
        command or [],
        db,
        vllm or [],
        platform,
        hf_config_dir,
        allow_hub,
        not no_search,
        progress=_progress,
        srcs=vllm_src or [],
        facts_lock=facts_lock,
    )
    sys.stdout.write(api.render_lint(r, format))
    if r.exit_code:
        raise typer.Exit(r.exit_code)


def _terminate(signum: int, _frame: object) -> None:
    # SIGTERM (timeouts, `kill`) unwinds like an interrupt, so `db.writing` removes its
    # private copy instead of leaving a .tmp file next to the database; exit 128+15.
    sys.stderr.write("terminated; the database was left as it was\n")
    raise SystemExit(143)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def main() -> None:
    import signal

    previous = signal.getsignal(signal.SIGTERM)
    if previous == signal.SIG_DFL:
        try:
            signal.signal(signal.SIGTERM, _terminate)
        except ValueError:  # not the main thread (an in-process caller): leave signals alone
            previous = None
    try:
        if len(sys.argv) < 2:
            commands = ", ".join(
                [c.name or getattr(c.callback, "__name__", "") for c in app.registered_commands]
                + [g.name for g in app.registered_groups if g.name]
            )
            raise UserError(f"missing command ({commands}); see compat --help", where="compat")
        rc = app(standalone_mode=False)
        if (
            rc == 130
        ):  # typer turns KeyboardInterrupt into Exit(130) before it reaches the handler below
            err.print("interrupted; the database was left as it was", markup=False)
        if isinstance(rc, int) and rc:
            sys.exit(rc)
    except UserError as exc:
        sys.stderr.write(f"error: {exc.line()}\n")
        sys.exit(2)
    except typer.Abort:
        err.print("aborted", markup=False)
        sys.exit(130)
    except KeyboardInterrupt:
        err.print("interrupted; the database was left as it was", markup=False)
        sys.exit(130)
    except SystemExit:
        raise
    except CLI_USAGE_ERROR as exc:  # usage errors arrive here in non-standalone mode
        sys.stderr.write(f"error: {_one_line(exc.format_message())}\n")  # type: ignore[attr-defined]
        sys.exit(2)
    finally:
        if previous == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, previous)


def run() -> None:
    """The program (`compat`, `python -m compat.cli`): `main`, then an exit that skips the
    interpreter's teardown. A build leaves millions of objects (parsed trees, facts, memos)
    that the teardown freed one by one, a second of a one-recipe build. As in the
    teardown, other threads are joined, exit handlers run and the streams are flushed: only
    the freeing is skipped."""
    import atexit
    import os
    import threading

    try:
        main()
        code = 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            sys.stderr.write(f"{exc.code}\n")
            code = 1
    threading._shutdown()  # type: ignore[attr-defined]  # what the teardown does first
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more to say
            code = code or 1
    os._exit(code)


if __name__ == "__main__":
    run()
