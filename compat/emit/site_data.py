"""What the site ships besides its pages: verdicts.json and compat.db.gz.

The budget (issue 12) is what a reader downloads: the pages and the JSON stay small
enough to publish and browse, the database goes out gzipped whole.

- verdicts.json is the matrix as data, one entry per cell (recipe, release, variant,
  strategy, feature mode), each outcome written once in `findings` and referenced by
  index, with the hardware it holds on. Every verdict row of the database is in it
  (schema/site_verdicts.schema.json says how to read it); reason chains and commands
  are only in the database.
- compat.db.gz is the SQLite database as the build wrote it (argv stored once in
  `command`), gzipped: `gunzip -k compat.db.gz`, then `sqlite3 compat.db`,
  `compat sql --db compat.db` or `datasette compat.db -m metadata.yaml`.
"""

from __future__ import annotations

import gzip
import json
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from compat.vocab import release_key

FORMAT = "vllm-compat/site-verdicts@2"
FINDING_KEYS = (
    "status",
    "message",
    "reason",
    "evidence",
    "works_from",
    "gated",
    "cause_kind",
    "cause",
    "causes",
)
CAUSE_KEYS = ("kind", "label", "field", "line", "fix_kind", "fix", "fix_why", "works_from")
GZIP_LEVEL = 6  # 59 MB -> 3.1 MB in about a second; 9 saves 3% for twice the time


def ship_database(snapshot: Path, target: Path) -> None:
    """gzip `snapshot` into `target` (compat.db.gz), byte-identical across runs (mtime 0)."""
    with (
        snapshot.open("rb") as src,
        target.open("wb") as raw,
        gzip.GzipFile(
            filename="compat.db", mode="wb", fileobj=raw, compresslevel=GZIP_LEVEL, mtime=0
        ) as dst,
    ):
        shutil.copyfileobj(src, dst, 1 << 20)


def targets_of(row: dict[str, Any]) -> list[tuple[str, str]]:
    """(platform, hardware profile) pairs a row holds on: its profiles when hardware is ''."""
    if not row["hardware"] and row["profiles"]:
        return [(row["platform"], p) for p in row["profiles"].split(",") if p]
    return [(row["platform"], row["hardware"])]


def verdicts_document(
    rows: Iterable[dict[str, Any]], causes: dict[int, dict[str, Any]], releases: list[str]
) -> dict[str, Any]:
    """The verdicts.json document for `rows` (the verdict table, one dict per row)."""
    findings: dict[tuple, int] = {}
    target_sets: dict[tuple, int] = {}
    cause_index: dict[int, int] = {}
    # (recipe, release, variant, strategy, feature mode) -> finding -> targets, in row order
    cells: dict[tuple[str, str, str, str, str], dict[int, list[tuple[str, str]]]] = {}
    flags: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in rows:
        refs = []
        for cid in r["causes"]:
            if cid in causes:
                refs.append(cause_index.setdefault(cid, len(cause_index)))
        key = (
            r["status"],
            r["message"],
            r["reason"],
            r["evidence"],
            r["works_from"],
            int(bool(r["gated"])),
            r["cause_kind"],
            r["cause"],
            tuple(refs),
        )
        f = findings.setdefault(key, len(findings))
        fm = (f"{r['feature']}:{r['mode']}" if r["mode"] else r["feature"]) or "base"
        cell = cells.setdefault(
            (r["recipe"], r["vllm_version"], r["variant"], r["strategy"], fm), {}
        )
        cell.setdefault(f, []).extend(targets_of(r))
        v = flags.setdefault(
            (r["recipe"], r["vllm_version"], r["variant"]),
            {"model_id": r["model_id"], "pinned": 0, "judged": 0},
        )
        v["pinned"] = v["pinned"] or int(bool(r["pinned"]))
        v["judged"] = v["judged"] or int(bool(r["judged"]))

    recipes: dict[str, dict[str, Any]] = {}
    order = {v: i for i, v in enumerate(sorted({k[1] for k in flags}, key=release_key))}
    for (recipe, version, variant, strategy, fm), outcomes in sorted(
        cells.items(), key=lambda kv: (kv[0][0], order[kv[0][1]])
    ):
        by_release = recipes.setdefault(recipe, {"releases": {}})["releases"]
        v = by_release.setdefault(version, {}).get(variant)
        if v is None:
            v = by_release[version][variant] = {**flags[(recipe, version, variant)], "cells": {}}
        v["cells"].setdefault(strategy, {})[fm] = [
            [f, target_sets.setdefault(tuple(sorted(set(t))), len(target_sets))]
            for f, t in outcomes.items()
        ]
    cause_list: list[dict[str, Any]] = [{}] * len(cause_index)
    for cid, i in cause_index.items():
        cause_list[i] = {k: causes[cid][k] for k in CAUSE_KEYS}
    return {
        "format": FORMAT,
        "about": "One entry per matrix cell: recipes[recipe].releases[vllm].{variant}.cells"
        "[strategy][feature or feature:mode or 'base'] is a list of [finding, targets]: "
        "findings[finding] says what happens on the hardware targets[targets] lists "
        "([platform, hardware profile]; profile '' where the command does not depend "
        "on it). causes[i] is the recipe element a finding blames, with its fix. "
        "Reason chains and commands: compat.db.gz (table verdict).",
        "releases": releases,
        "findings": [
            dict(zip(FINDING_KEYS, (*k[:-1], list(k[-1])), strict=True)) for k in findings
        ],
        "causes": cause_list,
        "targets": [[list(p) for p in key] for key in target_sets],
        "recipes": recipes,
    }


def write_verdicts(path: Path, document: dict[str, Any]) -> None:
    path.write_text(
        json.dumps(document, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8"
    )


def rows_of_document(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The verdict rows a verdicts.json document holds, one per (cell, finding, target).

    The inverse of `verdicts_document` for the keys it keeps; tests and readers use it.
    """
    out = []
    for recipe, entry in doc["recipes"].items():
        for version, variants in entry["releases"].items():
            for variant, v in variants.items():
                for strategy, by_fm in v["cells"].items():
                    for fm, outcomes in by_fm.items():
                        feature, _, mode = ("", "", "") if fm == "base" else fm.partition(":")
                        for f, t in outcomes:
                            finding = doc["findings"][f]
                            for platform, hardware in doc["targets"][t]:
                                out.append(
                                    {
                                        "recipe": recipe,
                                        "vllm_version": version,
                                        "variant": variant,
                                        "model_id": v["model_id"],
                                        "strategy": strategy,
                                        "feature": feature,
                                        "mode": mode,
                                        "platform": platform,
                                        "hardware": hardware,
                                        "pinned": v["pinned"],
                                        "judged": v["judged"],
                                        **finding,
                                    }
                                )
    return out
