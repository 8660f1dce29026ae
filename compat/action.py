"""The GitHub Action's work (action.yml runs `python -m compat.action`), kept here so tests run it.

GitHub hands a composite action's inputs over as the environment action.yml sets (`INPUT_*`)
and takes results from files it names in the environment: workflow commands on stdout (the
annotations `compat check --format github` writes), markdown appended to
`$GITHUB_STEP_SUMMARY` (the job summary: a table of causes with fixes and first working
releases, gates to review, vLLM-side causes) and `name=value` lines appended to
`$GITHUB_OUTPUT` (the step's outputs). Each is one call into compat.api, as the CLI makes.

Exit status: 1 when a command the site emits is blocked and not gated (or, with
`fail-on-unknown`, unknown), 0 otherwise; a usage error is one `error:` line and 2.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compat.errors import UserError

#: The environment action.yml sets, one variable per input (tests check the two agree).
INPUTS = (
    "INPUT_RECIPES",
    "INPUT_RELEASES",
    "INPUT_VLLM_SRC",
    "INPUT_FACTS_LOCK",
    "INPUT_HF_CONFIG_DIR",
    "INPUT_ALLOW_HUB",
    "INPUT_FAIL_ON_UNKNOWN",
    "INPUT_DB",
)
#: The lock `compat models lock` writes by default, used when the repository has one.
LOCK_NAME = "model-facts.lock.json"


@dataclass(frozen=True)
class Inputs:
    recipes: Path
    releases: list[str]
    srcs: list[str]
    facts_lock: Path | None
    hf_config_dir: Path | None
    allow_hub: bool
    fail_on_unknown: bool
    db: Path
    workspace: Path


def _words(text: str) -> list[str]:
    return [w for w in text.replace(",", " ").split() if w]


def _flag(env: Mapping[str, str], name: str) -> bool:
    raw = env.get(name, "").strip().lower()
    if raw in ("", "false", "0", "no"):
        return False
    if raw in ("true", "1", "yes"):
        return True
    where = name.removeprefix("INPUT_").lower().replace("_", "-")
    raise UserError(f"expected true or false, got {raw!r}", where=where)


def read_inputs(env: Mapping[str, str]) -> Inputs:
    """The inputs from the environment, paths relative to the workspace."""
    workspace = Path(env.get("GITHUB_WORKSPACE") or ".")
    recipes = workspace / (env.get("INPUT_RECIPES") or ".")
    lock_in = env.get("INPUT_FACTS_LOCK", "").strip()
    lock = workspace / lock_in if lock_in else recipes / LOCK_NAME
    if lock_in and not lock.is_file():
        raise UserError("no such lock file", where=f"facts-lock {lock_in}")
    hf = env.get("INPUT_HF_CONFIG_DIR", "").strip()
    db = env.get("INPUT_DB", "").strip()
    temp = Path(env.get("RUNNER_TEMP") or workspace)
    return Inputs(
        recipes=recipes,
        releases=_words(env.get("INPUT_RELEASES", "")),
        srcs=_words(env.get("INPUT_VLLM_SRC", "")),
        facts_lock=lock if lock.is_file() else None,
        hf_config_dir=workspace / hf if hf else None,
        allow_hub=_flag(env, "INPUT_ALLOW_HUB"),
        fail_on_unknown=_flag(env, "INPUT_FAIL_ON_UNKNOWN"),
        db=workspace / db if db else temp / "vllm-compat.db",
        workspace=workspace,
    )


def _prefix(inputs: Inputs) -> str:
    """The recipes root as the repository sees it, so annotations land on the right file."""
    try:
        rel = inputs.recipes.resolve().relative_to(inputs.workspace.resolve())
    except ValueError:
        return ""
    return "" if str(rel) == "." else f"{rel.as_posix()}/"


def _cell(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def summary_markdown(findings: dict[str, Any], built: dict[str, Any], prefix: str = "") -> str:
    """The job summary: totals, a table of causes with fixes and first working releases, the gates
    to review and the vLLM-side causes."""
    causes = findings["causes"]
    fixable = sum(c["fix_kind"] not in ("", "none") for c in causes)
    where = (
        f"at vLLM {', '.join(built['releases'])}"
        if built.get("explicit")
        else "each recipe at the vLLM release it pins"
    )
    totals = ", ".join(f"{k} {v}" for k, v in sorted(findings["totals"].items()))
    out = [
        (
            f"## vllm-compat: {findings['blocked']} blocked command(s), {len(causes)} cause(s), "
            f"{fixable} with a fix"
        ),
        "",
        f"Judged {where}. All judged rows: {totals}.",
        "",
    ]
    if causes:
        out += [
            "| recipe | cause | blocked | vLLM | fix | first working release |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for c in causes:
            fix = (
                f"{c['fix_kind']}: {c['fix']}"
                if c["fix_kind"] not in ("", "none")
                else f"none: {c['fix_why']}"
            )
            out.append(
                f"| `{prefix}{c['recipe']}:{c['line']}` | {_cell(c['label'])} | {len(c['rows'])} "
                f"({_cell(', '.join(c['strategies']))}) | {', '.join(c['releases'])} | "
                f"{_cell(fix)} | {c['works_from'] or '-'} |"
            )
        out += ["", "Write the fixes: `compat fix --db DB --apply . --commit` (one commit).", ""]
    out += _reviews_md(findings, prefix) + _upstream_md(findings, prefix)
    return "\n".join(out) + "\n"


def _reviews_md(findings: dict[str, Any], prefix: str) -> list[str]:
    reviews = findings.get("reviews") or []
    if not reviews:
        return []
    out = [
        f"### Gates to review ({len(reviews)})",
        "",
        (
            "Their hidden commands start at the pin; a gate may exist for reasons other than "
            "startup, so these are proposals (`compat fix --apply . --only ungate`)."
        ),
        "",
        "| recipe | gate | proposal | since |",
        "| --- | --- | --- | --- |",
    ]
    out += [
        f"| `{prefix}{r['recipe']}:{r['line']}` | {_cell(r['label'])} | {_cell(r['fix'])} | "
        f"{r['works_from'] or '-'} |"
        for r in reviews
    ]
    return [*out, ""]


def _upstream_md(findings: dict[str, Any], prefix: str) -> list[str]:
    ups = findings.get("upstream") or []
    if not ups:
        return []
    out = [
        f"### vLLM-side causes ({len(ups)})",
        "",
        "| recipe | what | first working release | bug report |",
        "| --- | --- | --- | --- |",
    ]
    for e in ups:
        f = e["first"]
        feature = f["feature"] + (f":{f['mode']}" if f["mode"] else "") or "''"
        report = (
            f"`compat explain {e['recipe']} {f['strategy']} {feature} "
            f"--vllm {f['vllm_version']} --format issue`"
        )
        out.append(
            f"| `{prefix}{e['recipe']}:{e['line']}` | {_cell(e['title'])} ({_cell(e['label'])}) | "
            f"{e['works_from'] or 'none'} | {report} |"
        )
    return [*out, ""]


def outputs(findings: dict[str, Any], db: Path) -> dict[str, str]:
    causes = findings["causes"]
    return {
        "blocked": str(findings["blocked"]),
        "causes": str(len(causes)),
        "fixable": str(sum(c["fix_kind"] not in ("", "none") for c in causes)),
        "unknown": str(findings.get("unknown", 0)),
        "reviews": str(len(findings.get("reviews") or [])),
        "upstream": str(len(findings.get("upstream") or [])),
        "db": str(db),
    }


def _append(path: str | None, text: str) -> None:
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text)


def run(env: Mapping[str, str]) -> int:
    """Build, check, annotate, summarize, set outputs; the exit status (see the module doc)."""
    from compat import api

    inputs = read_inputs(env)
    built = api.build(
        inputs.recipes,
        inputs.releases,
        inputs.srcs,
        inputs.db,
        inputs.hf_config_dir,
        inputs.allow_hub,
        progress=lambda m: print(m, file=sys.stderr),
        facts_lock=inputs.facts_lock,
    )
    built["explicit"] = bool(inputs.releases or inputs.srcs)
    findings = api.check(inputs.db)
    prefix = _prefix(inputs)
    sys.stdout.write(api.render_check(findings, api.CheckFormat.GITHUB, prefix=prefix))
    _append(env.get("GITHUB_STEP_SUMMARY"), summary_markdown(findings, built, prefix))
    _append(
        env.get("GITHUB_OUTPUT"),
        "".join(f"{k}={v}\n" for k, v in outputs(findings, inputs.db).items()),
    )
    if findings["blocked"]:
        return 1
    return 1 if inputs.fail_on_unknown and findings.get("unknown") else 0


def main_with(env: Mapping[str, str]) -> None:
    """Run with `env` as the environment and exit with its status (a usage error: one line, 2)."""
    try:
        sys.exit(run(env))
    except UserError as exc:
        sys.stderr.write(f"error: {exc.line()}\n")
        sys.exit(2)


def main() -> None:
    main_with(os.environ)


if __name__ == "__main__":
    main()
