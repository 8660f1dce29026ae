"""`vllm serve ARGV` read the way that release's CLI reads it, before anything touches a model.

The stages are vLLM's own (`vllm/entrypoints/cli/main.py`, `serve.py`):

1. `parse`: `FlexibleArgumentParser.parse_args` rewrites the argv (`--model` moved to the
   front, `_` to `-` in option names, `-O3`, dotted `--x.key value` merged into one JSON
   value per flag; `vllm/utils/argparse_utils.py`), run from the release's own source
   (`compat.verdict.argv_rewrite`), then argparse parses it with the
   options `make_arg_parser` registers. Here that parser is rebuilt with the standard
   library's argparse from the release's `cli_value` facts (action, nargs, type,
   choices, the positional `model_tag`) under a top-level `vllm` parser with a `serve`
   subparser, as `main()` builds it; so option abbreviations, value counting, the order
   of errors and argparse's wording are argparse's own. Type callables are re-created
   from what they do (`int`, `human_readable_int`, `optional_type(json.loads)`, vLLM's
   `parse_dataclass`, whose pydantic check is `compat.verdict.config_values`).
2. `validate`: `validate_parsed_serve_args`, and 3. `api_server`: `validate_api_server_args`,
   both run from the release's source in the sandbox (`compat.verdict.serve_rules`).

argparse stops at the first error; to report every problem, the option that failed is
relaxed (any value accepted) and the argv parsed again, so later findings say what vLLM
would report once the earlier ones are fixed. The first finding is vLLM's message.

Shell variables (`$HEAD_IP`) are values the user's shell supplies (`compat.verdict.shell`):
a defined one passes any type check and is reported as unknown only where the value
decides (choices, JSON); an undefined one is what the shell makes of it, an empty string.
"""

from __future__ import annotations

import argparse
import bisect
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

from compat.verdict.argv_rewrite import ReleaseRewrite, RewriteError
from compat.verdict.config_values import ClassSchema, Validator, format_errors
from compat.vllm.cli_kwargs import apply_chain, lambda_chain

STAGES = ("parse", "validate", "api_server", "engine_args")
_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_DOTTED_KEY = re.compile(r"(?<=--)[^\.]*")
_MAX_ROUNDS = 40
_SPACE = re.compile(r"\s")
_JSON_COLUMNS = ("option_strings", "const", "choices", "default")


@dataclass
class ArgFinding:
    """One thing vLLM's argument handling rejects (or that cannot be decided statically)."""

    stage: str  # parse | validate | api_server | engine_args
    status: str  # blocked | unknown | warning
    step: str  # the reason, in a maintainer's words
    message: str  # what vLLM prints ('' when vLLM says nothing)
    evidence: list[str] = field(default_factory=list)
    key: tuple[str, ...] = ()  # identity across releases: ("choice", "--moe-backend", "b12x")
    exception: str = ""  # what vLLM raises: SystemExit (argparse), TypeError, KeyError, ...


@dataclass
class ArgResult:
    findings: list[ArgFinding] = field(default_factory=list)
    namespace: dict[str, Any] | None = None  # parsed values (None when parsing failed)


class ShellValue(str):
    """A value the user's shell supplies (`$NAME`): any type conversion accepts it."""

    var: str

    def __new__(cls, name: str, text: str | None = None) -> ShellValue:
        obj = super().__new__(cls, text if text is not None else f"${name}")
        obj.var = name
        return obj


class _Choices(list):
    """argparse's choices, also containing every shell-supplied value (reported separately)."""

    def __contains__(self, item: object) -> bool:
        return isinstance(item, ShellValue) or list.__contains__(self, item)


class _ParseError(Exception):
    def __init__(self, prog: str, message: str, dest: str | None = None) -> None:
        super().__init__(message)
        self.prog, self.message, self.dest = prog, message, dest


class _Parser(argparse.ArgumentParser):
    """argparse with errors raised instead of printed (prog and message kept)."""

    #: every option's default, taken once the serve parser is built (`_take_defaults`)
    defaults_: dict[str, Any]
    #: (always-reached actions, option strings sorted, their actions, the narrow parser, its
    #: actions and option strings per set of picked actions), set by the first `_narrowed`
    narrow_index_: tuple[
        set[int], list[str], list[int], _Parser, dict[tuple[int, ...], tuple[list, dict]]
    ]

    def error(self, message: str) -> NoReturn:
        raise _ParseError(self.prog, message)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise _ParseError(self.prog, message or f"exit {status}")


class _Raised(Exception):
    """An exception vLLM's type callable lets escape argparse (a traceback, not a usage error)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


# --------------------------------------------------------------------------- preprocessing


def human_readable_int(value: str) -> int:
    """vLLM `utils/argparse_utils.py` `human_readable_int`: '25.6k' -> 25600, '1K' -> 1024."""
    value = value.strip()
    match = _HUMAN_INT.fullmatch(value)
    if match:
        number, suffix = match.groups()
        if suffix in "kmgt":
            return int(float(number) * {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}[suffix])
        try:
            return int(number) * {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[suffix]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"Decimals are not allowed with binary suffixes like {suffix}. Did you mean to use "
                f"{number}{suffix.lower()} instead?"
            ) from None
    return int(value)


def human_readable_int_or_auto(value: str) -> int:
    value = value.strip()
    if value == "-1" or value.lower() == "auto":
        return -1
    return human_readable_int(value)


def union_dict_and_str(val: str) -> Any:
    """vLLM's `union_dict_and_str` (the `dict | str` fields): JSON when it looks like an object."""
    if not re.match(r"(?s)^\s*{.*}\s*$", val):
        return str(val)
    if val in ("", "None"):
        return None
    try:
        return json.loads(val)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"Value {val} cannot be converted to <function loads at 0x?>."
        ) from None


def check_port(val: str) -> int:
    """vLLM's `--port` check."""
    try:
        port = int(val)
    except ValueError:
        raise argparse.ArgumentTypeError("Port must be an integer") from None
    if not (1024 <= port <= 65535):
        raise argparse.ArgumentTypeError("Port must be between 1024 and 65535")
    return port


#: type names whose callable is a fixed function: name -> (function, the name vLLM's has)
_PLAIN_TYPES: dict[str, tuple[Callable[[str], Any], str]] = {
    "str": (str, "str"),
    "int": (int, "int"),
    "float": (float, "float"),
    "human_readable_int": (human_readable_int, "human_readable_int"),
    "human_readable_int_or_auto": (human_readable_int_or_auto, "human_readable_int_or_auto"),
    "json": (json.loads, "loads"),
    "json_or_str": (union_dict_and_str, "union_dict_and_str"),
    "port": (check_port, "check_port"),
}


class PreprocessError(Exception):
    """The argv rewrite stopped: `exc` is vLLM's exception name, or 'unknown' with `key`
    naming what the replay could not do (read a --config file, run the release's rewrite)."""

    def __init__(self, exc: str, message: str, key: tuple[str, ...] = ("config-file",)) -> None:
        super().__init__(message)
        self.exc, self.message, self.key = exc, message, key


ConfigLoader = (
    Any  # Callable[[str], Any]: the parsed YAML of a `--config` file (raises on bad input)
)


def pull_config(args: list[str], load: ConfigLoader) -> list[str]:
    """`FlexibleArgumentParser._pull_args_from_config`: the YAML's options spliced in after the
    model (CLI > config > defaults), with `load_config_file`'s flattening of values."""
    if args.count("--config") > 1:
        raise PreprocessError("AssertionError", "More than one config file specified!")
    index = args.index("--config")
    if index == len(args) - 1:
        raise PreprocessError(
            "ValueError", "No config file specified! Please check your command-line arguments."
        )
    path = args[index + 1]
    extension = path.split(".")[-1]
    if extension not in ("yaml", "yml"):
        raise PreprocessError(
            "ValueError", f"Config file must be of a yaml/yml type. {extension} supplied"
        )
    if load is None:
        raise PreprocessError("unknown", f"--config {path}: the file is not read here")
    config = load(path)
    config_args: list[str] = []
    for key, value in (config or {}).items():
        if isinstance(value, bool):
            if value:
                config_args.append("--" + str(key))
        elif isinstance(value, list):
            if value:
                config_args.append("--" + str(key))
                config_args += [str(item) for item in value]
        elif isinstance(value, dict):
            config_args += ["--" + str(key), json.dumps(value)]
        else:
            config_args += ["--" + str(key), str(value)]
    model_in_cli = len(args) > 1 and not args[1].startswith("-")
    if not model_in_cli and "--model" not in config_args:
        raise PreprocessError(
            "ValueError",
            "No model specified! Please specify model either as a positional "
            "argument or in a config file.",
        )
    if model_in_cli:
        return [args[0], args[1], *config_args, *args[2:index], *args[index + 2 :]]
    return [args[0], *config_args, *args[1:index], *args[index + 2 :]]


def preprocess(args: list[str], config_loader: ConfigLoader = None) -> list[str]:
    """`FlexibleArgumentParser.parse_args` before argparse (args[0] == 'serve')."""
    args = list(args)
    if args and args[0] == "serve":
        idx = next((i for i, a in enumerate(args) if re.match(r"^--model(=.+|$)", a)), None)
        if idx is not None:
            if args[idx] == "--model":
                if idx + 1 >= len(args):
                    raise PreprocessError("IndexError", "list index out of range")
                tag, rest = args[idx + 1], idx + 2
            else:
                tag, rest = args[idx].removeprefix("--model="), idx + 1
            args = ["serve", tag, *args[1:idx], *args[rest:]]
        if (
            len(args) > 1
            and args[1].startswith("-")
            and not any(re.match(r"^--config(=.+|$)", a) for a in args)
            and any(re.match(r"^--served[-_]model[-_]name(=.+|$)", a) for a in args)
        ):
            raise PreprocessError(
                "ValueError",
                "`model` should be provided as the first positional argument "
                "when using `vllm serve`. i.e. `vllm serve <model> --<arg> <value>`.",
            )
    if "--config" in args:
        args = pull_config(args, config_loader)
    processed: list[str] = []
    for i, arg in enumerate(args):
        if arg.startswith("--"):
            if "=" in arg:
                flag, text = arg.split("=", 1)
                processed.append(f"{_dash(flag)}={text}")
            else:
                processed.append(_dash(arg))
        elif arg.startswith("-O") and arg != "-O":
            level = arg[3:] if arg[2] == "=" else arg[2:]
            processed += ["--optimization-level", level]
        elif arg == "-O" and i + 1 < len(args) and args[i + 1] in {"0", "1", "2", "3"}:
            processed.append("--optimization-level")
        else:
            processed.append(arg)
    delete: set[int] = set()
    dict_args: dict[str, dict[str, Any]] = {}
    for i, arg in enumerate(processed):
        if i in delete:
            continue
        if arg.startswith("--") and "." not in arg:
            continue
        if arg.startswith("-") and "." in arg:
            if "=" in arg:
                arg, value_str = arg.split("=", 1)
                if "." not in arg:
                    continue
            else:
                if i + 1 >= len(processed):
                    raise PreprocessError("IndexError", "list index out of range")
                value_str = processed[i + 1]
                delete.add(i + 1)
            if arg.endswith("+"):
                arg = arg[:-1]
                value_str = json.dumps(list(value_str.split(",")))
            key, *keys = arg.split(".")
            try:
                value: Any = json.loads(value_str)
            except json.JSONDecodeError:
                try:
                    value = human_readable_int(value_str)
                except (ValueError, argparse.ArgumentTypeError):
                    value = value_str
            nested: Any = value
            for k in reversed(keys):
                nested = {k: nested}
            _merge(dict_args.setdefault(key, {}), nested)
            delete.add(i)
    out = [a for i, a in enumerate(processed) if i not in delete]
    for key, obj in dict_args.items():
        out += [key, json.dumps(obj)]
    return out


def _dash(arg: str) -> str:
    return _DOTTED_KEY.sub(lambda m: m.group(0).replace("_", "-"), arg, count=1)


def _merge(original: dict[str, Any], update: dict[str, Any]) -> None:
    for k, v in update.items():
        if isinstance(v, dict) and isinstance(original.get(k), dict):
            _merge(original[k], v)
        elif isinstance(v, list) and isinstance(original.get(k), list):
            original[k] += v
        else:
            original[k] = v


def _expand_json_numbers(val: str) -> str:
    """`_expand_json_human_readable_numbers`: bare `80m` tokens outside JSON strings."""
    parts = re.split(r'("(?:[^"\\]|\\.)*")', val)
    for i in range(0, len(parts), 2):
        parts[i] = re.sub(
            r"\b\d+(?:\.\d+)?[kKmMgGtT]\b", lambda m: str(human_readable_int(m.group())), parts[i]
        )
    return "".join(parts)


# --------------------------------------------------------------------------- the parser


class _Notes:
    """What the type callables saw while argparse ran: shell values, unchecked values."""

    def __init__(self) -> None:
        self.findings: list[ArgFinding] = []
        self.evidence: list[
            str
        ] = []  # where the rejected field or class is defined (config values)


class ServeParser:
    """The release's `vllm serve` parser, rebuilt from its `cli_value` rows."""

    def __init__(
        self,
        values: list[dict[str, Any]],
        validator: Validator,
        version: str,
        tree: Any = None,
        inverse: dict[str, Any] | None = None,
    ) -> None:
        # JSON columns decoded once (a parser is rebuilt per set of relaxed options)
        self.values = [dict(v, **{c: json.loads(v[c]) for c in _JSON_COLUMNS}) for v in values]
        # `--enable-x` <-> `--disable-x` for BooleanOptionalAction options (vLLM's EnableDisableAction)
        self.inverse = (inverse or {}).get("prefixes") or {}
        self.validator = validator
        self.version = version
        self.tree = tree
        self.by_dest = {v["dest"] or v["flag"]: v for v in self.values}
        self.dest_of_string: dict[str, str] = {}  # option string or dest -> the row's dest
        for v in self.values:
            for name in [*v["option_strings"], v["flag"], v["dest"]]:
                self.dest_of_string.setdefault(name, v["dest"] or v["flag"])
        self.plugin_dests = [v["dest"] for v in self.values if v["dest"].endswith("_parser_plugin")]
        self.notes = _Notes()  # the parse in progress: what its type callables noticed
        self._built: dict[frozenset[str], _Parser] = {}
        self._release_rewrite: ReleaseRewrite | None = None

    def parser(self, relaxed: frozenset[str]) -> _Parser:
        """The parser with `relaxed` options accepting any value; built once per set."""
        if relaxed not in self._built:
            self._built[relaxed] = self.build(relaxed)
        return self._built[relaxed]

    @property
    def defaults(self) -> dict[str, Any]:
        """Every option's default as argparse leaves it in the namespace (from the full parser)."""
        return self.parser(frozenset()).defaults_

    def build(self, relaxed: frozenset[str]) -> _Parser:
        """The `serve` subparser (prog `vllm serve`). The top-level `vllm` parser adds nothing for
        args after `serve` (its subparsers action takes them all) except the final check for
        unrecognized arguments, which `_top_level_parse` repeats."""
        serve = _Parser(prog="vllm serve", usage="vllm serve [model_tag] [options]")
        for row in self.values:
            if row["flag"].startswith("-"):
                continue
            kwargs = self._kwargs(row, row["dest"] in relaxed)
            serve.add_argument(row["flag"], **kwargs)
        for row in self.values:
            if not row["flag"].startswith("-"):
                continue
            strings = self._option_strings(row)
            kwargs = self._kwargs(row, (row["dest"] or row["flag"]) in relaxed)
            try:
                serve.add_argument(*strings, **kwargs)
            except (argparse.ArgumentError, ValueError, TypeError):
                continue  # a duplicate or inconsistent option: vLLM's parser build would fail too
        serve.defaults_ = _take_defaults(serve)
        return serve

    @staticmethod
    def _option_strings(row: dict[str, Any]) -> list[str]:
        """What `add_argument` receives (the `--no-x` / `--disable-x` forms the action derives)."""
        return row["option_strings"] or [row["flag"]]

    def _kwargs(self, row: dict[str, Any], relaxed: bool) -> dict[str, Any]:
        action = row["action"]
        kw: dict[str, Any] = {"dest": row["dest"] or row["flag"].lstrip("-").replace("-", "_")}
        if not row["flag"].startswith("-"):
            kw.pop("dest")
        default = row["default"]
        kw["default"] = default if row["default_kind"] == "literal" else None
        if row["default_kind"].startswith("factory:") and row["type"] == "dataclass":
            kw["default"] = self.validator.config_object(row["default_kind"].split(":", 1)[1], {})
        if action in ("store_true", "store_false", "count"):
            kw["action"] = action
            return kw
        if action == "boolean_optional":
            kw["action"] = (
                _enable_disable(self.inverse) if self.inverse else argparse.BooleanOptionalAction
            )
            return kw
        if action == "store_const":
            kw["action"], kw["const"] = "store_const", row["const"]
            return kw
        if action == "append":
            kw["action"] = "append"
        nargs = row["nargs"]
        if nargs:
            kw["nargs"] = int(nargs) if nargs.isdigit() else nargs
            if nargs == "?":
                kw["const"] = row["const"]
        if relaxed:
            kw["type"] = _named(lambda v: v, "relaxed")
            return kw
        kw["type"] = self._type(row)
        choices = row["choices"]
        if choices is not None and not row["metavar_only"]:
            kw["choices"] = _Choices(choices)
        return kw

    # ---- type callables, as vLLM builds them

    def _type(self, row: dict[str, Any]) -> Any:
        name = row["type"]
        base = self._base(row)
        if row["parse"]:
            inner, shown = base, _shown(name, row)

            def parse_type(val: str) -> Any:
                if isinstance(val, ShellValue):
                    return val
                if row["optional"] and val in ("", "None"):
                    return None
                try:
                    return inner(val)
                except ValueError:
                    raise argparse.ArgumentTypeError(
                        f"Value {val} cannot be converted to {shown}."
                    ) from None

            return _named(parse_type, "_optional_type" if row["optional"] else "_parse_type")
        return base

    def _base(self, row: dict[str, Any]) -> Any:
        """The type callable vLLM gives the option, as a function of ours (shell values pass)."""
        name = row["type"]
        if name in ("", None):
            return self._shell_ok(row, lambda v: v, "identity")
        if name in _PLAIN_TYPES:
            fn, label = _PLAIN_TYPES[name]
            return self._shell_ok(row, fn, label)
        if name == "dataclass":
            return self._shell_ok(row, self._dataclass(row), "parse_dataclass")
        if name == "transform":
            chain = lambda_chain(row["callable_src"])
            if chain is not None:
                return self._shell_ok(row, lambda v: apply_chain(chain, v), "<lambda>")
        if name == "callable":
            release_fn = self._release_function(row["callable_src"], row)
            if release_fn is not None:
                return self._shell_ok(row, release_fn, row["callable_src"])
            method = self._config_classmethod(row["callable_src"], row)
            if method is not None:  # argparse names it by __name__: "invalid from_cli value"
                return self._shell_ok(row, method, row["callable_src"].rsplit(".", 1)[-1])
        return self._unchecked(row)

    def _shell_ok(self, row: dict[str, Any], fn: Any, label: str) -> Any:
        """`fn` named `label`, letting a value from a shell variable through unconverted (noted
        as unknown where the option has choices or takes JSON)."""
        flag, name, choices = row["flag"], row["type"], row["choices"]

        def convert(val: str) -> Any:
            if isinstance(val, ShellValue):
                if choices is not None and not row["metavar_only"]:
                    self.notes.findings.append(
                        ArgFinding(
                            "parse",
                            "unknown",
                            f"{flag} {val}: the value comes from the shell variable "
                            f"${val.var}; vLLM {self.version} accepts only {', '.join(map(str, choices))}",
                            "",
                            [_at(row["choices_file"], row["choices_line"])],
                            ("shell", flag, val.var),
                        )
                    )
                elif name in ("json", "json_or_str", "dataclass"):
                    self.notes.findings.append(
                        ArgFinding(
                            "parse",
                            "unknown",
                            f"{flag} {val}: the JSON value comes from the shell variable "
                            f"${val.var} and is not checked",
                            "",
                            [],
                            ("shell", flag, val.var),
                        )
                    )
                return val
            return fn(val)

        return _named(convert, label)

    def _unchecked(self, row: dict[str, Any]) -> Any:
        """A type callable we do not model: every value passes, noted as unknown."""
        flag = row["flag"]

        def unchecked(val: str) -> str:
            self.notes.findings.append(
                ArgFinding(
                    "parse",
                    "unknown",
                    f"{flag} {val!r}: vLLM {self.version} converts it with "
                    f"`{row['callable_src'] or row['type']}`, which is not modelled",
                    "",
                    [_at(row["file"], row["line"])],
                    ("unchecked", flag),
                )
            )
            return val

        return _named(unchecked, "unchecked")

    def _release_function(self, src: str, row: dict[str, Any]) -> Any:
        """A module-level function of the release used as `type=`, run from its source in the
        sandbox; a value it cannot evaluate passes unchecked, said so."""
        if self.tree is None or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", src):
            return None
        import ast

        from compat.vllm.cli_surface import ARG_UTILS, SymbolResolver
        from compat.vllm.sandbox import IsolatedProgram, SandboxError

        got = SymbolResolver(self.tree).resolve(ARG_UTILS, src)
        if got is None:
            return None
        file, fn = got
        if not isinstance(fn, ast.FunctionDef):
            return None
        try:
            program = IsolatedProgram(self.tree, {src: (fn, file)}, {"argparse": argparse})
        except SandboxError:
            return None

        return self._sandboxed_type(row, src, f"{file}:{fn.lineno}", lambda v: program.call(src, v))

    def _config_classmethod(self, src: str, row: dict[str, Any]) -> Any:
        """`type=CompilationConfig.from_cli` (before 0.10): the release's classmethod run in the
        sandbox, with the class standing for its pydantic check (`cls(...)`, `model_validate`,
        `model_validate_json`: compat.verdict.config_values) and `ast.literal_eval` available.
        A check that fails raises ValueError, as pydantic's ValidationError is one, so argparse
        reports `invalid from_cli value`."""
        m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)", src)
        if self.tree is None or m is None:
            return None
        import ast
        import types

        from compat.vllm.cli_surface import ARG_UTILS, SymbolResolver
        from compat.vllm.sandbox import IsolatedProgram, SandboxError

        cls_name, method = m.groups()
        r = SymbolResolver(self.tree)
        cls = r.resolve_class(ARG_UTILS, cls_name)
        got = r.find_method(cls, method) if cls is not None else None
        if cls is None or got is None or not isinstance(got[1], ast.FunctionDef):
            return None
        owner, fn = got[0], got[1]
        config = _ConfigClass(cls_name, self)
        host = {cls_name: config, "ast": types.SimpleNamespace(literal_eval=ast.literal_eval)}
        try:
            program = IsolatedProgram(self.tree, {method: (fn, owner.file)}, host)
        except SandboxError:
            return None

        def call(val: str) -> Any:
            try:
                return program.call(method, config, val)
            except SyntaxError as exc:  # literal_eval's; argparse does not catch it
                raise _Raised(f"SyntaxError: {exc}") from None

        return self._sandboxed_type(row, src, f"{owner.file}:{fn.lineno}", call)

    def _sandboxed_type(
        self, row: dict[str, Any], src: str, where: str, call: Callable[[str], Any]
    ) -> Callable[[str], Any]:
        """`type=` as argparse calls it: the release's converter run in the sandbox; a value it
        cannot evaluate passes unchecked, said so as an unknown finding."""
        from compat.vllm.sandbox import SandboxError

        def run(val: str) -> Any:
            try:
                return call(val)
            except (SandboxError, NameError, AttributeError) as exc:
                self.notes.findings.append(
                    ArgFinding(
                        "parse",
                        "unknown",
                        f"{row['flag']} {val!r}: vLLM {self.version} converts it with {src} "
                        f"({where}), which could not be evaluated ({exc})",
                        "",
                        [where],
                        ("unchecked", row["flag"]),
                    )
                )
                return val

        return run

    def _dataclass(self, row: dict[str, Any]) -> Any:
        cls = row["json_class"]
        flag = row["flag"]

        def parse_dataclass(val: str) -> Any:
            text = _expand_json_numbers(val)
            try:
                data = json.loads(text)
            except ValueError as exc:
                raise argparse.ArgumentTypeError(
                    f"1 validation error for {cls}\n  Invalid JSON: {_json_error(exc)} [type=json_invalid, "
                    f"input_value={text!r}, input_type=str]"
                ) from None
            out = self.validator.validate(cls, data)
            if out.raised:
                raise _Raised(out.raised)
            if out.errors:
                self.notes.evidence = _error_evidence(out, self.validator, cls)
                raise argparse.ArgumentTypeError(format_errors(cls, out.errors))
            if out.unchecked:
                self.notes.findings.append(
                    ArgFinding(
                        "parse",
                        "unknown",
                        f"{flag}: part of the {cls} value is not checked "
                        f"({'; '.join(out.unchecked[:3])})",
                        "",
                        out.evidence[:3],
                        ("unchecked", flag),
                    )
                )
            return self.validator.config_object(cls, data) if isinstance(data, dict) else data

        return parse_dataclass

    # ---- parsing

    def parse(
        self, argv: list[str], config_loader: ConfigLoader = None
    ) -> tuple[argparse.Namespace | None, list[ArgFinding]]:
        """Namespace (None when vLLM stops) and every parse-stage finding, vLLM's first."""
        findings: list[ArgFinding] = []
        try:
            processed = self.rewrite(argv, config_loader)
        except PreprocessError as exc:
            if exc.exc == "unknown":
                return None, [ArgFinding("parse", "unknown", exc.message, "", key=exc.key)]
            return None, [
                ArgFinding(
                    "parse",
                    "blocked",
                    f"vLLM's argv rewrite fails: {exc.exc}: {exc.message}",
                    exc.message,
                    key=("preprocess", exc.exc),
                    exception=exc.exc,
                )
            ]
        relaxed: set[str] = set()
        namespace = None
        for _ in range(_MAX_ROUNDS):
            self.notes = notes = _Notes()
            parser = self.parser(frozenset(relaxed))
            try:
                namespace = _top_level_parse(parser, processed, self.defaults)
                findings += notes.findings
                break
            except _ParseError as exc:
                dest = self._dest_of(exc.message)
                findings.append(self._finding(exc.prog, exc.message, dest))
                if dest is None or dest in relaxed:
                    namespace = None
                    break
                relaxed.add(dest)
            except _Raised as exc:
                unmodelled = exc.text.startswith("unmodelled")
                exc_name, _, exc_text = exc.text.partition(": ")
                findings.append(
                    ArgFinding(
                        "parse",
                        "unknown" if unmodelled else "blocked",
                        f"vLLM {self.version} raises {exc.text} while converting a value",
                        "" if unmodelled else exc_text,
                        key=("raised", exc.text),
                        exception="" if unmodelled else exc_name,
                    )
                )
                namespace = None
                break
        else:
            namespace = None
        if findings and any(f.status == "blocked" for f in findings):
            namespace = None
        return namespace, findings

    def rewrite(self, argv: list[str], config_loader: ConfigLoader = None) -> list[str]:
        """The release's own FlexibleArgumentParser.parse_args run on `argv` (compat.verdict.
        argv_rewrite); `preprocess`, the newest rewrite, for a parser built without a tree."""
        if self.tree is None:
            return preprocess(argv, config_loader)
        if self._release_rewrite is None:
            self._release_rewrite = ReleaseRewrite(self.tree)

        def pull(args: list[str]) -> list[str]:
            try:
                return pull_config(list(args), config_loader)
            except PreprocessError as exc:
                raise _PullError(exc) from None

        try:
            return self._release_rewrite(argv, pull)
        except _PullError as exc:
            raise exc.error from None
        except RewriteError as exc:
            raise PreprocessError(exc.exc, exc.message, ("argv-rewrite",)) from None

    def _dest_of(self, message: str) -> str | None:
        """The option an argparse message is about ('argument --x/-y: ...')."""
        m = re.match(r"argument ([^:]+): ", message)
        if not m:
            return None
        return next(
            (self.dest_of_string[n] for n in m.group(1).split("/") if n in self.dest_of_string),
            None,
        )

    def _finding(self, prog: str, message: str, dest: str | None) -> ArgFinding:
        text = f"{prog}: error: {message}"
        row = self.by_dest.get(dest or "")
        evidence = []
        key: tuple[str, ...] = ("parse", message.split(":")[0])
        step = f"vLLM {self.version}'s parser rejects it: {message.splitlines()[0]}"
        if message.startswith("unrecognized arguments: "):
            extras = message[len("unrecognized arguments: ") :]
            step = f"not `vllm serve` arguments in vLLM {self.version}: {extras}"
            key = ("unrecognized", extras)
        elif row is not None:
            evidence.append(_at(row["file"], row["line"]))
            if "invalid choice" in message:
                evidence.insert(0, _at(row["choices_file"], row["choices_line"]))
                value = re.search(r"invalid choice: (.*?) \(choose from", message)
                key = ("choice", row["flag"], value.group(1) if value else "")
                step = f"{row['flag']} {value.group(1) if value else ''} is not one of vLLM {self.version}'s choices"
            elif "validation error" in message:
                evidence = [*self.notes.evidence, *evidence]
                key = ("config", row["flag"], message.split("\n", 1)[-1].splitlines()[0])
                step = (
                    f"{row['flag']}: {row['json_class']} of vLLM {self.version} rejects the value "
                    f"({'; '.join(_error_heads(message))})"
                )
            else:
                key = ("value", row["flag"], message)
        return ArgFinding(
            "parse", "blocked", step, text, [e for e in evidence if e], key, "SystemExit"
        )


class _PullError(RewriteError):
    """`pull_config`'s own error, carried through the release's parse_args unchanged."""

    def __init__(self, error: PreprocessError) -> None:
        super().__init__(error.exc, error.message)
        self.error = error


class _ConfigClass:
    """A config class as its own `from_cli` uses it: building or validating an instance is the
    replay's pydantic check of the data, failing with ValueError (pydantic's ValidationError is
    one); an exception the class lets through (a model_post_init assert) stops the parse."""

    def __init__(self, name: str, parser: ServeParser) -> None:
        self.name = name
        self.parser = parser

    def _check(self, data: Any) -> Any:
        sp = self.parser
        out = sp.validator.validate(self.name, data)
        if out.raised:
            raise _Raised(out.raised)
        if out.errors:
            sp.notes.evidence = _error_evidence(out, sp.validator, self.name)
            raise ValueError(format_errors(self.name, out.errors))
        if out.unchecked:
            raise _Unchecked(f"part of the {self.name} value is not checked")
        return sp.validator.config_object(self.name, data) if isinstance(data, dict) else data

    def __call__(self, **kwargs: Any) -> Any:
        return self._check(kwargs)

    def model_validate(self, data: Any) -> Any:
        return self._check(data)

    def model_validate_json(self, text: str) -> Any:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ValueError(
                f"1 validation error for {self.name}\n  Invalid JSON: {_json_error(exc)}"
            ) from None
        return self._check(data)


class _Unchecked(AttributeError):
    """A value `_ConfigClass` cannot check in full: reported as unknown by the caller."""


def _top_level_parse(
    serve: _Parser, processed: list[str], defaults: dict[str, Any]
) -> argparse.Namespace:
    """`vllm`'s parse_args of ['serve', ...]: the subparser parses the rest, then the top level
    rejects what neither used (argparse `parse_args`: "unrecognized arguments")."""
    parsed, extras = _narrowed(serve, processed[1:]).parse_known_args(
        processed[1:], argparse.Namespace()
    )
    if extras:
        raise _ParseError("vllm", "unrecognized arguments: %s" % " ".join(extras))
    namespace = argparse.Namespace()
    vars(namespace).update(defaults)
    vars(namespace).update(vars(parsed), subparser="serve")
    return namespace


def _narrowed(serve: _Parser, args: list[str]) -> _Parser:
    """`serve` with only the actions these args can reach: the positionals, the required
    options, and every option string that starts with the option part of an arg that starts
    with '-' (so exact matches, abbreviations and their ambiguities, `--x=v` and `-Xv` forms
    meet the same candidates, in the same order). argparse walks every action of the parser
    twice per parse (defaults, then required and string-default checks); vLLM's serve parser
    has about 700 and an argv names a dozen, so the full parser cost a millisecond per argv.
    The namespace holds only what the args set either way (the defaults are SUPPRESS; see
    _take_defaults). One narrow parser per serve parser, given these actions for this parse.
    """
    index = serve.__dict__.get("narrow_index_")
    if index is None:
        always = {i for i, a in enumerate(serve._actions) if not a.option_strings or a.required}
        strings = sorted((o, i) for i, a in enumerate(serve._actions) for o in a.option_strings)
        narrow = _Parser(
            prog=serve.prog,
            usage=serve.usage,
            add_help=False,
            prefix_chars=serve.prefix_chars,
            allow_abbrev=serve.allow_abbrev,
            fromfile_prefix_chars=serve.fromfile_prefix_chars,
        )
        narrow._has_negative_number_optionals[:] = serve._has_negative_number_optionals
        index = serve.narrow_index_ = (
            always,
            [o for o, _ in strings],
            [i for _, i in strings],
            narrow,
            {},  # the actions and option strings of each set of picked actions, made once
        )
    always, options, owners, narrow, narrowings = index
    picked = set(always)
    for arg in args:
        if arg[:1] not in serve.prefix_chars:
            continue
        head = arg.split("=", 1)[0]
        prefixes = [head]
        if len(head) > 1 and head[1] not in serve.prefix_chars:
            prefixes.append(head[:2])  # `-Xvalue`: the short option -X with its value attached
        for prefix in prefixes:
            j = bisect.bisect_left(options, prefix)
            while j < len(options) and options[j].startswith(prefix):
                picked.add(owners[j])
                j += 1
    # What parse_known_args reads of its parser: the actions, in order, and the option strings
    # in the order add_argument registered them (the order an ambiguity error lists them in).
    key = tuple(sorted(picked))
    hit = narrowings.get(key)
    if hit is None:
        actions = [serve._actions[i] for i in key]
        hit = narrowings[key] = (actions, {o: a for a in actions for o in a.option_strings})
    narrow._actions, narrow._option_string_actions = hit  # read, never changed, by a parse
    return narrow


def _take_defaults(parser: argparse.ArgumentParser) -> dict[str, Any]:
    """Every action's default, string defaults run through the type callable (as argparse does
    for an option not given), computed once; the actions then default to SUPPRESS so a parse
    only sets what the argv names. A default the callable rejects stays a string."""
    out: dict[str, Any] = {}
    for action in parser._actions:
        if action.dest is argparse.SUPPRESS or action.default is argparse.SUPPRESS:
            continue
        default = action.default
        if isinstance(default, str) and callable(action.type):
            try:
                default = action.type(default)
            except (argparse.ArgumentTypeError, TypeError, ValueError, _Raised):
                pass
        out[action.dest] = default
        action.default = argparse.SUPPRESS
    return out


def check_arguments(
    k: Any, argv: list[str], shell: Any = None, config_loader: ConfigLoader = None
) -> ArgResult:
    """Every argument-level finding of `vllm serve ARGV` at the release `k` describes."""
    sp = k.serve_parser
    if sp is None:
        return ArgResult(
            [
                ArgFinding(
                    "parse",
                    "unknown",
                    f"the `vllm serve` options of vLLM {k.version} could not be extracted",
                    "",
                    key=("no-parser",),
                )
            ]
        )
    tokens, findings = shell.expand(argv) if shell is not None else (list(argv), [])
    start = (
        2
        if len(tokens) >= 2 and tokens[0].rsplit("/", 1)[-1] == "vllm" and tokens[1] == "serve"
        else 0
    )
    rest = tokens[start:] if start else tokens
    if rest and rest[0] == "serve":
        rest = rest[1:]
    namespace, parse_findings = sp.parse(["serve", *rest], config_loader)
    findings = [*findings, *parse_findings]
    spaced = [t for t in rest if isinstance(t, str) and t.startswith("-") and _SPACE.search(t)]
    for f in findings:
        if f.key[:1] == ("unrecognized",) and spaced:
            f.step += (
                f" ({', '.join(map(repr, spaced))}: one argv item holding a space, which argparse "
                "takes for a positional; split it into two items)"
            )
    if namespace is not None:
        # setup_server imports these plugin files before its checks; they can register parser names.
        plugins = [d for d in sp.plugin_dests if (v := getattr(namespace, d, None)) and len(v) > 3]
        for r in k.serve_rules.run(namespace):
            if r.status == "ok":
                continue
            status, step = (
                r.status,
                (
                    f"{r.function or r.stage} of vLLM {k.version}: "
                    f"{r.exception + ': ' if r.exception else ''}{r.message}"
                ),
            )
            if r.stage == "api_server" and plugins and status == "blocked":
                status = "unknown"
                step += f" (--{plugins[0].replace('_', '-')} is imported first and may register it)"
            findings.append(
                ArgFinding(
                    r.stage,
                    status,
                    step,
                    r.message if status == "blocked" else "",
                    [r.evidence] if r.evidence else [],
                    (r.stage, r.exception, r.message.split(" (")[0]),
                    r.exception,
                )
            )
    return ArgResult(findings, vars(namespace) if namespace is not None else None)


def _enable_disable(prefixes: dict[str, str]) -> type[argparse.Action]:
    """vLLM 0.33's EnableDisableAction: BooleanOptionalAction plus the inverse prefix."""

    class EnableDisableAction(argparse.BooleanOptionalAction):
        def __init__(self, option_strings: list[str], dest: str, *args: Any, **kwargs: Any) -> None:
            super().__init__(option_strings, dest, *args, **kwargs)
            inverses = [
                inv + opt.removeprefix(pre)
                for opt in option_strings
                for pre, inv in prefixes.items()
                if opt.startswith(pre)
            ]
            self.negative_option_strings = {
                o for o in self.option_strings if o not in option_strings
            } | set(inverses)
            self.option_strings = [*self.option_strings, *inverses]

        def __call__(
            self, parser: Any, namespace: Any, values: Any, option_string: str | None = None
        ) -> None:
            setattr(namespace, self.dest, option_string not in self.negative_option_strings)

    return EnableDisableAction


def _error_evidence(out: Any, validator: Validator, cls: str) -> list[str]:
    """file:line of each rejected field (its definition), or of the class for an unknown key."""
    found = []
    for e in out.errors:
        owner: str | None = cls
        schema: ClassSchema | None = validator.schemas.get(cls)
        for part in e.loc[:-1]:  # walk nested config classes
            field = (schema.fields.get(part) if schema else None) or {}
            spec = field.get("type") or {}
            owner = spec.get("name") if spec.get("t") == "class" else owner
            schema = validator.schemas.get(owner) if owner is not None else None
        if schema is None:
            continue
        rejected = schema.fields.get(e.loc[-1]) if e.loc else None
        at = (
            f"{rejected['file']}:{rejected['line']}" if rejected else f"{schema.file}:{schema.line}"
        )
        if at not in found:
            found.append(at)
    return found


def _error_heads(message: str) -> list[str]:
    lines = message.split("\n")[1:]
    return [
        f"{lines[i]}: {lines[i + 1].strip().split(' [')[0]}" for i in range(0, len(lines) - 1, 2)
    ]


def _json_error(exc: ValueError) -> str:
    return str(exc).split(":")[0].lower()


def _named(fn: Any, name: str) -> Any:
    try:
        fn.__name__ = name
    except (AttributeError, TypeError):
        pass
    return fn


def _shown(name: str | None, row: dict[str, Any]) -> str:
    """How `parse_type`'s message prints the wrapped callable."""
    return {
        "int": "<class 'int'>",
        "float": "<class 'float'>",
        "str": "<class 'str'>",
        "json": "<function loads at 0x?>",
        "human_readable_int": "<function human_readable_int at 0x?>",
        "human_readable_int_or_auto": "<function human_readable_int_or_auto at 0x?>",
        "dataclass": "<function _compute_kwargs.<locals>.parse_dataclass at 0x?>",
        "json_or_str": "<function union_dict_and_str at 0x?>",
    }.get(name or "", f"<{row['callable_src']}>")


def _at(file: str, line: int) -> str:
    return f"{file}:{line}" if file else ""
