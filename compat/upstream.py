"""vLLM-side causes: which blocked commands only vLLM can fix, and the bug report for each.

The project began with such a report (recipes: "multi_node_tp_pp + GLM-5.2 + MTP"): the MTP
draft class lacks SupportsPP and `create_draft_parallel_config` copies the target's PP size.
Which causes are vLLM's is data (`data/upstream.yaml`: finding-key patterns of the engine),
matched against the finding keys the build stored with each cause (`cause.finding_keys`).
`compat check --upstream` lists them; `compat explain ... --format issue` writes the report:
summary, the exact command, a reproduction at the level of vLLM's config classes, the
releases verified with the first that works, the evidence with file:line, and the recipe-side
workaround the fix stage planned. Nothing here decides a verdict.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from compat.chains import shown_steps
from compat.errors import UserError
from compat.recipes import parse_serve_args
from compat.recipes.synthesis import command_line
from compat.resources import data_dir, schema_dir
from compat.store import open_store
from compat.vocab import release_key


@dataclass(frozen=True)
class Rule:
    """One kind of vLLM-side cause (an entry of data/upstream.yaml)."""

    id: str
    title: str
    keys: tuple[str, ...]
    exception: str
    explain: str
    repro: str
    never_starts: bool = False

    def matches(self, finding_keys: Sequence[str], works_from: str) -> bool:
        if self.never_starts and works_from:
            return False
        return any(fnmatch.fnmatchcase(k, p) for k in finding_keys for p in self.keys)


@lru_cache(maxsize=1)
def rules() -> tuple[tuple[Rule, ...], tuple[str, ...]]:
    """(the rules, the flags a reproduction leaves out), validated against their schema."""
    raw = yaml.safe_load((data_dir() / "upstream.yaml").read_text(encoding="utf-8"))
    schema = json.loads((schema_dir() / "upstream.schema.json").read_text(encoding="utf-8"))
    jsonschema.validate(raw, schema)
    out = tuple(
        Rule(
            c["id"],
            c["title"],
            tuple(c["keys"]),
            c["exception"],
            " ".join(c["explain"].split()),
            c["repro"],
            bool(c.get("never_starts")),
        )
        for c in raw["causes"]
    )
    return out, tuple(raw["repro_drop_flags"])


def classify(finding_keys: Sequence[str], works_from: str) -> Rule | None:
    """The vLLM-side rule a cause's findings match, or None (the recipe's to fix)."""
    return next((r for r in rules()[0] if r.matches(finding_keys, works_from)), None)


def _keys(raw: str | None) -> list[str]:
    try:
        keys = json.loads(raw or "[]")
    except json.JSONDecodeError:
        return []
    return [str(k) for k in keys] if isinstance(keys, list) else []


def _has_keys(db_path: Path) -> bool:
    with open_store(db_path) as db:
        if not db.has_table("cause"):
            return False
        return any(r["name"] == "finding_keys" for r in db.dicts("pragma table_info(cause)"))


def upstream_causes(db_path: Path) -> list[dict[str, Any]]:
    """One entry per (recipe, cause) that blocks a judged command (gated or not) and is vLLM's.

    A database built before causes kept their finding keys has none (rebuild to see them).
    """
    if not _has_keys(db_path):
        return []
    with open_store(db_path) as db:
        linked = db.dicts(
            """
            select c.id, c.recipe, c.label, c.line, c.finding, c.finding_keys, c.works_from,
                   c.clear_from, c.fix_kind, c.fix, v.vllm_version, v.strategy, v.feature, v.mode, v.gated,
                   v.model_id, m.argv
            from cause c join verdict_cause vc on vc.cause_id = c.id
            join verdict v on v.id = vc.verdict_id left join command m on m.id = v.command_id
            where v.judged = 1 and v.status = 'blocked'
            order by c.recipe, c.line, c.id, v.strategy, v.feature, v.mode, v.variant"""
        )
    out: dict[int, dict[str, Any]] = {}
    for r in linked:
        entry = out.get(r["id"])
        if entry is None:
            rule = classify(_keys(r["finding_keys"]), r["works_from"] or r["clear_from"] or "")
            if rule is None:
                out[r["id"]] = {}
                continue
            entry = out[r["id"]] = {
                k: r[k]
                for k in (
                    "recipe",
                    "label",
                    "line",
                    "finding",
                    "works_from",
                    "clear_from",
                    "fix_kind",
                    "fix",
                )
            } | {
                "rule": rule.id,
                "title": rule.title.format(method=_method(r["argv"]) or "speculative"),
                "first": {
                    k: r[k] for k in ("model_id", "strategy", "feature", "mode", "vllm_version")
                },
                "strategies": [],
                "releases": [],
                "rows": 0,
                "gated": 0,
            }
        if not entry:
            continue
        entry["rows"] += 1
        entry["gated"] += r["gated"]
        for key, value in (("strategies", r["strategy"]), ("releases", r["vllm_version"])):
            if value not in entry[key]:
                entry[key].append(value)
    found = [e for e in out.values() if e]
    for e in found:
        e["releases"].sort(key=release_key)
    return found


def _method(argv_json: str | None) -> str:
    for _role, argv in json.loads(argv_json or "[]"):
        spec = parse_serve_args(list(argv)).speculative_config
        if isinstance(spec, dict) and isinstance(spec.get("method"), str):
            return str(spec["method"])
    return ""


def upstream_line(e: dict[str, Any]) -> str:
    """One line per vLLM-side cause, with the command that writes its bug report."""
    f = e["first"]
    feature = f["feature"] + (f":{f['mode']}" if f["mode"] else "")
    works = (
        f"first working release {e['works_from']}"
        if e["works_from"]
        else f"no release is known to start it; none is known to fail from {e['clear_from']}"
        if e.get("clear_from")
        else "no release starts it"
    )
    gated = " (all gated)" if e["gated"] == e["rows"] else ""
    quoted = feature or "''"
    explain = (
        f"compat explain {e['recipe']} {f['strategy']} {quoted} "
        f"--vllm {f['vllm_version']} --format issue"
    )
    return (
        f"{e['recipe']}:{e['line']}: upstream ({e['rule']}): {e['title']}: {e['label']} blocks "
        f"{e['rows']} command(s){gated} on {', '.join(e['strategies'])} at vLLM "
        f"{', '.join(e['releases'])}; {works}. Report: {explain}"
    )


# --------------------------------------------------------------------------- the report


def issue(db_path: Path, model: str, strategy: str, feature: str, vllm: str | None) -> str:
    """A bug report (GitHub issue markdown) for the vLLM-side cause of a blocked verdict."""
    from compat import report

    selected = report.select(db_path, model, strategy, feature, vllm)
    for _mode, rows in selected:
        for r in rows:
            if r["status"] != "blocked":
                continue
            for c in _row_causes(db_path, r["id"]):
                rule = classify(
                    _keys(c["finding_keys"]), c["works_from"] or c.get("clear_from") or ""
                )
                if rule is not None and c["recipe"] == r["recipe"]:
                    same = [
                        x for x in rows if x["status"] == "blocked" and x["cause_id"] == c["id"]
                    ]
                    return _report(db_path, r, c, rule, report.where(same or [r]))
    statuses = sorted({r["status"] for _m, rows in selected for r in rows})
    raise UserError(
        f"no vLLM-side cause here (verdicts: {', '.join(statuses)}); --format issue writes a "
        "report only for the causes `compat check --upstream` lists",
        where="compat explain",
    )


def _row_causes(db_path: Path, verdict_id: int) -> list[dict[str, Any]]:
    if not _has_keys(db_path):
        return []
    with open_store(db_path) as db:
        return db.dicts(
            "select c.* from verdict_cause vc join cause c on c.id = vc.cause_id "
            "where vc.verdict_id = ? order by c.id",
            (verdict_id,),
        )


def _history(db_path: Path, r: dict[str, Any]) -> list[tuple[str, str]]:
    """(release, status) of the same command at every release the database judged it."""
    with open_store(db_path) as db:
        rows = db.dicts(
            "select vllm_version, status from verdict where recipe = ? and variant = ? and "
            "strategy = ? and feature = ? and mode = ? and platform = ? and hardware = ?",
            tuple(r[k] for k in ("recipe", "variant", "strategy", "feature", "mode", "platform"))
            + (r["hardware"],),
        )
    seen = {x["vllm_version"]: x["status"] for x in rows}
    return sorted(seen.items(), key=lambda kv: release_key(kv[0]))


def _code(text: str) -> str:
    """Inline markdown code that survives backticks in the text."""
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def _report(db_path: Path, r: dict[str, Any], cause: dict[str, Any], rule: Rule, where: str) -> str:
    argvs = json.loads(r.get("command_argv") or "[]")
    head = next((a for role, a in argvs if not role), argvs[0][1] if argvs else [])
    args = parse_serve_args(list(head))
    release = r["vllm_version"]
    what = r["feature"] + (f":{r['mode']}" if r["mode"] else "") or "the base command"
    title = rule.title.format(method=(args.speculative_config or {}).get("method", "speculative"))
    works = cause["works_from"] or r["works_from"] or ""
    lines = [
        f"### [Bug]: {r['model_id']}: {title} ({r['strategy']}, {what}, vLLM {release})",
        "",
        "## Summary",
        "",
        (
            f"`vllm serve {r['model_id']}` {_key_flags(args)} fails on vLLM {release} with "
            f"{_code(rule.exception + ': ' + (r['message'] or cause['finding']))}. {rule.explain}"
        ),
        "",
        "## Command",
        "",
        "```bash",
        command_line(head),
        "```",
        "",
        (
            f"The head node's command as the recipes site emits it for {r['recipe']} "
            f"({r['strategy']}, {what}); the same failure holds on {where}."
        ),
        "",
        "## Reproduction (vLLM's config classes, no GPU, no weights)",
        "",
        "```python",
        _repro(rule, args, r, release).rstrip(),
        "```",
        "",
        *_releases(db_path, r, works, "" if works else cause.get("clear_from") or ""),
        *_evidence(r, release),
        "## Recipe-side workaround",
        "",
        _workaround(cause, works),
        "",
        "---",
        f"Written by vllm-compat from vLLM's source, read statically ({Path(db_path).name}).",
    ]
    return "\n".join(lines) + "\n"


def _key_flags(args: Any) -> str:
    parts = []
    for t in args.tokens:
        if t.flag in ("--pipeline-parallel-size", "--tensor-parallel-size", "--speculative-config"):
            value = f" '{t.value}'" if t.value and t.value.startswith("{") else f" {t.value}"
            parts.append(f"`{t.flag}{value if t.value is not None else ''}`")
    if not parts:
        return ""
    return "with " + (", ".join(parts[:-1]) + " and " if len(parts) > 1 else "") + parts[-1]


def _value(raw: str | None, negated: bool) -> Any:
    if raw is None:
        return not negated
    if raw[:1] in "{[":
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw
    for kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            pass
    return raw


def _repro(rule: Rule, args: Any, r: dict[str, Any], release: str) -> str:
    drop = set(rules()[1])
    engine = {"model": r["model_id"]}
    for t in args.tokens:
        if t.flag in drop or t.subkey or (t.value and "$" in t.value):
            continue
        engine[t.flag.removeprefix("--").replace("-", "_")] = _value(t.value, t.negated)
    spec = args.speculative_config or {}
    trust = any(t.flag == "--trust-remote-code" for t in args.tokens)
    return rule.repro.format(
        model=r["model_id"],
        trust_remote_code=", trust_remote_code=True" if trust else "",
        tp=args.tensor_parallel_size,
        pp=args.pipeline_parallel_size,
        spec=", ".join(f"{k}={v!r}" for k, v in spec.items()),
        engine_kwargs=", ".join(f"{k}={v!r}" for k, v in engine.items()),
        release=release,
        exception=rule.exception,
        message=" ".join((r["message"] or "").split()),
    )


def _releases(db_path: Path, r: dict[str, Any], works: str, clear: str = "") -> list[str]:
    out = ["## Releases verified", "", "| vLLM | verdict |", "| --- | --- |"]
    history = dict(_history(db_path, r))
    if works and works not in history:
        history[works] = "starts (bisected)"
    if clear and clear not in history:
        history[clear] = "not known to fail (bisected)"
    out += [f"| {v} | {history[v]} |" for v in sorted(history, key=release_key)]
    out.append("")
    if works:
        out.append(
            f"First release on the package index where it starts: **{works}** (found by "
            "bisection over the index; the table lists the releases the build stored)."
        )
    elif clear:
        out.append(
            f"No release on the package index is known to start it. From **{clear}** it is no "
            "longer known to fail (found by bisection over the index): the verdict there is "
            "`unknown`, because a fact the static read lacks decides it."
        )
    else:
        out.append("No release on the package index starts it.")
    return [*out, ""]


def _evidence(r: dict[str, Any], release: str) -> list[str]:
    out = [f"## Evidence (vLLM {release})", ""]
    out += [f"{i}. {step}" for i, step in enumerate(shown_steps(r["chain"]), 1)]
    out += ["", *[f"- `{e}`" for e in (r["evidence"] or "").split("; ") if e], ""]
    return out


def _workaround(cause: dict[str, Any], works: str) -> str:
    kind = cause["fix_kind"]
    if kind and kind != "none":
        text = f"{cause['fix']} (fix kind `{kind}`; `compat fix --apply DIR` writes it)."
    else:
        text = f"No automatic recipe fix: {cause['fix_why'] or 'not planned'}."
    if works and kind != "pin_bump":
        text += f" From vLLM {works} the command starts: a recipe pinned there needs no workaround."
    return text
