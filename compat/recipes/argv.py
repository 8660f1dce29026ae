"""Read a `vllm serve` argv the way vLLM's FlexibleArgumentParser and argparse would.

Verdicts must be computed from what vLLM will see, not from what the recipe
meant: the recipes site dedupes on literal flag strings, so `-tp 2` and
`--tensor-parallel-size 8`, `--load_format` and `--load-format`, or a JSON
`--speculative-config` next to dotted `--speculative-config.method` all survive
into one command. This module applies vLLM's rules (vLLM `utils/argparse_utils.py`
`FlexibleArgumentParser.parse_args`, 0.23 L243-429; research notes on vLLM §5.1):

* `--flag=value` and `--flag value`; underscores become dashes in the flag name
  up to the first '.'; short aliases map to their long flag (`SHORT_FLAGS`);
  `-O3` / `-O 3` mean `--optimization-level 3`;
* `--no-<flag>` turns a boolean off;
* dotted sub-keys (`--speculative-config.method mtp`, `-cc.cudagraph_mode=X`,
  `--x.list+ a,b`) are merged per spelling into one JSON object that vLLM
  appends after every other argument, so it replaces any explicit JSON value;
  a dotted value is JSON if it parses, else a human-readable int, else a string;
* the last occurrence of a flag wins; `--spec-method/--spec-model/--spec-tokens`
  are merged into the speculative config, and clash with keys it already has.

It never raises: anything vLLM would reject is recorded in `errors` (and JSON
trouble in the `*_error` fields) with the message vLLM or `json` would give.
Prefix abbreviations (`--tensor-par 2`) are not expanded: that needs the flag
list of a release, which `compat.vllm` owns.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

#: Short aliases of `vllm serve` flags (0.23-0.33; `-dc` from 0.24).
SHORT_FLAGS: dict[str, str] = {
    "-tp": "--tensor-parallel-size",
    "-pp": "--pipeline-parallel-size",
    "-dp": "--data-parallel-size",
    "-dcp": "--decode-context-parallel-size",
    "-pcp": "--prefill-context-parallel-size",
    "-ep": "--enable-expert-parallel",
    "-sc": "--speculative-config",
    "-cc": "--compilation-config",
    "-ac": "--attention-config",
    "-asc": "--api-server-count",
    "-q": "--quantization",
    "-n": "--nnodes",
    "-r": "--node-rank",
    "-dpa": "--data-parallel-address",
    "-dpb": "--data-parallel-backend",
    "-dpe": "--data-parallel-external-lb",
    "-dph": "--data-parallel-hybrid-lb",
    "-dpl": "--data-parallel-size-local",
    "-dpm": "--data-parallel-multi-port-external-lb",
    "-dpn": "--data-parallel-rank",
    "-dpp": "--data-parallel-rpc-port",
    "-dpr": "--data-parallel-start-rank",
    "-dc": "--diffusion-config",
}
_LONG_TO_SHORT = {long: short for short, long in SHORT_FLAGS.items()}

#: Flags that take no value (argparse BooleanOptionalAction or store_true). A caller
#: with a release's flag list can pass its own set to `parse_serve_args`.
BOOLEAN_FLAGS: frozenset[str] = frozenset(
    {
        "--enable-expert-parallel",
        "--enable-ep-weight-filter",
        "--enable-eplb",
        "--enable-auto-tool-choice",
        "--language-model-only",
        "--data-parallel-hybrid-lb",
        "--data-parallel-external-lb",
        "--data-parallel-multi-port-external-lb",
        "--headless",
        "--grpc",
        "--omni",
        "--trust-remote-code",
        "--enforce-eager",
        "--enable-prefix-caching",
        "--enable-chunked-prefill",
        "--enable-flashinfer-autotune",
        "--disable-hybrid-kv-cache-manager",
        "--disable-custom-all-reduce",
        "--disable-log-requests",
        "--enable-log-requests",
        "--disable-log-stats",
        "--async-scheduling",
        "--enable-lora",
        "--enable-sleep-mode",
        "--enable-dbo",
        "--skip-tokenizer-init",
        "--enable-prompt-tokens-details",
        "--enable-force-include-usage",
        "--enable-server-load-tracking",
        "--enable-request-id-headers",
        "--enable-log-outputs",
        "--disable-fastapi-docs",
        "--disable-uvicorn-access-log",
        "--disable-frontend-multiprocessing",
        "--enable-tokenizer-info-endpoint",
        "--return-tokens-as-token-ids",
        "--exclude-tools-when-tool-choice-none",
    }
)

_INT_FIELDS = {
    "tensor_parallel_size": "--tensor-parallel-size",
    "pipeline_parallel_size": "--pipeline-parallel-size",
    "data_parallel_size": "--data-parallel-size",
    "decode_context_parallel_size": "--decode-context-parallel-size",
    "prefill_context_parallel_size": "--prefill-context-parallel-size",
    "nnodes": "--nnodes",
}
_BOOL_FIELDS = {
    "enable_expert_parallel": "--enable-expert-parallel",
    "enable_auto_tool_choice": "--enable-auto-tool-choice",
    "language_model_only": "--language-model-only",
    "data_parallel_hybrid_lb": "--data-parallel-hybrid-lb",
    "headless": "--headless",
}
_STR_FIELDS = {
    "tool_call_parser": "--tool-call-parser",
    "reasoning_parser": "--reasoning-parser",
    "mm_encoder_tp_mode": "--mm-encoder-tp-mode",
    "quantization": "--quantization",
}
_SPEC_SHORTHANDS = (
    ("--spec-method", "method"),
    ("--spec-model", "model"),
    ("--spec-tokens", "num_speculative_tokens"),
)
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


@dataclass(frozen=True)
class FlagUse:
    """One flag occurrence, as written and as vLLM reads it."""

    raw: str  # the token as written ('--block-size=16', '-tp', '--speculative-config.method')
    flag: str  # long form, dashes, no '--no-': '--speculative-config'
    subkey: str | None  # dotted JSON path after the flag, e.g. 'method'
    value: str | None  # None for a flag given without a value
    is_short: bool
    negated: bool = False  # written as --no-<flag>
    index: int = -1  # position of the token in the argv given


@dataclass
class ServeArgs:
    """What `vllm serve` would resolve from an argv (defaults are vLLM's)."""

    model: str | None = None
    tokens: list[FlagUse] = field(default_factory=list)
    positionals: list[str] = field(default_factory=list)
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    decode_context_parallel_size: int = 1
    prefill_context_parallel_size: int = 1
    nnodes: int = 1
    enable_expert_parallel: bool = False
    data_parallel_hybrid_lb: bool = False
    data_parallel_external_lb: bool = False
    headless: bool = False
    speculative_config: dict[str, Any] | None = None
    speculative_config_error: str | None = None
    kv_transfer_config: dict[str, Any] | None = None
    kv_transfer_config_error: str | None = None
    tool_call_parser: str | None = None
    reasoning_parser: str | None = None
    enable_auto_tool_choice: bool = False
    language_model_only: bool = False
    mm_encoder_tp_mode: str | None = None
    quantization: str | None = None
    errors: list[str] = field(default_factory=list)

    def uses(self, flag: str) -> list[FlagUse]:
        """Every occurrence of a flag (long form), in order."""
        return [u for u in self.tokens if u.flag == flag]

    def has(self, flag: str) -> bool:
        return any(u.flag == flag for u in self.tokens)

    def last(self, flag: str) -> FlagUse | None:
        """The occurrence argparse keeps: the last non-dotted one."""
        for use in reversed(self.tokens):
            if use.flag == flag and use.subkey is None:
                return use
        return None

    def json_config(self, flag: str) -> tuple[Any, str | None]:
        """(value, error) of a JSON-typed flag after vLLM's dotted rewrite."""
        return resolve_json_flag(self.tokens, flag)


def _label(flag: str) -> str:
    """argparse's name for an option: '--tensor-parallel-size/-tp'."""
    short = _LONG_TO_SHORT.get(flag)
    return f"{flag}/{short}" if short else flag


def _normalise(name: str) -> str:
    """Underscores to dashes between the leading '--' and the first '.'."""
    head, dot, tail = name[2:].partition(".")
    return "--" + head.replace("_", "-") + dot + tail


def human_readable_int(text: str) -> int:
    """vLLM's `human_readable_int`: '25.6k' -> 25600, '1K' -> 1024; ValueError otherwise."""
    value = text.strip()
    match = _HUMAN_INT.fullmatch(value)
    if match:
        number, suffix = match.groups()
        if suffix in _DECIMAL:
            return int(float(number) * _DECIMAL[suffix])
        return int(number) * _BINARY[suffix]  # decimals with binary suffixes: ValueError
    return int(value)


def _dotted_value(text: str, append: bool) -> Any:
    if append:
        return list(text.split(","))
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    try:
        return human_readable_int(text)
    except (ValueError, OverflowError):
        return text


def _merge(target: dict[str, Any], update: dict[str, Any]) -> None:
    """vLLM's recursive_dict_update: dicts merge, lists concatenate, scalars overwrite."""
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        elif isinstance(value, list) and isinstance(target.get(key), list):
            target[key] = target[key] + value
        else:
            target[key] = value


def _load_json(flag: str, text: str | None) -> tuple[Any, str | None]:
    """argparse + vLLM's optional_type(json.loads): '' and 'None' mean None."""
    if text is None:
        return None, f"argument {_label(flag)}: expected one argument"
    if text in ("", "None"):
        return None, None
    try:
        return json.loads(text), None
    except (ValueError, RecursionError) as exc:
        return (
            None,
            f"argument {_label(flag)}: Value {text} cannot be converted to json.loads ({exc})",
        )


def resolve_json_flag(tokens: Sequence[FlagUse], flag: str) -> tuple[Any, str | None]:
    """The value vLLM ends up with for a JSON flag, and the first error argparse would raise.

    Explicit values are read in order; then one merged object per dotted
    spelling (e.g. '--speculative-config' and '-sc' separately), appended last.
    """
    value: Any = None
    error: str | None = None
    groups: dict[str, dict[str, Any]] = {}
    for use in tokens:
        if use.flag != flag:
            continue
        if use.subkey is None:
            loaded, problem = _load_json(flag, use.value)
            if problem and error is None:
                error = problem
            value = loaded
            continue
        append = use.subkey.endswith("+")
        keys = (use.subkey[:-1] if append else use.subkey).split(".")
        nested: Any = _dotted_value(use.value or "", append)
        for key in reversed(keys):
            nested = {key: nested}
        spelling = use.raw.split("=", 1)[0].split(".", 1)[0]
        spelling = _normalise(spelling) if spelling.startswith("--") else spelling
        _merge(groups.setdefault(spelling, {}), nested)
    for merged in groups.values():
        value = merged
    return value, error


class _Tokenizer:
    def __init__(self, boolean_flags: Collection[str]) -> None:
        self.boolean_flags = boolean_flags
        self.out = ServeArgs()

    def run(self, argv: Sequence[Any]) -> ServeArgs:
        args = [a if isinstance(a, str) else str(a) for a in argv]
        for position, original in enumerate(argv):
            if not isinstance(original, str):
                self.out.errors.append(f"argument {position} is not a string: {original!r}")
        start = 0
        if len(args) >= 2 and args[0].rsplit("/", 1)[-1] == "vllm" and args[1] == "serve":
            start = 2
        elif args and args[0] == "serve":
            start = 1
        i = start
        options_done = False
        while i < len(args):
            token = args[i]
            if (
                options_done
                or not token.startswith("-")
                or token == "-"
                or _NEGATIVE_NUMBER.match(token)
            ):
                self.positional(token)
                i += 1
            elif token == "--":
                options_done = True
                i += 1
            else:
                i = self.option(args, i)
        return self.out

    def positional(self, token: str) -> None:
        self.out.positionals.append(token)
        if self.out.model is None:
            self.out.model = token
        else:
            self.out.errors.append(f"unrecognized arguments: {token}")

    def option(self, args: list[str], i: int) -> int:
        """Record the option at args[i]; return the index after it (and its value)."""
        token = args[i]
        name, eq, inline = token.partition("=")
        is_short = not token.startswith("--")
        if is_short and name.startswith("-O") and name != "-O":
            level = token[3:] if token[2:3] == "=" else token[2:]
            self.add(token, "--optimization-level", None, level, True, False, i)
            return i + 1
        if not is_short:
            name = _normalise(name)
        base, dot, subkey = name.partition(".")
        if is_short:
            long = SHORT_FLAGS.get(base)
            if long is None and base == "-O":
                long = "--optimization-level"
            if long is None:
                self.out.errors.append(f"unrecognized arguments: {token}")
                long = base
        else:
            long = base
        negated = False
        if not is_short and not dot and long.startswith("--no-") and len(long) > 5:
            long, negated = "--" + long[5:], True
        if long == "--":
            self.out.errors.append(f"unrecognized arguments: {token}")
        nxt = args[i + 1] if i + 1 < len(args) else None
        if eq:
            value: str | None = inline
            step = 1
        elif dot:
            # vLLM takes the next token as the value, whatever it looks like.
            value, step = nxt, 2
            if nxt is None:
                self.out.errors.append(f"argument {token}: expected one argument")
        elif negated or long in self.boolean_flags:
            value, step = None, 1
        elif nxt is not None and (not nxt.startswith("-") or _NEGATIVE_NUMBER.match(nxt)):
            value, step = nxt, 2
        else:
            value, step = None, 1
        if not eq and step == 2 and value is not None and value.startswith("-") and "." in value:
            self.out.errors.append(
                f"value {value!r} of {token} starts with '-' and contains '.': "
                "vLLM's dotted-argument "
                "rewrite would read it as a flag"
            )
        self.add(token, long, subkey if dot else None, value, is_short, negated, i)
        return i + step

    def add(
        self,
        raw: str,
        flag: str,
        subkey: str | None,
        value: str | None,
        is_short: bool,
        negated: bool,
        index: int,
    ) -> None:
        self.out.tokens.append(FlagUse(raw, flag, subkey, value, is_short, negated, index))


def _resolve(out: ServeArgs) -> None:
    """Fill the typed fields from the flag uses, argparse-style (last occurrence wins)."""
    last = {u.flag: u for u in out.tokens if u.subkey is None}  # argparse keeps the last
    for attr, flag in _INT_FIELDS.items():
        use = last.get(flag)
        if use is None:
            continue
        if use.value is None:
            out.errors.append(f"argument {_label(flag)}: expected one argument")
            continue
        try:
            setattr(out, attr, int(use.value))
        except ValueError:
            out.errors.append(f"argument {_label(flag)}: invalid int value: {use.value!r}")
    for attr, flag in _BOOL_FIELDS.items():
        use = last.get(flag)
        if use is None:
            continue
        if use.value is not None and "=" in use.raw:
            out.errors.append(f"argument {_label(flag)}: ignored explicit argument {use.value!r}")
        setattr(out, attr, not use.negated)
    for attr, flag in _STR_FIELDS.items():
        use = last.get(flag)
        if use is not None:
            if use.value is None:
                out.errors.append(f"argument {_label(flag)}: expected one argument")
            setattr(out, attr, use.value)
    if out.model is None:
        use = last.get("--model")
        out.model = use.value if use is not None else None
    external = last.get("--data-parallel-external-lb")
    out.data_parallel_external_lb = (external is not None and not external.negated) or (
        last.get("--data-parallel-rank") is not None
    )

    spec, out.speculative_config_error = resolve_json_flag(out.tokens, "--speculative-config")
    for flag, key in _SPEC_SHORTHANDS:
        use = last.get(flag)
        if use is None or use.value is None:
            continue
        value: Any = use.value
        if key == "num_speculative_tokens":
            try:
                value = int(use.value)
            except ValueError:
                out.errors.append(f"argument {flag}: Value {use.value} cannot be converted to int")
                continue
        if spec is None:
            spec = {}
        if isinstance(spec, dict) and key in spec:
            out.speculative_config_error = out.speculative_config_error or (
                f"{flag} and --speculative-config['{key}'] are mutually exclusive"
            )
        elif isinstance(spec, dict):
            spec[key] = value
    if spec is not None and not isinstance(spec, dict):
        out.speculative_config_error = out.speculative_config_error or (
            f"--speculative-config must be a JSON object, not {type(spec).__name__}: {spec!r}"
        )
        spec = None
    out.speculative_config = spec
    if out.speculative_config_error:
        out.errors.append(out.speculative_config_error)

    kv, out.kv_transfer_config_error = resolve_json_flag(out.tokens, "--kv-transfer-config")
    if kv is not None and not isinstance(kv, dict):
        out.kv_transfer_config_error = out.kv_transfer_config_error or (
            f"--kv-transfer-config must be a JSON object, not {type(kv).__name__}"
        )
        kv = None
    out.kv_transfer_config = kv
    if out.kv_transfer_config_error:
        out.errors.append(out.kv_transfer_config_error)


@lru_cache(maxsize=1 << 15)  # every argv of a build (the snapshot has 25k), 3 KB each
def parsed_serve_args(argv: tuple[str, ...]) -> ServeArgs:
    """`parse_serve_args` of an argv, shared by every stage that reads it (enumeration's argv
    problems, the outline's draft checkpoints, each release's judge, the spelling fixer): one
    argv is parsed once, not once per stage. The result is read, never changed."""
    return parse_serve_args(argv)


def parse_serve_args(
    argv: Sequence[str], *, boolean_flags: Collection[str] | None = None
) -> ServeArgs:
    """Parse a `vllm serve` argv (with or without the leading 'vllm serve'); never raises.

    `boolean_flags` lists the flags that take no value (defaults to `BOOLEAN_FLAGS`);
    an unknown flag followed by a token that does not start with '-' takes it
    as its value, the way the recipes site pairs them.
    """
    tokenizer = _Tokenizer(BOOLEAN_FLAGS if boolean_flags is None else boolean_flags)
    if isinstance(argv, (str, bytes)):
        text = argv.decode(errors="replace") if isinstance(argv, bytes) else argv
        out = tokenizer.run(text.split())
        out.errors.append("argv must be a sequence of strings, not one string; split on whitespace")
    else:
        try:
            items = list(argv)
        except TypeError:
            items = []
        out = tokenizer.run(items)
        if not items and argv is not None and not isinstance(argv, (list, tuple)):
            out.errors.append(f"argv must be a sequence of strings, not {type(argv).__name__}")
    _resolve(out)
    return out
