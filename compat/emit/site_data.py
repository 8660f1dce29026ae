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

FORMAT = "vllm-compat/site-verdicts@3"
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
#: The fields of a finding that hold long text, written once in `texts` and given by index.
TEXT_KEYS = ("message", "reason", "evidence")
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
    table = _Tables()
    # recipe -> variant -> release -> (strategy, feature mode) -> (finding, source) -> targets
    cells: dict[str, dict[str, dict[str, dict[tuple[int, int], dict[tuple[int, int], list]]]]] = {}
    flags: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in rows:
        refs = [table.cause(cid) for cid in r["causes"] if cid in causes]
        f = table.finding(
            (
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
        )
        fm = (f"{r['feature']}:{r['mode']}" if r["mode"] else r["feature"]) or "base"
        at = cells.setdefault(r["recipe"], {}).setdefault(r["variant"], {})
        cell = at.setdefault(r["vllm_version"], {}).setdefault(
            (table.strategy(r["strategy"]), table.feature_mode(fm)), {}
        )
        cell.setdefault((f, table.source(r["source"])), []).extend(targets_of(r))
        v = flags.setdefault(
            (r["recipe"], r["variant"], r["vllm_version"]),
            {"model_id": r["model_id"], "pinned": 0, "judged": 0},
        )
        v["pinned"] = v["pinned"] or int(bool(r["pinned"]))
        v["judged"] = v["judged"] or int(bool(r["judged"]))
    recipes = {
        recipe: {"variants": _variants(recipe, by_variant, flags, table)}
        for recipe, by_variant in sorted(cells.items())
    }
    return {
        "format": FORMAT,
        "about": ABOUT,
        "releases": releases,
        "strategies": list(table.strategies),
        "feature_modes": list(table.feature_modes),
        "sources": list(table.sources),
        "finding_fields": list(FINDING_KEYS),
        "findings": [table.finding_row(k) for k in table.findings],
        "texts": list(table.texts),
        "causes": [{k: causes[cid][k] for k in CAUSE_KEYS} for cid in table.causes],
        "targets": [[list(p) for p in key] for key in table.targets],
        "recipes": recipes,
    }


ABOUT = (
    "One entry per matrix cell: recipes[recipe].variants[variant].releases[vllm].cells is a "
    "list of [strategy, feature mode, finding, targets, source], each an index: "
    "strategies[strategy] ('' for none), feature_modes[feature mode] ('base', 'feature' or "
    "'feature:mode'), findings[finding] says what happens (its values named by "
    "finding_fields; message, reason and evidence are indexes into texts) on the hardware "
    "targets[targets] lists ([platform, hardware profile]; profile '' where the command does "
    "not depend on it), to the command that sources[source] emit (the recipes site's api, "
    "ui or both). A cell with several outcomes has one entry per outcome. causes[i] is the "
    "recipe element a finding blames, with its fix. Reason chains and commands: compat.db.gz "
    "(table verdict)."
)


class _Tables:
    """The document's shared lists: each strategy, feature mode, finding, cause and target set
    written once and referenced by index, in first-seen order."""

    def __init__(self) -> None:
        self.strategies: dict[str, int] = {}
        self.feature_modes: dict[str, int] = {}
        self.findings: dict[tuple, int] = {}
        self.causes: dict[int, int] = {}
        self.targets: dict[tuple, int] = {}
        self.texts: dict[str, int] = {}
        self.sources: dict[str, int] = {}

    @staticmethod
    def _index(table: dict[Any, int], key: Any) -> int:
        return table.setdefault(key, len(table))

    def strategy(self, name: str) -> int:
        return self._index(self.strategies, name)

    def feature_mode(self, name: str) -> int:
        return self._index(self.feature_modes, name)

    def finding(self, key: tuple) -> int:
        return self._index(self.findings, key)

    def source(self, name: str) -> int:
        return self._index(self.sources, name)

    def cause(self, cause_id: int) -> int:
        return self._index(self.causes, cause_id)

    def target_set(self, pairs: list[tuple[str, str]]) -> int:
        return self._index(self.targets, tuple(sorted(set(pairs))))

    def finding_row(self, key: tuple) -> list[Any]:
        """A finding as the document writes it: its FINDING_KEYS in order, TEXT_KEYS as indexes
        into `texts`, causes as a list."""
        row: list[Any] = list(key[:-1]) + [list(key[-1])]
        for i, name in enumerate(FINDING_KEYS):
            if name in TEXT_KEYS:
                row[i] = self._index(self.texts, row[i])
        return row


def _variants(
    recipe: str,
    by_variant: dict[str, dict[str, dict[tuple[int, int], dict[tuple[int, int], list]]]],
    flags: dict[tuple[str, str, str], dict[str, Any]],
    table: _Tables,
) -> dict[str, Any]:
    """A recipe's variants: model id once, then per release the flags and the cells."""
    out: dict[str, Any] = {}
    for variant, by_release in by_variant.items():
        versions = sorted(by_release, key=release_key)
        model_id = flags[(recipe, variant, versions[0])]["model_id"]
        releases = {}
        for version in versions:
            entry = dict(flags[(recipe, variant, version)])
            if entry["model_id"] == model_id:
                del entry["model_id"]  # said by the variant
            entry["cells"] = [
                [strategy, fm, f, table.target_set(targets), source]
                for (strategy, fm), outcomes in by_release[version].items()
                for (f, source), targets in outcomes.items()
            ]
            releases[version] = entry
        out[variant] = {"model_id": model_id, "releases": releases}
    return out


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
        for variant, v in entry["variants"].items():
            for version, at in v["releases"].items():
                for strategy, fm, f, t, source in at["cells"]:
                    finding = dict(zip(doc["finding_fields"], doc["findings"][f], strict=True))
                    finding.update({k: doc["texts"][finding[k]] for k in TEXT_KEYS})
                    name = doc["feature_modes"][fm]
                    feature, _, mode = ("", "", "") if name == "base" else name.partition(":")
                    for platform, hardware in doc["targets"][t]:
                        out.append(
                            {
                                "recipe": recipe,
                                "vllm_version": version,
                                "variant": variant,
                                "model_id": at.get("model_id", v["model_id"]),
                                "strategy": doc["strategies"][strategy],
                                "feature": feature,
                                "mode": mode,
                                "platform": platform,
                                "hardware": hardware,
                                "source": doc["sources"][source],
                                "pinned": at["pinned"],
                                "judged": at["judged"],
                                **finding,
                            }
                        )
    return out
