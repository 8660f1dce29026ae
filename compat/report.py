"""Readers of the verdict rows: the check report and explain. No decisions are made here."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from compat import db as dbm
from compat.errors import UserError


def _rows(db_path: Path, sql: str, params: tuple = ()) -> list[dict[str, Any]]:
    engine = dbm.reading(db_path)
    try:
        with engine.connect() as conn:
            return dbm.dict_rows(conn, sql, params)
    except Exception as exc:
        raise UserError(f"cannot read verdicts: {str(getattr(exc, 'orig', exc)).splitlines()[0]}",
                        where=str(db_path)) from None


def findings(db_path: Path) -> dict[str, Any]:
    """Blocked, ungated combinations at the judged releases, grouped by recipe.

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
        groups[r["recipe"]].append({k: r[k] for k in (
            "vllm_version", "platform", "hardware", "variant", "strategy", "feature", "mode",
            "message", "reason", "evidence", "works_from")})
    totals = _rows(db_path, "select status, count(*) n from verdict where judged = 1 group by status")
    return {"blocked": len(rows), "recipes": dict(groups),
            "totals": {t["status"]: t["n"] for t in totals}}


def render_text(f: dict[str, Any]) -> str:
    lines = []
    for recipe, items in f["recipes"].items():
        lines.append(f"{recipe}: {len(items)} blocked")
        seen = set()
        for i in items:
            key = (i["vllm_version"], i["strategy"], i["feature"], i["mode"], i["message"])
            if key in seen:
                continue
            seen.add(key)
            feat = i["feature"] + (f":{i['mode']}" if i["mode"] else "") or "(base command)"
            wf = f"; works from {i['works_from']}" if i["works_from"] else ""
            lines.append(f"  vllm {i['vllm_version']} {i['strategy']} {feat}: {i['reason']}{wf}")
            if i["message"]:
                lines.append(f"    vLLM says: {i['message']}")
            if i["evidence"]:
                lines.append(f"    evidence: {i['evidence']}")
    t = f["totals"]
    lines.append(f"{f['blocked']} blocked ungated rows in {len(f['recipes'])} recipes "
                 f"(all rows: {', '.join(f'{k} {v}' for k, v in sorted(t.items()))})")
    return "\n".join(lines) + "\n"


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
