"""`compat overrides`: the fix stage's plans rendered as YAML, and exactly those written by --apply.

A real build of the fixture recipes at the fixture release gives causes and planned fixes;
a hand-made database reproduces the case where the two used to disagree (one mode blocked,
another unknown, on one strategy: the printed YAML said "left ungated" while --apply wrote
a gate planned by the fix stage).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import jsonschema
import pytest
import yaml

from compat import api, store
from compat import tables as t
from compat.emit.overrides import edits_of, generate_overrides, load_schema, render_yaml, validate
from compat.errors import UserError
from compat.fix.edits import Edit, dumps
from compat.fix.plan import _merge
from compat.fix.context import Proposal
from compat.fix.writer import apply_fixes, planned_fixes

HERE = Path(__file__).resolve().parent
RECIPES = HERE / "fixtures" / "recipes" / "minimal"
MINI = HERE / "fixtures" / "minitrees" / "dispatch"
HF = HERE / "fixtures" / "hardening" / "hf"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("overrides") / "c.db"
    mp = pytest.MonkeyPatch()
    mp.setenv("COMPAT_CACHE", str(tmp_path_factory.mktemp("cache")))
    try:
        api.build(RECIPES, [], [f"{MINI}=0.0.1"], path, hf_config_dir=HF)
    finally:
        mp.undo()
    return path


def parsed(doc_text: str) -> dict:
    return yaml.safe_load(doc_text) or {}


def test_the_yaml_is_the_document_and_validates(built: Path) -> None:
    doc = generate_overrides(built)
    text = render_yaml(doc)
    data = parsed(text)
    assert data == doc.to_dict()
    validate(data)
    assert doc.recipes, "the fixture build has blocked commands"
    # at explicit releases no pin can move and no gate keeps a working strategy: each says why
    assert any("no_fix" in entry for entry in data.values())


def assert_printed_is_applied(db: Path, recipes: Path, tmp_path: Path) -> int:
    """One planner: the edits the YAML shows, merged as the writer merges them, are the edits
    `--apply` writes, and applying either gives the same files. Returns the recipes fixed."""
    data = parsed(render_yaml(generate_overrides(db)))
    planned = planned_fixes(db)
    shown = {recipe: edits_of(entry) for recipe, entry in data.items() if "fixes" in entry}
    assert set(shown) == set(planned)
    for recipe, fixes in planned.items():
        want = _merge([Proposal(kind, tuple(e), summary) for kind, summary, e in fixes])
        got = _merge([Proposal("shown", tuple(shown[recipe]), "")])
        assert [(e.op, e.path, e.value, e.old) for e in got] == [(e.op, e.path, e.value, e.old) for e in want]
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(recipes, a)
    shutil.copytree(recipes, b)
    apply_fixes(db, a)
    from compat.fix.edits import apply
    from compat.fix.yaml_edit import edit_recipe_text, load_data

    for recipe, edits in shown.items():
        path = b / recipe
        text = path.read_text()
        merged = _merge([Proposal("shown", tuple(edits), "")])
        path.write_text(edit_recipe_text(text, merged, apply(load_data(text), merged)).text)
    for path in sorted(a.rglob("*.yaml")):
        assert path.read_text() == (b / path.relative_to(a)).read_text(), path
    return len(shown)


def _one_mode_blocked_one_unknown(path: Path) -> Path:
    """GLM-5.2-shaped rows: on multi_node_tp_pp mode mtp is blocked, mode dspark unknown; the fix
    stage planned a gate for the mtp cause."""
    gate = Edit("set", ("features", "spec_decoding", "strategies"), ["single_node_tp"], after="description",
                comment="vllm-compat: gate")
    base = {"vllm_version": "0.23.0", "platform": "cuda", "recipe": "models/a.yaml", "model_id": "acme/a",
            "variant": "default", "strategy": "multi_node_tp_pp", "feature": "spec_decoding", "judged": 1,
            "pinned": 1}
    with store.writing(path) as db:
        db.append(t.Verdict, [
            dict(base, id=1, mode="mtp", status="blocked", reason="draft lacks PP", cause_id=1, works_from="0.30.0"),
            dict(base, id=2, mode="dspark", status="unknown", reason="draft checkpoint unresolved"),
            dict(base, id=3, strategy="single_node_tp", mode="mtp", status="ok")])
        db.append(t.CauseRow, [{"id": 1, "recipe": "models/a.yaml", "kind": "feature", "element":
                                "features.spec_decoding", "mode": "mtp", "label": "spec_decoding:mtp",
                                "fix_kind": "gate", "fix": "gate spec_decoding off multi_node_tp_pp",
                                "fix_edits": dumps([gate]), "works_from": "0.30.0"}])
        db.append(t.VerdictCause, [{"verdict_id": 1, "cause_id": 1}])
    return path


def test_a_mode_conflict_shows_the_gate_apply_writes(tmp_path: Path) -> None:
    """The defect (issue 17): both now say what the fix stage planned."""
    db = _one_mode_blocked_one_unknown(tmp_path / "c.db")
    text = render_yaml(generate_overrides(db))
    assert "left ungated" not in text
    entry = parsed(text)["models/a.yaml"]
    assert entry["fixes"][0]["kind"] == "gate"
    assert [(e.path, e.value) for e in edits_of(entry)] == [(("features", "spec_decoding", "strategies"),
                                                              ["single_node_tp"])]
    # the information part names only the blocked mode
    unsupported = entry["strategy_overrides"]["multi_node_tp_pp"]["unsupported_features"]["spec_decoding"]
    assert unsupported["modes"] == ["mtp"] and unsupported["works_from"] == "0.30.0"
    recipes = tmp_path / "recipes" / "models"
    recipes.mkdir(parents=True)
    text_a = "model:\n  model_id: acme/a\nfeatures:\n  spec_decoding:\n    description: mtp\n    args: []\n"
    (recipes / "a.yaml").write_text(text_a)
    with store.writing(db) as s:
        s.replace(t.RecipeFile, [{"path": "models/a.yaml", "sha256": hashlib.sha256(text_a.encode()).hexdigest()}])
    assert assert_printed_is_applied(db, tmp_path / "recipes", tmp_path / "applied") == 1
    apply_fixes(db, tmp_path / "recipes")
    assert yaml.safe_load((recipes / "a.yaml").read_text())["features"]["spec_decoding"]["strategies"] == \
        ["single_node_tp"]


def test_empty_document_renders_and_validates(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    with store.writing(db) as s:
        s.append(t.Verdict, [{"vllm_version": "0.1.0", "platform": "cuda", "recipe": "models/a.yaml",
                              "status": "ok", "judged": 1}])
    text = render_yaml(generate_overrides(db))
    assert parsed(text) == {}
    validate({})


def test_schema_rejects_unknown_keys_and_empty_edits() -> None:
    v = jsonschema.Draft202012Validator(load_schema())
    assert list(v.iter_errors({"models/a.yaml": {"features": {"x": {"strategies": ["a"]}}}}))
    bad = {"models/a.yaml": {"fixes": [{"kind": "gate", "fix": "x", "causes": ["c"], "works_from": None,
                                        "edits": []}]}}
    assert list(v.iter_errors(bad))
    with pytest.raises(UserError):
        validate(bad)


def test_db_without_verdicts_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such database"):
        generate_overrides(tmp_path / "missing.db")
