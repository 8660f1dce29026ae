"""The argument replay's findings in a release's source, cached across processes
(compat.verdict.replay_cache): exact ASTs back, and the same findings from a cached entry."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import pytest

from compat.verdict import replay_cache
from compat.verdict.arguments import ServeParser, check_arguments
from compat.verdict.config_values import Validator, schemas_from_rows
from compat.verdict.serve_rules import ServeRules
from tests import test_arguments as ta

SOURCE = '''
import x
@decorator(1, k=b"\\x00\\xff")
async def f(a: int, /, b=1j, *args: "str", c=..., **kw) -> None:
    global g
    x = f"{a!r:>{b}} {c=}"
    y = [i for i in range(3) if i] + {1: 2}[1:] + (1e300 * 1e300,)
    with open(a) as h, (z := 3):
        pass
    try:
        return lambda q, *, r=None: q
    except* ValueError as e:
        raise
    match a:
        case {"k": [1, *rest]}: pass
        case Point(x=0) | None: pass
'''


def test_an_ast_comes_back_exactly() -> None:
    mod = ast.parse(SOURCE)
    back = replay_cache.from_doc(replay_cache.to_doc(mod))
    assert ast.dump(back, include_attributes=True) == ast.dump(mod, include_attributes=True)
    compile(back, "<back>", "exec")
    value = {"t": (1, "a", None, True, 2.5), "l": [b"\x00", 3j, ...]}
    assert replay_cache.from_doc(replay_cache.to_doc(value)) == value


def test_a_node_type_python_lacks_is_not_loaded() -> None:
    with pytest.raises(ValueError):
        replay_cache.from_doc({"_": "path"})  # ast.path is no node type: nothing else is looked up


def test_only_index_releases_are_cached(isolated_cache: Path) -> None:
    calls = []

    def find() -> dict:
        calls.append(1)
        return {"fn": ast.parse("def f():\n    return 1\n").body[0]}

    index = SimpleNamespace(sha256="ab" * 32, version="1.0")
    local = SimpleNamespace(sha256=None, version="1.0")
    for tree in (index, index, local, local):
        found = replay_cache.cached(tree, "kind", find)
        assert isinstance(found["fn"], ast.FunctionDef) and found["fn"].lineno == 1
    assert len(calls) == 3  # the index release was found once, then read from the cache
    assert list((isolated_cache / "replay").rglob("*.json.gz"))


def test_cached_replay_finds_what_the_source_gives(tmp_path: Path, isolated_cache: Path) -> None:
    """Every rule of test_arguments, judged with the replay found in the source and with the
    replay read back from the cache: the same findings, field for field."""
    templates = ["examples/tool_chat_template_a.jinja",
                 "vllm/transformers_utils/chat_templates/template_b.jinja"]
    results = []
    for run in ("cold", "warm"):
        tree = ta._mini_release(tmp_path / run, ta.SERVE)
        tree.sha256 = "cd" * 32  # as if from the index: cached on the first run, read on the second
        release = SimpleNamespace(
            version=ta.VERSION,
            serve_parser=ServeParser(ta.VALUES, Validator(schemas_from_rows(ta.CONFIG)), ta.VERSION, tree),
            serve_rules=ServeRules(tree, {"tool": {"hermes", "glm45"}, "reasoning": {"qwen3"}}, templates,
                                   ta.VERSION))
        results.append([check_arguments(release, ["vllm", "serve", "org/model", *argv], ta.SHELL).findings
                        for argv, _want in ta.RULES])
        kinds = sorted(p.name for p in (isolated_cache / "replay").rglob("*.json.gz"))
        assert len(kinds) == 2  # serve_rules and argv_rewrite
    assert results[0] == results[1]
    assert any(f.status == "blocked" and f.stage != "parse" for fs in results[1] for f in fs)


def _rewrite_tree(root: Path, offset: int):
    from compat.sources.tree import VllmTree

    (root / "vllm/utils").mkdir(parents=True)
    (root / "vllm/utils/argparse_utils.py").write_text(
        "\n" * offset + "class FlexibleArgumentParser:\n"
        "    def parse_args(self, args=None, namespace=None):\n"
        "        if '--config' in args:\n"
        "            args = self._pull_args_from_config(args)\n"
        "        if '--boom' in args:\n"
        "            raise ValueError('boom ' + str(len(args)))\n"
        "        if '--name' in args:\n"
        "            return undefined_name\n"
        "        return super().parse_args([a.replace('_', '-') for a in args], namespace)\n")
    return VllmTree(root, f"0.0.{offset}", "src")


def test_releases_with_one_parse_args_share_its_runs(tmp_path: Path) -> None:
    """The same parse_args at another place (another release) gives the same runs, each failure
    told with its own release's file and line; a run that read a --config file is not shared."""
    from compat.verdict import argv_rewrite
    from compat.verdict.argv_rewrite import ReleaseRewrite, RewriteError

    a, b = ReleaseRewrite(_rewrite_tree(tmp_path / "a", 0)), ReleaseRewrite(_rewrite_tree(tmp_path / "b", 5))
    assert a.shape == b.shape and (a.line, b.line) == (2, 7)
    argv = ["serve", "m", "--max_num_seqs", "2"]
    assert a(argv, None) == b(argv, None) == ["serve", "m", "--max-num-seqs", "2"]
    assert (a.shape, tuple(argv)) in argv_rewrite._RUNS
    for rewrite in (a, b):
        with pytest.raises(RewriteError) as raised:
            rewrite(["serve", "--boom"], None)
        assert (raised.value.exc, raised.value.message) == ("ValueError", "boom 2")
        with pytest.raises(RewriteError) as raised:
            rewrite(["serve", "--name"], None)
        assert raised.value.exc == "unknown"
        assert f"argparse_utils.py:{rewrite.line}) uses name 'undefined_name'" in raised.value.message
    pulls = []
    config = ["serve", "--config", "c.yaml"]
    for rewrite in (a, b):
        assert rewrite(config, lambda args: pulls.append(1) or ["serve", "--x_y", "1"]) == ["serve", "--x-y", "1"]
    assert len(pulls) == 2 and (a.shape, tuple(config)) not in argv_rewrite._RUNS


def test_a_cached_override_runner_is_the_one_found(isolated_cache: Path) -> None:
    """The hf_config_override runner built from the cache holds what a fresh one finds, and
    runs the same."""
    from compat.sources import tree_from_path
    from compat.verdict.knowledge import _runner
    from compat.vllm.speculative import OverrideRunner

    dispatch = Path(__file__).resolve().parent / "fixtures" / "minitrees" / "dispatch"
    tree = tree_from_path(f"{dispatch}=0.0.1")
    tree.sha256 = "ef" * 32  # as if from the index
    fresh = OverrideRunner(tree)
    assert fresh.fn is not None
    config = {"model_type": "fancy", "num_nextn_predict_layers": 1, "architectures": ["Fancy"]}
    assert fresh.run(dict(config)).architectures == ("FancyMTP",)
    for _run in ("cold", "warm"):
        runner = _runner(tree)
        assert set(vars(runner)) == set(vars(fresh))
        assert (runner.file, runner.line) == (fresh.file, fresh.line)
        assert ast.dump(runner.fn, include_attributes=True) == ast.dump(fresh.fn, include_attributes=True)
        assert runner.run(dict(config)) == fresh.run(dict(config))
    assert len(list((isolated_cache / "replay").rglob("*.json.gz"))) == 1
