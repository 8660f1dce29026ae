"""Fixes as a ready commit: one branch and one commit in the recipes checkout, plain `git`.

The message lists each fix with its cause, the evidence (release, file:line, the full chain
the one-line comment in the recipe leaves out) and what the site stops emitting: the
recipe is rendered before and after the fix's edits through the replay of the recipes'
own synthesizer (`compat.recipes`, checked against command-synthesis.js by
tests/test_recipes_site_js.py), and the commands that disappear are counted. The same text
in markdown is the PR body (`--format markdown`). No GitHub API is used: pushing the branch
and opening the PR is the workflow's job (examples/workflows/).
"""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from compat.errors import UserError
from compat.fix.edits import Edit, apply

#: The branch `--commit` makes when none is named.
DEFAULT_BRANCH = "vllm-compat/fixes"
#: Who commits when the checkout has no git identity (a CI runner).
BOT = ("vllm-compat", "vllm-compat@users.noreply.github.com")


@dataclass
class FixNote:
    """One fix of one recipe file, as the commit message and the PR body tell it."""

    recipe: str
    kind: str
    summary: str
    causes: list[dict[str, Any]] = field(default_factory=list)
    stops: list[str] = field(
        default_factory=list
    )  # 'spec_decoding:mtp on multi_node_tp_pp (19 ...)'
    starts: list[str] = field(default_factory=list)  # what an ungate lets the site emit again


# --------------------------------------------------------------------------- describing


def _site_keys(repo: Any, recipe: Any) -> dict[tuple[str, str, str, str], set[tuple[str, str]]]:
    """(strategy, feature, mode, variant) -> {(platform, profile)} the site emits for `recipe`."""
    from compat.recipes import enumerate_recipe

    repo = replace(repo, recipes={**repo.recipes, recipe.path: recipe})
    out: dict[tuple[str, str, str, str], set[tuple[str, str]]] = {}
    for c in enumerate_recipe(repo, recipe):
        if not c.gated:
            for p in c.profiles or (c.hardware,):
                out.setdefault((c.strategy, c.feature, c.mode, c.variant), set()).add(
                    (c.platform, p)
                )
    return out


def _difference(
    a: dict[tuple[str, str, str, str], set[tuple[str, str]]],
    b: dict[tuple[str, str, str, str], set[tuple[str, str]]],
) -> list[str]:
    """What `a` emits and `b` does not, one phrase per (feature[:mode], strategy)."""
    gone: dict[tuple[str, str], Counter[str]] = {}
    for key, where in a.items():
        lost = where - b.get(key, set())
        if lost:
            strategy, feature, mode, variant = key
            what = (feature + (f":{mode}" if mode else "")) or "base command"
            gone.setdefault((what, strategy), Counter())[variant] += len(lost)
    return [
        f"{what} on {strategy} ({sum(v.values())} command(s): variant(s) {', '.join(sorted(v))})"
        for (what, strategy), v in sorted(gone.items())
    ]


def describe(
    db_path: Path, root: Path, plans: dict[str, list[tuple[str, str, list[Edit]]]]
) -> list[FixNote]:
    """A FixNote per planned fix, with its causes from the database and what the site stops
    (and starts) emitting, from the checkout under `root` as it is before the fixes."""
    from compat import report
    from compat.recipes import load_repo
    from compat.recipes.repo import Recipe

    causes = report.causes(db_path) + [
        dict(r, kind="gate", rows=[], releases=[]) for r in report.reviews(db_path)
    ]
    repo = load_repo(root)
    notes: list[FixNote] = []
    for path, fixes in sorted(plans.items()):
        recipe = repo.recipes.get(path)
        before = _site_keys(repo, recipe) if recipe is not None else {}
        for kind, summary, edits in fixes:
            note = FixNote(path, kind, summary)
            note.causes = [
                c
                for c in causes
                if c["recipe"] == path and c["fix_kind"] == kind and c["fix"] == summary
            ]
            if recipe is not None:
                after = _site_keys(repo, Recipe(path, apply(recipe.data, edits)))
                note.stops, note.starts = _difference(before, after), _difference(after, before)
            notes.append(note)
    return notes


def _cause_lines(c: dict[str, Any]) -> list[str]:
    rows = c.get("rows") or []
    releases = ", ".join(c.get("releases") or []) or "the pin"
    where = f"{c['field']}, line {c['line']}" if c.get("field") else f"line {c['line']}"
    out = [
        f"cause: {c['label']} ({where})"
        + (f", {len(rows)} command(s) at vLLM {releases}" if rows else "")
    ]
    out.append(f"finding: {' '.join(str(c['finding']).split())}")
    if c.get("message"):
        out.append(f"vLLM raises: {' '.join(str(c['message']).split())}")
    evidence = c.get("evidence") or ""
    if evidence:
        out.append(f"evidence (vLLM {(c.get('releases') or ['?'])[0]}): {evidence}")
    if c.get("works_from"):
        out.append(f"first release where it starts: {c['works_from']}")
    if c.get("fix_why") and c.get("fix_kind") == "ungate":
        out.append(f"note: {c['fix_why']}")
    return out


def headline(notes: list[FixNote]) -> str:
    kinds = Counter(n.kind for n in notes)
    files = len({n.recipe for n in notes})
    what = ", ".join(f"{k} {v}" for k, v in kinds.most_common())
    return f"vllm-compat: {len(notes)} fix(es) in {files} recipe file(s) ({what})"


INTRO = (
    "Commands the recipes site synthesizes that cannot start at the vLLM release each recipe "
    "pins, found by reading vLLM's source statically (vllm-compat). Every fix was judged "
    "again, through the same synthesis replay and engine, before it was written; none takes "
    "away a command that starts."
)


def message_text(notes: list[FixNote]) -> str:
    """The commit message: a headline, then each fix with its causes and the site's change."""
    import textwrap

    out = [headline(notes), "", *textwrap.wrap(INTRO, 72)]
    recipe = ""
    for n in notes:
        if n.recipe != recipe:
            recipe = n.recipe
            out += ["", recipe]
        out.append(f"- {n.kind}: {n.summary}")
        for c in n.causes:
            out += [f"  {line}" for line in _cause_lines(c)]
        out += [f"  the site stops emitting: {s}" for s in n.stops]
        out += [f"  the site emits again: {s}" for s in n.starts]
    return "\n".join(out) + "\n"


def message_markdown(notes: list[FixNote]) -> str:
    """The PR body: the same as the commit message, in markdown."""
    out = [f"## {headline(notes)}", "", INTRO, ""]
    out += ["| recipe | fix | causes | first working release |", "| --- | --- | --- | --- |"]
    for n in notes:
        works = ", ".join(dict.fromkeys(c["works_from"] for c in n.causes if c.get("works_from")))
        labels = ", ".join(c["label"] for c in n.causes)
        out.append(f"| `{n.recipe}` | {n.kind}: {n.summary} | {labels} | {works or '-'} |")
    recipe = ""
    for n in notes:
        if n.recipe != recipe:
            recipe = n.recipe
            out += ["", f"### `{recipe}`"]
        out += ["", f"**{n.kind}**: {n.summary}", ""]
        for c in n.causes:
            out += [f"- {line}" for line in _cause_lines(c)]
        out += [f"- the site stops emitting: {s}" for s in n.stops]
        out += [f"- the site emits again: {s}" for s in n.starts]
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- git


def _git(root: Path, *args: str, input: str | None = None) -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *args],
            input=input,
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
        )
    except OSError as exc:
        raise UserError(f"cannot run git: {exc.strerror or exc}", where="--commit") from None
    if done.returncode != 0:
        why = (done.stderr or done.stdout).strip().splitlines()
        sub = next((a for a in args if not a.startswith("-") and "=" not in a), "")
        raise UserError(f"git {sub} failed: {why[-1] if why else done.returncode}", where=str(root))
    return done.stdout


def prepare(root: Path, branch: str) -> Path:
    """The checkout's top directory; a UserError when `root` is not in a git work tree or the
    branch exists already."""
    try:
        top = Path(_git(root, "rev-parse", "--show-toplevel").strip())
    except UserError:
        raise UserError("not inside a git checkout; --commit needs one", where=str(root)) from None
    if _git(root, "branch", "--list", branch).strip():
        raise UserError(f"branch {branch!r} exists; give another with --branch", where="--commit")
    return top


def commit(root: Path, files: list[str], message: str, branch: str) -> str:
    """Switch to a new `branch` (the working tree as it is), commit exactly `files` (paths relative
    to `root`) with `message`; the commit's sha."""
    _git(root, "switch", "-c", branch)
    paths = [str(Path(root).resolve() / f) for f in files]
    _git(root, "add", "--", *paths)
    identity: list[str] = []
    if not _git_config(root, "user.email"):
        identity = ["-c", f"user.name={BOT[0]}", "-c", f"user.email={BOT[1]}"]
    _git(root, *identity, "commit", "--quiet", "-F", "-", "--", *paths, input=message)
    return _git(root, "rev-parse", "HEAD").strip()


def _git_config(root: Path, key: str) -> str:
    try:
        return _git(root, "config", key).strip()
    except UserError:
        return ""


# --------------------------------------------------------------------------- apply + commit


def apply_and_commit(
    db_path: Path,
    root: Path,
    *,
    only: tuple[str, ...] = (),
    dry_run: bool = False,
    commit_it: bool = False,
    branch: str = DEFAULT_BRANCH,
) -> Any:
    """Write the planned fixes (compat.fix.writer), described for a commit message and a PR body;
    with `commit_it`, on a new branch as one commit. Nothing is written when the checkout is not
    a git work tree, the branch exists, or a fix cannot be written."""
    from compat.fix.writer import apply_fixes, planned_fixes

    if commit_it and not dry_run:
        prepare(root, branch)
    preview = apply_fixes(db_path, root, dry_run=True, only=only)
    plans = {r: f for r, f in planned_fixes(db_path, only).items() if r in preview.changed_files}
    notes = describe(db_path, root, plans)
    preview.message = message_text(notes) if notes else ""
    preview.markdown = message_markdown(notes) if notes else ""
    if dry_run or not preview.changed_files:
        return preview
    result = apply_fixes(db_path, root, dry_run=False, only=only)
    result.message, result.markdown = preview.message, preview.markdown
    if commit_it:
        result.branch = branch
        result.sha = commit(root, result.changed_files, result.message, branch)
    return result
