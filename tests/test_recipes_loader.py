"""load_repo: the snapshot loads; broken input names file and field; local defects are problems."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from compat.errors import UserError
from compat.recipes import load_repo

from tests.conftest import SNAPSHOT  # noqa: E402 (COMPAT_RECIPES_SNAPSHOT, as every test reads it)
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "recipes"
MINIMAL = FIXTURES / "minimal"


@pytest.fixture(scope="module")
def snapshot_root() -> Path:
    if not (SNAPSHOT / "taxonomy.yaml").is_file():
        pytest.skip(f"recipes snapshot not found at {SNAPSHOT}")
    return SNAPSHOT


def test_snapshot_loads_all_173_recipes(snapshot_root: Path) -> None:
    repo = load_repo(snapshot_root)
    assert len(repo.recipes) == 173
    assert len(repo.strategies) == 9
    assert set(repo.kv_stores) == {"kv_store_centralized_mooncake", "kv_store_distributed_mooncake"}
    assert len(repo.hardware) == 26
    assert "models/zai-org/GLM-5.2.yaml" in repo.recipes
    assert repo.recipes["models/zai-org/GLM-5.2.yaml"].model_id == "zai-org/GLM-5.2"
    assert repo.hardware["mi300x"].platform == "rocm" and repo.hardware["b200"].platform == "cuda"
    assert repo.hardware["trillium"].platform is None
    assert repo.problems == []  # the snapshot is clean; any new problem is a finding to look at


def _tree_with(tmp_path: Path, fixture: str, target: str) -> Path:
    root = tmp_path / "recipes"
    shutil.copytree(MINIMAL, root)
    dest = root / target
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(FIXTURES / "malformed" / fixture, dest)
    return root


@pytest.mark.parametrize(
    "fixture,where,message",
    [
        ("missing_model_id.yaml", "models/acme/Broken.yaml: model.model_id", "is required"),
        ("model_id_not_string.yaml", "models/acme/Broken.yaml: model.model_id", "not a number"),
        (
            "variants_not_mapping.yaml",
            "models/acme/Broken.yaml: variants",
            "must be a mapping, not a list",
        ),
        ("variant_not_mapping.yaml", "models/acme/Broken.yaml: variants.default", "not a string"),
        ("features_not_mapping.yaml", "models/acme/Broken.yaml: features", "must be a mapping"),
        ("top_level_list.yaml", "models/acme/Broken.yaml", "top level must be a mapping"),
        ("syntax_error.yaml", "models/acme/Broken.yaml", "YAML syntax error at line 5"),
    ],
)
def test_unusable_recipe_raises_user_error_naming_file_and_field(
    tmp_path: Path, fixture: str, where: str, message: str
) -> None:
    root = _tree_with(tmp_path, fixture, "models/acme/Broken.yaml")
    with pytest.raises(UserError) as err:
        load_repo(root)
    assert err.value.where == where
    assert message in err.value.message
    assert err.value.line().startswith(where + ": ")


def test_strategy_without_name_raises(tmp_path: Path) -> None:
    root = _tree_with(tmp_path, "strategy_without_name.yaml", "strategies/broken.yaml")
    with pytest.raises(UserError) as err:
        load_repo(root)
    assert err.value.where == "strategies/broken.yaml: name"


def test_not_a_checkout(tmp_path: Path) -> None:
    with pytest.raises(UserError) as err:
        load_repo(tmp_path)
    assert err.value.where == f"--recipes {tmp_path}" and "models/" in err.value.message


def test_confined_defects_become_problems_not_exceptions() -> None:
    repo = load_repo(MINIMAL)
    lines = {p.line() for p in repo.problems}
    gadget = "models/acme/Gadget.yaml"
    assert (
        f"{gadget}: compatible_strategies[1]: unknown strategy id 'multi_node_teleport'; skipped"
        in lines
    )
    assert f"{gadget}: features.tool_calling.args: must be a list of strings, not a string" in lines
    assert f"{gadget}: features.fancy.args[2]: must be a string, not a boolean; dropped" in lines
    assert any("features.spec_decoding.strategies" in line and "ignored" in line for line in lines)
    assert (
        "models/acme/Widget.yaml: variants.small.default_modes.spec_decoding: "
        "references unknown mode 'warp'" in lines
    )
