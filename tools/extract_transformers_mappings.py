"""Write data/transformers_model_types.json: architecture class name -> model_type(s).

Why: a recipe names an HF model id, and when no config.json is at hand the only
fact we may have is an architecture name (from vLLM's test registry or docs).
vLLM's speculative-decoding rewrite keys on `model_type` as well as on
`architectures[0]`, so the resolver needs the model_type that transformers pairs
with that class. transformers' own auto mappings (`MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`
and friends: model_type -> class name) are the authoritative pairing; this script
inverts them. When transformers files one class under several model types (it reuses
`LlamaForCausalLM` for `internlm3` and `iquestcoder`), the entry also names the `owner`:
the one model type whose own `models/<module>/` defines the class, if exactly one does.

The mappings are read with `ast` from the installed package's source, so the script
needs transformers' files but none of its dependencies (torch, tokenizers, ...).
Run it with the interpreter of a scratch environment that has the pinned release:

    python -m venv "$TMPDIR/tf" && "$TMPDIR/tf/bin/pip" install --no-deps transformers==5.23.0
    "$TMPDIR/tf/bin/python" tools/extract_transformers_mappings.py --out data/transformers_model_types.json
    rm -rf "$TMPDIR/tf"

or point `--transformers-dir` at an unpacked `transformers/` package directory.
"""

from __future__ import annotations

import argparse
import ast
import importlib.metadata
import importlib.util
import json
import re
import sys
from pathlib import Path

# Mappings consulted first: an architecture found here is recorded with this mapping
# as its provenance. Every other *_MAPPING_NAMES dict follows in source order.
PRIORITY = (
    "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
    "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES",
    "MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES",
    "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
    "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES",
    "MODEL_MAPPING_NAMES",
)
MODELING = "models/auto/modeling_auto.py"
CONFIGS = ("models/auto/auto_mappings.py", "models/auto/configuration_auto.py")
_VERSION_RE = re.compile(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", re.MULTILINE)


def _pairs(node: ast.expr) -> list[tuple[str, list[str]]]:
    """(model_type, [class names]) from an `OrderedDict([...])` literal; splats are skipped."""
    if not (isinstance(node, ast.Call) and node.args):
        return []
    seq = node.args[0]
    if not isinstance(seq, (ast.List, ast.Tuple)):
        return []
    out = []
    for elt in seq.elts:
        if not (isinstance(elt, ast.Tuple) and len(elt.elts) == 2):
            continue  # `*list(OTHER.items())`: that mapping is read on its own
        try:
            key = ast.literal_eval(elt.elts[0])
            val = ast.literal_eval(elt.elts[1])
        except ValueError:
            continue
        names = [val] if isinstance(val, str) else [v for v in val if isinstance(v, str)]
        if isinstance(key, str):
            out.append((key, names))
    return out


def _mapping_assigns(tree: ast.Module) -> dict[str, ast.expr]:
    found: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and target.id.endswith("_MAPPING_NAMES"):
                found.setdefault(target.id, node.value)  # first assignment is the literal
    return found


def _string_pairs(tree: ast.Module, name: str) -> list[tuple[str, str]]:
    """(key, value) string pairs of `NAME = OrderedDict([...])` and `NAME.update({...})`."""
    out: list[tuple[str, str]] = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == name
        ):
            out.extend((k, v[0]) for k, v in _pairs(node.value) if v)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "update"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == name
            and node.args
            and isinstance(node.args[0], ast.Dict)
        ):
            for k, v in zip(node.args[0].keys, node.args[0].values):
                if isinstance(k, ast.Constant) and isinstance(v, ast.Constant):
                    out.append((k.value, v.value))
    return out


def _defining_modules(pkg: Path) -> dict[str, str]:
    """class name -> the models/<module>/ whose modeling_*.py defines it (text scan)."""
    found: dict[str, str] = {}
    pat = re.compile(r"^class\s+(\w+)\s*[(:]", re.MULTILINE)
    for path in sorted((pkg / "models").glob("*/modeling_*.py")):
        for m in pat.finditer(path.read_text(encoding="utf-8", errors="replace")):
            found.setdefault(m.group(1), path.parent.name)
    return found


def extract(pkg: Path, version: str) -> dict:
    modeling = _mapping_assigns(ast.parse((pkg / MODELING).read_text(encoding="utf-8")))
    order = [n for n in PRIORITY if n in modeling] + [n for n in modeling if n not in PRIORITY]
    archs: dict[str, dict] = {}
    for name in order:
        for model_type, classes in _pairs(modeling[name]):
            for cls in classes:
                entry = archs.setdefault(cls, {"model_types": [], "mapping": name})
                if model_type not in entry["model_types"]:
                    entry["model_types"].append(model_type)
    model_types: set[str] = set()
    for rel in CONFIGS:
        path = pkg / rel
        if not path.is_file():
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name, value in _mapping_assigns(tree).items():
            if name == "CONFIG_MAPPING_NAMES":
                model_types.update(mt for mt, _ in _pairs(value))
        # configuration_auto.py adds a few by hand: `CONFIG_MAPPING_NAMES.update({...})` and
        # `CONFIG_MAPPING_NAMES = OrderedDict(**{"gpt-sw3": ...}, **CONFIG_MAPPING_NAMES)`
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "CONFIG_MAPPING_NAMES"
                and isinstance(node.value, ast.Call)
            ):
                for kw in node.value.keywords:
                    if kw.arg is None and isinstance(kw.value, ast.Dict):
                        model_types.update(
                            k.value
                            for k in kw.value.keys
                            if isinstance(k, ast.Constant) and isinstance(k.value, str)
                        )
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "update"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "CONFIG_MAPPING_NAMES"
                and node.args
                and isinstance(node.args[0], ast.Dict)
            ):
                for k in node.args[0].keys:
                    if isinstance(k, ast.Constant) and isinstance(k.value, str):
                        model_types.add(k.value)
    special: dict[str, str] = {}
    for rel in CONFIGS:
        path = pkg / rel
        if path.is_file():
            special.update(
                dict(
                    _string_pairs(
                        ast.parse(path.read_text(encoding="utf-8")),
                        "SPECIAL_MODEL_TYPE_TO_MODULE_NAME",
                    )
                )
            )
    defined = _defining_modules(pkg)
    for cls, entry in archs.items():
        entry["model_types"].sort()
        if len(entry["model_types"]) > 1 and cls in defined:
            owners = [
                mt
                for mt in entry["model_types"]
                if special.get(mt, mt.replace("-", "_")) == defined[cls]
            ]
            if len(owners) == 1:
                entry["owner"] = owners[0]
    return {
        "generated_by": "tools/extract_transformers_mappings.py",
        "transformers_version": version,
        "source_files": ["transformers/" + MODELING] + ["transformers/" + r for r in CONFIGS],
        "mapping_priority": order,
        "architectures": {k: archs[k] for k in sorted(archs)},
        "model_types": sorted(model_types),
    }


def dumps(data: dict) -> str:
    """JSON with one architecture per line: small diffs when transformers is bumped."""
    lines = ["{"]
    for key, value in data.items():
        if key == "architectures":
            lines.append(f'  "{key}": {{')
            items = list(value.items())
            for i, (arch, entry) in enumerate(items):
                comma = "," if i < len(items) - 1 else ""
                lines.append(f"    {json.dumps(arch)}: {json.dumps(entry)}{comma}")
            lines.append("  },")
        else:
            lines.append(f"  {json.dumps(key)}: {json.dumps(value)},")
    lines[-1] = lines[-1].rstrip(",")
    lines.append("}")
    return "\n".join(lines) + "\n"


def locate() -> tuple[Path, str]:
    """The installed transformers package directory and version, without importing it."""
    spec = importlib.util.find_spec("transformers")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(
            "transformers is not installed in this interpreter; see the module docstring"
        )
    pkg = Path(next(iter(spec.submodule_search_locations)))
    return pkg, importlib.metadata.version("transformers")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("data/transformers_model_types.json"))
    ap.add_argument(
        "--transformers-dir",
        type=Path,
        default=None,
        help="an unpacked transformers/ package directory instead of the installed one",
    )
    args = ap.parse_args(argv)
    if args.transformers_dir:
        pkg = args.transformers_dir
        m = _VERSION_RE.search((pkg / "__init__.py").read_text(encoding="utf-8"))
        version = m.group(1) if m else "unknown"
    else:
        pkg, version = locate()
    data = extract(pkg, version)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(dumps(data), encoding="utf-8")
    print(
        f"{args.out}: {len(data['architectures'])} architectures, "
        f"{len(data['model_types'])} model types, transformers {version}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
