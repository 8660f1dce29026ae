"""What a verdict is made of: findings (one checked fact each) and the outcome they add up to.

A finding has a status (compat.vocab.Status), the stage of vLLM's startup it belongs to, the
message vLLM raises, file:line evidence, and a key: what was checked, the same at every
release ('flag:--nnodes', 'target_pp', 'gate:nixl-pp-not-supported'), so that causes,
bisection and fixes compare findings across releases by what failed, never by prose. A note
explains without deciding (the chain shows it, the status ignores it).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum

from compat.vocab import Status

#: The chain tag of a step that explains without deciding (e.g. "decided without the model config").
NOTE = "note"


class Stage(StrEnum):
    """Where in vLLM's startup a finding is raised."""

    ARGUMENT = "argument"  # argument handling: parse, validate_parsed_serve_args, API-server checks
    CONFIG = "config"  # while the engine config is built
    STARTUP = "startup"  # at model load or engine start


@dataclass(frozen=True)
class Finding:
    status: Status
    step: str
    message: str = ""
    evidence: tuple[str, ...] | list[str] = ()
    stage: Stage = Stage.CONFIG
    key: str = field(kw_only=True)  # what was checked, the same at every release
    note: bool = field(default=False, kw_only=True)  # explains without deciding

    def __post_init__(self) -> None:
        if not self.key:
            raise ValueError(f"a finding needs a key: {self.step!r}")
        object.__setattr__(self, "status", Status(self.status))
        object.__setattr__(self, "stage", Stage(self.stage))

    @property
    def tag(self) -> str:
        """How the chain and reports label it: its status, or `note`."""
        return NOTE if self.note else self.status.value

    @property
    def shown(self) -> bool:
        """Worth listing beside a verdict: not ok, or a note."""
        return self.note or self.status != Status.OK

    def on_node(self, prefix: str) -> Finding:
        """The same finding on one node of a deployment (`prefix` names its role), key included."""
        if not prefix:
            return self
        return replace(self, step=prefix + self.step, key=prefix + self.key)


def note(step: str, key: str) -> Finding:
    return Finding(Status.OK, step, key=key, note=True)


@dataclass
class Outcome:
    """The findings of one command at one release, and the verdict they add up to.

    Status precedence: blocked > unknown > warning > ok (compat.vocab.Status); the message is
    the first one given at the deciding status.
    """

    status: Status = Status.OK
    message: str = ""
    chain: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    # the verdict counting only argument- and config-time checks (what golden data covers)
    config_status: Status = Status.OK
    version: str = ""
    keys: list[tuple[str, str]] = field(default_factory=list)  # (tag, key) per chain step
    findings: list[Finding] = field(default_factory=list)  # every step, as added

    def add(self, f: Finding) -> None:
        self.findings.append(f)
        self.keys.append((f.tag, f.key))
        if f.note:  # context for the reader; decides nothing
            self.chain.append(f"[{NOTE}] {f.step}")
            return
        if f.stage in (Stage.ARGUMENT, Stage.CONFIG) and f.status.rank > self.config_status.rank:
            self.config_status = f.status
        self.chain.append(f"[{f.status}] {f.step}")
        for e in f.evidence:
            if e and e not in self.evidence:
                self.evidence.append(e)
        if f.status.rank > self.status.rank:
            self.status = f.status
            if f.message:
                self.message = f.message
        elif f.status == self.status and f.message and not self.message and f.status != Status.OK:
            self.message = f.message

    @property
    def reason(self) -> str:
        decisive = [c for c in self.chain if c.startswith(f"[{self.status}]")]
        step = decisive[0] if decisive else (self.chain[-1] if self.chain else "")
        return step[len(self.status) + 3 :]

    def has(self, status: str, key: str) -> bool:
        """Does it hold finding `key` at `status`?"""
        return (status, key) in self.keys
