"""The only writer of recipe files: planned fixes, round-trip, all-or-nothing per file.

What is written is exactly what the fix stage re-judged: the edits stored with each cause
(`cause.fix_edits`), applied by the round-trip editor (compat.fix.yaml_edit), whose result
must parse to `edits.apply(data, edits)`. Before anything is written:

- every file to be edited must be the one the build read (sha256 in `recipe_file`); a
  file changed since is refused by name, unless the fixes are already in it (a second
  apply is a no-op);
- every edit must succeed; one failure writes nothing.

Each file is then replaced atomically (a temporary file in its directory, fsync, rename),
so an interrupted apply leaves every file either as it was or fully written.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import yaml

from compat.errors import UserError
from compat.fix.context import Proposal
from compat.fix.edits import Edit, EditConflict, apply
from compat.fix.plan import _merge
from compat.fix.yaml_edit import EditError, edit_recipe_text, load_data
from compat.store import open_store
from compat.tables import RecipeFile


@dataclass
class ApplyResult:
    changed_files: list[str] = field(default_factory=list)
    diffs: dict[str, str] = field(default_factory=dict)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (recipe, why)
    fixes: dict[str, list[str]] = field(default_factory=dict)  # recipe -> fix summaries
    dry_run: bool = False
    message: str = ""  # the commit message (compat.fix.commit), when asked for
    markdown: str = ""  # the same as a PR body
    branch: str = ""  # with --commit: the branch made and its commit
    sha: str = ""


def planned_fixes(
    db_path: Path, only: Sequence[str] = ()
) -> dict[str, list[tuple[str, str, list[Edit]]]]:
    """recipe -> [(fix kind, summary, edits)] stored by the build (cause table): of the `only`
    kinds, or, when none are named, every kind but the opt-in proposals (`ungate`)."""
    from compat.fix import OPT_IN

    with open_store(Path(db_path)) as db:
        if not db.has_table("cause"):
            raise UserError(
                "no fix plans in this database; run `compat build` first", where=str(db_path)
            )
        causes = db.causes(order="recipe, id")
    out: dict[str, list[tuple[str, str, list[Edit]]]] = {}
    for c in causes:
        if c.fix_kind in ("", "none") or (c.fix_kind not in only if only else c.fix_kind in OPT_IN):
            continue
        entry = (c.fix_kind, c.fix, c.edits())
        if entry[2] and entry not in out.setdefault(c.recipe, []):
            out[c.recipe].append(entry)
    return out


def recorded_hashes(db_path: Path) -> dict[str, str]:
    with open_store(Path(db_path)) as db:
        return (
            {r.path: r.sha256 for r in db.rows(RecipeFile, order="path")}
            if db.has_table("recipe_file")
            else {}
        )


def safe_path(root: Path, recipe: str) -> Path:
    rel = PurePosixPath(recipe)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        raise UserError("recipe path must be relative to the recipes root", where=recipe)
    return root.joinpath(*rel.parts)


def apply_fixes(
    db_path: Path, recipes_root: Path, *, dry_run: bool = False, only: Sequence[str] = ()
) -> ApplyResult:
    """Write every planned fix into the recipe files under `recipes_root` (see the module doc)."""
    root = Path(recipes_root)
    if not root.is_dir():
        raise UserError("recipes root is not a directory", where=str(root))
    plans = planned_fixes(db_path, only)
    hashes = recorded_hashes(db_path)
    result = ApplyResult(dry_run=dry_run)
    new_texts: dict[str, tuple[Path, str, str]] = {}
    for recipe, fixes in plans.items():
        path = safe_path(root, recipe)
        if not path.is_file():
            raise UserError(
                "the build judged this recipe, but the recipes root has no such file", where=recipe
            )
        raw = path.read_bytes()
        text = raw.decode("utf-8")
        edits = _merge([Proposal(kind, tuple(e), summary) for kind, summary, e in fixes])
        try:
            data = load_data(text)
            want = apply(data, edits)
        except (yaml.YAMLError, EditConflict) as exc:
            raise UserError(
                f"the recipe no longer has the shape the fixes were planned for ({exc})",
                where=recipe,
            ) from None
        if want == data:
            continue  # already applied: a no-op
        if recipe in hashes and hashlib.sha256(raw).hexdigest() != hashes[recipe]:
            raise UserError("changed since the build; rebuild before applying fixes", where=recipe)
        try:
            outcome = edit_recipe_text(text, edits, want)
        except EditError as exc:
            raise UserError(f"cannot edit safely: {exc}", where=recipe) from None
        new_texts[recipe] = (path, text, outcome.text)
        result.fixes[recipe] = [summary for _, summary, _ in fixes]
    for recipe, (path, old, new) in sorted(new_texts.items()):
        result.diffs[recipe] = "".join(
            difflib.unified_diff(
                old.splitlines(keepends=True),
                new.splitlines(keepends=True),
                fromfile=f"a/{recipe}",
                tofile=f"b/{recipe}",
            )
        )
        result.changed_files.append(recipe)
    if not dry_run:
        write_files({path: new for path, _, new in new_texts.values()})
    return result


def write_files(texts: dict[Path, str]) -> None:
    """Replace each file atomically (same directory, fsync, rename), keeping its mode."""
    for path, text in texts.items():
        mode = path.stat().st_mode & 0o7777
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, mode)
            os.replace(tmp, path)
        except OSError as exc:
            raise UserError(
                f"cannot write recipe: {exc.strerror or exc}", where=str(path)
            ) from None
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
