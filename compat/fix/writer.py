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
import sqlite3
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import yaml

from compat.errors import UserError
from compat.fix.edits import Edit, EditConflict, apply, loads
from compat.fix.plan import _merge
from compat.fix.context import Proposal
from compat.fix.yaml_edit import EditError, edit_recipe_text, load_data


@dataclass
class ApplyResult:
    changed_files: list[str] = field(default_factory=list)
    diffs: dict[str, str] = field(default_factory=dict)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (recipe, why)
    methods: dict[str, str] = field(default_factory=dict)
    fixes: dict[str, list[str]] = field(default_factory=dict)  # recipe -> fix summaries
    dry_run: bool = False


def planned_fixes(db_path: Path, only: Sequence[str] = ()) -> dict[str, list[tuple[str, str, list[Edit]]]]:
    """recipe -> [(fix kind, summary, edits)] stored by the build (cause table)."""
    path = Path(db_path)
    if not path.is_file():
        raise UserError("no such database (run `compat build` first)", where=str(path))
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT recipe, fix_kind, fix, fix_edits FROM cause "
                           "WHERE fix_kind NOT IN ('', 'none') ORDER BY recipe, id").fetchall()
    except sqlite3.DatabaseError as exc:
        raise UserError(f"no fix plans in this database ({exc}); run `compat build` first",
                        where=str(path)) from None
    finally:
        con.close()
    out: dict[str, list[tuple[str, str, list[Edit]]]] = {}
    for recipe, kind, summary, raw in rows:
        if only and kind not in only:
            continue
        entry = (kind, summary, loads(raw))
        if entry[2] and entry not in out.setdefault(recipe, []):
            out[recipe].append(entry)
    return out


def recorded_hashes(db_path: Path) -> dict[str, str]:
    con = sqlite3.connect(f"{Path(db_path).resolve().as_uri()}?mode=ro", uri=True)
    try:
        return dict(con.execute("SELECT path, sha256 FROM recipe_file").fetchall())
    except sqlite3.DatabaseError:
        return {}
    finally:
        con.close()


def safe_path(root: Path, recipe: str) -> Path:
    rel = PurePosixPath(recipe)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        raise UserError("recipe path must be relative to the recipes root", where=recipe)
    return root.joinpath(*rel.parts)


def apply_fixes(db_path: Path, recipes_root: Path, *, dry_run: bool = False,
                only: Sequence[str] = ()) -> ApplyResult:
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
            raise UserError("the build judged this recipe, but the recipes root has no such file", where=recipe)
        raw = path.read_bytes()
        text = raw.decode("utf-8")
        edits = _merge([Proposal(kind, tuple(e), summary) for kind, summary, e in fixes])
        try:
            data = load_data(text)
            want = apply(data, edits)
        except (yaml.YAMLError, EditConflict) as exc:
            raise UserError(f"the recipe no longer has the shape the fixes were planned for ({exc})",
                            where=recipe) from None
        if want == data:
            continue  # already applied: a no-op
        if recipe in hashes and hashlib.sha256(raw).hexdigest() != hashes[recipe]:
            raise UserError("changed since the build; rebuild before applying fixes", where=recipe)
        try:
            outcome = edit_recipe_text(text, edits, want)
        except EditError as exc:
            raise UserError(f"cannot edit safely: {exc}", where=recipe) from None
        new_texts[recipe] = (path, text, outcome.text)
        result.methods[recipe] = outcome.method or ""
        result.fixes[recipe] = [summary for _, summary, _ in fixes]
    for recipe, (path, old, new) in sorted(new_texts.items()):
        result.diffs[recipe] = "".join(difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True),
            fromfile=f"a/{recipe}", tofile=f"b/{recipe}"))
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
            raise UserError(f"cannot write recipe: {exc.strerror or exc}", where=str(path)) from None
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
