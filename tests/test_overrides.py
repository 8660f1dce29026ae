"""`compat overrides`: verdict rows -> overrides YAML, and the honoured gate applied to recipes.

A small verdict database is built here by hand, shaped like the GLM-5.2 report:
MTP and DSpark both fail on multi_node_tp_pp at the pinned 0.23.0 (ok from
0.33.0), a mode-only conflict on DeepSeek-V4-Flash (MTP blocked, DSpark ok on
pd_cluster), and a Kimi-K3 row its existing allowlist already gates.
"""

from __future__ import annotations

import difflib
import shutil
import sqlite3
from pathlib import Path

import jsonschema
import pytest
import yaml

from compat import db as dbm
from compat.emit.overrides import (
    OverridesDoc,
    apply_overrides,
    generate_overrides,
    load_schema,
    render_yaml,
    validate,
)
from compat.errors import UserError
from compat.recipes.offering import effective_compatible_strategies
from compat.recipes.repo import Recipe

SNAPSHOT = Path(__file__).resolve().parents[2] / "shared" / "recipes-snapshot"
GLM = "models/zai-org/GLM-5.2.yaml"
DSV4 = "models/deepseek-ai/DeepSeek-V4-Flash.yaml"
KIMI = "models/moonshotai/Kimi-K3.yaml"
QWEN = "models/Qwen/Qwen3-4B.yaml"

PP_MESSAGE = (
    "NotImplementedError: Pipeline parallelism is not supported for this model. "
    "Supported models implement the `SupportsPP` interface."
)
PP_EVIDENCE = "vllm/config/model.py:1200 (0.23.0); vllm/config/speculative.py:955 (0.23.0)"


@pytest.fixture()
def recipes(tmp_path: Path) -> Path:
    """A private copy of the recipes snapshot (tests write into it)."""
    if not (SNAPSHOT / "taxonomy.yaml").is_file():
        pytest.skip(f"recipes snapshot not found at {SNAPSHOT}")
    dest = tmp_path / "recipes"
    shutil.copytree(SNAPSHOT, dest)
    return dest


def _effective(root: Path, recipe: str) -> list[str]:
    data = yaml.safe_load((root / recipe).read_text(encoding="utf-8"))
    return effective_compatible_strategies(Recipe(recipe, data))


def _row(
    recipe: str,
    strategy: str,
    feature: str = "",
    mode: str = "",
    status: str = "ok",
    *,
    version: str = "0.23.0",
    platform: str = "cuda",
    hardware: str = "b200",
    variant: str = "default",
    model_id: str = "",
    pinned: int = 1,
    gated: int = 0,
    works_from: str = "",
    message: str = "",
    reason: str = "",
    evidence: str = "",
) -> dict:
    return {
        "vllm_version": version,
        "platform": platform,
        "hardware": hardware,
        "recipe": recipe,
        "model_id": model_id,
        "variant": variant,
        "strategy": strategy,
        "feature": feature,
        "mode": mode,
        "status": status,
        "message": message,
        "reason": reason,
        "evidence": evidence,
        "gated": gated,
        "pinned": pinned,
        "judged": pinned,
        "works_from": works_from,
        "argv": "",
        "chain": "[]",
    }


def _pp_blocked(**kw) -> dict:
    return dict(
        status="blocked",
        message=PP_MESSAGE,
        evidence=PP_EVIDENCE,
        works_from="0.33.0",
        reason=(
            "the MTP draft (DeepSeekMTPModel) does not support PP, and the draft "
            "parallel config copies the target's pipeline_parallel_size"
        ),
        **kw,
    )


def _make_db(path: Path, rows: list[dict]) -> Path:
    engine = dbm.engine_for(path)
    dbm.init_schema(engine)
    dbm.replace_rows(engine, dbm.Verdict, rows)
    engine.dispose()
    return path


def _scenario_rows(root: Path) -> list[dict]:
    rows: list[dict] = []
    # GLM-5.2: MTP on four variants, DSpark on `default`; both fail only under TP x PP.
    glm_modes = [("default", "mtp"), ("default", "dspark"), ("nvfp4", "mtp")]
    for strategy in _effective(root, GLM):
        for version, pinned in (("0.23.0", 1), ("0.33.0", 0)):
            rows.append(
                _row(GLM, strategy, version=version, pinned=pinned, model_id="zai-org/GLM-5.2")
            )
            for variant, mode in glm_modes:
                kw = {
                    "version": version,
                    "pinned": pinned,
                    "variant": variant,
                    "model_id": "zai-org/GLM-5.2",
                }
                if strategy == "multi_node_tp_pp" and version == "0.23.0":
                    rows.append(_row(GLM, strategy, "spec_decoding", mode, **_pp_blocked(**kw)))
                else:
                    rows.append(_row(GLM, strategy, "spec_decoding", mode, **kw))
        # the ROCm profile runs the mxfp4 variant (MTP only)
        rows.append(
            _row(
                GLM,
                strategy,
                "spec_decoding",
                "mtp",
                platform="rocm",
                hardware="mi355x",
                variant="mxfp4",
                **(_pp_blocked() if strategy == "multi_node_tp_pp" else {}),
            )
        )
    # a non-pinned finding that only pinned_only=False may report
    rows.append(
        _row(
            GLM,
            "single_node_tp",
            "tool_calling",
            status="blocked",
            version="0.22.0",
            pinned=0,
            works_from="0.23.0",
            message="ValueError: unknown tool parser glm47",
            reason="tool parser glm47 not registered",
            evidence="vllm/tool_parsers/__init__.py:40 (0.22.0)",
        )
    )
    # DeepSeek-V4-Flash: MTP (fp8) blocked on pd_cluster, DSpark (default) ok there.
    for strategy in _effective(root, DSV4):
        rows.append(_row(DSV4, strategy))
        rows.append(_row(DSV4, strategy, "spec_decoding", "dspark", variant="default"))
        if strategy == "pd_cluster":
            rows.append(
                _row(
                    DSV4,
                    strategy,
                    "spec_decoding",
                    "mtp",
                    "blocked",
                    variant="fp8",
                    message="ValueError: mtp with NIXL is not supported.",
                    reason="synthetic: MTP drafts cannot use the NIXL KV connector",
                    evidence="vllm/v1/spec_decode/eagle.py:77 (0.25.0)",
                    works_from="",
                )
            )
        else:
            rows.append(_row(DSV4, strategy, "spec_decoding", "mtp", variant="fp8"))
    # Kimi-K3: already gated off multi_node_tp_pp by its own allowlist.
    rows.append(
        _row(
            KIMI, "multi_node_tp_pp", "spec_decoding", "", gated=1, **_pp_blocked(version="0.27.1")
        )
    )
    rows.append(_row(KIMI, "multi_node_tp", "spec_decoding", "", version="0.27.1"))
    # Qwen3-4B: a base-command failure, informational only.
    rows.append(
        _row(
            QWEN,
            "single_node_tp",
            status="blocked",
            version="0.11.0",
            message="ValueError: synthetic base failure",
            reason="synthetic base failure",
            evidence="vllm/engine/arg_utils.py:1 (0.11.0)",
            works_from="0.12.0",
        )
    )
    return rows


@pytest.fixture()
def scenario(recipes: Path, tmp_path: Path) -> Path:
    return _make_db(tmp_path / "compat.db", _scenario_rows(recipes))


def _snapshot_bytes(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


# --------------------------------------------------------------------------- generate / render


def test_generated_yaml_validates_and_matches_the_document(scenario: Path, recipes: Path) -> None:
    doc = generate_overrides(scenario, recipes)
    text = render_yaml(doc)
    data = yaml.safe_load(text)
    jsonschema.Draft202012Validator(load_schema()).validate(data)
    validate(data)
    assert data == doc.to_dict()
    assert set(data) == {GLM, DSV4, QWEN}  # Kimi-K3 is gated already: no finding

    glm = data[GLM]
    entry = glm["strategy_overrides"]["multi_node_tp_pp"]["unsupported_features"]["spec_decoding"]
    assert "modes" not in entry  # both offered modes fail: the whole feature
    assert entry["vllm"] == "0.23.0" and entry["works_from"] == "0.33.0"
    assert "pipeline_parallel_size" in entry["reason"]
    want = [s for s in _effective(recipes, GLM) if s != "multi_node_tp_pp"]
    assert glm["features"] == {"spec_decoding": {"strategies": want}}
    assert "tool_calling" not in str(glm)  # a non-pinned row is ignored by default

    # evidence and the vLLM message ride along as comments above the entries
    assert "# evidence: vllm/config/model.py:1200 (0.23.0)" in text
    assert "# evidence: vllm/config/speculative.py:955 (0.23.0)" in text
    assert f"# vLLM 0.23.0: {PP_MESSAGE}" in text
    assert "works from vLLM 0.33.0" in text

    dsv4 = data[DSV4]
    assert "features" not in dsv4  # mode-only conflict: not widened
    conflict = dsv4["mode_conflicts"]["spec_decoding"]["pd_cluster"]
    assert conflict["blocked_modes"] == ["mtp"] and conflict["other_modes"] == ["dspark"]
    assert conflict["gated"] is False and conflict["works_from"] is None
    unsupported = dsv4["strategy_overrides"]["pd_cluster"]["unsupported_features"]["spec_decoding"]
    assert unsupported["modes"] == ["mtp"]

    qwen = data[QWEN]
    assert set(qwen) == {"model_id", "strategy_findings"} or set(qwen) == {"strategy_findings"}
    assert qwen["strategy_findings"]["single_node_tp"]["works_from"] == "0.12.0"


def test_schema_rejects_an_empty_allowlist_and_unknown_keys() -> None:
    schema = load_schema()
    bad_empty = {GLM: {"features": {"spec_decoding": {"strategies": []}}}}
    bad_key = {GLM: {"features": {"spec_decoding": {"strategies": ["a"], "modes": {}}}}}
    bad_path = {"/abs/GLM.yaml": {"features": {"f": {"strategies": ["a"]}}}}
    for bad in (bad_empty, bad_key, bad_path):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.Draft202012Validator(schema).validate(bad)
    with pytest.raises(UserError):
        validate(bad_empty)


def test_pinned_only_false_includes_every_release(scenario: Path, recipes: Path) -> None:
    doc = generate_overrides(scenario, recipes, pinned_only=False)
    glm = doc.to_dict()[GLM]
    assert "tool_calling" in glm["strategy_overrides"]["single_node_tp"]["unsupported_features"]
    jsonschema.Draft202012Validator(load_schema()).validate(yaml.safe_load(render_yaml(doc)))


def test_without_recipes_root_allowlists_come_from_the_rows(scenario: Path, recipes: Path) -> None:
    doc = generate_overrides(scenario)
    assert doc.allowlists_from == "verdict rows"
    want = [s for s in _effective(recipes, GLM) if s != "multi_node_tp_pp"]
    assert doc.to_dict()[GLM]["features"]["spec_decoding"]["strategies"] == want
    assert "Allowlists computed from: verdict rows" in render_yaml(doc)


def test_feature_rows_under_a_blocked_base_command_are_not_feature_findings(
    tmp_path: Path, recipes: Path
) -> None:
    """Where the base command cannot start, the feature cannot either; gating it would fix nothing."""
    base = {
        "status": "blocked",
        "version": "0.23.0",
        "platform": "rocm",
        "hardware": "mi355x",
        "variant": "mxfp4",
        "message": "ValueError: synthetic",
        "reason": "synthetic base failure",
        "evidence": "vllm/x.py:1 (0.23.0)",
        "works_from": "0.24.0",
    }
    db = _make_db(
        tmp_path / "base.db",
        [
            _row(GLM, "multi_node_tep", **base),
            _row(GLM, "multi_node_tep", "spec_decoding", "mtp", **base),
            _row(GLM, "multi_node_tep", "spec_decoding", "mtp", variant="default"),
            _row(GLM, "multi_node_tep", "spec_decoding", "dspark", variant="default"),
        ],
    )
    data = generate_overrides(db, recipes).to_dict()
    assert set(data[GLM]) == {"model_id", "strategy_findings"}
    assert data[GLM]["strategy_findings"]["multi_node_tep"]["variants"] == ["mxfp4"]
    result = apply_overrides(generate_overrides(db, recipes), recipes)
    assert result.changed_files == []


def test_awkward_text_survives_rendering(tmp_path: Path, recipes: Path) -> None:
    awkward = {
        "status": "blocked",
        "reason": 'a "quoted": #not-a-comment\nsecond line — ünïcode',
        "message": "Error: x: y\n  z",
        "evidence": "vllm/a.py:1 (0.23.0)",
    }
    db = _make_db(
        tmp_path / "awk.db",
        [
            _row(GLM, "pd_cluster", "spec_decoding", "mtp", **awkward),
            _row(GLM, "pd_cluster", "spec_decoding", "dspark", **awkward),
            _row(GLM, "single_node_tp", "spec_decoding", "mtp"),
        ],
    )
    doc = generate_overrides(db, recipes)
    text = render_yaml(doc)
    data = yaml.safe_load(text)
    validate(data)
    assert data == doc.to_dict()
    entry = data[GLM]["strategy_overrides"]["pd_cluster"]["unsupported_features"]["spec_decoding"]
    assert entry["reason"] == 'a "quoted": #not-a-comment second line — ünïcode'
    assert "# vLLM 0.23.0: Error: x: y z" in text


def test_empty_document_renders_and_validates(tmp_path: Path, recipes: Path) -> None:
    db = _make_db(tmp_path / "ok.db", [_row(GLM, "single_node_tp", "spec_decoding", "mtp")])
    doc = generate_overrides(db, recipes)
    assert doc.recipes == {}
    data = yaml.safe_load(render_yaml(doc))
    assert data == {}
    validate(data)


# --------------------------------------------------------------------------- apply


def test_apply_changes_glm_only_by_comment_and_allowlist(scenario: Path, recipes: Path) -> None:
    before = _snapshot_bytes(recipes)
    doc = generate_overrides(scenario, recipes)
    result = apply_overrides(doc, recipes)

    assert result.changed_files == [GLM]
    assert result.methods[GLM] == "ruamel"  # GLM-5.2 round-trips byte-identically
    after = _snapshot_bytes(recipes)
    assert {k for k in before if before[k] != after[k]} == {GLM}
    assert set(after) == set(before)  # no stray temp files

    old = before[GLM].decode("utf-8")
    new = after[GLM].decode("utf-8")
    diff = list(difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0))
    added = [ln[1:] for ln in diff if ln.startswith("+") and not ln.startswith("+++")]
    removed = [ln for ln in diff if ln.startswith("-") and not ln.startswith("---")]
    hunks = [ln for ln in diff if ln.startswith("@@")]
    assert removed == [] and len(hunks) == 1
    want = [s for s in _effective(recipes, GLM) if s != "multi_node_tp_pp"]
    assert want == [
        "single_node_tp",
        "single_node_tep",
        "multi_node_tp",
        "multi_node_tep",
        "multi_node_dep",
        "pd_cluster",
    ]
    comments = [ln for ln in added if ln.startswith("    # ")]
    assert added == comments + ["    strategies:"] + [f"      - {s}" for s in want]
    assert 1 <= len(comments) <= 2
    assert "multi_node_tp_pp" in comments[0] and "vllm/config/model.py:1200 (0.23.0)" in " ".join(
        comments
    )
    assert "works from 0.33.0" in " ".join(comments)
    # inserted right after the feature's description, like Kimi-K3
    lines = new.splitlines()
    at = lines.index("    strategies:")
    assert lines[at - 1 - len(comments)].strip().startswith('description: "Multi-Token Prediction')
    assert lines[at + 1 + len(want)] == "    default_mode: mtp"
    # every comment of the original survives, verbatim
    for ln in old.splitlines():
        if ln.lstrip().startswith("#"):
            assert ln in lines
    # the applied file reads back as the gate
    data = yaml.safe_load(new)
    assert data["features"]["spec_decoding"]["strategies"] == want
    assert list(data["features"]["spec_decoding"])[:2] == ["description", "strategies"]
    # the returned diff is the same change
    assert result.diffs[GLM].startswith(f"--- a/{GLM}\n+++ b/{GLM}\n")
    # the mode conflict is reported, not applied
    assert any(recipe == DSV4 and "mode conflict" in why for recipe, why in result.skipped)


def test_second_apply_is_a_no_op(scenario: Path, recipes: Path) -> None:
    doc = generate_overrides(scenario, recipes)
    apply_overrides(doc, recipes)
    once = _snapshot_bytes(recipes)
    again = apply_overrides(generate_overrides(scenario, recipes), recipes)
    assert again.changed_files == [] and again.diffs == {}
    assert _snapshot_bytes(recipes) == once


def test_dry_run_writes_nothing_and_returns_the_diff(scenario: Path, recipes: Path) -> None:
    before = _snapshot_bytes(recipes)
    doc = generate_overrides(scenario, recipes)
    dry = apply_overrides(doc, recipes, dry_run=True)
    assert dry.dry_run and dry.changed_files == [GLM]
    assert _snapshot_bytes(recipes) == before
    real = apply_overrides(doc, recipes)
    assert real.diffs == dry.diffs
    assert "+    strategies:\n" in dry.diffs[GLM]


def test_mode_conflict_is_gated_only_when_asked(scenario: Path, recipes: Path) -> None:
    before = _snapshot_bytes(recipes)
    doc = generate_overrides(scenario, recipes, gate_mode_conflicts=True)
    data = yaml.safe_load(render_yaml(doc))
    jsonschema.Draft202012Validator(load_schema()).validate(data)
    assert data[DSV4]["mode_conflicts"]["spec_decoding"]["pd_cluster"]["gated"] is True
    want = [s for s in _effective(recipes, DSV4) if s != "pd_cluster"]
    assert data[DSV4]["features"]["spec_decoding"]["strategies"] == want

    result = apply_overrides(doc, recipes)
    assert sorted(result.changed_files) == sorted([GLM, DSV4])
    # DeepSeek-V4-Flash does not round-trip through ruamel byte-identically: the line editor did it
    assert result.methods[DSV4] == "lines" and result.notes[DSV4]
    old, new = before[DSV4].decode(), (recipes / DSV4).read_text(encoding="utf-8")
    diff = [
        ln
        for ln in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0)
        if ln[:1] in "+-" and ln[:3] not in ("+++", "---")
    ]
    assert all(ln.startswith("+") for ln in diff)
    assert yaml.safe_load(new)["features"]["spec_decoding"]["strategies"] == want
    assert "whole feature; only modes mtp fail" in new
    # the comment about default_mode stays directly above default_mode
    lines = new.splitlines()
    at = lines.index("    default_mode: mtp")
    assert lines[at - 1].strip().startswith("# checkpoints flip this to dspark")


def test_narrowing_an_existing_allowlist(recipes: Path, tmp_path: Path) -> None:
    """Kimi-K3 keeps its allowlist and comment; pd_cluster is dropped from it."""
    db = _make_db(
        tmp_path / "kimi.db",
        [
            _row(KIMI, "pd_cluster", "spec_decoding", **_pp_blocked(version="0.27.1")),
            _row(KIMI, "multi_node_tp", "spec_decoding", version="0.27.1"),
        ],
    )
    old = (recipes / KIMI).read_text(encoding="utf-8")
    doc = generate_overrides(db, recipes)
    result = apply_overrides(doc, recipes)
    assert result.changed_files == [KIMI]
    new = (recipes / KIMI).read_text(encoding="utf-8")
    diff = [
        ln
        for ln in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0)
        if ln[:1] in "+-" and ln[:3] not in ("+++", "---")
    ]
    assert [ln for ln in diff if ln.startswith("-")] == ["-      - pd_cluster"]
    assert all(ln.startswith("+    # ") for ln in diff if ln.startswith("+"))
    got = yaml.safe_load(new)["features"]["spec_decoding"]["strategies"]
    assert got == [
        "single_node_tp",
        "multi_node_tp",
        "multi_node_tep",
        "multi_node_dep",
        "multi_node_tp_dp",
    ]
    assert "# (vllm-project/vllm#50098), so the feature is gated off multi_node_tp_pp" in new
    assert apply_overrides(generate_overrides(db, recipes), recipes).changed_files == []


def test_a_gate_that_would_empty_the_allowlist_is_reported(recipes: Path, tmp_path: Path) -> None:
    """Kimi-K3's DCP feature is allowed on single_node_tp only; blocking it there cannot be gated."""
    db = _make_db(
        tmp_path / "dcp.db",
        [
            _row(
                KIMI,
                "single_node_tp",
                "decode_context_parallelism",
                status="blocked",
                version="0.27.1",
                reason="synthetic",
                message="ValueError: synthetic",
                evidence="vllm/x.py:1 (0.27.1)",
            ),
        ],
    )
    before = _snapshot_bytes(recipes)
    doc = generate_overrides(db, recipes)
    data = yaml.safe_load(render_yaml(doc))
    validate(data)
    assert "features" not in data[KIMI]
    assert data[KIMI]["ungateable"]["decode_context_parallelism"]["strategies"] == [
        "single_node_tp"
    ]
    result = apply_overrides(doc, recipes)
    assert result.changed_files == [] and _snapshot_bytes(recipes) == before
    assert any("empty" in why for _, why in result.skipped)


# --------------------------------------------------------------------------- bad input


def test_db_without_verdict_table_is_a_user_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE other (x)")
    con.commit()
    con.close()
    with pytest.raises(UserError) as err:
        generate_overrides(path)
    assert "verdict" in err.value.message and err.value.where == "empty.db"
    with pytest.raises(UserError):
        generate_overrides(tmp_path / "missing.db")
    (tmp_path / "junk.db").write_text("not sqlite at all, just text" * 100)
    with pytest.raises(UserError):
        generate_overrides(tmp_path / "junk.db")


def test_missing_recipe_file_is_a_user_error(scenario: Path, recipes: Path) -> None:
    doc = generate_overrides(scenario, recipes)
    (recipes / GLM).unlink()
    with pytest.raises(UserError) as err:
        generate_overrides(scenario, recipes)
    assert err.value.where == GLM
    with pytest.raises(UserError) as err:
        apply_overrides(doc, recipes)
    assert err.value.where == GLM


def test_recipe_path_escaping_the_root_is_rejected(tmp_path: Path, recipes: Path) -> None:
    db = _make_db(
        tmp_path / "evil.db",
        [
            _row(
                "../outside.yaml", "single_node_tp", "spec_decoding", status="blocked", reason="x"
            ),
            _row("../outside.yaml", "multi_node_tp", "spec_decoding"),
        ],
    )
    with pytest.raises(UserError):
        generate_overrides(db, recipes)
    doc = generate_overrides(db)
    with pytest.raises(UserError):
        apply_overrides(doc, recipes)
    assert isinstance(doc, OverridesDoc)
