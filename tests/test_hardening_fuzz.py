"""Hardening: property-based fuzzing of recipe YAML, `vllm serve` arg lists and --speculative-config.

Contract (README "Exit codes", DESIGN "Contracts"): bad input gives exit 2 with one line
naming the file and field, never a traceback, and a failed run leaves the database as it
was; anything else is a finding (exit 0 for `build`). In-process, that means:

* `load_repo` / `enumerate_repo` on a mutated recipes tree raise nothing but `UserError`;
* `parse_serve_args` never raises;
* the verdict engine (`Judge.judge`) never raises and always returns one of the four statuses.

The bulk runs in-process on mutations of tests/fixtures/recipes/minimal; a few mutated
trees also go through the `compat build` CLI (in-process `compat.cli.main`, through
tests/cli_kit.py, which writes an escaping exception to stderr as the interpreter would, so
"no traceback on stderr" is a real check). Nothing here touches the network: the package
index opener is replaced by one that fails, and its URL cannot be reached (builds are given
--vllm-src, so they never ask for it anyway).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compat import api
from compat import store
from compat.errors import UserError
from compat.hf import ModelResolver
from compat.recipes import Combination, enumerate_repo, load_repo, parse_serve_args
from compat.sources import tree_from_path
from compat.verdict import gates as vgates
from compat.verdict.engine import Judge
from compat.verdict.knowledge import load_knowledge
from tests import cli_kit

HERE = Path(__file__).resolve().parent
MINIMAL = HERE / "fixtures" / "recipes" / "minimal"
MINITREE = HERE / "fixtures" / "minitrees" / "dispatch"
HF = HERE / "fixtures" / "hardening" / "hf"
STATUSES = {"ok", "blocked", "warning", "unknown"}
RECIPE_FILES = sorted(p.relative_to(MINIMAL).as_posix() for p in MINIMAL.rglob("*.yaml"))
# Examples per property; raise (e.g. HARDENING_EXAMPLES=2000) for a long local fuzzing run.
N = int(os.environ.get("HARDENING_EXAMPLES", "0") or 0)


def examples(default: int) -> int:
    return N or default


FUZZ = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large,
                                                    HealthCheck.function_scoped_fixture]}


@pytest.fixture(scope="module", autouse=True)
def _offline_and_isolated(tmp_path_factory: pytest.TempPathFactory):
    """A private COMPAT_CACHE for the module, and a package-index opener that refuses."""
    from compat.sources import pypi

    def refuse(url: str, headers: dict[str, str]) -> bytes:
        raise OSError(f"network disabled in hardening tests: {url}")

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COMPAT_CACHE", str(tmp_path_factory.mktemp("cache")))
        mp.setattr(pypi, "_default_open", refuse)
        yield


# ------------------------------------------------------------------ value generators

ODD_STRINGS = [
    "", " ", "\t", "null", "~", "yes", "no", "0.23.0", "nightly", "0x1F", "1e999", "-1", "NaN",
    "--", "-", "--tensor-parallel-size", "-tp", "--x=1", "{", "[]", "{\"method\": \"mtp\"}",
    "models/../../etc/passwd", "/abs/path", "C:\\win", "a" * 400, "é中\U0001F600", "\u202e\u0000",
    "zai-org/GLM-5.2", "acme/Widget", "single_node_tp", "multi_node_tp_pp", "spec_decoding", "mtp",
    "NVIDIA", "AMD", "hopper", "amd", "h200", "default", "vllm/vllm-openai:v0.24.0",
    "vllm/vllm-openai:nightly", "vllm/vllm-openai:v", ":", "!!python/name:os.system",
]
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 10), st.integers(min_value=2**63, max_value=10**300),
    st.integers(max_value=-(2**63), min_value=-(10**300)),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12), st.sampled_from(ODD_STRINGS),
)
KEYS = st.one_of(st.text(max_size=8), st.sampled_from(ODD_STRINGS[:20]), st.integers(-2, 2),
                 st.booleans(), st.none(), st.floats(allow_nan=False))
JUNK = st.recursive(SCALARS, lambda ch: st.lists(ch, max_size=3) | st.dictionaries(KEYS, ch, max_size=3),
                    max_leaves=8)
# YAML text the dumper cannot produce: tags, anchors, overflowing scalars, bad dates.
RAW_SNIPPETS = [
    "9" * 5000,  # more digits than int() converts (ValueError in the constructor)
    "0x" + "f" * 5000,  # a huge int that loads fine but cannot be str()-ed
    "!!int abc", "!!float x", "!!timestamp 2020-13-45", "2001-02-30", "2020-01-01",
    "2020-01-01T00:00:00Z", "!!binary zz", "!!binary aGVsbG8=", "!!set {a, b}", "!!omap [a: 1]",
    "!!python/object/apply:os.system ['true']", "!!python/name:os.system", "!custom tag",
    "&a [*a]", "&b {k: *b}", "*undefined_alias", "[" * 200 + "]" * 200, ".nan", "-.inf",
    "'unterminated", "{a: 1, a: 2}", "\"\\x00\"", "|\n  block\n", "? [1, 2]\n  : 3",
]
RAW_FILES = [
    b"", b"\xff\xfe\x00garbage", b"\xef\xbb\xbfmodel: {model_id: x}\n", b"- just\n- a list\n",
    b"42\n", b"%YAML 9.9\n---\na: 1\n", b"a: 1\n---\nb: 2\n", b"\t- tab indented\n", b"key: [unclosed\n",
]
SENTINEL = "__HARDENING_RAW_VALUE__"


def _paths(doc: Any, pre: tuple = ()) -> list[tuple]:
    out = [pre]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, pre + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, pre + (i,))
    return out


def _get(doc: Any, path: tuple) -> Any:
    for k in path:
        doc = doc[k]
    return doc


def mutated_text(data: st.DataObject, rel: str) -> bytes:
    """The pristine file `rel` of the minimal tree with one to three mutations applied."""
    text = (MINIMAL / rel).read_text(encoding="utf-8")
    kind = data.draw(st.sampled_from(["tree", "tree", "tree", "raw_value", "raw_file"]), label="kind")
    if kind == "raw_file":
        return data.draw(st.sampled_from(RAW_FILES) | st.binary(max_size=40)
                         | st.text(max_size=60).map(str.encode), label="file bytes")
    doc = yaml.safe_load(text)
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        op = data.draw(st.sampled_from(["replace", "delete", "add", "wrap", "retype", "leaf", "leaf"]), label="op")
        paths = _paths(doc)
        if op == "leaf":  # odd scalars deep inside: mostly loads, so enumeration gets exercised
            paths = [p for p in paths if p and not isinstance(_get(doc, p), (dict, list))] or paths
            op = "retype"
        path = paths[data.draw(st.integers(0, len(paths) - 1), label="path")]
        if not path:
            doc = data.draw(JUNK, label="document")
            continue
        parent, key = _get(doc, path[:-1]), path[-1]
        if op == "replace":
            parent[key] = data.draw(JUNK, label="value")
        elif op == "delete":
            del parent[key]
        elif op == "add" and isinstance(parent, dict):
            parent[data.draw(KEYS, label="new key")] = data.draw(JUNK, label="new value")
        elif op == "wrap":
            parent[key] = [parent[key]] if data.draw(st.booleans()) else {"nested": parent[key]}
        else:  # retype: a scalar of a different kind where the synthesizer expects one
            parent[key] = data.draw(SCALARS, label="scalar")
    if kind == "raw_value":
        paths = [p for p in _paths(doc) if p]
        if paths:
            path = paths[data.draw(st.integers(0, len(paths) - 1), label="raw path")]
            _get(doc, path[:-1])[path[-1]] = SENTINEL
    out = yaml.safe_dump(doc, allow_unicode=True, sort_keys=False, width=1000)
    if kind == "raw_value":
        out = out.replace(SENTINEL, data.draw(st.sampled_from(RAW_SNIPPETS), label="raw"), 1)
    return out.encode("utf-8")


def make_tree(data: st.DataObject, root: Path) -> list[str]:
    """Copy the minimal recipes tree to `root` and mutate one or two of its files."""
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(MINIMAL, root)
    files = data.draw(st.lists(st.sampled_from(RECIPE_FILES), min_size=1, max_size=2, unique=True),
                      label="files")
    for rel in files:
        (root / rel).write_bytes(mutated_text(data, rel))
    return files


def assert_user_error_names_file(exc: UserError, mutated: list[str]) -> None:
    line = exc.line()
    assert "\n" not in line and "\r" not in line, f"multi-line error: {line!r}"
    assert any(line.startswith(rel) for rel in mutated), f"error does not name a mutated file: {line!r}"


# ------------------------------------------------------------------ recipes, in-process

@settings(max_examples=examples(100), **FUZZ)
@given(data=st.data())
def test_fuzz_recipes_load_and_enumerate_only_user_errors(data, tmp_path_factory):
    root = tmp_path_factory.mktemp("recipes")
    mutated = make_tree(data, root)
    try:
        repo = load_repo(root)
        enum = enumerate_repo(repo)
    except UserError as exc:
        assert_user_error_names_file(exc, mutated)
        return
    for c in enum.combinations:
        assert c.platform in ("cuda", "rocm")
        assert all(isinstance(a, str) for _role, argv in c.argvs for a in argv)
        assert all(isinstance(p, str) for p in c.problems)
    shutil.rmtree(root)


@pytest.mark.parametrize("snippet", RAW_SNIPPETS)
def test_each_odd_yaml_value_in_a_recipe_is_a_user_error_or_loads(snippet, tmp_path):
    """Every raw snippet once in a field the synthesizer reads (deterministic, complements the fuzz)."""
    root = tmp_path / "r"
    shutil.copytree(MINIMAL, root)
    rel = "models/acme/Widget.yaml"
    text = (root / rel).read_text().replace('min_vllm_version: "0.23.0"', f"min_vllm_version: {snippet}")
    (root / rel).write_text(text.replace('base_args: ["--kv-cache-dtype"', f'base_args: [{SENTINEL}, "--kv-cache-dtype"')
                            .replace(SENTINEL, snippet if "\n" not in snippet else "x"))
    try:
        enumerate_repo(load_repo(root))
    except UserError as exc:
        assert_user_error_names_file(exc, [rel])


# ------------------------------------------------------------------ argv and JSON, in-process

FLAGS = [
    "--pipeline-parallel-size", "-pp", "--tensor-parallel-size", "-tp", "--data-parallel-size", "-dp",
    "-dcp", "--decode-context-parallel-size", "--enable-expert-parallel", "-ep", "--no-enable-expert-parallel",
    "--speculative-config", "-sc", "--speculative-config.method", "--speculative-config.model",
    "--speculative_config.num_speculative_tokens", "--speculative-config.draft_tensor_parallel_size",
    "--speculative-config.method.nested", "--speculative-config.x+", "--spec-model", "--spec-tokens",
    "--kv-transfer-config", "--kv-transfer-config.kv_connector", "--tool-call-parser",
    "--enable-auto-tool-choice", "--reasoning-parser", "--tool-parser-plugin", "--mm-encoder-tp-mode",
    "--async-scheduling", "--distributed-executor-backend", "--quantization", "--language-model-only",
    "--model", "--data-parallel-external-lb", "--data-parallel-rank", "--nnodes", "-n", "--headless",
    "--", "-", "--=", "-O3", "-O", "-O=2", "--no-", "--no-x", "-x", "--unknown-flag", "--a.b.c",
]
SPEC_KEYS = ["method", "model", "num_speculative_tokens", "draft_tensor_parallel_size",
             "enable_adaptive_verification", "quantization", "prompt_lookup_max"]
METHODS = ["mtp", "fancy_mtp", "eagle", "eagle3", "ngram", "draft_model", "suffix", "dflash", "medusa",
           "extract_hidden_states", "MTP", "", "deepseek_mtp"]
MODELS = ["acme/Fancy", "acme/PP", "acme/NoPP", "acme/Draft", "acme/Moe", "acme/Unknown", "ngram",
          "[ngram]", "pkg.module.Class", "eagle3-draft", "dflash-x"]
JSON_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-2, 8), st.integers(min_value=10**20, max_value=10**400),
                        st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
                        st.sampled_from(METHODS + MODELS))
JSON_VALUE = st.recursive(JSON_SCALAR, lambda ch: st.lists(ch, max_size=3)
                          | st.dictionaries(st.sampled_from(SPEC_KEYS) | st.text(max_size=5), ch, max_size=4),
                          max_leaves=10)
SPEC_OBJECT = st.fixed_dictionaries({}, optional={
    "method": st.sampled_from(METHODS) | JSON_VALUE,
    "model": st.sampled_from(MODELS) | JSON_VALUE,
    "num_speculative_tokens": JSON_SCALAR,
    "draft_tensor_parallel_size": st.sampled_from([1, 2, 8, "2", "x", None, [2], {"a": 1}, 10**30, -1, 1.5, True]),
    "enable_adaptive_verification": JSON_SCALAR,
})


def _malformed(text: str, cut: int, junk: str) -> str:
    cut = cut % (len(text) + 1)
    return text[:cut] + junk + text[cut + 1:]


SPEC_TEXT = st.one_of(
    SPEC_OBJECT.map(json.dumps),
    JSON_VALUE.map(json.dumps),  # nested, and non-objects: [], 3, "x", null
    st.sampled_from(["[]", "3", "\"mtp\"", "null", "true", "{}", "None", "", "1e999", "-0", "NaN",
                     "{\"method\": \"mtp\",", "{'method': 'mtp'}", "[" * 3000 + "]" * 3000,
                     "{\"a\":" * 2000 + "1" + "}" * 2000, "{\"num_speculative_tokens\": " + "9" * 5000 + "}",
                     "{\"method\": \"mtp\", \"method\": [1]}", "{\"model\": {\"model\": {\"model\": 1}}}"]),
    st.builds(_malformed, SPEC_OBJECT.map(json.dumps), st.integers(0, 200),
              st.sampled_from(["", "{", "}", "\"", ",", "\\", "\x00", "é"])),
)
VALUES = st.one_of(st.sampled_from(["1", "2", "0", "-1", "8", "9" * 40, "9" * 5000, "1.5", "2k", "1K",
                                    "", "x", "-", "-.5", "-a.b", "None", "data", "weights", "ray", "fp8"]),
                   st.text(max_size=10), SPEC_TEXT)
ARGV = st.lists(st.one_of(st.sampled_from(FLAGS), VALUES, st.sampled_from(FLAGS).map(lambda f: f + "=")
                          .flatmap(lambda f: VALUES.map(lambda v: f + v))), max_size=14)


@settings(max_examples=examples(200), **FUZZ)
@given(argv=ARGV, lead=st.sampled_from([[], ["vllm", "serve"], ["serve"], ["/usr/bin/vllm", "serve", "m"]]))
def test_fuzz_parse_serve_args_never_raises(argv, lead):
    args = parse_serve_args(lead + argv)
    assert isinstance(args.errors, list) and all(isinstance(e, str) for e in args.errors)
    assert args.speculative_config is None or isinstance(args.speculative_config, dict)
    assert args.kv_transfer_config is None or isinstance(args.kv_transfer_config, dict)
    assert isinstance(args.pipeline_parallel_size, int)


@settings(max_examples=examples(300), **FUZZ)
@given(spec=SPEC_TEXT)
def test_fuzz_speculative_config_json_parses_to_object_or_error(spec):
    args = parse_serve_args(["m", "--speculative-config", spec])
    if args.speculative_config is None:
        # None, '' and 'None' mean "no speculative config" to vLLM; anything else must say why.
        assert args.speculative_config_error or spec.strip() in ("", "None", "null")
    else:
        assert isinstance(args.speculative_config, dict)


# ------------------------------------------------------------------ the verdict engine

@pytest.fixture(scope="module")
def judges(tmp_path_factory) -> dict[str, Judge]:
    """Judges at the scanned dispatch minitree: as scanned (no flags or parsers extracted),
    and 'rich' (flags, parsers and every curated gate verified) so fuzzed args reach the
    flag, parser, gate and runner checks too."""
    db = tmp_path_factory.mktemp("judge") / "mini.db"
    api.scan([], [f"{MINITREE}=0.0.1"], False, db)
    tree = tree_from_path(f"{MINITREE}=0.0.1")
    with store.open_store(db) as facts:
        plain = load_knowledge(facts, "0.0.1", tree)
        rich = load_knowledge(facts, "0.0.1", tree)
    rich.notes = []
    for f in FLAGS:
        if f.startswith("--") and "." not in f and "=" not in f and not f.startswith("--no-") and len(f) > 3:
            canonical = f.replace("_", "-")
            vt = "bool" if f in ("--enable-expert-parallel", "--enable-auto-tool-choice", "--async-scheduling",
                                 "--language-model-only", "--headless") else "json" if "config" in f else "str"
            rich.flags[canonical] = {"canonical": canonical, "value_type": vt, "file": "vllm/engine/arg_utils.py",
                                     "line": 1}
    rich.flags["-tp"] = rich.flags["--tensor-parallel-size"]
    rich.subkeys["--speculative-config"] |= {"method", "model", "num_speculative_tokens",
                                             "draft_tensor_parallel_size", "enable_adaptive_verification"}
    rich.parsers["tool"] |= {"hermes"}
    rich.parsers["reasoning"] |= {"deepseek_r1"}
    for r in vgates.rules():
        rich.gates[r.id] = {"rule_id": r.id, "status": "verified", "file": "vllm/x.py", "line": 1,
                            "effect": r.effect, "message": r.message}
    rich.release_facts["runner_default"] = {"mode": "v2"}
    rich.release_facts["requirements"] = {"packages": ["torch"]}
    rich.class_attrs["can_return_lse_for_decode"].append({"class_name": "FlashAttentionImpl", "file": "a.py"})
    models = ModelResolver(hf_config_dir=HF)
    return {"plain": Judge(plain, models), "rich": Judge(rich, models)}


def _combo(model: str, argvs: tuple, platform: str = "cuda", problems: tuple = ()) -> Combination:
    return Combination(recipe="models/acme/Fuzz.yaml", model_id=model, variant="default", strategy="s",
                       feature="spec_decoding", mode="", hardware="", platform=platform, argvs=argvs,
                       vllm_pin="0.0.1", docker_pin=None, gated=False, omni=False, problems=problems)


def _check_outcome(out: Any) -> None:
    assert out.status in STATUSES, out.status
    assert out.config_status in STATUSES
    assert out.chain and all(isinstance(s, str) for s in out.chain)
    assert isinstance(out.reason, str) and isinstance(out.message, str)
    assert all(isinstance(e, str) for e in out.evidence)


@settings(max_examples=examples(300), **FUZZ)
@given(which=st.sampled_from(["plain", "rich"]), model=st.sampled_from(MODELS[:6]),
       platform=st.sampled_from(["cuda", "rocm"]), argv=ARGV,
       roles=st.sampled_from([("",), ("prefill", "decode")]))
def test_fuzz_judge_arg_lists_never_raise(judges, which, model, platform, argv, roles):
    argvs = tuple((role, ("vllm", "serve", model, *argv)) for role in roles)
    _check_outcome(judges[which].judge(_combo(model, argvs, platform)))


@settings(max_examples=examples(300), **FUZZ)
@given(which=st.sampled_from(["plain", "rich"]), model=st.sampled_from(MODELS[:6]), spec=SPEC_TEXT,
       pp=st.sampled_from(["1", "2", "4", "0", "-1", "9" * 30]), ep=st.booleans(),
       extra=st.lists(st.sampled_from(["--speculative-config.method", "--speculative-config.model",
                                       "--speculative-config.draft_tensor_parallel_size", "--spec-tokens",
                                       "--spec-model"]).flatmap(lambda f: VALUES.map(lambda v: (f, v))),
                      max_size=2))
def test_fuzz_judge_speculative_config_never_raises(judges, which, model, spec, pp, ep, extra):
    argv = ["vllm", "serve", model, "-pp", pp, "--speculative-config", spec]
    argv += ["--enable-expert-parallel"] if ep else []
    argv += [x for pair in extra for x in pair]
    out = judges[which].judge(_combo(model, (("", tuple(argv)),)))
    _check_outcome(out)
    args = parse_serve_args(argv)
    if args.speculative_config_error:
        assert out.status in ("blocked", "unknown")


@pytest.mark.parametrize("spec", [
    "[]", "3", "\"mtp\"", "null", "{\"method\": [1]}", "{\"method\": {\"a\": 1}}", "{\"model\": 5}",
    "{\"model\": [\"x\"]}", "{\"method\": \"draft_model\", \"model\": [\"x\"]}", "{\"method\": true}",
    "{\"method\": \"mtp\", \"num_speculative_tokens\": 1e999}", "{\"method\": \"eagle\", \"model\": {\"x\": 1}}",
    "{\"method\": \"mtp\", \"draft_tensor_parallel_size\": \"x\"}", "{\"method\": \"mtp\", \"draft_tensor_parallel_size\": [2]}",
    "{\"method\": \"mtp\", \"draft_tensor_parallel_size\": {\"a\": 1}}", "{" * 5000,
])
@pytest.mark.parametrize("which", ["plain", "rich"])
def test_judge_known_bad_speculative_configs(judges, which, spec):
    """Regression cases the fuzzing found (TypeError / AttributeError before the fixes)."""
    for model in ("acme/Fancy", "acme/PP"):
        out = judges[which].judge(_combo(model, (("", ("vllm", "serve", model, "-pp", "2",
                                                         "--speculative-config", spec)),)))
        _check_outcome(out)
    out = judges[which].judge(_combo("acme/PP", (("", ("m", "--speculative-config.method.x", "mtp")),)))
    _check_outcome(out)
    assert out.status == "blocked" or which == "plain"


def test_non_string_method_or_model_is_blocked_with_reason(judges):
    out = judges["plain"].judge(_combo("acme/Fancy", (("", ("m", "--speculative-config", '{"method": [1]}')),)))
    assert out.status == "blocked" and "method must be a string" in out.reason
    out = judges["plain"].judge(_combo("acme/Fancy", (("", ("m", "--speculative-config", '{"model": 5}')),)))
    assert out.status == "blocked" and "model must be a string" in out.reason


# ------------------------------------------------------------------ the whole build, through the CLI

def _cli(argv: list[str]) -> tuple[int, str]:
    """compat.cli.main in-process (tests/cli_kit.py): (exit code, stderr)."""
    r = cli_kit.run(*argv)
    return r.returncode, r.stderr


@pytest.fixture(scope="module")
def baseline_db(tmp_path_factory) -> bytes:
    db = tmp_path_factory.mktemp("base") / "base.db"
    code, err = _cli(["build", "--recipes", str(MINIMAL), "--vllm-src", f"{MINITREE}=0.0.1", "--db", str(db)])
    assert code == 0, err
    return db.read_bytes()


def _error_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("error:")]


@settings(max_examples=examples(10), **FUZZ)
@given(data=st.data(), db_exists=st.booleans())
def test_fuzz_build_cli_exit_0_or_2_and_db_untouched(data, db_exists, baseline_db, tmp_path_factory):
    work = tmp_path_factory.mktemp("build")
    root = work / "recipes"
    mutated = make_tree(data, root)
    db = work / "c.db"
    if db_exists:
        db.write_bytes(baseline_db)
    code, err = _cli(["build", "--recipes", str(root), "--vllm-src", f"{MINITREE}=0.0.1", "--db", str(db),
                      "--hf-config-dir", str(HF)])  # acme/Widget resolves: the judge goes past "unresolved"
    assert "Traceback" not in err
    assert code in (0, 2), err
    leftovers = [p.name for p in work.iterdir() if p.name.endswith(".tmp")]
    assert not leftovers
    if code == 2:
        lines = _error_lines(err)
        assert len(lines) == 1, err
        assert any(lines[0].startswith(f"error: {rel}") for rel in mutated), lines[0]
        assert (db.read_bytes() == baseline_db) if db_exists else not db.exists()
    else:
        _cols, rows = store.query(db, "SELECT DISTINCT status FROM v_verdict")
        assert {r[0] for r in rows} <= STATUSES
    shutil.rmtree(work)


CLI_CASES = {
    "model_id_list": ("models/acme/Widget.yaml", "  model_id: acme/Widget", "  model_id: [1, 2]"),
    "variants_broken": ("models/acme/Widget.yaml", "variants:\n  default:", "variants: ~\n  _default:"),
    "variants_list": ("models/acme/Widget.yaml", "variants:\n  default:", "variants:\n  - default:"),
    "recursive_alias": ("models/acme/Widget.yaml", "features:\n", "features: &f\n  self: *f\n"),
    "control_char": ("models/acme/Widget.yaml", "  title: Widget", "  title: Wid\x1fget"),
    "huge_int": ("models/acme/Widget.yaml", 'min_vllm_version: "0.23.0"', "min_vllm_version: " + "9" * 5000),
    "infinite": ("models/acme/Widget.yaml", "    vram_minimum_gb: 60", "    vram_minimum_gb: .inf"),
    "bad_date": ("models/acme/Widget.yaml", 'min_vllm_version: "0.23.0"', "min_vllm_version: 2001-02-30"),
    "taxonomy_brand": ("taxonomy.yaml", "brand: AMD", "brand: {x: 1}"),
    "strategy_unicode_junk": ("strategies/single_node_tp.yaml", "deploy_type: single_node", "deploy_type: [é中]"),
    "finding_only": ("models/acme/Widget.yaml", '"--reasoning-parser", "widget"', '"--reasoning-parser", 7, null'),
}


def _case_tree(case: str, tmp_path: Path) -> tuple[Path, str]:
    rel, old, new = CLI_CASES[case]
    root = tmp_path / "recipes"
    shutil.copytree(MINIMAL, root)
    text = (root / rel).read_text()
    assert old in text
    (root / rel).write_text(text.replace(old, new, 1))
    return root, rel


@pytest.mark.parametrize("case", sorted(CLI_CASES))
def test_build_cli_cases(case, tmp_path):
    root, rel = _case_tree(case, tmp_path)
    db = tmp_path / "c.db"
    code, err = _cli(["build", "--recipes", str(root), "--vllm-src", f"{MINITREE}=0.0.1", "--db", str(db)])
    if case == "finding_only":
        assert code == 0, err
        return
    assert code == 2, err
    lines = _error_lines(err)
    assert len(lines) == 1 and lines[0].startswith(f"error: {rel}: "), err
    assert not db.exists()


@pytest.mark.parametrize("case", ["model_id_list", "finding_only"])
def test_build_cli_no_traceback(case, tmp_path, monkeypatch):
    """Once per outcome, everything a user sees on stderr (an escaping exception included)."""
    from compat.sources import pypi

    root, rel = _case_tree(case, tmp_path)
    db = tmp_path / "c.db"
    monkeypatch.setenv("COMPAT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(pypi, "INDEX_URL", "http://127.0.0.1:9/simple")
    r = cli_kit.run("build", "--recipes", str(root), "--vllm-src", f"{MINITREE}=0.0.1", "--db", str(db))
    assert "Traceback" not in r.stderr, r.stderr
    if case == "finding_only":
        assert r.returncode == 0, r.stderr
        assert db.is_file()
        return
    assert r.returncode == 2, r.stderr
    lines = _error_lines(r.stderr)
    assert len(lines) == 1 and lines[0].startswith(f"error: {rel}: "), r.stderr
    assert not db.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
