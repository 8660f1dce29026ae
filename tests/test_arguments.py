"""vLLM's argument handling as the engine replays it (compat.verdict.arguments, config_values,
serve_rules, shell): input/output tables over hand-written release facts.

Each table row is one rule: an argv and the finding vLLM's own code gives it (or none).
Turning a rule off (a type callable, a choices check, a pydantic check, the dotted rewrite,
a shell placeholder, a validation function) makes its rows fail.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from compat.sources.tree import VllmTree
from compat.verdict.arguments import ServeParser, check_arguments, preprocess
from compat.verdict.config_values import Validator, schemas_from_rows
from compat.verdict.serve_rules import ServeRules
from compat.verdict.shell import Placeholder, ShellVars, read_placeholders

VERSION = "9.9.9"


def opt(flag: str, *strings: str, **kw) -> dict:
    """A cli_value row with argparse's defaults."""
    row = {"flag": flag, "option_strings": json.dumps([flag, *strings] if flag.startswith("-") else []),
           "dest": kw.pop("dest", flag.lstrip("-").replace("-", "_")), "action": "store", "nargs": "",
           "const": "null", "type": "str", "parse": 0, "optional": 0, "callable_src": "", "json_class": "",
           "choices": "null", "metavar_only": 0, "choices_file": "", "choices_line": 0, "default": "null",
           "default_kind": "literal", "unknown": "", "file": "vllm/engine/arg_utils.py", "line": 10}
    for k, v in kw.items():
        row[k] = json.dumps(v) if k in ("choices", "default", "const") else v
    return row


VALUES = [
    opt("model_tag", nargs="?"),
    opt("--model", default="Qwen/Qwen3-0.6B"),
    opt("--tensor-parallel-size", "-tp", type="int", default=1),
    opt("--api-server-count", type="int", parse=1, optional=1),
    opt("--max-model-len", type="human_readable_int_or_auto"),
    opt("--max-num-batched-tokens", type="human_readable_int"),
    opt("--gpu-memory-utilization", type="float", default=0.9),
    opt("--moe-backend", type="transform", callable_src="lambda s: s.lower().replace('-', '_')",
        choices=["auto", "marlin", "triton"], choices_file="vllm/config/kernel.py", choices_line=12,
        default="auto"),
    opt("--kv-cache-dtype", choices=["auto", "fp8"], default="auto"),
    opt("--tokenizer-mode", choices=["auto", "hf"], metavar_only=1, default="auto"),
    opt("--enable-expert-parallel", "-ep", action="boolean_optional", type="", default=False),
    opt("--headless", action="store_true", type="", default=False),
    opt("--enable-auto-tool-choice", action="boolean_optional", type="", default=False),
    opt("--tool-call-parser", parse=1, optional=1),
    opt("--tool-parser-plugin", default=""),
    opt("--chat-template", parse=1, optional=1),
    opt("--speculative-config", "-sc", type="json", parse=1, optional=1),
    opt("--compilation-config", "-cc", type="dataclass", json_class="CompilationConfig",
        default_kind="factory:CompilationConfig"),
    opt("--kv-transfer-config", type="dataclass", json_class="KVTransferConfig", parse=1, optional=1),
    opt("--limit-mm-per-prompt", type="json_or_str"),
    opt("--ignore-patterns", nargs="+"),
    opt("--data-parallel-rpc-port", "-dpp", type="int"),
    opt("--data-parallel-address", "-dpa"),
    opt("--tensor-split", nargs="2", type="int"),
]

_MODE = {"t": "enum", "name": "CompilationMode", "members": {"NONE": 0, "VLLM_COMPILE": 3}}
_CG = {"t": "enum", "name": "CUDAGraphMode", "members": {"NONE": 0, "FULL": 2, "FULL_DECODE_ONLY": [2, 0]}}


def cfg(cls: str, field: str, type_: dict | None = None, default=None, kind="literal", validators=(),
        extra="") -> dict:
    return {"class_name": cls, "field": field, "type": json.dumps(type_ or {}), "default": json.dumps(default),
            "default_kind": kind, "validators": json.dumps(list(validators)), "extra": extra,
            "file": "vllm/config/compilation.py", "line": 100}


CONFIG = [
    cfg("CompilationConfig", "", extra="forbid"),
    cfg("CompilationConfig", "mode", {"t": "union", "of": [_MODE, {"t": "none"}]},
        validators=[{"mode": "before", "kind": "enum_name", "upper": True, "enum": "CompilationMode",
                     "func": "m", "file": "c.py", "line": 1, "exception": "ValueError",
                     "message": "f\"Invalid compilation mode: {value}. Valid modes are: "
                                "{', '.join(CompilationMode.__members__.keys())}\""}]),
    cfg("CompilationConfig", "cudagraph_mode", {"t": "union", "of": [_CG, {"t": "none"}]},
        validators=[{"mode": "before", "kind": "enum_name", "upper": True, "enum": "CUDAGraphMode",
                     "func": "c", "file": "c.py", "line": 2},
                    {"mode": "wrap", "kind": "skip_none", "func": "s", "file": "c.py", "line": 3}]),
    cfg("CompilationConfig", "custom_ops", {"t": "list", "of": {"t": "str"}}, []),
    cfg("CompilationConfig", "max_cudagraph_capture_size", {"t": "bounded", "of": {"t": "int"}, "ge": 1}),
    cfg("CompilationConfig", "pass_config", {"t": "class", "name": "PassConfig"}, None, "factory:PassConfig"),
    cfg("PassConfig", "", extra="forbid"),
    cfg("PassConfig", "fuse_norm_quant", {"t": "bool"}, False),
    cfg("KVTransferConfig", "", extra="forbid"),
    cfg("KVTransferConfig", "kv_connector", {"t": "union", "of": [{"t": "str"}, {"t": "none"}]}),
    cfg("KVTransferConfig", "kv_role", {"t": "union", "of": [
        {"t": "literal", "values": ["kv_producer", "kv_consumer"]}, {"t": "none"}]}),
    cfg("KVTransferConfig", "kv_buffer_size", {"t": "float"}, 1e9),
]

SERVE = '''
from vllm.entrypoints.openai.cli_args import make_arg_parser, validate_parsed_serve_args
from vllm.entrypoints.openai.api_server import run_server, setup_server
'''
CLI_ARGS = '''
from vllm.entrypoints.chat_utils import validate_chat_template


def make_arg_parser(parser):
    return parser


def validate_parsed_serve_args(args):
    if hasattr(args, "subparser") and args.subparser != "serve":
        return
    validate_chat_template(args.chat_template)
    if args.enable_auto_tool_choice and not args.tool_call_parser:
        raise TypeError("Error: --enable-auto-tool-choice requires --tool-call-parser")
'''
CHAT_UTILS = '''
from pathlib import Path


def validate_chat_template(chat_template):
    if chat_template is None:
        return
    elif isinstance(chat_template, str):
        if not any(c in chat_template for c in "{}\\n") and not Path(chat_template).exists():
            from vllm.transformers_utils.chat_templates.registry import CHAT_TEMPLATES_DIR

            builtin = CHAT_TEMPLATES_DIR / chat_template
            if not builtin.exists():
                raise ValueError(f"The supplied chat template string ({chat_template}) appears path-like, "
                                 f"but doesn't exist! Tried: {chat_template} and {builtin}")
'''
API_SERVER = '''
from vllm.tool_parsers import ToolParserManager


def validate_api_server_args(args):
    valid = ToolParserManager.list_registered()
    if args.enable_auto_tool_choice and args.tool_call_parser not in valid:
        raise KeyError(f"invalid tool call parser: {args.tool_call_parser} (chose from {{ {','.join(valid)} }})")


def setup_server(args):
    validate_api_server_args(args)


async def run_server(args):
    pass
'''
REGISTRY = '''
from pathlib import Path

CHAT_TEMPLATES_DIR = Path(__file__).parent
'''


# The mini trees' FlexibleArgumentParser (rewrites argv as vLLM 0.33 does; the replay runs it
# from the tree, compat.verdict.argv_rewrite).
ARGPARSE_UTILS = (Path(__file__).parent / "fixtures" / "minitrees" / "mini_current" / "vllm" / "utils"
                  / "argparse_utils.py").read_text()


def _mini_release(root: Path, serve: str) -> VllmTree:
    """The entrypoint files argument checks read, with `serve` as cli/serve.py."""
    files = {"vllm/entrypoints/cli/serve.py": serve, "vllm/entrypoints/openai/cli_args.py": CLI_ARGS,
             "vllm/entrypoints/chat_utils.py": CHAT_UTILS, "vllm/entrypoints/openai/api_server.py": API_SERVER,
             "vllm/transformers_utils/chat_templates/registry.py": REGISTRY,
             "vllm/utils/argparse_utils.py": ARGPARSE_UTILS}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return VllmTree(root, VERSION, "src")


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    root = tmp_path_factory.mktemp("mini-args")
    tree = _mini_release(root, SERVE)
    templates = ["examples/tool_chat_template_a.jinja", "vllm/transformers_utils/chat_templates/template_b.jinja"]
    validator = Validator(schemas_from_rows(CONFIG))
    return SimpleNamespace(
        version=VERSION, serve_parser=ServeParser(VALUES, validator, VERSION, tree),
        serve_rules=ServeRules(tree, {"tool": {"hermes", "glm45"}, "reasoning": {"qwen3"}}, templates, VERSION))


SHELL = ShellVars([Placeholder("HEAD_IP", "src/lib/command-synthesis.js", 1),
                   Placeholder("[A-Za-z0-9_]+_DP_RPC_PORT", "src/lib/command-synthesis.js", 2)])

UNEXPECTED = "  Unexpected keyword argument [type=unexpected_keyword_argument, "

# argv (after `vllm serve MODEL`) -> (stage, exception, message) of vLLM's first error; None = accepted
RULES = [
    # parse: options and values, as argparse reads them
    ([], None),
    (["--tensor-parallel-size", "8", "-tp", "2"], None),  # the last occurrence wins
    (["--tensor-par", "2"], None),  # argparse accepts an unambiguous prefix
    (["--no-such-flag", "1"], ("parse", "SystemExit", "vllm: error: unrecognized arguments: --no-such-flag 1")),
    (["--max-model-len auto"], ("parse", "SystemExit", "vllm: error: unrecognized arguments: --max-model-len auto")),
    (["--tensor-parallel-size", "two"],
     ("parse", "SystemExit", "vllm serve: error: argument --tensor-parallel-size/-tp: invalid int value: 'two'")),
    (["--api-server-count", "x"], ("parse", "SystemExit", "vllm serve: error: argument --api-server-count: "
                                   "Value x cannot be converted to <class 'int'>.")),
    (["--api-server-count", "None"], None),  # optional_type reads 'None' as None
    (["--gpu-memory-utilization", "0.9x"],
     ("parse", "SystemExit", "vllm serve: error: argument --gpu-memory-utilization: invalid float value: '0.9x'")),
    (["--max-model-len", "auto"], None),
    (["--max-model-len", "128k"], None),
    (["--max-num-batched-tokens", "1.5K"], ("parse", "SystemExit", "vllm serve: error: argument "
     "--max-num-batched-tokens: Decimals are not allowed with binary suffixes like K. Did you mean to use "
     "1.5k instead?")),
    (["--max-num-batched-tokens", "lots"], ("parse", "SystemExit", "vllm serve: error: argument "
                                            "--max-num-batched-tokens: invalid human_readable_int value: 'lots'")),
    (["--moe-backend", "Marlin"], None),  # the lambda lowercases before the choices check
    (["--moe-backend", "b12x"], ("parse", "SystemExit", "vllm serve: error: argument --moe-backend: invalid "
                                 "choice: 'b12x' (choose from 'auto', 'marlin', 'triton')")),
    (["--kv-cache-dtype", "fp4"], ("parse", "SystemExit", "vllm serve: error: argument --kv-cache-dtype: "
                                   "invalid choice: 'fp4' (choose from 'auto', 'fp8')")),
    (["--tokenizer-mode", "custom"], None),  # Literal | str: shown as metavar, not enforced
    (["--enable-expert-parallel"], None),
    (["--no-enable-expert-parallel"], None),
    (["-ep"], None),
    (["--headless=yes"], ("parse", "SystemExit", "vllm serve: error: argument --headless: ignored explicit "
                          "argument 'yes'")),
    (["--ignore-patterns"], ("parse", "SystemExit", "vllm serve: error: argument --ignore-patterns: expected "
                             "at least one argument")),
    (["--tensor-split", "1"], ("parse", "SystemExit", "vllm serve: error: argument --tensor-split: expected "
                               "2 arguments")),
    (["--served-model-name", "x"], ("parse", "SystemExit", "vllm: error: unrecognized arguments: "
                                    "--served-model-name x")),
    (["--speculative-config", "{bad"], ("parse", "SystemExit", "vllm serve: error: argument --speculative-config/"
                                        "-sc: Value {bad cannot be converted to <function loads at 0x?>.")),
    (["--speculative-config.method", "mtp", "--speculative_config.num_speculative_tokens", "2"], None),
    (["--limit-mm-per-prompt", '{"image": 2}'], None),
    (["--limit-mm-per-prompt", "{bad}"], ("parse", "SystemExit", "vllm serve: error: argument "
     "--limit-mm-per-prompt: Value {bad} cannot be converted to <function loads at 0x?>.")),
    # parse: JSON config flags, validated by pydantic against the release's config class
    (["--compilation-config", '{"cudagraph_mode": "full_decode_only", "mode": 3}'], None),
    (["--compilation-config", '{"use_inductor": false}'], ("parse", "SystemExit",
     "vllm serve: error: argument --compilation-config/-cc: 1 validation error for CompilationConfig\n"
     "use_inductor\n" + UNEXPECTED + "input_value=False, input_type=bool]")),
    (["-cc.mode", "vllm_compile", "-cc.pass_config.fuse_norm_quant", "True"], None),
    (["-cc.pass_config.fuse_norm_quant", "maybe"], ("parse", "SystemExit",
     "vllm serve: error: argument --compilation-config/-cc: 1 validation error for CompilationConfig\n"
     "pass_config.fuse_norm_quant\n"
     "  Input should be a valid boolean, unable to interpret input [type=bool_parsing, input_value='maybe', "
     "input_type=str]")),
    (["--compilation-config", '{"mode": "fast"}'], ("parse", "SystemExit",
     "vllm serve: error: argument --compilation-config/-cc: 1 validation error for CompilationConfig\nmode\n"
     "  Value error, Invalid compilation mode: fast. Valid modes are: NONE, VLLM_COMPILE [type=value_error, "
     "input_value='fast', input_type=str]")),
    (["--compilation-config", '{"cudagraph_mode": "SOMETIMES"}'], ("parse", "KeyError", "'SOMETIMES'")),
    (["--compilation-config", '{"max_cudagraph_capture_size": 0}'], ("parse", "SystemExit",
     "vllm serve: error: argument --compilation-config/-cc: 1 validation error for CompilationConfig\n"
     "max_cudagraph_capture_size\n  Input should be greater than or equal to 1 [type=greater_than_equal, "
     "input_value=0, input_type=int]")),
    (["--compilation-config", '{"custom_ops": "all"}'], ("parse", "SystemExit",
     "vllm serve: error: argument --compilation-config/-cc: 1 validation error for CompilationConfig\n"
     "custom_ops\n  Input should be a valid list [type=list_type, input_value='all', input_type=str]")),
    (["--kv-transfer-config", '{"kv_connector": "NixlConnector", "kv_role": "kv_both"}'], ("parse", "SystemExit",
     "vllm serve: error: argument --kv-transfer-config: 1 validation error for KVTransferConfig\nkv_role\n"
     "  Input should be 'kv_producer' or 'kv_consumer' [type=literal_error, input_value='kv_both', "
     "input_type=str]")),
    (["--kv-transfer-config", '{"kv_buffer_size": 5e8, "foo": 1, "bar": 2}'], ("parse", "SystemExit",
     "vllm serve: error: argument --kv-transfer-config: 2 validation errors for KVTransferConfig\nfoo\n"
     + UNEXPECTED + "input_value=1, input_type=int]\nbar\n" + UNEXPECTED + "input_value=2, input_type=int]")),
    (["--kv-transfer-config", '{"kv_buffer_size": 80m}'], None),  # bare human-readable numbers in JSON
    # validate: validate_parsed_serve_args of the release, run from its source
    (["--enable-auto-tool-choice"], ("validate", "TypeError",
                                     "Error: --enable-auto-tool-choice requires --tool-call-parser")),
    (["--chat-template", "examples/tool_chat_template_a.jinja"], None),  # in the release's examples/
    (["--chat-template", "template_b.jinja"], None),  # a built-in template
    (["--chat-template", "{{ messages }}"], None),  # a literal template
    (["--chat-template", "/home/me/template.jinja"], "unknown"),  # a file of the user's machine
    (["--chat-template", "examples/nope.jinja"], ("validate", "ValueError",
     "The supplied chat template string (examples/nope.jinja) appears path-like, but doesn't exist! Tried: "
     "examples/nope.jinja and vllm/transformers_utils/chat_templates/examples/nope.jinja")),
    # api_server: validate_api_server_args; the parser name is checked only with auto tool choice
    (["--tool-call-parser", "nope"], None),
    (["--tool-call-parser", "hermes", "--enable-auto-tool-choice"], None),
    (["--tool-call-parser", "nope", "--enable-auto-tool-choice"], ("api_server", "KeyError",
     "'invalid tool call parser: nope (chose from { glm45,hermes })'")),
    # shell placeholders: values the user's shell supplies
    (["--data-parallel-rpc-port", "$PREFILL_DP_RPC_PORT", "--data-parallel-address", "$HEAD_IP"], None),
    (["--data-parallel-rpc-port", "$PREFILL_DP_RPC_POTR"], ("parse", "SystemExit", "vllm serve: error: argument "
     "--data-parallel-rpc-port/-dpp: invalid int value: ''")),  # a typo is an unset variable: ''
]


@pytest.mark.parametrize("argv,want", RULES, ids=[" ".join(r[0])[:60] or "plain" for r in RULES])
def test_rules(release, argv: list[str], want) -> None:
    res = check_arguments(release, ["vllm", "serve", "org/model", *argv], SHELL)
    blocked = [f for f in res.findings if f.status == "blocked"]
    if want is None:
        assert not blocked, [f.message for f in blocked]
        return
    if want == "unknown":
        assert not blocked and [f.status for f in res.findings] == ["unknown"], res.findings
        return
    assert blocked, res.findings
    assert (blocked[0].stage, blocked[0].exception, blocked[0].message) == want


def test_every_problem_is_reported_vllms_first_first(release) -> None:
    res = check_arguments(release, ["vllm", "serve", "m", "--moe-backend", "b12x", "-tp", "x", "--nope"], SHELL)
    msgs = [f.message for f in res.findings]
    assert msgs[0].startswith("vllm serve: error: argument --moe-backend: invalid choice")
    assert msgs[1] == "vllm serve: error: argument --tensor-parallel-size/-tp: invalid int value: 'x'"
    assert msgs[2] == "vllm: error: unrecognized arguments: --nope"


def test_choice_finding_cites_the_choices() -> None:
    parser = ServeParser(VALUES, Validator({}), VERSION)
    _ns, findings = parser.parse(["serve", "m", "--moe-backend", "b12x"])
    assert findings[0].evidence[0] == "vllm/config/kernel.py:12"
    assert findings[0].key == ("choice", "--moe-backend", "'b12x'")


def test_shell_value_meeting_choices_is_unknown(release) -> None:
    shell = ShellVars([Placeholder("BACKEND", "x.js", 1)])
    res = check_arguments(release, ["vllm", "serve", "m", "--moe-backend", "$BACKEND"], shell)
    assert [f.status for f in res.findings] == ["unknown"]
    assert "$BACKEND" in res.findings[0].step and "auto, marlin, triton" in res.findings[0].step


def test_undefined_placeholder_is_a_warning_not_invented_away(release) -> None:
    res = check_arguments(release, ["vllm", "serve", "m", "--data-parallel-address", "$HEAD_PI"], SHELL)
    assert [f.status for f in res.findings] == ["warning"]
    assert "$HEAD_PI is not a placeholder the recipes define" in res.findings[0].step
    assert res.namespace["data_parallel_address"] == ""


def test_plugin_may_register_the_parser(release) -> None:
    res = check_arguments(release, ["vllm", "serve", "m", "--tool-call-parser", "nope", "--enable-auto-tool-choice",
                                    "--tool-parser-plugin", "my_parser.py"], SHELL)
    assert [f.status for f in res.findings] == ["unknown"]
    assert "--tool-parser-plugin" in res.findings[0].step


def test_config_file_is_read_as_vllm_reads_it(release) -> None:
    config = {"tensor-parallel-size": 4, "enable-expert-parallel": True, "headless": False,
              "compilation-config": {"mode": 3}}
    res = check_arguments(release, ["vllm", "serve", "m", "--config", "c.yaml", "-tp", "2"], SHELL,
                          config_loader=lambda _p: config)
    assert not res.findings
    assert res.namespace["tensor_parallel_size"] == 2  # the command line beats the file
    assert res.namespace["enable_expert_parallel"] is True and res.namespace["headless"] is False
    res = check_arguments(release, ["vllm", "serve", "m", "--config", "c.yaml"], SHELL,
                          config_loader=lambda _p: {"kv-cache-dtype": "fp4"})
    assert res.findings[0].message.endswith("invalid choice: 'fp4' (choose from 'auto', 'fp8')")


# the argv rewrite of FlexibleArgumentParser.parse_args
PREPROCESS = [
    (["serve", "m", "--tensor_parallel_size", "2"], ["serve", "m", "--tensor-parallel-size", "2"]),
    (["serve", "--model", "m", "-tp", "2"], ["serve", "m", "-tp", "2"]),
    (["serve", "m", "-O3"], ["serve", "m", "--optimization-level", "3"]),
    (["serve", "m", "--a.b", "1", "--a.c+", "x,y", "-k"], ["serve", "m", "-k", "--a", '{"b": 1, "c": ["x", "y"]}']),
    (["serve", "m", "--a.size", "80g"], ["serve", "m", "--a", '{"size": 80000000000}']),
    (["serve", "m", "--a_b.c_d", "v"], ["serve", "m", "--a-b", '{"c_d": "v"}']),
]


@pytest.mark.parametrize("argv,want", PREPROCESS)
def test_preprocess(argv, want) -> None:
    assert preprocess(argv) == want


@pytest.mark.parametrize("argv,want", PREPROCESS)
def test_the_release_rewrite_is_run_from_its_source(release, argv, want) -> None:
    """With a tree, the replay runs the release's own parse_args (super().parse_args -> its list)."""
    assert release.serve_parser.rewrite(argv) == want


def test_a_release_rewrite_that_raises_is_vllms_answer(tmp_path) -> None:
    """0.9-0.10 refuse `--model` with vllm serve; the release's own ValueError is the finding."""
    tree = _mini_release(tmp_path, SERVE)
    (tmp_path / "vllm/utils/argparse_utils.py").write_text(
        "class FlexibleArgumentParser:\n"
        "    def parse_args(self, args=None, namespace=None):\n"
        "        if args and args[0] == 'serve' and any(a == '--model' for a in args):\n"
        "            raise ValueError('With `vllm serve`, you should provide the model as a positional')\n"
        "        return super().parse_args([a.replace('_', '-') for a in args], namespace)\n")
    sp = ServeParser(VALUES, Validator(schemas_from_rows(CONFIG)), VERSION, tree)
    assert sp.rewrite(["serve", "m", "--tensor_parallel_size", "2"]) == ["serve", "m", "--tensor-parallel-size", "2"]
    _ns, findings = sp.parse(["serve", "--model", "m"])
    assert [(f.status, f.exception) for f in findings] == [("blocked", "ValueError")]
    assert "provide the model as a positional" in findings[0].message


def test_a_release_rewrite_that_cannot_run_is_unknown(tmp_path) -> None:
    tree = _mini_release(tmp_path, SERVE)
    (tmp_path / "vllm/utils/argparse_utils.py").write_text(
        "class FlexibleArgumentParser:\n"
        "    def parse_args(self, args=None, namespace=None):\n"
        "        while args:\n"
        "            pass\n")
    sp = ServeParser(VALUES, Validator(schemas_from_rows(CONFIG)), VERSION, tree)
    _ns, findings = sp.parse(["serve", "m"])
    assert [(f.status, f.key) for f in findings] == [("unknown", ("argv-rewrite",))] and "while loop" in findings[0].step


def test_served_model_name_without_a_model_is_vllms_value_error(release) -> None:
    res = check_arguments(release, ["vllm", "serve", "--served-model-name", "x"], SHELL)
    assert (res.findings[0].exception, res.findings[0].message) == ("ValueError", (
        "`model` should be provided as the first positional argument when using `vllm serve`. "
        "i.e. `vllm serve <model> --<arg> <value>`."))


def test_placeholders_are_read_from_the_recipes_checkout(tmp_path: Path) -> None:
    (tmp_path / "src" / "lib").mkdir(parents=True)
    (tmp_path / "strategies").mkdir()
    (tmp_path / "src" / "lib" / "command-synthesis.js").write_text(
        '// rendered as $COMMENTED\n'
        'args.push("--master-addr", "$HEAD_IP");\n'
        'args.push("--data-parallel-rpc-port", `$${roleKey.toUpperCase()}_DP_RPC_PORT`);\n')
    (tmp_path / "strategies" / "pd.yaml").write_text('env:\n  HOST: "$PREFILL_NODE_1"  # or $OTHER\n')
    shell = read_placeholders(tmp_path)
    assert shell.defined("HEAD_IP").line == 2
    assert shell.defined("DECODE_DP_RPC_PORT").file == "src/lib/command-synthesis.js"
    assert shell.defined("PREFILL_NODE_1").file == "strategies/pd.yaml"
    assert shell.defined("COMMENTED") is None and shell.defined("OTHER") is None
    assert shell.defined("HEAD_PI") is None


def test_config_finding_cites_the_class_or_field(release) -> None:
    res = check_arguments(release, ["vllm", "serve", "m", "--compilation-config", '{"use_inductor": false}'], SHELL)
    assert res.findings[0].evidence[0] == "vllm/config/compilation.py:100"  # the class: no such field
    assert res.findings[0].key == ("config", "--compilation-config", "use_inductor")


def test_replay_only_where_the_argv_rewrite_is_verified() -> None:
    """A release whose parse_args is not one checked against vLLM keeps name-level flag checks."""
    from compat.hf import ModelResolver
    from compat.verdict.engine import Judge, _verified_rewrites
    from compat.verdict.knowledge import Knowledge

    k = Knowledge(version=VERSION, tree=None, values=VALUES)
    judge = Judge(k, ModelResolver(trees=[]))
    assert judge.arguments(["vllm", "serve", "m", "-tp", "x"]) is None  # no argv_rewrite fact
    k.release_facts["argv_rewrite"] = {"sha": "0" * 16, "file": "f.py", "line": 1}
    assert Judge(k, ModelResolver(trees=[])).arguments(["vllm", "serve", "m", "-tp", "x"]) is None
    k.release_facts["argv_rewrite"] = {"sha": sorted(_verified_rewrites())[0], "file": "f.py", "line": 1}
    found = Judge(k, ModelResolver(trees=[])).arguments(["vllm", "serve", "m", "-tp", "x"])
    assert found and found[0].status == "blocked" and found[0].stage == "argument"


def test_verified_rewrites_are_those_of_the_golden_runs() -> None:
    import yaml

    from compat.resources import data_dir

    doc = yaml.safe_load((data_dir() / "argv_rewrites.yaml").read_text())
    root = Path(__file__).resolve().parents[1]
    for v in doc["verified"]:
        assert (root / v["golden"]).is_file(), v  # each shape names the golden run that checked it


def test_argv_rewrites_data_matches_its_schema() -> None:
    import jsonschema
    import yaml

    root = Path(__file__).resolve().parents[1]
    schema = json.loads((root / "schema" / "argv_rewrites.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    doc = yaml.safe_load((root / "data" / "argv_rewrites.yaml").read_text())
    jsonschema.validate(doc, schema)
    assert len({v["sha"] for v in doc["verified"]}) == len(doc["verified"])


def test_argv_rewrite_shape_follows_the_code(tmp_path: Path) -> None:
    """The same parse_args gives the same sha wherever it lives; a changed body another."""
    from compat.vllm.cli_surface import argv_rewrite_shape

    body = ("class FlexibleArgumentParser:\n    def parse_args(self, args=None, namespace=None):\n"
            "        return {}\n")
    shapes = []
    for i, (rel, text) in enumerate([("vllm/utils/argparse_utils.py", body), ("vllm/utils/__init__.py", body),
                                     ("vllm/utils.py", body.replace("{}", "[]"))]):
        root = tmp_path / str(i)
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("# a comment moves no code\n" * i + text)
        shapes.append(argv_rewrite_shape(VllmTree(root, VERSION, "src")))
    assert shapes[0]["sha"] == shapes[1]["sha"] != shapes[2]["sha"]
    assert shapes[1]["file"] == "vllm/utils/__init__.py" and shapes[1]["line"] == 3
    assert argv_rewrite_shape(VllmTree(tmp_path / "none", VERSION, "src")) is None


ARG_UTILS_SRC = '''
def doubled(val):
    return int(val) * 2


def needs_torch(val):
    return torch.dtype(val)
'''

OLD_API_SERVER = '''
from vllm.entrypoints.openai.tool_parsers import ToolParserManager


def validate_api_server_args(args):
    valid = ToolParserManager.tool_parsers.keys()
    if args.enable_auto_tool_choice and args.tool_call_parser not in valid:
        raise KeyError(f"invalid tool call parser: {args.tool_call_parser} (chose from {{ {','.join(valid)} }})")
    if args.chat_template is not None:
        args.chat_template.no_such_method()


def setup_server(args):
    validate_api_server_args(args)


async def run_server(args):
    pass
'''


@pytest.fixture(scope="module")
def older(tmp_path_factory):
    """A release that converts with its own functions and reads the parser dict directly."""
    root = tmp_path_factory.mktemp("older-args")
    files = {"vllm/entrypoints/cli/serve.py": SERVE, "vllm/entrypoints/openai/cli_args.py": CLI_ARGS,
             "vllm/entrypoints/chat_utils.py": CHAT_UTILS, "vllm/entrypoints/openai/api_server.py": OLD_API_SERVER,
             "vllm/transformers_utils/chat_templates/registry.py": REGISTRY, "vllm/engine/arg_utils.py": ARG_UTILS_SRC,
             "vllm/utils/argparse_utils.py": ARGPARSE_UTILS}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    tree = VllmTree(root, VERSION, "src")
    values = [*VALUES, opt("--doubled", type="callable", callable_src="doubled"),
              opt("--dtype-ish", type="callable", callable_src="needs_torch")]
    return SimpleNamespace(
        version=VERSION, serve_parser=ServeParser(values, Validator(schemas_from_rows(CONFIG)), VERSION, tree),
        serve_rules=ServeRules(tree, {"tool": {"hermes"}, "reasoning": set()}, [], VERSION))


def test_release_type_function_runs_from_its_source(older) -> None:
    res = check_arguments(older, ["vllm", "serve", "m", "--doubled", "21"], SHELL)
    assert not res.findings and res.namespace["doubled"] == 42
    res = check_arguments(older, ["vllm", "serve", "m", "--doubled", "x"], SHELL)
    assert res.findings[0].status == "blocked" and "--doubled" in res.findings[0].message


def test_release_type_function_that_cannot_be_evaluated_is_unknown(older) -> None:
    res = check_arguments(older, ["vllm", "serve", "m", "--dtype-ish", "bfloat16"], SHELL)
    assert [f.status for f in res.findings] == ["unknown"]
    assert "needs_torch (vllm/engine/arg_utils.py:6), which could not be evaluated" in res.findings[0].step


def test_older_parser_dicts_are_read(older) -> None:
    ok = check_arguments(older, ["vllm", "serve", "m", "--tool-call-parser", "hermes", "--enable-auto-tool-choice"],
                         SHELL)
    assert not ok.findings
    bad = check_arguments(older, ["vllm", "serve", "m", "--tool-call-parser", "nope", "--enable-auto-tool-choice"],
                          SHELL)
    assert (bad.findings[0].stage, bad.findings[0].exception) == ("api_server", "KeyError")


def test_validation_reading_what_the_analysis_lacks_is_unknown(older) -> None:
    """An AttributeError from a stand-in is the analysis's gap, not vLLM's answer."""
    res = check_arguments(older, ["vllm", "serve", "m", "--chat-template", "{{ messages }}"], SHELL)
    assert [f.status for f in res.findings] == ["unknown"]
    assert "could not be evaluated: AttributeError" in res.findings[0].step


SERVE_WITH_CMD = SERVE + '''

class ServeSubcommand:
    @staticmethod
    def cmd(args):
        if args.headless:
            args.api_server_count = 0
        if args.api_server_count < 1:
            run_headless(args)
        else:
            run_server(args)


def run_headless(args):
    pass
'''


@pytest.fixture(scope="module")
def dispatching(tmp_path_factory):
    """A release whose `cmd` sends a headless node to run_headless (no API server)."""
    root = tmp_path_factory.mktemp("dispatch-args")
    tree = _mini_release(root, SERVE_WITH_CMD)
    return SimpleNamespace(
        version=VERSION, serve_parser=ServeParser(VALUES, Validator(schemas_from_rows(CONFIG)), VERSION, tree),
        serve_rules=ServeRules(tree, {"tool": {"hermes"}, "reasoning": {"qwen3"}}, [], VERSION))


@pytest.mark.parametrize("extra,api_checked", [
    ([], True),
    (["--headless"], False),  # a worker node: run_headless starts no API server
    (["--api-server-count", "0"], False),
    (["--api-server-count", "2"], True),
])
def test_api_server_validation_only_where_cmd_starts_one(dispatching, release, extra, api_checked) -> None:
    argv = ["vllm", "serve", "m", "--tool-call-parser", "nope", "--enable-auto-tool-choice", *extra]
    stages = [f.stage for f in check_arguments(dispatching, argv, SHELL).findings if f.status == "blocked"]
    assert stages == (["api_server"] if api_checked else [])
    # a release whose cmd is not found keeps the API server's validation for every node
    assert [f.stage for f in check_arguments(release, argv, SHELL).findings] == ["api_server"]
    assert dispatching.serve_rules.headless_dispatch == "vllm/entrypoints/cli/serve.py:8"  # def cmd


def test_unverified_rewrite_makes_what_the_replay_rejects_unknown() -> None:
    """Not verified: flag names decide as before, a rejected value is unknown, never ok."""
    from compat.hf import ModelResolver
    from compat.recipes import Combination
    from compat.verdict.engine import Judge
    from compat.verdict.knowledge import Knowledge

    k = Knowledge(version=VERSION, tree=None, values=VALUES)
    k.release_facts["argv_rewrite"] = {"sha": "0" * 16, "file": "f.py", "line": 1}
    judge = Judge(k, ModelResolver(trees=[]))
    found = judge.unverified_arguments(["vllm", "serve", "m", "-tp", "x", "--nope"])
    assert [(f.status, f.stage) for f in found] == [("unknown", "argument")]  # --nope: left to the name checks
    assert "not verified for vLLM 9.9.9's argv rewrite" in found[0].step
    combo = Combination(recipe="", model_id="m", variant="", strategy="", feature="", mode="", hardware="",
                        platform="cuda", argvs=(("", ("vllm", "serve", "m", "-tp", "x")),), vllm_pin="",
                        docker_pin=None, gated=False, omni=False, problems=())
    out = judge.judge(combo)
    assert out.status != "ok" and any("invalid int value: 'x'" in f.message for f in out.findings)
    assert not any(f.status == "blocked" and f.stage == "argument" for f in out.findings)


def _both_parsers():
    from compat.verdict.arguments import _Parser, _take_defaults

    p = _Parser(prog="vllm serve")
    p.add_argument("model_tag", nargs="?")
    p.add_argument("--max-model-len", type=int)
    p.add_argument("--max-num-seqs", type=int)
    p.add_argument("--max-num-batched-tokens", type=int)
    p.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction)
    p.add_argument("-O", "--compilation-config")
    p.add_argument("--tool-call-parser", choices=["a", "b"])
    p.add_argument("--tp", "--tensor-parallel-size", dest="tp", type=int)
    for i in range(200):
        p.add_argument(f"--filler-{i}", default="x")
    _take_defaults(p)
    return p


@pytest.mark.parametrize("args", [
    ["m", "--max-model-len", "8"],
    ["m", "--max-model", "8"],               # an abbreviation
    ["m", "--max-num", "8"],                 # ambiguous: two options start so
    ["m", "--max-num-seqs=4", "--tp", "2"],
    ["m", "-O3", "--no-enable-prefix-caching"],
    ["m", "-O", "{}", "--tool-call-parser", "c"],  # invalid choice
    ["m", "--max-model-len", "-1"],          # a negative value
    ["m", "--max-model-len", "--tp", "2"],   # a missing value
    ["m", "--unknown", "1", "--filler-3", "y"],
    ["m", "--tensor", "4", "extra"],
    ["m", "-", "--"],
])
def test_the_narrowed_parser_parses_as_the_whole_one(args: list[str]) -> None:
    """_narrowed keeps only the actions an argv can reach; what argparse makes of the argv,
    namespace or error message, must not change."""
    from compat.verdict.arguments import _narrowed, _ParseError

    def outcome(parser):
        try:
            ns, extras = parser.parse_known_args(list(args), argparse.Namespace())
            return vars(ns), extras
        except _ParseError as exc:
            return exc.message

    whole = _both_parsers()
    assert outcome(_narrowed(whole, args)) == outcome(whole)
    if "-" not in args:  # a bare '-' is a prefix of every option: all of them stay
        assert len(_narrowed(whole, args)._actions) < 20


# ---- releases before 0.9: the `vllm` command in vllm/scripts.py, checks inline in run_server,
# JSON flags converted by the config class's own `from_cli`

SCRIPTS_07 = '''
from vllm.entrypoints.openai.api_server import run_server
from vllm.entrypoints.openai.cli_args import make_arg_parser, validate_parsed_serve_args


def main():
    parser = FlexibleArgumentParser(description="vLLM CLI")
    parser.add_argument("-v", "--version", action="version", version="0.7")
    subparsers = parser.add_subparsers(required=True, dest="subparser")
    serve_parser = subparsers.add_parser("serve", usage="vllm serve <model_tag> [options]")
    serve_parser.add_argument("model_tag", type=str, help="The model tag to serve")
    serve_parser.add_argument("--config", type=str, default="", required=False)
    serve_parser = make_arg_parser(serve_parser)
    args = parser.parse_args()
    if args.subparser == "serve":
        validate_parsed_serve_args(args)
'''
RUN_SERVER_07 = '''
from vllm.entrypoints.openai.tool_parsers import ToolParserManager


async def run_server(args, **uvicorn_kwargs):
    logger.info("vLLM API server version %s", VLLM_VERSION)
    valid_tool_parses = ToolParserManager.tool_parsers.keys()
    if args.enable_auto_tool_choice and args.tool_call_parser not in valid_tool_parses:
        raise KeyError(f"invalid tool call parser: {args.tool_call_parser} "
                       f"(chose from {{ {','.join(valid_tool_parses)} }})")
    sock = create_server_socket((args.host or "", args.port))
    await serve_http(sock)
'''
CONFIG_07 = '''
import ast
from pydantic import BaseModel


class CompilationConfig(BaseModel):
    level: int = 0
    use_inductor: bool = True

    @classmethod
    def from_cli(cls, cli_value: str) -> "CompilationConfig":
        if cli_value in ["0", "1", "2", "3"]:
            return cls(level=int(cli_value))
        dict_value = ast.literal_eval(cli_value)
        return CompilationConfig.model_validate(dict_value)
'''
ARG_UTILS_07 = '''
from vllm.config import CompilationConfig
'''


@pytest.fixture(scope="module")
def release_07(tmp_path_factory):
    root = tmp_path_factory.mktemp("args-07")
    files = {"vllm/scripts.py": SCRIPTS_07, "vllm/entrypoints/openai/cli_args.py": CLI_ARGS,
             "vllm/entrypoints/chat_utils.py": CHAT_UTILS, "vllm/entrypoints/openai/api_server.py": RUN_SERVER_07,
             "vllm/transformers_utils/chat_templates/registry.py": REGISTRY, "vllm/config.py": CONFIG_07,
             "vllm/engine/arg_utils.py": ARG_UTILS_07, "vllm/utils/argparse_utils.py": ARGPARSE_UTILS}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    tree = VllmTree(root, VERSION, "src")
    values = [opt("model_tag"), *(v for v in VALUES[1:] if v["flag"] != "--compilation-config"),
              opt("--compilation-config", "-O", type="callable", callable_src="CompilationConfig.from_cli")]
    config = [cfg("CompilationConfig", "", extra="ignore"), cfg("CompilationConfig", "level", {"t": "int"}, 0),
              cfg("CompilationConfig", "use_inductor", {"t": "bool"}, True)]
    return SimpleNamespace(
        tree=tree, version=VERSION, serve_parser=ServeParser(values, Validator(schemas_from_rows(config)), VERSION, tree),
        serve_rules=ServeRules(tree, {"tool": ["mistral", "hermes"], "reasoning": []}, [], VERSION))


def test_serve_subparser_arguments_are_read_from_scripts_py(release_07) -> None:
    """0.5-0.7 add `model_tag` (required) and `--config` in vllm/scripts.py main(), before
    make_arg_parser(serve_parser); 0.8-0.9 in serve.py's subparser_init."""
    from compat.vllm.cli_surface import extract_cli

    cli = extract_cli(release_07.tree)
    assert [(p[0], p[1].nargs, p[2]) for p in cli.positionals] == [("model_tag", None, "vllm/scripts.py")]
    assert cli.lookup("--config").file == "vllm/scripts.py"
    assert "--version" not in cli.long_flags()  # the top-level parser's, not serve's


def test_run_server_inline_checks_before_its_socket(release_07) -> None:
    """Before validate_api_server_args existed, run_server checked the parser name inline, before
    it bound its socket: those statements are run (the dict in registration order)."""
    res = check_arguments(release_07, ["vllm", "serve", "m", "--enable-auto-tool-choice",
                                       "--tool-call-parser", "qwen3_xml"], SHELL)
    blocked = [f for f in res.findings if f.status == "blocked"]
    assert [(f.stage, f.exception) for f in blocked] == [("api_server", "KeyError")]
    assert blocked[0].message == "'invalid tool call parser: qwen3_xml (chose from { mistral,hermes })'"
    ok = check_arguments(release_07, ["vllm", "serve", "m", "--enable-auto-tool-choice",
                                      "--tool-call-parser", "hermes"], SHELL)
    assert not [f for f in ok.findings if f.status != "ok"], ok.findings


@pytest.mark.parametrize("value,want", [
    ('{"use_inductor": false}', "invalid from_cli value"),  # literal_eval: `false` is not Python
    ('{"level": "x"}', "invalid from_cli value"),            # the class's own check fails
    ('{"use_inductor": False, "cudagraph_mode": 1}', None),  # BaseModel ignores unknown keys
    ("3", None),
])
def test_from_cli_runs_the_class_method(release_07, value, want) -> None:
    res = check_arguments(release_07, ["vllm", "serve", "m", "--compilation-config", value], SHELL)
    blocked = [f for f in res.findings if f.status == "blocked"]
    if want is None:
        assert not [f for f in res.findings if f.status != "ok"], res.findings
    else:
        assert blocked and want in blocked[0].message, res.findings


def test_a_release_without_the_checks_runs_none(tmp_path) -> None:
    """0.6.2: main() calls no validate_parsed_serve_args and run_server binds its socket first
    (socket.socket): both stages are absent, not unknown."""
    files = {"vllm/scripts.py": SCRIPTS_07.replace(", validate_parsed_serve_args", "").replace(
                 '    if args.subparser == "serve":\n        validate_parsed_serve_args(args)\n', ""),
             "vllm/entrypoints/openai/api_server.py":
                 "async def run_server(args):\n    logger.info('x')\n"
                 "    temp_socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n",
             "vllm/entrypoints/openai/cli_args.py": CLI_ARGS}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    rules = ServeRules(VllmTree(tmp_path, VERSION, "src"), {"tool": ["hermes"], "reasoning": []}, [], VERSION)
    assert rules.absent == {"validate"} and not rules.missing
    assert [(r.stage, r.status) for r in rules.run(argparse.Namespace())] == [("api_server", "ok")]


@pytest.mark.parametrize("body,found", [
    # 0.6.0-0.6.1: no socket bound first; the engine is built, then the app (its checks come later)
    ("    async with build_async_engine_client(args) as client:\n        app = await init_app(client, args)\n", True),
    # neither a socket nor the engine: not a shape this reads
    ("    app = await init_app(None, args)\n", False),
])
def test_run_server_checks_end_where_the_engine_starts(tmp_path, body, found) -> None:
    """Where run_server binds no socket before the engine starts, the statements before the
    engine is built are its checks (none at 0.6.0: the stage runs and passes, it is not
    missing); a run_server of another shape stays missing (unknown), never ok."""
    files = {"vllm/scripts.py": SCRIPTS_07.replace(", validate_parsed_serve_args", "").replace(
                 '    if args.subparser == "serve":\n        validate_parsed_serve_args(args)\n', ""),
             "vllm/entrypoints/openai/api_server.py":
                 "async def run_server(args, **uvicorn_kwargs):\n    logger.info('x')\n" + body,
             "vllm/entrypoints/openai/cli_args.py": CLI_ARGS}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    rules = ServeRules(VllmTree(tmp_path, VERSION, "src"), {"tool": ["hermes"], "reasoning": []}, [], VERSION)
    if found:
        assert not rules.missing
        assert [(r.stage, r.status) for r in rules.run(argparse.Namespace())] == [("api_server", "ok")]
    else:
        assert "api_server" in rules.missing
