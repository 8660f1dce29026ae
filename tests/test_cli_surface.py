"""`vllm serve` flag extraction (compat.vllm.cli_surface): synthetic minitrees fast, real sdists slow."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from compat.sources.tree import VllmTree
from compat.vllm.cli_surface import dataclass_field_names, extract_cli

MINI = Path(__file__).parent / "fixtures" / "minitrees"


def mini(name: str = "mini_current", root: Path | None = None) -> VllmTree:
    return VllmTree(root or MINI / name, "0.0.1", "src")


def line_of(tree: VllmTree, rel: str, needle: str) -> int:
    lines = (tree.read(rel) or "").splitlines()
    return next(i for i, text in enumerate(lines, 1) if needle in text)


# --------------------------------------------------------------------------- fast


def test_minitree_flag_set() -> None:
    s = extract_cli(mini())
    assert s.status == "ok", s.reason
    assert s.long_flags() == {
        "--headless", "--api-server-count",
        "--tool-call-parser", "--enable-auto-tool-choice", "--chat-template-content-format",
        "--default-chat-template-kwargs", "--lora-modules", "--port", "--api-key", "--middleware",
        "--pipeline-parallel-size", "--tensor-parallel-size", "--decode-context-parallel-size",
        "--enable-expert-parallel", "--disable-custom-all-reduce", "--distributed-executor-backend",
        "--speculative-config",
        "--spec-method", "--compilation-config", "--additional-config", "--model",
        "--disable-log-stats", "--fail-on-environ-validation", "--enable-log-requests",
    }
    shorts = {f.flag: f.canonical for f in s.flags if f.kind == "short"}
    assert shorts == {"-asc": "--api-server-count", "-P": "--port", "-pp": "--pipeline-parallel-size",
                      "-tp": "--tensor-parallel-size", "-dcp": "--decode-context-parallel-size",
                      "-ep": "--enable-expert-parallel", "-sc": "--speculative-config",
                      "-cc": "--compilation-config"}
    # BooleanOptionalAction (explicit, or a bool config field) adds --no-x; store_true does not
    negated = {f.flag for f in s.flags if f.kind == "negated"}
    assert negated == {"--no-enable-auto-tool-choice", "--no-enable-expert-parallel",
                       "--no-disable-custom-all-reduce",
                       "--no-fail-on-environ-validation", "--no-enable-log-requests"}
    assert s.lookup("--no-headless") is None


def test_minitree_evidence_points_at_the_option_string() -> None:
    t = mini()
    s = extract_cli(t)
    pp = s.lookup("--pipeline-parallel-size")
    assert (pp.file, pp.line) == ("vllm/engine/arg_utils.py",
                                  line_of(t, "vllm/engine/arg_utils.py", '"--pipeline-parallel-size"'))
    assert (pp.config_class, pp.config_field, pp.dest) == ("ParallelConfig", "pipeline_parallel_size",
                                                           "pipeline_parallel_size")
    short = s.lookup("-pp")
    assert short.canonical == "--pipeline-parallel-size" and short.line == pp.line + 1
    # dataclass field flags point at the field; the short alias at the customisation
    port = s.lookup("--port")
    assert (port.file, port.line) == ("vllm/entrypoints/openai/cli_args.py",
                                      line_of(t, "vllm/entrypoints/openai/cli_args.py", "port: int"))
    assert s.lookup("-P").line == line_of(t, "vllm/entrypoints/openai/cli_args.py", '["flags"]')
    assert s.lookup("--tool-call-parser").source == "BaseFrontendArgs"
    assert s.lookup("--headless").source == "make_arg_parser"
    assert s.lookup("--enable-log-requests").source == "AsyncEngineArgs.add_cli_args"
    assert s.lookup("--model").conditional == "not ('serve' in sys.argv[1:] and '--help' in sys.argv[1:])"


def test_minitree_value_types() -> None:
    s = extract_cli(mini())
    f = s.by_flag()
    assert (f["--speculative-config"].value_type, f["--speculative-config"].json_class) == (
        "json", "SpeculativeConfig")  # type override to json.loads keeps the target class
    assert (f["--compilation-config"].value_type, f["--compilation-config"].json_class) == (
        "json", "CompilationConfig")
    assert f["--additional-config"].value_type == "json"
    assert f["--pipeline-parallel-size"].value_type == "int"
    assert f["--enable-expert-parallel"].value_type == "bool"
    assert f["--headless"].value_type == "bool"
    assert f["--api-server-count"].value_type == "int"
    assert f["--distributed-executor-backend"].value_type == "choice"
    assert f["--distributed-executor-backend"].choices == ["ray", "mp", "uni", "external_launcher",
                                                           "None"]
    assert f["--chat-template-content-format"].choices == ["auto", "string", "openai"]
    assert f["--spec-method"].value_type == "choice"
    assert f["--default-chat-template-kwargs"].value_type == "json"  # customised type=json.loads
    assert f["--lora-modules"].value_type == "list"  # scalar element type keeps nargs="+"
    assert f["--middleware"].value_type == "list"
    assert f["--model"].value_type == "str"


def test_minitree_dotted_subkeys() -> None:
    s = extract_cli(mini())
    spec = s.subkeys["--speculative-config"]
    assert spec == {"method", "model", "num_speculative_tokens", "draft_tensor_parallel_size",
                    "draft_load_config", "draft_load_config.load_format",
                    "draft_load_config.download_dir"}
    assert not spec & {"target_model_config", "target_parallel_config", "draft_model_config",
                       "draft_parallel_config"}
    # ClassVar, `_`-prefixed and init=False fields are not settable keys
    assert s.subkeys["--compilation-config"] == {"mode", "pass_config", "compile_sizes",
                                                 "pass_config.enable_sp",
                                                 "pass_config.fuse_norm_quant"}
    src = s.subkey_sources["--speculative-config"]
    assert (src.json_class, src.file) == ("SpeculativeConfig", "vllm/config/speculative.py")
    assert "--additional-config" not in s.subkeys  # free-form dict: no key list


def test_check_arg() -> None:
    s = extract_cli(mini())
    assert s.check_arg("--tensor-parallel-size=2") == ("ok", None)
    assert s.check_arg("--tensor_parallel_size")[0] == "ok"
    assert s.check_arg("-tp")[0] == "ok"
    assert s.check_arg("--no-enable-expert-parallel")[0] == "ok"
    assert s.check_arg("--speculative-config.method")[0] == "ok"
    assert s.check_arg("--speculative_config.method")[0] == "ok"
    assert s.check_arg("--compilation-config.pass_config.enable_sp")[0] == "ok"
    status, reason = s.check_arg("--speculative-config.draft_model_config")
    assert status == "invalid" and "SpeculativeConfig" in reason
    assert s.check_arg("--pipeline-parallel-size.foo")[0] == "invalid"
    assert s.check_arg("--additional-config.anything")[0] == "unknown"
    status, reason = s.check_arg("--no-such-flag")
    assert status == "invalid" and "0.0.1" in reason


def test_make_arg_parser_found_by_search(tmp_path: Path) -> None:
    """0.33 moved make_arg_parser to entrypoints/common; no serve.py import to follow here."""
    root = tmp_path / "tree"
    shutil.copytree(MINI / "mini_current", root)
    (root / "vllm/entrypoints/cli/serve.py").unlink()
    (root / "vllm/entrypoints/common").mkdir()
    shutil.move(root / "vllm/entrypoints/openai/cli_args.py",
                root / "vllm/entrypoints/common/cli_args.py")
    s = extract_cli(mini(root=root))
    assert s.status == "ok"
    assert s.sources[0].file == "vllm/entrypoints/common/cli_args.py"
    assert s.lookup("--port").file == "vllm/entrypoints/common/cli_args.py"
    assert "--pipeline-parallel-size" in s.long_flags()


def test_engine_args_unreachable_is_partial(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    shutil.copytree(MINI / "mini_current", root)
    p = root / "vllm/entrypoints/openai/cli_args.py"
    p.write_text(p.read_text().replace("    parser = AsyncEngineArgs.add_cli_args(parser)\n", ""))
    s = extract_cli(mini(root=root))
    assert s.status == "partial"
    assert "EngineArgs.add_cli_args" in s.reason
    assert s.check_arg("--no-such-flag")[0] == "unknown"  # cannot call it invalid


def test_unknown_layout_reports_unknown() -> None:
    s = extract_cli(mini("mini_legacy"))
    assert s.status == "unknown"
    assert "make_arg_parser" in s.reason
    assert s.flags == []
    assert s.check_arg("--tensor-parallel-size")[0] == "unknown"


# --------------------------------------------------------------------------- slow (real sdists)

# research §5.1: long flags without --no-*; SpeculativeConfig AST fields (all / settable)
COUNTS = [("0.23.0", 261, 30, 26), ("0.24.0", 266, 31, 27), ("0.33.0", 321, 43, 39)]


@pytest.mark.slow
@pytest.mark.parametrize("version,n_long,n_spec_fields,n_spec_keys", COUNTS)
def test_real_counts(vllm_tree, version: str, n_long: int, n_spec_fields: int, n_spec_keys: int) -> None:
    t = vllm_tree(version)
    s = extract_cli(t)
    assert s.status == "ok", s.reason
    assert len(s.long_flags()) == n_long
    assert len(dataclass_field_names(t, "SpeculativeConfig", "vllm/config/speculative.py")) == n_spec_fields
    top = {k for k in s.subkeys["--speculative-config"] if "." not in k}
    assert len(top) == n_spec_keys
    assert "method" in top and "draft_tensor_parallel_size" in top
    assert "target_model_config" not in top


@pytest.mark.slow
@pytest.mark.parametrize("version,frontend", [("0.23.0", "vllm/entrypoints/openai/cli_args.py"),
                                              ("0.24.0", "vllm/entrypoints/openai/cli_args.py"),
                                              ("0.33.0", "vllm/entrypoints/common/cli_args.py")])
def test_real_well_known_flags(vllm_tree, version: str, frontend: str) -> None:
    t = vllm_tree(version)
    s = extract_cli(t)
    for flag, file in [("--pipeline-parallel-size", "vllm/engine/arg_utils.py"),
                       ("-pp", "vllm/engine/arg_utils.py"),
                       ("--tensor-parallel-size", "vllm/engine/arg_utils.py"),
                       ("--decode-context-parallel-size", "vllm/engine/arg_utils.py"),
                       ("--enable-expert-parallel", "vllm/engine/arg_utils.py"),
                       ("--speculative-config", "vllm/engine/arg_utils.py"),
                       ("--kv-transfer-config", "vllm/engine/arg_utils.py"),
                       ("--mm-encoder-tp-mode", "vllm/engine/arg_utils.py"),
                       ("--api-server-count", frontend)]:
        f = s.lookup(flag)
        assert f is not None, flag
        assert f.file == file
        assert f'"{flag}"' in t.read(file).splitlines()[f.line - 1]  # evidence line holds the literal
    tcp = s.lookup("--tool-call-parser")
    assert tcp.file == frontend and "tool_call_parser:" in t.read(frontend).splitlines()[tcp.line - 1]
    assert s.lookup("--no-enable-auto-tool-choice").kind == "negated"
    assert s.lookup("--no-enforce-eager") is not None
    assert s.lookup("--no-pipeline-parallel-size") is None
    spec = s.lookup("--speculative-config")
    assert (spec.value_type, spec.json_class) == ("json", "SpeculativeConfig")
    kv = s.lookup("--kv-transfer-config")
    assert kv.json_class == "KVTransferConfig" and "kv_connector" in s.subkeys["--kv-transfer-config"]
    assert s.lookup("--mm-encoder-tp-mode").choices == ["weights", "data"]
    shorts = {f.flag for f in s.flags if f.kind == "short"}
    assert {"-tp", "-pp", "-dp", "-dcp", "-pcp", "-ep", "-q", "-sc", "-cc", "-ac", "-asc"} <= shorts


@pytest.mark.slow
def test_real_attention_config_keys(vllm_tree) -> None:
    # research §5.1: AttentionConfig has 15 / 16 / 24 fields
    for version, n in [("0.23.0", 15), ("0.24.0", 16), ("0.33.0", 24)]:
        s = extract_cli(vllm_tree(version))
        assert len({k for k in s.subkeys["--attention-config"] if "." not in k}) == n
        assert s.check_arg("--attention-config.backend")[0] == "ok"


def test_nested_dict_spread_keeps_the_field_type():
    """`**{**kwargs["field"], "default": None}` still gives a boolean flag with its --no- twin."""
    from compat.sources.tree import VllmTree

    root = Path(__file__).resolve().parent / "fixtures" / "minitrees" / "mini_current"
    cli = extract_cli(VllmTree(root=root, version="mini", origin="src"))
    assert cli.lookup("--disable-custom-all-reduce").value_type == "bool"
    assert cli.lookup("--no-disable-custom-all-reduce").kind == "negated"
