"""Shell variables in a synthesized argv (`--master-addr $HEAD_IP`): values the user's shell supplies.

The recipes site prints multi-node and PD commands with placeholders the user sets
before running them (`$HEAD_IP`, `$PREFILL_DP_RPC_PORT`, `$DECODE_NODE_1`). vLLM
never sees the name, only the value, so a placeholder where an int is expected is
not an error. Which names are placeholders is read from the recipes checkout: every
`$NAME` written in the synthesizer (`src/lib/command-synthesis.js`, whose template
literals such as `` `$${roleKey.toUpperCase()}_DP_RPC_PORT` `` become the pattern
`<any>_DP_RPC_PORT`) and in the strategy files (`strategies/*.yaml`), comments
excluded. A name outside that set is not invented away: it is what the user's shell
makes of an unset variable, an empty string, and vLLM is judged on that.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SYNTHESIZER = "src/lib/command-synthesis.js"
STRATEGIES = "strategies"
_VAR_IN_ARG = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_JS_PLACEHOLDER = re.compile(r"\$((?:\$\{[^}`]*\}|[A-Z][A-Z0-9_]*)(?:\$\{[^}`]*\}|[A-Z0-9_]+)*)")
_YAML_PLACEHOLDER = re.compile(r"\$\{?([A-Z][A-Z0-9_]*)\}?")


@dataclass(frozen=True)
class Placeholder:
    pattern: str  # a regex over the variable name: 'HEAD_IP', '[A-Z0-9_]+_DP_RPC_PORT'
    file: str  # where the recipes write it (relative to the checkout)
    line: int


@dataclass
class ShellVars:
    """The placeholders a recipes checkout defines."""

    placeholders: list[Placeholder] = field(default_factory=list)
    _compiled: list[tuple[re.Pattern[str], Placeholder]] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        self._compiled = [(re.compile(p.pattern), p) for p in self.placeholders]

    def defined(self, name: str) -> Placeholder | None:
        return next((p for rx, p in self._compiled if rx.fullmatch(name)), None)

    def expand(self, argv: list[str]) -> tuple[list[Any], list[Any]]:
        """argv as vLLM receives it (ShellValue for a defined placeholder, '' for an unset
        name), and a warning for every undefined name."""
        from compat.verdict.arguments import ArgFinding, ShellValue

        out: list[Any] = []
        findings: list[Any] = []
        for token in argv:
            if "$" not in token:  # no variable: the regex would find none (most tokens)
                out.append(token)
                continue
            names = [m.group(1) or m.group(2) for m in _VAR_IN_ARG.finditer(token)]
            if not names:
                out.append(token)
                continue
            undefined = [n for n in names if self.defined(n) is None]
            for n in undefined:
                findings.append(
                    ArgFinding(
                        "parse",
                        "warning",
                        f"${n} is not a placeholder the recipes define ({self.where()}); "
                        "the shell expands an unset variable to an empty string",
                        "",
                        [],
                        ("shell-undefined", n),
                    )
                )
            if undefined:
                token = _VAR_IN_ARG.sub(
                    lambda m: "" if (m.group(1) or m.group(2)) in undefined else m.group(0), token
                )
            defined = [n for n in names if n not in undefined]
            out.append(ShellValue(defined[0], token) if defined else token)
        return out, findings

    def where(self) -> str:
        files = sorted({p.file for p in self.placeholders})
        return ", ".join(files) if files else "no recipes checkout read"

    def rows(self) -> list[dict[str, Any]]:
        return [{"pattern": p.pattern, "file": p.file, "line": p.line} for p in self.placeholders]

    @classmethod
    def from_rows(cls, rows: list[dict[str, Any]]) -> ShellVars:
        return cls([Placeholder(r["pattern"], r["file"], r["line"]) for r in rows])


def read_placeholders(root: Path) -> ShellVars:
    """Placeholders in the synthesizer and the strategy files of a recipes checkout."""
    found: dict[str, Placeholder] = {}
    js = root / SYNTHESIZER
    if js.is_file():
        for line_no, line in _lines_without_comments(js.read_text(encoding="utf-8"), "//"):
            for m in _JS_PLACEHOLDER.finditer(line):
                pattern = _to_pattern(m.group(1))
                found.setdefault(pattern, Placeholder(pattern, SYNTHESIZER, line_no))
    for path in sorted((root / STRATEGIES).glob("*.yaml")):
        rel = f"{STRATEGIES}/{path.name}"
        for line_no, line in _lines_without_comments(path.read_text(encoding="utf-8"), "#"):
            for m in _YAML_PLACEHOLDER.finditer(line):
                pattern = re.escape(m.group(1))
                found.setdefault(pattern, Placeholder(pattern, rel, line_no))
    return ShellVars(sorted(found.values(), key=lambda p: (p.file, p.line, p.pattern)))


def _to_pattern(js: str) -> str:
    """A JS template piece `${expr}_DP_RPC_PORT` -> regex `[A-Za-z0-9_]+_DP_RPC_PORT`."""
    out = []
    for piece in re.split(r"(\$\{[^}`]*\})", js):
        if piece.startswith("${"):
            out.append("[A-Za-z0-9_]+")
        elif piece:
            out.append(re.escape(piece))
    return "".join(out)


def _lines_without_comments(text: str, marker: str) -> list[tuple[int, str]]:
    out = []
    in_block = False
    for n, line in enumerate(text.splitlines(), 1):
        if marker == "//":
            if in_block:
                if "*/" not in line:
                    continue
                line, in_block = line.split("*/", 1)[1], False
            while "/*" in line:
                head, _, tail = line.partition("/*")
                if "*/" in tail:
                    line = head + tail.split("*/", 1)[1]
                else:
                    line, in_block = head, True
            if line.lstrip().startswith("//"):
                continue
            line = re.sub(r"(?<![:\"'`])//.*$", "", line)
        else:
            line = re.sub(r"(^|\s)#.*$", "", line)
        out.append((n, line))
    return out
