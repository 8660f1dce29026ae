"""`compat lint -- vllm serve ...` as a user meets it: findings per release, bad input, the seed case."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.cli_kit import run

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "minitrees"
SEED_SPEC = '{"method":"mtp","num_speculative_tokens":1}'


@pytest.fixture(scope="module")
def mini_release(tmp_path_factory) -> Path:
    """A scannable mini release: the registry of `dispatch`, the CLI of `mini_current`, and
    the validation functions of tests/test_arguments.py."""
    from test_arguments import API_SERVER, CHAT_UTILS, CLI_ARGS, REGISTRY

    root = tmp_path_factory.mktemp("mini-release")
    shutil.copytree(FIXTURES / "dispatch" / "vllm", root / "vllm")
    shutil.copytree(FIXTURES / "mini_current" / "vllm", root / "vllm", dirs_exist_ok=True)
    cli = root / "vllm/entrypoints/openai/cli_args.py"
    cli.write_text(cli.read_text() + "\nfrom vllm.entrypoints.chat_utils import validate_chat_template\n\n\n"
                   + CLI_ARGS[CLI_ARGS.index("def validate_parsed_serve_args"):])
    for rel, text in {"vllm/entrypoints/chat_utils.py": CHAT_UTILS,
                      "vllm/entrypoints/openai/api_server.py": API_SERVER,
                      "vllm/transformers_utils/chat_templates/registry.py": REGISTRY}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    serve = root / "vllm/entrypoints/cli/serve.py"
    serve.write_text(serve.read_text() + "\nfrom vllm.entrypoints.openai.cli_args import validate_parsed_serve_args\n"
                     "from vllm.entrypoints.openai.api_server import setup_server\n")
    return root


def lint(mini: Path, *command: str, extra: tuple[str, ...] = (), cwd: Path | None = None):
    return run("lint", "--db", "absent.db", "--vllm-src", f"{mini}=0.0.1", "--no-search", *extra, "--",
               *command, cwd=cwd)


@pytest.fixture()
def replayed(monkeypatch, mini_release):
    """In-process lint of the mini release with its argv rewrite counted as verified (it has none
    of vLLM's code; the real releases' rewrites are verified by the golden data, tests below)."""
    from compat import lint as lintm
    from compat.verdict import engine

    monkeypatch.setattr(engine, "argv_rewrite_verified", lambda k: True)

    def go(*command: str, cwd: Path) -> tuple[int, str]:
        monkeypatch.chdir(cwd)
        r = lintm.lint(list(command), None, srcs=[f"{mini_release}=0.0.1"], search=False)
        return r.exit_code, lintm.render(r)

    return go


def test_findings_one_line_each_and_exit_1(replayed, tmp_path, isolated_cache) -> None:
    code, out = replayed("vllm", "serve", "no-such/model", "-tp", "two", "--bogus", cwd=tmp_path)
    assert code == 1
    lines = out.strip().splitlines()
    assert lines[0].startswith("0.0.1: blocked: ") and "invalid int value: 'two'" in lines[0]
    assert any("unrecognized arguments: --bogus" in line for line in lines)
    # an id no source knows is an unknown verdict, not an error: the truth is "not known"
    assert any(line.startswith("0.0.1: unknown: model config of no-such/model unresolved") for line in lines)
    assert lines[-1].startswith("works at none of the releases judged")


def test_json_format(mini_release, tmp_path, isolated_cache) -> None:
    r = lint(mini_release, "vllm", "serve", "m", "--bogus", extra=("--format", "json"), cwd=tmp_path)
    doc = json.loads(r.stdout)
    assert r.returncode == 1 and doc["model"] == "m" and doc["releases"][0]["status"] == "blocked"
    # the mini release's argv rewrite is not a verified one: a note, and flag names checked
    findings = doc["releases"][0]["findings"]
    assert findings[0]["status"] == "note" and "argv rewrite" in findings[0]["step"]
    assert any("--bogus does not exist" in f["step"] for f in findings)


@pytest.mark.parametrize("command,needle", [
    ([], "empty command"),
    (["  "], "empty command"),
    (["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"], "not a `vllm serve` command"),
    (["vllm", "bench", "serve"], "not a `vllm serve` command"),
])
def test_bad_commands_exit_2_one_line(tmp_path, isolated_cache, command, needle) -> None:
    r = run("lint", "--db", str(tmp_path / "c.db"), "--", *command, cwd=tmp_path)
    assert r.returncode == 2, r.stdout
    assert needle in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert "Traceback" not in r.stderr


def test_unknown_lint_option_before_the_separator_is_named(tmp_path, isolated_cache) -> None:
    r = run("lint", "--db", str(tmp_path / "c.db"), "--confg", "x.yaml", "--", "vllm", "serve", "m", cwd=tmp_path)
    assert r.returncode == 2 and "no such option: --confg" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_config_file_with_unbalanced_quotes_is_bad_input(tmp_path, isolated_cache) -> None:
    cfg = tmp_path / "serve.yaml"
    cfg.write_text('tensor-parallel-size: 2\nserved-model-name: "broken\n')
    r = run("lint", "--db", str(tmp_path / "c.db"), "--", "vllm", "serve", "m", "--config", str(cfg), cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.startswith(f"error: --config {cfg}: invalid YAML: ")
    assert len(r.stderr.strip().splitlines()) == 1
    r = run("lint", "--db", str(tmp_path / "c.db"), "--", "vllm", "serve", "m", "--config",
            str(tmp_path / "missing.yaml"), cwd=tmp_path)
    assert r.returncode == 2 and "no such file" in r.stderr


def test_config_file_is_judged(replayed, tmp_path, isolated_cache) -> None:
    cfg = tmp_path / "serve.yaml"
    cfg.write_text("tensor-parallel-size: two\n")
    _code, out = replayed("vllm", "serve", "m", "--config", str(cfg), cwd=tmp_path)
    assert "invalid int value: 'two'" in out
    cfg.write_text("tensor-parallel-size: 2\n")
    _code, out = replayed("vllm", "serve", "m", "--config", str(cfg), cwd=tmp_path)
    assert "invalid int value" not in out


def test_missing_database_without_releases_is_bad_input(tmp_path, isolated_cache) -> None:
    r = run("lint", "--db", str(tmp_path / "none.db"), "--", "vllm", "serve", "m", cwd=tmp_path)
    assert r.returncode == 2 and "no such database" in r.stderr


@pytest.mark.slow
def test_seed_command_names_the_chain_and_works_from_030(vllm_tree, tmp_path) -> None:
    """The command of the bug report that started the project: GLM-5.2, TP 8 x PP 2, MTP."""
    for v in ("0.23.0", "0.33.0"):
        vllm_tree(v)  # cached sdists
    r = run("lint", "--db", str(tmp_path / "none.db"), "--vllm", "0.23.0", "--vllm", "0.33.0", "--",
            "vllm", "serve", "zai-org/GLM-5.2", "--tensor-parallel-size", "8", "--pipeline-parallel-size", "2",
            "--speculative-config", SEED_SPEC, cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    first = r.stdout.splitlines()[0]
    assert first.startswith("0.23.0: blocked: method mtp: SpeculativeConfig.hf_config_override")
    assert "DeepSeekMTPModel" in first and "create_draft_parallel_config copies pipeline_parallel_size=2" in first
    assert "vLLM: Pipeline parallelism is not supported for this model." in first
    assert "0.33.0: ok" in r.stdout
    assert r.stdout.strip().splitlines()[-1].startswith("works from 0.30.0: ")


@pytest.mark.slow
def test_value_accepted_from_the_first_release_that_lists_it(vllm_tree, tmp_path) -> None:
    """DeepSeek-V4-Flash's `--moe-backend b12x`: rejected by 0.23.0's choices; the first release accepting it."""
    r = run("lint", "--db", str(tmp_path / "none.db"), "--vllm", "0.23.0", "--vllm", "0.33.0", "--",
            "vllm", "serve", "deepseek-ai/DeepSeek-V4-Flash", "--moe-backend", "b12x", cwd=tmp_path)
    line = next(x for x in r.stdout.splitlines() if x.startswith("0.23.0: blocked"))
    assert "vLLM: vllm serve: error: argument --moe-backend: invalid choice: 'b12x'" in line
    assert "| accepted from 0.29.0 |" in line and "vllm/config/kernel.py:" in line
    assert r.stdout.strip().splitlines()[-1].startswith("works from 0.29.0")


def test_database_releases_are_judged(mini_release, tmp_path, isolated_cache) -> None:
    """Without --vllm the database's releases are judged (from their rows)."""
    db = tmp_path / "c.db"
    assert run("scan", "--vllm-src", f"{mini_release}=0.0.1", "--db", str(db), cwd=tmp_path).returncode == 0
    r = run("lint", "--db", str(db), "--no-search", "--", "vllm", "serve", "m", "--bogus", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert "0.0.1: blocked: flag --bogus does not exist in vLLM 0.0.1" in r.stdout


def test_facts_lock_answers_the_model_first(mini_release, tmp_path, isolated_cache) -> None:
    """lint resolves model ids through the build's chain, a facts lock first (offline)."""
    r = lint(mini_release, "vllm", "serve", "acme/fancy", extra=("--format", "json"), cwd=tmp_path)
    assert "model config of acme/fancy unresolved" in r.stdout
    lock = tmp_path / "model-facts.lock.json"
    lock.write_text(json.dumps({"lock_version": 1, "models": {"acme/fancy": {
        "status": "resolved", "source": "local", "revision": None, "date": "2026-01-01",
        "facts": {"architectures": ["FancyForCausalLM"], "model_type": "fancy"}}}}))
    r = lint(mini_release, "vllm", "serve", "acme/fancy", extra=("--format", "json", "--facts-lock", str(lock)),
             cwd=tmp_path)
    assert "unresolved" not in r.stdout, r.stdout
    assert json.loads(r.stdout)["releases"][0]["status"] == "ok", r.stdout
    lock.write_text("{")
    r = lint(mini_release, "vllm", "serve", "acme/fancy", extra=("--facts-lock", str(lock)), cwd=tmp_path)
    assert r.returncode == 2 and str(lock) in r.stderr and len(r.stderr.strip().splitlines()) == 1
