"""Hand-curated model facts (data/model_configs.yaml), schema-checked, each with provenance.

Curated data exists for ids that no config.json, vLLM test or doc covers, and
only for facts someone can source: a statement in a model card or recipe, or the
fact that an id is a quantized/renamed copy of another id. It is never a place to
guess an architecture.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from compat.errors import UserError
from compat.resources import data_dir, schema_dir

REPO = data_dir().parent
DEFAULT_CURATED = data_dir() / "model_configs.yaml"
SCHEMA = schema_dir() / "model_configs.schema.json"
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class CuratedEntry:
    model_id: str
    data: dict[str, Any]
    line: int
    label: str  # the file's name as shown in provenance, e.g. data/model_configs.yaml

    @property
    def where(self) -> str:
        return f"{self.label}:{self.line}"

    @property
    def provenance(self) -> str:
        p = self.data["provenance"]
        return "; ".join(p) if isinstance(p, list) else p

    @property
    def same_as(self) -> str | None:
        return self.data.get("same_as")


def _label(path: Path) -> str:
    try:
        return path.resolve().relative_to(REPO).as_posix()
    except ValueError:
        return path.name


def load_curated(path: Path) -> dict[str, CuratedEntry]:
    """Entries by lower-cased id. A missing file is an empty set; a malformed one is a UserError."""
    if not path.is_file():
        return {}
    label = _label(path)
    text = path.read_text(encoding="utf-8")
    try:
        root = yaml.compose(text, Loader=_LOADER)
        data = yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError as exc:
        raise UserError(f"not valid YAML: {exc}", where=label) from exc
    if data is None:
        return {}
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        err = errors[0]
        at = "/".join(str(p) for p in err.absolute_path) or "(root)"
        raise UserError(f"{at}: {err.message}", where=label)
    lines: list[int] = []
    if isinstance(root, yaml.MappingNode):
        for key, value in root.value:
            if key.value == "models" and isinstance(value, yaml.SequenceNode):
                lines = [item.start_mark.line + 1 for item in value.value]
    out: dict[str, CuratedEntry] = {}
    for i, item in enumerate(data["models"]):
        key = item["id"].casefold()
        line = lines[i] if i < len(lines) else 0
        if key in out:
            raise UserError(
                f"models[{i}]: duplicate id {item['id']!r} (first at line {out[key].line})",
                where=label,
            )
        if item.get("same_as", "").casefold() == key:
            raise UserError(f"models[{i}]: {item['id']!r} is same_as itself", where=label)
        out[key] = CuratedEntry(item["id"], item, line, label)
    return out
