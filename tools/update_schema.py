"""Regenerate schema/tables.json from the SQLModel tables in compat/db.py.

compat.dbfile creates and fills the tables with sqlite3 alone (the scan never imports
SQLAlchemy); this file is how it knows them. tests/test_dbfile.py fails when it is stale.

Usage: python tools/update_schema.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compat.db import schema_document  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "schema" / "tables.json"


def render() -> str:
    return json.dumps(schema_document(), indent=1) + "\n"


if __name__ == "__main__":
    OUT.write_text(render(), encoding="utf-8")
    print(f"wrote {OUT.relative_to(OUT.parents[1])}")
