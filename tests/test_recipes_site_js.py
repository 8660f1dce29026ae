"""Every command vllm-compat judges is the one the recipes site emits, checked by its own JavaScript.

Two references, run under node from the snapshot itself (tools/recipes_site):
`src/lib/command-synthesis.js` given each render's exact inputs, and the whole
`scripts/build-recipes-api.mjs` run in a scratch directory (the JSON API as
published: which commands, at which sizes). js-yaml comes from npm into the
cache; without node or the registry these tests skip and say why.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from compat.recipes import load_repo
from compat.recipes.enumerate import iter_renders
from compat.recipes.sizing import PdPool
from tests.site_tool import js_yaml_or_skip

pytestmark = pytest.mark.slow

@pytest.fixture(scope="module")
def site(
    snapshot: Path, compat_cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    tool, modules = js_yaml_or_skip(compat_cache)
    repo = load_repo(snapshot)
    renders = [r for r in iter_renders(repo) if r.sizing is not None]
    return {
        "tool": tool,
        "repo": repo,
        "modules": modules,
        "renders": renders,
        "replayed": tool.replay(snapshot, renders, modules),
        "published": tool.publish_api(snapshot, modules, tmp_path_factory.mktemp("api")),
    }


def test_every_render_is_what_command_synthesis_js_renders(site: dict[str, Any]) -> None:
    tally = site["tool"].compare_replay(site["renders"], site["replayed"])
    print("\n" + "\n".join(tally.lines("renders vs command-synthesis.js, same inputs")))
    assert set(tally.rows) == {"api", "ui"}
    assert tally.roles["worker"] > 0 and tally.roles["prefill worker"] > 0
    assert tally.differences == [], "\n".join(tally.differences[:30])


def test_api_renders_are_what_the_json_api_publishes(site: dict[str, Any]) -> None:
    report = site["tool"].compare_api(site["repo"], site["renders"], site["published"])
    print("\n" + "\n".join(report.lines()))
    assert sum(report.tally.rows.values()) > 5000
    assert report.not_rendered == [], "\n".join(report.not_rendered[:30])
    assert report.not_published == [], "\n".join(report.not_published[:30])
    assert report.tally.differences == [], "\n".join(report.tally.differences[:30])


def test_the_replay_follows_the_inputs(site: dict[str, Any]) -> None:
    """Sizes changed on the way to node change the site's commands: the comparison can fail."""
    renders = site["renders"]
    multi = next(r for r in renders if r.strategy == "multi_node_tp" and r.nodes == 2)
    pd = next(
        r
        for r in renders
        if r.strategy == "pd_cluster" and r.source == "ui" and r.sizing.pd_pools is not None
    )
    resized = [
        dataclasses.replace(multi, sizing=dataclasses.replace(multi.sizing, node_count=3)),
        dataclasses.replace(
            pd,
            sizing=dataclasses.replace(
                pd.sizing,
                pd_pools=tuple(
                    (role, PdPool(pool.nodes + 1, pool.parallelism))
                    for role, pool in pd.sizing.pd_pools
                ),
            ),
        ),
    ]
    replayed = site["tool"].replay(site["repo"].root, resized, site["modules"])
    tally = site["tool"].compare_replay(resized, replayed)
    assert len(tally.differences) == 2, tally.differences
    assert len(replayed[0]) == 3  # head and two workers
