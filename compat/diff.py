"""`compat diff A B`: what changed between two scanned releases, grouped for one screen.

Everything is a set difference over fact rows already in the database, so the diff
shows exactly what the verdicts were computed from.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from compat.errors import UserError
from compat.store import Store, open_store
from compat.vllm.capabilities import FLAGS as CAP_FLAGS


def _rows(db: Store, sql: str, params: tuple[Any, ...]) -> list[dict[str, Any]]:
    return db.dicts(sql, params)


def diff(db_path: Path, a: str, b: str) -> dict[str, Any]:
    with open_store(db_path) as conn:
        have = {r["version"] for r in _rows(conn, "select version from release", ())}
        for v in (a, b):
            if v not in have:
                raise UserError(
                    f"release {v} is not in the database (scanned: {', '.join(sorted(have)) or 'none'})",
                    where=str(db_path),
                )

        def both(sql: str) -> tuple[list[dict], list[dict]]:
            return _rows(conn, sql, (a,)), _rows(conn, sql, (b,))

        out: dict[str, Any] = {"from": a, "to": b}
        out["capabilities"] = _capability_changes(
            *both("select * from arch_capability where vllm_version = ?")
        )
        out["drafts"] = _draft_changes(*both("select * from draft_mapping where vllm_version = ?"))
        out["draft_parallel"] = _draft_parallel_changes(
            *both("select * from draft_parallel where vllm_version = ?")
        )
        sa, sb = both("select method from spec_method where vllm_version = ?")
        out["spec_methods"] = _setdiff({r["method"] for r in sa}, {r["method"] for r in sb})
        ga, gb = both("select rule_id, status from gate_status where vllm_version = ?")
        gma = {r["rule_id"]: r["status"] for r in ga}
        gmb = {r["rule_id"]: r["status"] for r in gb}
        out["gates"] = [
            {"rule": g, "from": gma.get(g), "to": gmb.get(g)}
            for g in sorted(gma.keys() | gmb.keys())
            if gma.get(g) != gmb.get(g)
        ]
        fa, fb = both(
            "select flag from cli_flag where vllm_version = ? and kind in ('long', 'short')"
        )
        out["flags"] = _setdiff({r["flag"] for r in fa}, {r["flag"] for r in fb})
        for kind in ("tool", "reasoning"):
            xa, xb = both(
                f"select name from parser_name where vllm_version = ? and kind = '{kind}'"
            )
            out[f"{kind}_parsers"] = _setdiff({r["name"] for r in xa}, {r["name"] for r in xb})
        out["messages"] = _message_changes(
            *both("select template, file, line from raise_message where vllm_version = ?")
        )
        out["verdicts"] = _verdict_changes(conn, a, b)
    return out


def _capability_changes(ca: list[dict], cb: list[dict]) -> dict[str, Any]:
    """Archs added and removed, and per (platform, arch) the flags that flipped or the class
    that moved."""
    ia = {(r["platform"], r["arch"]): r for r in ca}
    ib = {(r["platform"], r["arch"]): r for r in cb}
    changed = []
    for key in sorted(ia.keys() & ib.keys()):
        ra, rb = ia[key], ib[key]
        flips = {f: [ra[f], rb[f]] for f in CAP_FLAGS if ra[f] != rb[f]}
        moved = ra["class_path"] != rb["class_path"]
        if flips or moved:
            changed.append(
                {
                    "platform": key[0],
                    "arch": key[1],
                    "flags": flips,
                    "class": [ra["class_path"], rb["class_path"]] if moved else None,
                    "evidence": f"{rb['file']}:{rb['line']}",
                }
            )
    return {
        "added": sorted({k[1] for k in ib.keys() - ia.keys()}),
        "removed": sorted({k[1] for k in ia.keys() - ib.keys()}),
        "changed": changed,
    }


def _draft_changes(da: list[dict], db_: list[dict]) -> list[dict[str, Any]]:
    """Draft mappings that appeared, went, or changed their draft or its PP support."""
    ka = {(r["platform"], r["target_model_type"], r["target_arch"], r["method"]): r for r in da}
    kb = {(r["platform"], r["target_model_type"], r["target_arch"], r["method"]): r for r in db_}
    drafts = []
    for platform, model_type, target_arch, method in sorted(ka.keys() | kb.keys()):
        key4 = (platform, model_type, target_arch, method)
        before, after = ka.get(key4), kb.get(key4)
        fields = ("draft_arch", "draft_class", "draft_supports_pp", "draft_inherits_pp")
        if before is None or after is None or any(before[f] != after[f] for f in fields):
            drafts.append(
                {
                    "platform": platform,
                    "target": model_type if model_type not in ("", "unknown") else target_arch,
                    "method": method,
                    "from": {f: before[f] for f in fields} if before else None,
                    "to": {f: after[f] for f in fields} if after else None,
                }
            )
    return drafts


def _draft_parallel_changes(pa: list[dict], pb: list[dict]) -> list[dict[str, Any]]:
    """Methods whose draft PP or EP size comes from elsewhere now (or that appeared or went)."""
    ma = {r["method"]: r for r in pa}
    mb = {r["method"]: r for r in pb}
    return [
        {
            "method": m,
            "from": {"pp": ma[m]["pp_source"], "ep": ma[m]["ep_source"]} if m in ma else None,
            "to": {"pp": mb[m]["pp_source"], "ep": mb[m]["ep_source"]} if m in mb else None,
            "evidence": f"{mb[m]['file']}:{mb[m]['line']}" if m in mb else "",
        }
        for m in sorted(ma.keys() | mb.keys())
        if m not in ma
        or m not in mb
        or (ma[m]["pp_source"], ma[m]["ep_source"]) != (mb[m]["pp_source"], mb[m]["ep_source"])
    ]


def _message_changes(ra: list[dict], rb: list[dict]) -> dict[str, Any]:
    """Raise templates new in B (with where B first writes each) and gone from it."""
    ta = {r["template"] for r in ra}
    new = {}
    for r in rb:
        if r["template"] not in ta and r["template"] not in new:
            new[r["template"]] = f"{r['file']}:{r['line']}"
    tb = {r["template"] for r in rb}
    return {
        "new": [{"message": t, "at": w} for t, w in sorted(new.items())],
        "gone": sorted(ta - tb),
    }


def _setdiff(a: set[str], b: set[str]) -> dict[str, list[str]]:
    return {"added": sorted(b - a), "removed": sorted(a - b)}


def _verdict_changes(conn: Any, a: str, b: str) -> dict[str, Any]:
    key = "platform, hardware, recipe, variant, strategy, feature, mode, source"
    rows = _rows(
        conn,
        f"""
        select x.recipe, x.strategy, x.feature, x.mode, x.status as before, y.status as after,
               y.reason as reason, count(*) as n
        from verdict x join verdict y using ({key})
        where x.vllm_version = ? and y.vllm_version = ? and x.status <> y.status
        group by x.recipe, x.strategy, x.feature, x.mode, x.status, y.status
        order by x.recipe, x.strategy, x.feature, x.mode""",
        (a, b),
    )
    by_recipe: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_recipe[r.pop("recipe")].append(r)
    compared = _rows(
        conn,
        f"select count(*) n from verdict x join verdict y using ({key}) "
        "where x.vllm_version = ? and y.vllm_version = ?",
        (a, b),
    )[0]["n"]
    return {
        "compared": compared,
        "changed": sum(r["n"] for r in rows),
        "by_recipe": dict(by_recipe),
    }


def _listed(lines: list[str], items: list[Any], limit: int, line: Any, pad: str = "    ") -> None:
    """Append one line per item, at most `limit`, and say how many were left out."""
    for item in items[:limit]:
        lines.append(pad + line(item))
    if len(items) > limit:
        lines.append(f"{pad}... and {len(items) - limit} more (--format json lists all)")


def _pc(x: dict[str, str] | None) -> str:
    """A draft parallel config as words: where the draft's PP and EP sizes come from."""
    if x is None:
        return "method absent"
    words = {
        "target": "copied from the target",
        "one": "forced to 1",
        "target_config": "the target's own",
        "none": "no draft",
        "off": "off",
        "target_if_moe": "the target's when MoE",
        "unknown": "unknown",
    }
    return f"PP {words.get(x['pp'], x['pp'])}, EP {words.get(x['ep'], x['ep'])}"


def render_text(d: dict[str, Any], limit: int = 12) -> str:
    a, b = d["from"], d["to"]
    lines = [f"vLLM {a} -> {b}"]
    _verdict_lines(lines, d["verdicts"], limit)
    caps = d["capabilities"]
    lines.append(
        f"\nCapabilities: {len(caps['added'])} archs added, {len(caps['removed'])} removed, "
        f"{len(caps['changed'])} changed"
    )

    def cap_line(c: dict[str, Any]) -> str:
        parts = [f"{f} {x}->{y}" for f, (x, y) in c["flags"].items()]
        if c["class"]:
            parts.append(f"class {c['class'][0]} -> {c['class'][1]}")
        return f"{c['platform']} {c['arch']}: {', '.join(parts)}"

    _listed(lines, caps["changed"], limit, cap_line, pad="  ")
    _speculative_lines(lines, d, limit)
    lines.append(f"\nGates: {len(d['gates'])} changed")
    for g in d["gates"]:
        lines.append(f"  {g['rule']}: {g['from'] or 'absent'} -> {g['to'] or 'absent'}")
    lines.append(
        f"\nFlags {_fmt(d['flags'])}; tool parsers {_fmt(d['tool_parsers'])}; "
        f"reasoning parsers {_fmt(d['reasoning_parsers'])}"
    )
    m = d["messages"]
    lines.append(
        f"\nError messages (parallel/speculative keywords): {len(m['new'])} new, {len(m['gone'])} gone"
    )
    _listed(lines, m["new"], limit, lambda x: f"+ {x['message'][:110]} ({x['at']})", pad="  ")
    return "\n".join(lines) + "\n"


def _verdict_lines(lines: list[str], v: dict[str, Any], limit: int) -> None:
    """Regressions and fixes listed by recipe, the other transitions counted."""
    lines.append(f"\nVerdicts: {v['changed']} of {v['compared']} comparable rows changed status")
    if not v["compared"]:
        lines.append("  (build with --vllm for both releases to compare verdicts)")
    groups = {
        "now blocked (regressions)": lambda i: (
            i["after"] == "blocked" and i["before"] in ("ok", "warning")
        ),
        "now working (fixed)": lambda i: (
            i["before"] == "blocked" and i["after"] in ("ok", "warning")
        ),
        # The failure is gone; a fact the static read lacks decides the rest.
        "no longer known to fail (now unknown)": lambda i: (
            i["before"] == "blocked" and i["after"] == "unknown"
        ),
    }
    for title, pick in groups.items():
        items = [(r, i) for r, xs in v["by_recipe"].items() for i in xs if pick(i)]
        lines.append(
            f"  {title}: {sum(i['n'] for _, i in items)} rows in {len({r for r, _ in items})} recipes"
        )

        def verdict_line(item: tuple[str, dict[str, Any]]) -> str:
            recipe, i = item
            feat = i["feature"] + (f":{i['mode']}" if i["mode"] else "") or "(base)"
            why = f"  [{i['reason'][:80]}]" if i["after"] != "ok" else ""
            return f"{recipe} {i['strategy']} {feat} ({i['n']} rows){why}"

        _listed(lines, items, limit, verdict_line)
    other: dict[str, int] = {}
    for xs in v["by_recipe"].values():
        for i in xs:
            if not any(pick(i) for pick in groups.values()):
                k = f"{i['before']} -> {i['after']}"
                other[k] = other.get(k, 0) + i["n"]
    if other:
        lines.append(
            "  other transitions: " + ", ".join(f"{k} {n}" for k, n in sorted(other.items()))
        )


def _speculative_lines(lines: list[str], d: dict[str, Any], limit: int) -> None:
    """Methods, draft parallel configs, and the cuda draft mappings that changed."""
    lines.append(f"\nSpeculative decoding: methods {_fmt(d['spec_methods'])}")
    for p in d["draft_parallel"]:
        lines.append(
            f"  draft parallel config for {p['method']}: {_pc(p['from'])} -> {_pc(p['to'])}"
            + (f" ({p['evidence']})" if p["evidence"] else "")
        )
    cuda = [x for x in d["drafts"] if x["platform"] == "cuda"]
    lines.append(f"  {len(cuda)} draft mappings changed (cuda)")
    _listed(
        lines,
        cuda,
        limit,
        lambda x: (
            f"{x['method']} draft of {x['target'] or '(unknown target)'}: "
            f"{_draft(x['from'])} -> {_draft(x['to'])}"
        ),
    )


def _draft(d: dict[str, Any] | None) -> str:
    if not d:
        return "none"
    yn = {1: "yes", 0: "no", None: "?"}
    cls = (d["draft_class"] or d["draft_arch"] or "?").rsplit(".", 1)[-1]
    return (
        f"{cls} (SupportsPP {yn[d['draft_supports_pp']]}, inherits PP {yn[d['draft_inherits_pp']]})"
    )


def _fmt(d: dict[str, list[str]]) -> str:
    added = d["added"]
    shown = ", ".join(added[:6]) + (f", ... and {len(added) - 6} more" if len(added) > 6 else "")
    return f"+{len(added)} -{len(d['removed'])}" + (f" (+{shown})" if added else "")
