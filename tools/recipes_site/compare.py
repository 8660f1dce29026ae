"""Replay vllm-compat's commands with the recipes site's own JavaScript, and compare.

Two references, both run under node straight from the recipes checkout:

* `src/lib/command-synthesis.js`, driven by `driver.mjs` with exactly the inputs
  vllm-compat rendered each command with (enabled features in order, mode picks,
  nodeCount, pdNodes): proves the Python replay of the synthesizer, every node of
  every command included;
* `scripts/build-recipes-api.mjs`, run whole in a scratch directory: the JSON
  API as published. It checks which commands the API emits and at what sizes.

Both read the YAML with js-yaml 4, installed once with npm into the cache
(`$COMPAT_CACHE/npm/`, default the user cache), never into this repository or
the checkout; `Unavailable` says why when node or the npm registry is missing.

Usage:
  python tools/recipes_site/compare.py RECIPES_DIR
      every render of the current enumeration against both references
  python tools/recipes_site/compare.py RECIPES_DIR --db DB [--vllm V]
      the commands a built database judges against the commands the site emits
      (the JSON API's, and the builder's at default sizes), e.g. for a database
      built by an older vllm-compat
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DRIVER = HERE / "driver.mjs"
JS_YAML = "js-yaml"
JS_YAML_VERSION = "4.1.1"  # what the recipes research notes ran (js-yaml 4)

Argvs = tuple[tuple[str, tuple[str, ...]], ...]
Key = tuple[str, str, str, str, str, str]  # recipe, variant, profile, strategy, feature, mode


class Unavailable(Exception):
    """node, npm or the registry is missing: the comparison cannot run (a reason, not a failure)."""


# --- the JavaScript side ---------------------------------------------------------------


def _cache_root() -> Path:
    env = os.environ.get("COMPAT_CACHE")
    if env:
        return Path(env)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("vllm-compat"))


def node_binary() -> str:
    node = shutil.which("node")
    if node is None:
        raise Unavailable("node is not installed")
    return node


def js_yaml_modules(cache: Path | None = None) -> Path:
    """A node_modules directory holding js-yaml, installed with npm on first use."""
    root = (cache or _cache_root()) / "npm" / f"{JS_YAML}-{JS_YAML_VERSION}"
    modules = root / "node_modules"
    manifest = modules / JS_YAML / "package.json"
    if manifest.is_file():
        try:
            if json.loads(manifest.read_text())["version"] == JS_YAML_VERSION:
                return modules
        except (OSError, ValueError, KeyError):
            pass
    npm = shutil.which("npm")
    if npm is None:
        raise Unavailable("npm is not installed (needed once to fetch js-yaml)")
    root.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".js-yaml.", dir=root.parent))
    try:
        cmd = [
            npm,
            "install",
            "--prefix",
            str(staging),
            "--no-audit",
            "--no-fund",
            "--no-package-lock",
            "--loglevel=error",
            "--fetch-retries=2",
            "--fetch-retry-mintimeout=1000",
            "--fetch-retry-maxtimeout=5000",
            f"{JS_YAML}@{JS_YAML_VERSION}",
        ]
        try:
            done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            raise Unavailable("npm install js-yaml timed out (registry unreachable?)") from None
        if done.returncode != 0:
            said = [
                line.removeprefix("npm error").strip()
                for line in done.stderr.splitlines()
                if line.strip() and "complete log of this run" not in line
            ]
            why = "; ".join(said[:2]) or f"exit status {done.returncode}"
            raise Unavailable(f"npm install {JS_YAML}@{JS_YAML_VERSION} failed: {why}")
        if root.exists():
            shutil.rmtree(root)
        staging.rename(root)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return modules


def _node(args: list[str], what: str, **kw: Any) -> subprocess.CompletedProcess:
    """node with these args; a failure raises with the end of its stderr."""
    done = subprocess.run([node_binary(), *args], capture_output=True, text=True, check=False, **kw)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed: {done.stderr.strip()[-2000:]}")
    return done


def _job(index: int, render: Any) -> dict[str, Any]:
    sizing = render.sizing
    pd = None
    if sizing is not None and sizing.pd_pools is not None:
        pd = {
            role: {
                "nodes": pool.nodes,
                **({"parallelism": pool.parallelism} if pool.parallelism else {}),
            }
            for role, pool in sizing.pd_pools
        }
    return {
        "id": index,
        "recipe": render.recipe,
        "variant": render.variant,
        "strategy": render.strategy,
        "hw": render.profile,
        "features": list(render.features),
        "modes": dict(render.modes),
        "ungated": [render.feature] if render.gated else [],
        "nodeCount": sizing.node_count if sizing is not None else 1,
        "pdNodes": pd,
        "followers": bool(sizing and sizing.pool_followers),
    }


def replay(recipes: Path, renders: Sequence[Any], modules: Path) -> list[Argvs | str]:
    """The site synthesizer's argvs for each render's inputs (an error text where it threw)."""
    jobs = "\n".join(json.dumps(_job(i, r)) for i, r in enumerate(renders)) + "\n"
    done = _node(
        ["--disable-warning=MODULE_TYPELESS_PACKAGE_JSON", str(DRIVER), str(recipes), str(modules)],
        "driver.mjs",
        input=jobs,
    )
    out: list[Argvs | str] = ["no result"] * len(renders)
    for line in done.stdout.splitlines():
        item = json.loads(line)
        if "error" in item:
            out[item["id"]] = f"error: {item['error']}"
        else:
            out[item["id"]] = tuple((role, tuple(argv)) for role, argv in item["argvs"])
    return out


@dataclass(frozen=True)
class Published:
    """One command set the JSON API writes: a (base, variant, hardware, strategy) rendering."""

    base: str  # the hf id whose subtree holds it (recipe or promoted variant)
    variant: str
    hardware: str
    strategy: str
    deploy_type: str
    argvs: Argvs


def _published_argvs(doc: dict[str, Any]) -> Argvs:
    kind = doc.get("deploy_type")
    if kind == "multi_node":
        workers = doc.get("worker_argvs") or []
        return (("", tuple(doc["head_argv"])),) + tuple(
            (f"worker {i}", tuple(a)) for i, a in enumerate(workers, 1)
        )
    if kind == "pd_cluster":
        return tuple((role, tuple(doc[role]["argv"])) for role in ("prefill", "decode"))
    if kind == "kv_store_lb":
        return ()
    return (("", tuple(doc["argv"])),)


def publish_api(recipes: Path, modules: Path, scratch: Path) -> list[Published]:
    """Run the checkout's build-recipes-api.mjs in `scratch` and read back every rendering."""
    stage = scratch / "api"
    (stage / "scripts").mkdir(parents=True)
    (stage / "src" / "lib").mkdir(parents=True)
    shutil.copy2(recipes / "scripts" / "build-recipes-api.mjs", stage / "scripts")
    shutil.copy2(recipes / "src" / "lib" / "command-synthesis.js", stage / "src" / "lib")
    (stage / "package.json").write_text('{"private": true, "type": "module"}\n')
    for name in (
        "models",
        "strategies",
        "kv_store",
        "quickstart",
        "taxonomy.yaml",
        "platforms.yaml",
    ):
        if (recipes / name).exists():
            os.symlink(recipes / name, stage / name)
    os.symlink(modules, stage / "node_modules")
    _node(["scripts/build-recipes-api.mjs"], "build-recipes-api.mjs", cwd=stage)
    public = stage / "public"
    out: list[Published] = []
    for path in sorted(public.rglob("*.json")):
        rel = path.relative_to(public).parts
        if len(rel) < 3:
            continue  # index files and the recipe documents themselves
        doc = json.loads(path.read_text())
        if not isinstance(doc, dict) or "deploy_type" not in doc or "hf_id" in doc:
            continue
        out.append(
            Published(
                f"{rel[0]}/{rel[1]}",
                doc["variant"],
                doc["hardware"],
                doc["strategy"],
                doc["deploy_type"],
                _published_argvs(doc),
            )
        )
    return out


# --- comparisons ----------------------------------------------------------------------


def role_kind(role: str) -> str:
    """'' -> head; 'worker N' -> worker; 'prefill', 'prefill worker N' -> prefill, prefill worker."""
    if not role:
        return "head"
    if role.startswith("worker "):
        return "worker"
    return role.split(" worker ")[0] + (" worker" if " worker " in role else "")


@dataclass
class Tally:
    """Rows (command sets) and argvs compared and identical, by source and by role kind."""

    rows: Counter[str] = field(default_factory=Counter)
    rows_same: Counter[str] = field(default_factory=Counter)
    roles: Counter[str] = field(default_factory=Counter)
    roles_same: Counter[str] = field(default_factory=Counter)
    differences: list[str] = field(default_factory=list)

    def add(
        self, source: str, label: str, want: Argvs, got: Argvs | str | None, covers: bool = False
    ) -> bool:
        """Count one command set; `covers`: `got` may hold more nodes than `want` publishes."""
        have = dict(got) if isinstance(got, tuple) else {}
        if covers:
            same_row = isinstance(got, tuple) and all(have.get(r) == a for r, a in want)
        else:
            same_row = isinstance(got, tuple) and dict(want) == have
        self.rows[source] += 1
        self.rows_same[source] += same_row
        for role, argv in want:
            kind = role_kind(role)
            self.roles[kind] += 1
            self.roles_same[kind] += have.get(role) == argv
        if not same_row:
            self.differences.append(f"{label}: {_difference(want, got)}")
        return same_row

    def lines(self, title: str) -> list[str]:
        out = [title]
        for source in sorted(self.rows):
            out.append(
                f"  source {source}: {self.rows_same[source]} of {self.rows[source]} rows identical"
            )
        for kind in ("head", "worker", "prefill", "prefill worker", "decode", "decode worker"):
            if self.roles[kind]:
                out.append(
                    f"  role {kind}: {self.roles_same[kind]} of {self.roles[kind]} argvs identical"
                )
        total, same = sum(self.rows.values()), sum(self.rows_same.values())
        out.append(f"  all: {same} of {total} rows identical, {len(self.differences)} differ")
        return out


def _difference(want: Argvs, got: Argvs | str | None) -> str:
    if got is None:
        return "not judged by vllm-compat"
    if isinstance(got, str):
        return got
    have = dict(got)
    for role, argv in want:
        if role not in have:
            return f"{role or 'head'}: missing"
        if have[role] != argv:
            a, b = " ".join(argv), " ".join(have[role])
            cut = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            return f"{role or 'head'}: site {a[max(0, cut - 40) : cut + 80]!r} vs {b[max(0, cut - 40) : cut + 80]!r}"
    extra = [r for r in have if r not in dict(want)]
    return f"extra roles {extra}" if extra else "same"


def compare_replay(renders: Sequence[Any], replayed: Sequence[Argvs | str]) -> Tally:
    """Each render's argvs against the site synthesizer's for the same inputs."""
    tally = Tally()
    for r, js in zip(renders, replayed, strict=True):
        label = f"{r.source} {r.recipe} {r.variant} {r.profile} {r.strategy} {r.feature}:{r.mode}"
        # The reference is the site's output; vllm-compat's argvs are what is checked.
        tally.add(
            r.source,
            label,
            js if isinstance(js, tuple) else r.argvs,
            r.argvs if isinstance(js, tuple) else js,
        )
    return tally


def published_keys(repo: Any) -> dict[str, str]:
    """The API's base hf id -> recipe path (parents and promoted variants)."""
    from compat.recipes.json_api import _hf_id, published_variants

    out = {_hf_id(path): path for path in repo.recipes}
    for path, recipe in repo.recipes.items():
        for key in published_variants(repo, recipe):
            model_id = recipe.variants[key].get("model_id")
            if isinstance(model_id, str) and model_id not in out:
                out[model_id] = path
    return out


@dataclass
class ApiReport:
    tally: Tally
    not_rendered: list[str]  # published by the API, no vllm-compat render
    not_published: list[str]  # rendered as source api, not in the API's output
    mooncake: int  # kv_store compositions the API publishes (not synthesized)
    other_brands: int  # renderings on profiles vllm-compat does not judge

    def lines(self) -> list[str]:
        out = self.tally.lines("JSON API as published vs vllm-compat's api renders")
        out.append(
            f"  published but not rendered: {len(self.not_rendered)}; rendered but not "
            f"published: {len(self.not_published)}; Mooncake compositions (not "
            f"synthesized): {self.mooncake}; on unjudged brands: {self.other_brands}"
        )
        return out


def compare_api(repo: Any, renders: Iterable[Any], published: Sequence[Published]) -> ApiReport:
    """vllm-compat's api renders against the API's files, both ways."""
    base_to_recipe = published_keys(repo)
    mine = {(r.recipe, r.variant, r.profile, r.strategy): r for r in renders if r.source == "api"}
    tally = Tally()
    seen: set[tuple[str, str, str, str]] = set()
    not_rendered: list[str] = []
    mooncake = other = 0
    for p in published:
        if p.deploy_type == "kv_store_lb":
            mooncake += 1
            continue
        profile = repo.hardware.get(p.hardware)
        if profile is None or profile.platform is None:
            other += 1
            continue
        key = (base_to_recipe.get(p.base, p.base), p.variant, p.hardware, p.strategy)
        if key in seen:
            continue  # a default variant published under its parent and its own id
        seen.add(key)
        r = mine.get(key)
        label = f"api {' '.join(key)}"
        if r is None:
            not_rendered.append(label)
            tally.add("api", label, p.argvs, None)
            continue
        tally.add("api", label, p.argvs, r.argvs)
    not_published = [f"api {' '.join(k)}" for k in mine if k not in seen]
    return ApiReport(tally, not_rendered, not_published, mooncake, other)


# --- a built database against the site --------------------------------------------------


JUDGED = "judged"  # the `version` that reads each recipe's rows at the release it is judged at


def _db_rows(
    db: Path, version: str | None
) -> tuple[dict[tuple[str, ...], list[dict[str, Any]]], str]:
    """The database's verdict rows by selection. `version` None is the lowest judged release;
    JUDGED is every recipe at the release it was judged at (a pinned build: each at its pin)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    con.row_factory = sqlite3.Row
    cols = {r[1] for r in con.execute("PRAGMA table_info(verdict)")}
    if version is None:
        version = con.execute("SELECT min(vllm_version) FROM verdict WHERE judged = 1").fetchone()[
            0
        ]
    source = "v.source" if "source" in cols else "''"
    fix_kind = "(SELECT c.fix_kind FROM cause c WHERE c.id = v.cause_id)" if "cause_id" in cols else "''"
    where = "v.judged = 1" if version == JUDGED else "v.vllm_version = ?"
    sql = (
        "SELECT v.recipe, v.variant, v.strategy, v.feature, v.mode, v.platform, v.hardware, "
        f"{source} AS source, v.vllm_version, v.status, v.gated, {fix_kind} AS fix_kind, "
        "COALESCE(NULLIF(v.argv, ''), c.argv) AS argv FROM verdict v "
        f"LEFT JOIN command c ON c.id = v.command_id WHERE {where}"
    )
    rows: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for r in con.execute(sql, () if version == JUDGED else (version,)):
        key = (r["recipe"], r["variant"], r["strategy"], r["feature"], r["mode"], r["platform"])
        argvs = tuple((role, tuple(argv)) for role, argv in json.loads(r["argv"] or "[]"))
        rows.setdefault(key, []).append(
            {"hardware": r["hardware"], "source": r["source"], "argvs": argvs,
             "vllm_version": r["vllm_version"], "status": r["status"], "gated": bool(r["gated"]),
             "fix_kind": r["fix_kind"] or ""}
        )
    con.close()
    return rows, version


def _db_row(
    rows: dict[tuple[str, ...], list[dict[str, Any]]],
    key: tuple[str, ...],
    profile: str,
    source: str,
) -> dict[str, Any] | None:
    candidates = [r for r in rows.get(key, ()) if not r["source"] or source in r["source"]]
    for r in candidates:
        if r["hardware"] == profile:
            return r
    for r in candidates:
        if r["hardware"] == "":
            return r
    return None


@dataclass
class DbReport:
    """A database's verdicts on the commands the site emits."""

    tally: Tally
    version: str
    # Site commands the database judges blocked under a cause that has a fix, or holds as
    # gated (the site should not emit them): each a label and why.
    fixable_blocked: list[str] = field(default_factory=list)


def _judge(report: DbReport, label: str, row: dict[str, Any] | None) -> None:
    if row is None:
        return  # the tally says it was not judged
    if row["gated"]:
        report.fixable_blocked.append(f"{label}: emitted by the site, gated in the database")
    elif row["status"] == "blocked" and row["fix_kind"] not in ("", "none"):
        report.fixable_blocked.append(
            f"{label}: blocked at {row['vllm_version']}, fix {row['fix_kind']} not applied"
        )


def compare_db(
    repo: Any,
    db: Path,
    version: str | None,
    ui_site: Sequence[tuple[Any, Argvs]],
    published: Sequence[Published],
) -> DbReport:
    """What a database judges against what the site emits, per site command."""
    rows, version = _db_rows(db, version)
    base_to_recipe = published_keys(repo)
    report = DbReport(Tally(), version)
    for r, argvs in ui_site:
        key = (r.recipe, r.variant, r.strategy, r.feature, r.mode, r.platform)
        label = f"ui {' '.join(key)} {r.profile}"
        row = _db_row(rows, key, r.profile, "ui")
        report.tally.add("ui", label, argvs, row and row["argvs"])
        _judge(report, label, row)
    seen: set[tuple[str, ...]] = set()
    for p in published:
        profile = repo.hardware.get(p.hardware)
        if p.deploy_type == "kv_store_lb" or profile is None or profile.platform is None:
            continue
        key = (base_to_recipe.get(p.base, p.base), p.variant, p.strategy, "", "", profile.platform)
        if key + (p.hardware,) in seen:
            continue
        seen.add(key + (p.hardware,))
        label = f"api {' '.join(key)} {p.hardware}"
        row = _db_row(rows, key, p.hardware, "api")
        report.tally.add(
            "api",
            label,
            p.argvs,
            row and row["argvs"],
            covers=True,  # an api,ui row also holds the builder's PD followers
        )
        _judge(report, label, row)
    return report


def site_commands(
    recipes: Path, modules: Path
) -> tuple[Any, list[tuple[Any, Argvs]], list[Published]]:
    """What the site emits for a recipes checkout: the builder's commands at default sizes
    (the ungated selections, replayed by command-synthesis.js) and the JSON API's."""
    from compat.recipes import load_repo
    from compat.recipes.enumerate import iter_renders

    repo = load_repo(recipes)
    renders = [r for r in iter_renders(repo) if r.sizing is not None and r.source == "ui" and not r.gated]
    replayed = replay(recipes, renders, modules)
    with tempfile.TemporaryDirectory() as scratch:
        published = publish_api(recipes, modules, Path(scratch))
    ui_site = [(r, js) for r, js in zip(renders, replayed, strict=True) if isinstance(js, tuple)]
    return repo, ui_site, published


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recipes", type=Path)
    parser.add_argument("--db", type=Path, help="compare this database's commands instead")
    parser.add_argument(
        "--vllm",
        help=f"release whose verdict rows to read (default: lowest judged; {JUDGED!r}: each "
        "recipe at the release it was judged at, as a pinned build)",
    )
    parser.add_argument("--show", type=int, default=10, help="differences to print per report")
    args = parser.parse_args(argv)
    from compat.recipes import load_repo
    from compat.recipes.enumerate import iter_renders

    try:
        modules = js_yaml_modules()
    except Unavailable as exc:
        print(f"cannot compare: {exc}", file=sys.stderr)
        return 2
    repo = load_repo(args.recipes)
    renders = [r for r in iter_renders(repo) if r.sizing is not None]
    replayed = replay(args.recipes, renders, modules)
    with tempfile.TemporaryDirectory() as scratch:
        published = publish_api(args.recipes, modules, Path(scratch))
    if args.db is None:
        same_inputs = compare_replay(renders, replayed)
        api = compare_api(repo, renders, published)
        reports = [
            same_inputs.lines("vllm-compat renders vs command-synthesis.js on the same inputs"),
            api.lines(),
        ]
        diffs = [
            same_inputs.differences,
            api.tally.differences + api.not_rendered + api.not_published,
        ]
    else:
        ui_site = [
            (r, js)
            for r, js in zip(renders, replayed, strict=True)
            if r.source == "ui" and not r.gated and isinstance(js, tuple)
        ]
        report = compare_db(repo, args.db, args.vllm, ui_site, published)
        reports = [
            report.tally.lines(f"{args.db} (vLLM {report.version} rows) vs the commands the site emits"),
            [f"  {len(report.fixable_blocked)} site commands judged blocked under a cause with a fix"
             " (or gated in the database)"],
        ]
        diffs = [report.tally.differences, report.fixable_blocked]
    for lines, found in zip(reports, diffs, strict=True):
        print("\n".join(lines))
        for line in found[: args.show]:
            print(f"    {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
