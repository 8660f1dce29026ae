#!/usr/bin/env python3
"""Record what `vllm serve` does with each argv before it touches a model.

Run with the python of a virtualenv that has the vLLM release installed, from a
directory holding that release's `examples/` (the sdist root; see README.md):

    cd $SDIST_ROOT && $VENV/bin/python tools/golden/serve_args.py \
        --argvs argvs.json --out tests/golden [--platform cuda]

`argvs.json` comes from `export_argvs.py` (every argv a vllm-compat build
synthesized). For each argv, in one interpreter, the stages `vllm serve` runs
before it loads anything:

1. `parse`: the CLI's parser exactly as `vllm/entrypoints/cli/main.py` builds it
   (a `FlexibleArgumentParser` with a `serve` subparser made by
   `ServeSubcommand.subparser_init`, i.e. `make_arg_parser`), `parse_args`;
2. `validate`: `ServeSubcommand.validate` (`validate_parsed_serve_args`; nothing in 0.6.0-0.6.3,
   whose main() dispatches right after parsing);
3. `serve_cmd`: `ServeSubcommand.cmd` itself, run for real up to the entry it dispatches
   to (`run_server`, `run_multi_api_server`, `run_headless`, `run_dp_supervisor`, each
   replaced by a stub that only records which one was reached): its own checks (a
   `--headless` with API servers, several DP load-balancing modes) and `args.model =
   args.model_tag`;
4. `api_server`: the API server's `validate_api_server_args` (what `setup_server`
   runs before binding its socket), only where `cmd` reaches an API server: a
   `--headless` node (`run_headless`) starts none and never runs it;
5. `engine_args`: `AsyncEngineArgs.from_cli_args`, which every entry runs.

Shell variables the synthesizer leaves in an argv (`--master-addr $HEAD_IP`,
`--data-parallel-rpc-port $PREFILL_DP_RPC_PORT`) are expanded first, as the
user's shell would: a name ending in `PORT` becomes `29550`, any other name
`10.0.0.1` (`shell_value`); each row lists the names it expanded.

The first stage that raises is recorded with its exception type and message
(argparse errors: the `prog: error: ...` text it prints before exiting 2); a row
that passes them all is `ok`. Plugin files (`--tool-parser-plugin`,
`--reasoning-parser-plugin`) are not imported: they are user code outside vLLM.

Output `<out>/serve-args-<vllm version>.json.gz` (compact JSON, gzipped without a timestamp:
6,700 argvs are 3 MB of JSON, 60 kB compressed), rows sorted by argv:
`{"vllm_version", "python", "platform", ..., "rows": [[argv, omni, shell_vars, stage, exception, message,
values], ...]}` (`argv` as synthesized, before expansion; `values`: every parsed value that differs
from its default, as JSON, a config object as `<ClassName>`; empty when parsing failed).
Progress is checkpointed (one JSON line per argv) so an interrupted run resumes.
Messages are made machine-independent: a path inside the venv's site-packages becomes the
package-relative path (`vllm/...`), any other venv path starts with `<venv>`, the
working directory `<sdist>`, object addresses `0x?`.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import json
import os
import platform as py_platform
import re
import sys
import tempfile
import time
import traceback

os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Not offline: with HF_HUB_OFFLINE, EngineArgs.__post_init__ resolves the model id in the local
# HF cache (a model-touching step). Any Hub access would be a bug in this harness instead: make
# it fail fast and visibly.
os.environ["HF_HUB_OFFLINE"] = "0"
os.environ.setdefault("HF_ENDPOINT", "http://127.0.0.1:9")

HERE = os.path.dirname(os.path.abspath(__file__))
STAGES = ("parse", "validate", "serve_cmd", "api_server", "engine_args")
# What ServeSubcommand.cmd dispatches to; each is stubbed while cmd runs (entry_of).
ENTRIES = ("run_server", "run_multi_api_server", "run_headless", "run_dp_supervisor")
MESSAGE_LIMIT = 2000
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_SHELL_VAR = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")


def shell_value(name: str) -> str:
    """What the user's shell puts where the argv names $NAME: a port or a host address."""
    return "29550" if name.upper().endswith("PORT") else "10.0.0.1"


def expand(argv: list[str]) -> tuple[list[str], list[str]]:
    """argv as the shell hands it to vLLM, and the variable names expanded."""
    names: list[str] = []

    def sub(m: re.Match) -> str:
        names.append(m.group(1))
        return shell_value(m.group(1))

    return [_SHELL_VAR.sub(sub, a) for a in argv], sorted(set(names))


def _site_dirs() -> list[str]:
    import sysconfig

    paths = sysconfig.get_paths()
    return sorted({paths["purelib"], paths["platlib"]}, key=len, reverse=True)


def clean(text: str, cwd: str) -> str:
    # A file of an installed package reads as in its source tree (`vllm/transformers_utils/...`,
    # as vllm-compat names it), not `<venv>/lib/python3.11/site-packages/vllm/...`.
    for site in _site_dirs():
        text = text.replace(site + os.sep, "")
    text = text.replace(sys.prefix, "<venv>").replace(cwd, "<sdist>")
    text = _ADDRESS.sub(" at 0x?", text)
    return text if len(text) <= MESSAGE_LIMIT else text[:MESSAGE_LIMIT] + "..."


class _Captured(Exception):
    """Raised by the patched argparse while the console script's main() parses: it carries the parser."""

    def __init__(self, parser):
        super().__init__("parser captured")
        self.parser = parser


class _Reached(Exception):
    """Raised by a stubbed entry: vLLM's code got that far, and nothing was started."""


def console_entry():
    """(target, function) of the installed distribution's `vllm` console script:
    `vllm.entrypoints.cli.main:main` (0.8 on) or `vllm.scripts:main` (before)."""
    from importlib.metadata import distribution

    for ep in distribution("vllm").entry_points:
        if ep.group == "console_scripts" and ep.name == "vllm":
            return ep.value, ep.load()
    raise SystemExit("the installed vllm has no `vllm` console script")


def build_parser():
    """The `vllm` CLI's parser, built by the release's own console-script main().

    main() builds the parser (a FlexibleArgumentParser with a `serve` subparser: from
    `ServeSubcommand.subparser_init` in vllm/entrypoints/cli/, or inline in vllm/scripts.py) and
    then parses sys.argv. argparse's parse_args/parse_known_args are patched for that one call to
    raise with the parser instead of parsing, so nothing of main() is re-implemented here.
    Returns (parser, console-script target)."""
    sys.argv = ["vllm"]  # argparse's prog: messages read `vllm serve: error: ...`
    target, main = console_entry()
    originals = {name: argparse.ArgumentParser.__dict__[name] for name in ("parse_args", "parse_known_args")}

    def capture(self, *_a, **_k):
        raise _Captured(self)

    try:
        for name in originals:
            setattr(argparse.ArgumentParser, name, capture)
        main()
    except _Captured as c:
        return c.parser, target
    finally:
        for name, fn in originals.items():
            setattr(argparse.ArgumentParser, name, fn)
    raise SystemExit(f"{target} returned without parsing its arguments")


def serve_subparser(parser):
    return parser._subparsers._group_actions[0].choices["serve"]


def serve_dispatch(parser):
    """The function main() dispatches `vllm serve` to (the subparser's `dispatch_function`
    default: `ServeSubcommand.cmd`, or `vllm.scripts.serve`)."""
    fn = serve_subparser(parser)._defaults.get("dispatch_function")
    if fn is None:
        raise SystemExit("the serve subparser has no dispatch_function")
    return fn


def serve_validator(parser, main_target: str):
    """What main() runs on parsed `serve` args before dispatching: `cmds["serve"].validate(args)`
    where main() keeps CLISubcommand objects (vllm/entrypoints/cli/main.py), else the
    `validate_parsed_serve_args` main() calls itself (vllm/scripts.py). Returns (name, fn)."""
    dispatch = serve_dispatch(parser)
    owner = getattr(dispatch, "__self__", None)
    if owner is None:
        mod = sys.modules[dispatch.__module__]
        if hasattr(mod, "cmd_init"):
            owner = next((c for c in mod.cmd_init() if c.name == "serve"), None)
    if owner is not None and hasattr(owner, "validate"):
        cls = type(owner)
        return f"{cls.__module__}.{cls.__qualname__}.validate", owner.validate
    mod_name, _, func = main_target.partition(":")
    main_fn = getattr(sys.modules[mod_name], func)
    fn = main_fn.__globals__.get("validate_parsed_serve_args")
    if fn is not None:
        return f"{fn.__module__}.{fn.__qualname__}", fn
    if "validate_parsed_serve_args" not in main_fn.__code__.co_names:
        # vllm/scripts.py of 0.6.0-0.6.3: main() dispatches right after parse_args (the release has
        # no validate_parsed_serve_args); the `validate` stage runs nothing.
        return f"none ({main_target} checks nothing between parsing and dispatch)", lambda _args: None
    raise SystemExit(f"{main_target} calls validate_parsed_serve_args, which is not beside it")


def api_server_validator():
    """`validate_api_server_args` of this release (it moved between releases), or None where the
    release has none (before 0.9: its checks are inline in `run_server`, see run_server_checks)."""
    for mod_name in ("vllm.entrypoints.common.cli_args", "vllm.entrypoints.openai.api_server"):
        try:
            mod = __import__(mod_name, fromlist=["validate_api_server_args"])
        except ImportError:
            continue
        fn = getattr(mod, "validate_api_server_args", None)
        if fn is not None:
            return f"{mod_name}.validate_api_server_args", fn
    return None


SOCKET_FUNCTIONS = ("create_server_socket", "create_server_unix_socket")


def run_server_stop(g: dict) -> str:
    """The first socket step of run_server (whose module globals are `g`): `create_server_socket`
    (0.6.4 on), else a `socket.socket(...)` made inline through the module's `socket` (0.6.0-0.6.3
    bind a temporary socket as run_server's first step)."""
    if "create_server_socket" in g:
        return "create_server_socket"
    if getattr(g.get("socket"), "socket", None) is not None:
        return "socket.socket"
    raise SystemExit("run_server's module has neither create_server_socket nor socket: "
                     "cannot stop before the socket")


class _SocketModule:
    """run_server's module's `socket` with its `socket` constructor raising _Reached (every other
    name is the real module's): a socket made inline (0.6.0-0.6.3) stops the run before it binds."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        return getattr(self._real, name)

    @staticmethod
    def socket(*_a, **_k):
        raise _Reached("socket")


def run_server_checks(run_server, args) -> None:
    """Run the release's own `run_server(args)` coroutine up to the socket it binds first.

    Releases without `validate_api_server_args` check the tool and reasoning parser names inline,
    between the plugin import and `create_server_socket` (0.6.4-0.8.x); 0.6.0-0.6.3 have no such
    check and bind a temporary socket first (`socket.socket(...)` inline, see run_server_stop).
    The socket functions (globals of run_server's module) are replaced by stubs raising _Reached,
    as is the `socket` module's constructor seen from that module (_SocketModule), and
    `ToolParserManager.import_tool_parser` by a no-op (a plugin file is user code, not vLLM, as
    for the releases that have validate_api_server_args). The coroutine is stepped once by hand:
    everything before the socket is synchronous."""
    g = run_server.__globals__
    saved = {name: g[name] for name in SOCKET_FUNCTIONS if name in g}
    if run_server_stop(g) == "socket.socket":
        saved["socket"] = g["socket"]
    tpm = g.get("ToolParserManager")
    saved_import = tpm.__dict__.get("import_tool_parser") if tpm is not None else None

    def stub(*_a, **_k):
        raise _Reached("socket")

    coro = None
    try:
        for name in saved:
            g[name] = _SocketModule(saved[name]) if name == "socket" else stub
        if saved_import is not None:
            tpm.import_tool_parser = classmethod(lambda cls, *_a, **_k: None)
        coro = run_server(args)
        coro.send(None)
    except _Reached:
        return
    except StopIteration:
        pass
    finally:
        for name, fn in saved.items():
            g[name] = fn
        if saved_import is not None:
            tpm.import_tool_parser = saved_import
        if coro is not None:
            coro.close()
    raise SystemExit("run_server went past its checks without binding a socket")


def entry_of(dispatch, args) -> tuple[str, object]:
    """The entry the serve dispatch function (`ServeSubcommand.cmd`, `vllm.scripts.serve`) sends
    these args to, running vLLM's own function with the entries (globals of its module) replaced
    by stubs. Its exceptions propagate. Returns (entry name, the real entry function)."""
    func = getattr(dispatch, "__func__", dispatch)
    g = func.__globals__
    if getattr(args, "grpc", False):
        raise SystemExit("--grpc starts the gRPC server inside cmd; not supported by this harness")
    reached: list[str] = []
    saved = {name: g[name] for name in ENTRIES if name in g}

    def stub(name: str):
        def entry(*_a, **_k):
            reached.append(name)
            raise _Reached(name)
        return entry

    try:
        for name in saved:
            g[name] = stub(name)
        dispatch(args)
    except _Reached:
        pass
    finally:
        for name, fn in saved.items():
            g[name] = fn
    if not reached:
        raise SystemExit(f"{func.__qualname__} returned without reaching any of {ENTRIES}")
    return reached[0], saved[reached[0]]


def serve_defaults(parser) -> dict:
    """Default of every dest of the serve subparser."""
    return {a.dest: a.default for a in serve_subparser(parser)._actions}


def changed_values(args, defaults: dict) -> dict:
    """The parsed values that differ from their defaults, as JSON (a config object: its class name)."""
    import dataclasses

    out = {}
    for dest, value in sorted(vars(args).items()):
        if dest not in defaults or value == defaults[dest] or dest == "dispatch_function":
            continue
        if dataclasses.is_dataclass(value):
            out[dest] = f"<{type(value).__name__}>"
        else:
            try:
                out[dest] = json.loads(json.dumps(value))
            except (TypeError, ValueError):
                out[dest] = f"<{type(value).__name__}>"
    return out


def run_one(argv: list[str], parser, validate, dispatch, validate_api, cwd: str,
            defaults: dict) -> tuple[str, str, str, dict]:
    """(stage, exception, message, parsed values) of the first stage that fails, or ('ok', '', '', values)."""
    from vllm.engine.arg_utils import AsyncEngineArgs

    stage = "parse"
    values: dict = {}
    try:
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                args = parser.parse_args(argv[1:])
        except SystemExit as exc:
            lines = err.getvalue()
            at = lines.find(": error: ")
            if at < 0:
                return stage, "SystemExit", clean(f"exit {exc.code}: {lines.strip()}", cwd), values
            start = lines.rfind("\n", 0, at) + 1
            return stage, "SystemExit", clean(lines[start:].strip(), cwd), values
        values = changed_values(args, defaults)
        stage = "validate"
        validate(args)
        stage = "serve_cmd"
        entry, entry_fn = entry_of(dispatch, args)
        if entry != "run_headless":
            stage = "api_server"
            if validate_api is not None:
                validate_api(args)
            elif entry == "run_server":
                run_server_checks(entry_fn, args)
            else:
                raise SystemExit(f"{entry} reached in a release without validate_api_server_args")
        stage = "engine_args"
        AsyncEngineArgs.from_cli_args(args)
    except Exception as exc:  # every failure is data here
        return stage, type(exc).__name__, clean(str(exc), cwd), values
    return "ok", "", "", values


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--argvs", required=True, help="JSON from export_argvs.py")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--platform", default="cuda", choices=("auto", "cuda", "cpu"),
                    help="platform installed before vLLM resolves one (see README.md)")
    ap.add_argument("--checkpoint", help="progress file (default: in the temp dir)")
    ap.add_argument("--limit", type=int, help="stop after this many new argvs (debug)")
    args = ap.parse_args()
    started = time.time()
    cwd = os.getcwd()
    if os.path.isdir(os.path.join(cwd, "vllm")):
        raise SystemExit("run from a directory without a vllm/ package (it would shadow the install)")

    sys.path.insert(0, HERE)
    from modelinfo import FAKE_CUDA_CAPABILITY, describe_platform, force_platform, platform_label

    if args.platform != "auto":
        force_platform(args.platform)
    import vllm
    from vllm.platforms import current_platform

    from importlib.metadata import version as dist_version

    # The release as installed (its distribution's version), which names the file: the 0.6.2 wheel's
    # vllm.__version__ reads "0.6.1.dev238+ge2c6e0a82" (recorded beside it when it differs).
    version = dist_version("vllm")
    with open(args.argvs) as fh:
        todo = json.load(fh)["argvs"]
    checkpoint = args.checkpoint or os.path.join(tempfile.gettempdir(), f"serve-args-{version}.jsonl")
    done: dict[str, list] = {}
    if os.path.exists(checkpoint):
        with open(checkpoint) as fh:
            for line in fh:
                try:
                    row = json.loads(line)
                except ValueError:
                    continue  # a line cut by an interrupt
                done[json.dumps(row[0])] = row
        print(f"resuming: {len(done)} argvs already in {checkpoint}", file=sys.stderr)

    t0 = time.time()
    parser, main_target = build_parser()
    defaults = serve_defaults(parser)
    validate_name, validate = serve_validator(parser, main_target)
    dispatch = serve_dispatch(parser)
    dispatch_name = f"{dispatch.__module__}.{dispatch.__qualname__}"
    api = api_server_validator()
    if api is not None:
        api_name, validate_api = api
    else:
        from vllm.entrypoints.openai import api_server as openai_api_server

        stop = run_server_stop(vars(openai_api_server))
        api_name, validate_api = f"run_server up to its {stop} (no validate_api_server_args)", None
    entry_points = {"console_script": main_target, "validate": validate_name, "dispatch": dispatch_name,
                    "api_server": api_name, "engine_args": "vllm.engine.arg_utils.AsyncEngineArgs.from_cli_args"}
    print(f"parser built in {time.time() - t0:.1f}s; {entry_points}", file=sys.stderr)
    new = 0
    with open(checkpoint, "a") as ck:
        for i, item in enumerate(todo, 1):
            key = json.dumps(item["argv"])
            if key in done:
                continue
            if args.limit is not None and new >= args.limit:
                break
            argv, shell_vars = expand(item["argv"])
            try:
                stage, exc, msg, values = run_one(argv, parser, validate, dispatch, validate_api, cwd,
                                                   defaults)
            except BaseException as e:  # noqa: BLE001 (KeyboardInterrupt stops below)
                if isinstance(e, KeyboardInterrupt):
                    raise
                stage, exc, msg, values = "harness", type(e).__name__, clean(traceback.format_exc(limit=3), cwd), {}
            row = [item["argv"], bool(item.get("omni")), shell_vars, stage, exc, msg, values]
            done[key] = row
            ck.write(json.dumps(row) + "\n")
            new += 1
            if new % 200 == 0:
                ck.flush()
                print(f"[{i}/{len(todo)}] {time.time() - started:.0f}s", file=sys.stderr, flush=True)
    wanted = {json.dumps(item["argv"]) for item in todo}
    rows = sorted((r for k, r in done.items() if k in wanted), key=lambda r: r[0])
    if len(rows) < len(wanted):
        print(f"incomplete: {len(rows)} of {len(wanted)} argvs; re-run to continue", file=sys.stderr)
        return 1
    import pydantic

    doc = {
        "vllm_version": version,
        "python": py_platform.python_version(),
        "pydantic": pydantic.__version__,
        "platform": args.platform if args.platform != "auto" else platform_label(current_platform),
        "platform_detail": describe_platform(current_platform, args.platform != "auto"),
        "assumed_cuda_capability": list(FAKE_CUDA_CAPABILITY) if args.platform == "cuda" else None,
        "api_server_validation": api_name,
        **({"vllm_dunder_version": vllm.__version__} if vllm.__version__ != version else {}),
        "entry_points": entry_points,
        "stages": list(STAGES),
        "columns": ["argv", "omni", "shell_vars", "stage", "exception", "message", "values"],
        "rows": rows,
    }
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"serve-args-{version}.json.gz")
    text = json.dumps(doc, separators=(",", ":"), sort_keys=True) + "\n"
    # gzip without a timestamp or name: the same rows give the same bytes
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as fh:
        fh.write(text.encode("utf-8"))
    counts: dict[str, int] = {}
    for r in rows:
        counts[r[3]] = counts.get(r[3], 0) + 1
    print(f"wrote {path}: {len(rows)} argvs {counts}, {time.time() - started:.0f}s", file=sys.stderr)
    os.unlink(checkpoint)
    return 0


if __name__ == "__main__":
    sys.exit(main())
