"""Readers of the verdict rows: the check report and explain. No decisions are made here."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from compat import db as dbm
from compat.errors import UserError
from compat.vocab import release_key


def _rows(db_path: Path, sql: str, params: tuple = ()) -> list[dict[str, Any]]:
    engine = dbm.reading(db_path)
    try:
        with engine.connect() as conn:
            return dbm.dict_rows(conn, sql, params)
    except Exception as exc:
        raise UserError(f"cannot read verdicts: {str(getattr(exc, 'orig', exc)).splitlines()[0]}",
                        where=str(db_path)) from None


ROW_KEYS = ("vllm_version", "platform", "hardware", "variant", "strategy", "feature", "mode",
            "message", "reason", "evidence", "works_from", "cause_kind", "cause")


def findings(db_path: Path) -> dict[str, Any]:
    """Blocked, ungated combinations at the judged releases: grouped by (recipe, cause), with fixes.

    A database without verdicts (a scan only, or an empty build) is a UserError: a check
    that passes on nothing would tell CI everything is fine.
    """
    judged = _rows(db_path, "select count(*) n from verdict where judged = 1")[0]["n"]
    if not judged:
        raise UserError("no verdicts in this database (it holds only a scan?); run `compat build "
                        "--recipes DIR` first", where=str(db_path))
    rows = _rows(db_path, "select * from verdict where judged = 1 and status = 'blocked' and gated = 0 "
                          "order by recipe, strategy, feature, mode, variant, platform, hardware")
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[r["recipe"]].append({k: r[k] for k in ROW_KEYS})
    totals = _rows(db_path, "select status, count(*) n from verdict where judged = 1 group by status")
    return {"blocked": len(rows), "recipes": dict(groups), "causes": _causes(db_path),
            "totals": {t["status"]: t["n"] for t in totals}}


def _causes(db_path: Path) -> list[dict[str, Any]]:
    """One entry per (recipe, cause) blocking an ungated judged command, with counts and its rows."""
    linked = _rows(db_path, """
        select c.*, v.vllm_version, v.platform, v.hardware, v.variant, v.strategy, v.feature, v.mode,
               v.message, v.reason, v.evidence, v.works_from as row_works_from
        from cause c join verdict_cause vc on vc.cause_id = c.id
        join verdict v on v.id = vc.verdict_id
        where v.judged = 1 and v.status = 'blocked' and v.gated = 0
        order by c.recipe, c.line, c.id, v.strategy, v.feature, v.mode, v.variant, v.hardware""")
    out: dict[int, dict[str, Any]] = {}
    for r in linked:
        entry = out.get(r["id"])
        if entry is None:
            entry = out[r["id"]] = {k: r[k] for k in (
                "recipe", "kind", "label", "element", "mode", "field", "line", "finding", "fix_kind",
                "fix", "fix_why", "works_from")}
            entry.update(message=r["message"], evidence=r["evidence"], rows=[])
        entry["rows"].append({k: r[k] for k in ROW_KEYS if k in r} | {"works_from": r["row_works_from"]})
    for entry in out.values():
        rows = entry["rows"]
        entry["counts"] = {key: len({x[field] for x in rows}) for key, field in (
            ("strategies", "strategy"), ("variants", "variant"), ("hardware", "hardware"),
            ("releases", "vllm_version"))}
        entry["strategies"] = sorted({x["strategy"] for x in rows})
        entry["releases"] = sorted({x["vllm_version"] for x in rows}, key=release_key)
    return list(out.values())


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s" if not word.endswith("y") else f"{n} {word[:-1]}ies"


def cause_line(c: dict[str, Any]) -> str:
    """One line per (recipe, cause, fix): where, what, how many, and the fix or why there is none."""
    n = c["counts"]
    scope = (f"{_plural(len(c['rows']), 'command')} ({_plural(n['strategies'], 'strategy')}: "
             f"{', '.join(c['strategies'])}; {_plural(n['variants'], 'variant')}; "
             f"{n['hardware']} hardware; vLLM {', '.join(c['releases'])})")
    fix = (f"fix ({c['fix_kind']}): {c['fix']}" if c["fix_kind"] not in ("", "none")
           else f"no automatic fix: {c['fix_why'] or 'not planned'}")
    works = f"; works from {c['works_from']}" if c["works_from"] else ""
    return f"{c['recipe']}:{c['line']}: {c['label']} blocks {scope}: {_one(c['finding'])}{works}. {fix}"


def _one(text: str, limit: int = 220) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_text(f: dict[str, Any], verbose: bool = False) -> str:
    lines = []
    for c in f["causes"]:
        lines.append(cause_line(c))
        if verbose:
            for r in c["rows"]:
                feat = r["feature"] + (f":{r['mode']}" if r["mode"] else "") or "base command"
                lines.append(f"    vllm {r['vllm_version']} {r['platform']}/{r['hardware'] or 'any'} "
                             f"{r['strategy']} {feat} variant {r['variant']}")
    t = f["totals"]
    fixed = sum(len(c["rows"]) for c in f["causes"] if c["fix_kind"] not in ("", "none"))
    lines.append(f"{f['blocked']} blocked ungated rows in {len(f['recipes'])} recipes, {len(f['causes'])} causes"
                 f" ({sum(c['fix_kind'] not in ('', 'none') for c in f['causes'])} with a fix, covering "
                 f"{fixed} row-causes); all rows: {', '.join(f'{k} {v}' for k, v in sorted(t.items()))}")
    return "\n".join(lines) + "\n"


def render_github(f: dict[str, Any]) -> str:
    """GitHub workflow annotations, one per (recipe, cause), at the recipe line of the culprit."""
    out = []
    for c in f["causes"]:
        message = cause_line(c).split(": ", 1)[1].replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
        title = f"vllm-compat: {c['label']}".replace(",", "%2C").replace(":", "%3A")
        out.append(f"::error file={c['recipe']},line={c['line']},title={title}::{message}")
    return "\n".join(out) + ("\n" if out else "")


def explain(db_path: Path, model: str, strategy: str, feature: str, vllm: str | None) -> str:
    feat, _, mode = feature.partition(":")
    where = "(model_id = ? or recipe = ? or recipe like ?) and strategy = ? and feature = ? and mode = ?"
    params: tuple = (model, model, f"%/{model.split('/')[-1]}.yaml", strategy, feat, mode)
    if vllm:
        where += " and vllm_version = ?"
        params += (vllm,)
    else:
        where += " and judged = 1"
    rows = _rows(db_path, f"select * from verdict where {where} order by vllm_version, variant, platform, hardware",
                 params)
    if not rows:
        raise UserError(f"no verdict for {model} {strategy} {feature or '(base)'}"
                        f"{' at ' + vllm if vllm else ''}", where="compat explain")
    out = []
    seen = set()
    for r in rows:
        key = (r["vllm_version"], r["status"], r["chain"])
        if key in seen:
            continue
        seen.add(key)
        label = f"{r['model_id']} ({r['recipe']}), variant {r['variant']}, {r['strategy']}, " \
                f"{feat + (':' + mode if mode else '') if feat else 'base command'}, vLLM {r['vllm_version']} " \
                f"on {r['platform']}{' / ' + r['hardware'] if r['hardware'] else ''}"
        out.append(f"{label}: {r['status'].upper()}")
        for i, step in enumerate(json.loads(r["chain"] or "[]"), 1):
            out.append(f"  {i}. {step}")
        if r["message"]:
            out.append(f"  vLLM raises: {r['message']}")
        if r["evidence"]:
            out.append(f"  evidence (vLLM {r['vllm_version']}): {r['evidence']}")
        if r["works_from"]:
            out.append(f"  works from vLLM {r['works_from']}")
        if r["gated"]:
            out.append("  (the recipe already gates this feature off this strategy)")
        out.append("")
    return "\n".join(out)
