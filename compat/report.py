"""Readers of the verdict rows: the check report and explain. No decisions are made here."""

from __future__ import annotations

import difflib
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from compat.chains import shown_steps
from compat.errors import UserError
from compat.recipes.synthesis import command_line
from compat.store import open_store
from compat.vocab import release_key


def _rows(db_path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    import sqlite3

    with open_store(db_path) as db:
        try:
            return db.dicts(sql, params)
        except sqlite3.Error as exc:
            raise UserError(
                f"cannot read verdicts: {str(exc).splitlines()[0]}", where=str(db_path)
            ) from None


ROW_KEYS = (
    "vllm_version",
    "platform",
    "hardware",
    "variant",
    "strategy",
    "feature",
    "mode",
    "message",
    "reason",
    "evidence",
    "works_from",
    "cause_kind",
    "cause",
)


def findings(db_path: Path) -> dict[str, Any]:
    """Blocked, ungated combinations at the judged releases: grouped by (recipe, cause), with fixes.

    A database without verdicts (a scan only, or an empty build) is a UserError: a check
    that passes on nothing would tell CI everything is fine.
    """
    judged = _rows(db_path, "select count(*) n from verdict where judged = 1")[0]["n"]
    if not judged:
        raise UserError(
            "no verdicts in this database (it holds only a scan?); run `compat build "
            "--recipes DIR` first",
            where=str(db_path),
        )
    rows = _rows(
        db_path,
        "select * from verdict where judged = 1 and status = 'blocked' and gated = 0 "
        "order by recipe, strategy, feature, mode, variant, platform, hardware",
    )
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[r["recipe"]].append({k: r[k] for k in ROW_KEYS})
    totals = _rows(
        db_path, "select status, count(*) n from verdict where judged = 1 group by status"
    )
    unknown = _rows(
        db_path,
        "select count(*) n from verdict where judged = 1 and status = 'unknown' and gated = 0",
    )[0]["n"]
    return {
        "blocked": len(rows),
        "recipes": dict(groups),
        "causes": causes(db_path),
        "reviews": reviews(db_path),
        "unknown": unknown,
        "totals": {t["status"]: t["n"] for t in totals},
    }


def reviews(db_path: Path) -> list[dict[str, Any]]:
    """Gates whose hidden commands start at the pin (ungate proposals): warnings, not findings."""
    return _rows(
        db_path,
        "select recipe, label, field, line, finding, works_from, fix_kind, fix, fix_why "
        "from cause where fix_kind = 'ungate' order by recipe, line",
    )


def review_line(r: dict[str, Any]) -> str:
    """One warning line per ungate proposal; `compat fix --apply DIR --only ungate` writes it."""
    return (
        f"{r['recipe']}:{r['line']}: warning: {r['label']} {r['finding']}. "
        f"proposal (ungate): {r['fix']}; {r['fix_why']}"
    )


def causes(db_path: Path) -> list[dict[str, Any]]:
    """One entry per (recipe, cause) blocking an ungated judged command, with counts and its rows."""
    linked = _rows(
        db_path,
        """
        select c.*, v.vllm_version, v.platform, v.hardware, v.variant, v.strategy, v.feature, v.mode,
               v.message, v.reason, v.evidence, v.works_from as row_works_from, m.argv as command_argv
        from cause c join verdict_cause vc on vc.cause_id = c.id
        join verdict v on v.id = vc.verdict_id left join command m on m.id = v.command_id
        where v.judged = 1 and v.status = 'blocked' and v.gated = 0
        order by c.recipe, c.line, c.id, v.strategy, v.feature, v.mode, v.variant, v.hardware""",
    )
    out: dict[int, dict[str, Any]] = {}
    for r in linked:
        entry = out.get(r["id"])
        if entry is None:
            entry = out[r["id"]] = {
                k: r[k]
                for k in (
                    "recipe",
                    "kind",
                    "label",
                    "element",
                    "mode",
                    "field",
                    "line",
                    "finding",
                    "fix_kind",
                    "fix",
                    "fix_why",
                    "works_from",
                    "clear_from",
                )
                if k in r
            }
            entry.update(
                message=r["message"],
                evidence=r["evidence"],
                rows=[],
                command=[
                    [role, command_line(argv)]
                    for role, argv in json.loads(r["command_argv"] or "[]")
                ],
            )
        entry["rows"].append(
            {k: r[k] for k in ROW_KEYS if k in r} | {"works_from": r["row_works_from"]}
        )
    for entry in out.values():
        rows = entry["rows"]
        entry["counts"] = {
            key: len({x[field] for x in rows})
            for key, field in (
                ("strategies", "strategy"),
                ("variants", "variant"),
                ("hardware", "hardware"),
                ("releases", "vllm_version"),
            )
        }
        entry["strategies"] = sorted({x["strategy"] for x in rows})
        entry["releases"] = sorted({x["vllm_version"] for x in rows}, key=release_key)
    return list(out.values())


def _plural(n: int, word: str) -> str:
    return (
        f"{n} {word}"
        if n == 1
        else f"{n} {word}s"
        if not word.endswith("y")
        else f"{n} {word[:-1]}ies"
    )


def cause_line(c: dict[str, Any]) -> str:
    """One line per (recipe, cause, fix): where, what, how many, and the fix or why there is none."""
    n = c["counts"]
    scope = (
        f"{_plural(len(c['rows']), 'command')} ({_plural(n['strategies'], 'strategy')}: "
        f"{', '.join(c['strategies'])}; {_plural(n['variants'], 'variant')}; "
        f"{n['hardware']} hardware; vLLM {', '.join(c['releases'])})"
    )
    fix = (
        f"fix ({c['fix_kind']}): {c['fix']}"
        if c["fix_kind"] not in ("", "none")
        else f"no automatic fix: {c['fix_why'] or 'not planned'}"
    )
    works = (
        f"; works from {c['works_from']}"
        if c["works_from"]
        else f"; not known to fail from {c['clear_from']} (unknown there)"
        if c.get("clear_from")
        else ""
    )
    return f"{c['recipe']}:{c['line']}: {c['label']} blocks {scope}: {_one(c['finding'])}{works}. {fix}"


def _one(text: str, limit: int = 220) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_text(f: dict[str, Any], verbose: bool = False) -> str:
    lines = []
    for c in f["causes"]:
        lines.append(cause_line(c))
        if verbose:
            for role, command in c["command"]:
                lines.append(f"    e.g.{' ' + role if role else ''}: {command}")
            for r in c["rows"]:
                feat = r["feature"] + (f":{r['mode']}" if r["mode"] else "") or "base command"
                lines.append(
                    f"    vllm {r['vllm_version']} {r['platform']}/{r['hardware'] or 'any'} "
                    f"{r['strategy']} {feat} variant {r['variant']}"
                )
    lines += [review_line(r) for r in f.get("reviews", [])]
    t = f["totals"]
    fixed = sum(len(c["rows"]) for c in f["causes"] if c["fix_kind"] not in ("", "none"))
    reviews = len(f.get("reviews", []))
    lines.append(
        f"{f['blocked']} blocked ungated rows in {len(f['recipes'])} recipes, {len(f['causes'])} causes"
        f" ({sum(c['fix_kind'] not in ('', 'none') for c in f['causes'])} with a fix, covering "
        f"{fixed} row-causes); {reviews} gate(s) to review; all rows: "
        f"{', '.join(f'{k} {v}' for k, v in sorted(t.items()))}"
    )
    return "\n".join(lines) + "\n"


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(text).replace(",", "%2C").replace(":", "%3A")


def render_github(f: dict[str, Any], prefix: str = "") -> str:
    """GitHub workflow annotations, one per (recipe, cause), at the recipe line of the culprit;
    a `::warning` per gate to review. `prefix`: the recipes root relative to the repository."""
    out = []
    for c in f["causes"]:
        message = _data(cause_line(c).split(": ", 1)[1])
        title = _prop(f"vllm-compat: {c['label']}")
        out.append(
            f"::error file={_prop(prefix + c['recipe'])},line={c['line']},title={title}::{message}"
        )
    for r in f.get("reviews", []):
        message = _data(review_line(r).split(": warning: ", 1)[1])
        title = _prop(f"vllm-compat: {r['label']} may be stale")
        out.append(
            f"::warning file={_prop(prefix + r['recipe'])},line={r['line']},title={title}::{message}"
        )
    return "\n".join(out) + ("\n" if out else "")


def explain(db_path: Path, model: str, strategy: str, feature: str, vllm: str | None) -> str:
    """The causal chain behind a verdict, for every distinct outcome, with where it holds."""
    feat, _, _mode = feature.partition(":")
    out: list[str] = []
    for m, rows in select(db_path, model, strategy, feature, vllm):
        out += _explain_rows(rows, feat, m)
    return "\n".join(out)


def select(
    db_path: Path, model: str, strategy: str, feature: str, vllm: str | None
) -> list[tuple[str, list[dict[str, Any]]]]:
    """(mode, verdict rows) of one recipe x strategy x feature[:mode], at `vllm` or the judged
    release, each row with its command and cause; a modal feature without a mode gives each mode.

    Mistyped inputs get suggestions (close model ids, strategies, features and modes, the
    releases the database holds).
    """
    feat, _, mode = feature.partition(":")
    recipe_rows = _rows(db_path, "select distinct recipe, model_id from verdict")
    chosen = _pick_recipe(model, recipe_rows)
    releases = sorted(
        {r["vllm_version"] for r in _rows(db_path, "select distinct vllm_version from verdict")},
        key=release_key,
    )
    if vllm and vllm not in releases:
        raise UserError(
            f"no verdicts at vLLM {vllm}; this database holds {', '.join(releases) or 'none'}",
            where="--vllm",
        )
    if chosen is None:
        names = sorted({r["model_id"] for r in recipe_rows} | {r["recipe"] for r in recipe_rows})
        close = difflib.get_close_matches(model, names, n=3, cutoff=0.5)
        raise UserError(
            f"no recipe or model {model!r}"
            + (f"; did you mean {', '.join(close)}?" if close else ""),
            where="compat explain",
        )
    combos = _rows(
        db_path, "select distinct strategy, feature, mode from verdict where recipe = ?", (chosen,)
    )
    modes = _check_names(chosen, combos, strategy, feat, mode)
    out = []
    for m in [mode] if mode else modes:  # a modal feature without a mode: every mode
        sql = (
            "select v.*, c.argv as command_argv, k.label as cause_label, k.field as cause_field, "
            "k.line as cause_line, k.fix_kind, k.fix, k.fix_why from verdict v "
            "left join command c on c.id = v.command_id left join cause k on k.id = v.cause_id "
            "where v.recipe = ? and v.strategy = ? and v.feature = ? and v.mode = ?"
        )
        args: tuple = (chosen, strategy, feat, m)
        if vllm:
            sql += " and v.vllm_version = ?"
            args += (vllm,)
        else:
            sql += " and v.judged = 1"
        rows = _rows(
            db_path, sql + " order by v.vllm_version, v.variant, v.platform, v.hardware", args
        )
        if rows:
            out.append((m, rows))
    if not out:
        raise UserError(
            f"no verdict for {chosen} {strategy} {feature or '(base)'}"
            f"{' at ' + vllm if vllm else ''}; releases: {', '.join(releases)}",
            where="compat explain",
        )
    return out


def _check_names(
    chosen: str, combos: list[dict[str, Any]], strategy: str, feat: str, mode: str
) -> list[str]:
    """The modes of `feat` on `strategy`; a UserError with suggestions for a name not there."""
    strategies = sorted({c["strategy"] for c in combos})
    if strategy not in strategies:
        close = difflib.get_close_matches(strategy, strategies, n=3, cutoff=0.4)
        raise UserError(
            f"{chosen} offers no strategy {strategy!r}; it has {', '.join(strategies)}"
            + (f" (did you mean {', '.join(close)}?)" if close else ""),
            where="compat explain",
        )
    features = sorted({c["feature"] for c in combos if c["strategy"] == strategy and c["feature"]})
    if feat and feat not in features:
        close = difflib.get_close_matches(feat, features, n=3, cutoff=0.4)
        raise UserError(
            f"{chosen} has no feature {feat!r} on {strategy}; it has {', '.join(features) or 'none'}"
            + (f" (did you mean {', '.join(close)}?)" if close else ""),
            where="compat explain",
        )
    modes = sorted(
        {c["mode"] for c in combos if c["strategy"] == strategy and c["feature"] == feat}
    )
    if mode and mode not in modes:
        close = difflib.get_close_matches(mode, modes, n=3, cutoff=0.4)
        raise UserError(
            f"{feat} has no mode {mode!r} on {strategy}; its modes are {', '.join(modes)}"
            + (f" (did you mean {', '.join(close)}?)" if close else ""),
            where="compat explain",
        )
    return modes


def _pick_recipe(model: str, rows: list[dict[str, Any]]) -> str | None:
    for r in rows:
        if model in (r["recipe"], r["model_id"]):
            return r["recipe"]
    name = model.split("/")[-1]
    hits = sorted({r["recipe"] for r in rows if r["recipe"].endswith(f"/{name}.yaml")})
    return hits[0] if len(hits) == 1 else None


def _explain_rows(rows: list[dict[str, Any]], feat: str, mode: str) -> list[str]:
    """One block per distinct (release, status, chain), naming every platform, hardware and variant."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["vllm_version"], r["status"], r["chain"]), []).append(r)
    out = []
    for (version, status, chain), rs in groups.items():
        r = rs[0]
        what = f"{feat}:{mode}" if mode else feat or "base command"
        out.append(
            f"{r['model_id']} ({r['recipe']}), {r['strategy']}, {what}, vLLM {version}: {status.upper()}"
        )
        out.append(f"  holds on {where(rs)}")
        for i, step in enumerate(shown_steps(chain), 1):
            out.append(f"  {i}. {step}")
        if r["message"]:
            out.append(f"  vLLM raises: {r['message']}")
        if r["evidence"]:
            out.append(f"  evidence (vLLM {version}): {r['evidence']}")
        if r.get("cause_label"):
            at = f" ({r['cause_field']}, line {r['cause_line']})" if r.get("cause_field") else ""
            out.append(f"  cause: {r['cause_label']}{at}")
            if r.get("fix_kind") and r["fix_kind"] != "none":
                out.append(
                    f"  fix ({r['fix_kind']}): {r['fix']} (`compat fix --apply DIR` writes it)"
                )
            elif r.get("fix_kind") == "none":
                out.append(f"  no automatic fix: {r['fix_why']}")
        if r["works_from"]:
            out.append(
                f"  works from vLLM {r['works_from']} (first release on the index that starts it)"
            )
        if r["gated"]:
            out.append("  (the recipe already gates this feature off this strategy)")
        for role, argv in json.loads(r.get("command_argv") or "[]"):
            label = f"{role} " if role else ""
            out.append(f"  command ({label}variant {r['variant']}): {command_line(argv)}")
        out.append("")
    return out


def where(rows: list[dict[str, Any]]) -> str:
    """'cuda: b200, h100 (variants default, fp8); rocm: mi355x (variant default)'."""
    by_platform: dict[str, tuple[set[str], set[str]]] = {}
    for r in rows:
        hw, variants = by_platform.setdefault(r["platform"], (set(), set()))
        hw.update(p for p in (r.get("profiles") or r["hardware"] or "").split(",") if p)
        variants.add(r["variant"] or "default")
    parts = []
    for platform, (hw, variants) in sorted(by_platform.items()):
        vs = sorted(variants)
        parts.append(
            f"{platform}: {', '.join(sorted(hw)) or 'every offered profile'} "
            f"({'variant' if len(vs) == 1 else 'variants'} {', '.join(vs)})"
        )
    return "; ".join(parts)
