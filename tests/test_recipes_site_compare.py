"""tools/recipes_site/compare.py without node: what it sends, what it reads back, how it counts."""

from __future__ import annotations

from types import ModuleType

import pytest

from compat.recipes.enumerate import Render
from compat.recipes.sizing import PdPool, Sizing
from tests.site_tool import load_compare

@pytest.fixture(scope="module")
def tool() -> ModuleType:
    return load_compare()


def _render(**kw: object) -> Render:
    base = dict(
        recipe="models/acme/W.yaml",
        variant="default",
        profile="h200",
        platform="cuda",
        strategy="pd_cluster",
        feature="spec_decoding",
        mode="mtp",
        gated=True,
        source="ui",
        features=("tool_calling", "spec_decoding"),
        modes=(("spec_decoding", "mtp"),),
        sizing=Sizing(
            "ui",
            1,
            (("prefill", PdPool(2, "tep")), ("decode", PdPool(1, "dep"))),
            pool_followers=True,
        ),
        argvs=(("prefill", ("vllm", "serve", "m")),),
        docker_pin=None,
        problems=(),
        nodes=1,
    )
    base.update(kw)
    return Render(**base)  # type: ignore[arg-type]


def test_job_carries_the_render_inputs(tool: ModuleType) -> None:
    job = tool._job(7, _render())
    assert job == {
        "id": 7,
        "recipe": "models/acme/W.yaml",
        "variant": "default",
        "strategy": "pd_cluster",
        "hw": "h200",
        "features": ["tool_calling", "spec_decoding"],
        "modes": {"spec_decoding": "mtp"},
        "ungated": ["spec_decoding"],
        "nodeCount": 1,
        "pdNodes": {
            "prefill": {"nodes": 2, "parallelism": "tep"},
            "decode": {"nodes": 1, "parallelism": "dep"},
        },
        "followers": True,
    }
    legacy = tool._job(0, _render(sizing=Sizing("api", 2), gated=False))
    assert (legacy["pdNodes"], legacy["nodeCount"], legacy["ungated"]) == (None, 2, [])


def test_published_documents_become_role_argvs(tool: ModuleType) -> None:
    multi = {
        "deploy_type": "multi_node",
        "head_argv": ["vllm", "serve", "m", "--node-rank", "0"],
        "worker_argvs": [["vllm", "serve", "m", "--node-rank", "1", "--headless"]],
    }
    assert [r for r, _ in tool._published_argvs(multi)] == ["", "worker 1"]
    pd = {"deploy_type": "pd_cluster", "prefill": {"argv": ["a"]}, "decode": {"argv": ["b"]}}
    assert tool._published_argvs(pd) == (("prefill", ("a",)), ("decode", ("b",)))
    assert tool._published_argvs({"deploy_type": "single_node", "argv": ["x"]}) == (("", ("x",)),)
    assert tool._published_argvs({"deploy_type": "kv_store_lb"}) == ()


def test_tally_counts_rows_and_roles_and_keeps_every_difference(tool: ModuleType) -> None:
    kinds = [tool.role_kind(r) for r in ("", "worker 2", "prefill", "decode worker 1")]
    assert kinds == ["head", "worker", "prefill", "decode worker"]
    tally = tool.Tally()
    want = (("", ("vllm", "serve", "m", "--tp", "8")), ("worker 1", ("vllm", "serve", "m")))
    assert tally.add("api", "same", want, want)
    assert not tally.add("ui", "changed", want, ((want[0][0], ("vllm", "serve", "m")), want[1]))
    assert not tally.add("ui", "no worker", want, want[:1])
    assert not tally.add("ui", "unjudged", want, None)
    assert (tally.rows["ui"], tally.rows_same["ui"], tally.rows_same["api"]) == (3, 0, 1)
    assert (tally.roles["head"], tally.roles_same["head"]) == (4, 2)
    assert (tally.roles["worker"], tally.roles_same["worker"]) == (4, 2)
    assert [d.split(":")[0] for d in tally.differences] == ["changed", "no worker", "unjudged"]
    assert "worker 1: missing" in tally.differences[1]
    assert "not judged by vllm-compat" in tally.differences[2]
    published = want[:1]  # node 0 only, as the JSON API publishes PD pools
    assert not tool.Tally().add("api", "more nodes", published, want)
    assert tool.Tally().add("api", "more nodes", published, want, covers=True)
    assert not tool.Tally().add("api", "other", published, want[1:], covers=True)
