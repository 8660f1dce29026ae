"""Compare two build databases table for table, row for row (a refactor must change nothing).

Usage: python tools/compare_dbs.py A.db B.db [--tables verdict,cause,...] [--ignore-columns c1,c2]
                                     [--examples N]

Every table both databases hold (or those named) is compared in primary-key order on the
columns both hold; a table or column only one holds is reported. Exit 0 when identical,
1 when anything differs (each difference is printed, up to N examples per table), 2 on bad input.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from pathlib import Path

#: What a build writes about its verdicts, the tables a refactor of the stages after the engine
#: must leave identical (facts are compared too when named).
DEFAULT_TABLES = ("verdict", "cause", "verdict_cause", "command", "draft_mapping", "model_fact",
                  "recipe_file", "shell_variable")


def _tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("select name from sqlite_master where type = 'table'")}


def _columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in con.execute(f"pragma table_info({table})")]


def _order(con: sqlite3.Connection, table: str, columns: list[str]) -> str:
    pk = [r[1] for r in sorted(con.execute(f"pragma table_info({table})"), key=lambda r: r[5]) if r[5]]
    return ", ".join(f'"{c}"' for c in (pk or columns))


def compare_table(a: sqlite3.Connection, b: sqlite3.Connection, table: str, ignore: set[str],
                  examples: int) -> list[str]:
    """Lines describing how `table` differs between the two databases ([] when identical)."""
    ca, cb = _columns(a, table), _columns(b, table)
    out = []
    only_a, only_b = [c for c in ca if c not in cb], [c for c in cb if c not in ca]
    if only_a or only_b:
        out.append(f"{table}: columns only in A {only_a}, only in B {only_b}")
    cols = [c for c in ca if c in cb and c not in ignore]
    select = ", ".join(f'"{c}"' for c in cols)
    ra = a.execute(f"select {select} from {table} order by {_order(a, table, cols)}").fetchall()
    rb = b.execute(f"select {select} from {table} order by {_order(b, table, cols)}").fetchall()
    if len(ra) != len(rb):
        out.append(f"{table}: {len(ra)} rows in A, {len(rb)} in B")
    shown = 0
    differing = 0
    for i, (x, y) in enumerate(zip(ra, rb)):
        if x == y:
            continue
        differing += 1
        if shown < examples:
            shown += 1
            diffs = [f"{c}: {u!r} -> {v!r}" for c, u, v in zip(cols, x, y) if u != v]
            out.append(f"{table} row {i + 1}: " + "; ".join(d[:300] for d in diffs))
    if differing:
        out.append(f"{table}: {differing} of {min(len(ra), len(rb))} rows differ")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", type=Path)
    ap.add_argument("b", type=Path)
    ap.add_argument("--tables", default=",".join(DEFAULT_TABLES))
    ap.add_argument("--ignore-columns", default="")
    ap.add_argument("--examples", type=int, default=5)
    args = ap.parse_args(argv)
    for p in (args.a, args.b):
        if not p.is_file():
            print(f"compare_dbs: {p}: no such database", file=sys.stderr)
            return 2
    a = sqlite3.connect(f"{args.a.resolve().as_uri()}?mode=ro", uri=True)
    b = sqlite3.connect(f"{args.b.resolve().as_uri()}?mode=ro", uri=True)
    ignore = {c for c in args.ignore_columns.split(",") if c}
    lines = []
    ta, tb = _tables(a), _tables(b)
    for table in [t for t in args.tables.split(",") if t]:
        if table not in ta or table not in tb:
            lines.append(f"{table}: only in {'A' if table in ta else 'B' if table in tb else 'neither'}")
            continue
        lines += compare_table(a, b, table, ignore, args.examples)
    for line in lines:
        print(line)
    if not lines:
        print(f"identical: {args.tables}")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
