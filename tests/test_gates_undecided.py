"""Never `ok` by default (issue 16): a verified rule that might apply but cannot be decided makes
the verdict `unknown`, naming what is undecided.

A table over data/gates.yaml, so a new rule is covered without a new test: for every rule the
engine applies, a context where it fires is searched for (values its own conditions mention,
and small sizes); then each condition it reads is left undecided in turn (the key missing, a
capability unknown). The rule must then give an `unknown` finding that names that condition,
and never leave the verdict `ok`.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

from compat.verdict import gates as vgates
from compat.verdict.knowledge import Knowledge
from compat.vllm.gates import _BOOLEAN, _CAPS, _NUMERIC, _STRING, GateRule, rule_applies
from compat.vocab import Status

RULES = [r for r in vgates.rules() if r.id not in vgates.HANDLED_BY_ENGINE
         and not (r.group == "v2_unsupported" and r.effect == "fallback")]


def _leaves(cond: dict[str, Any], prefix: str = "") -> list[str]:
    """The condition keys a rule reads ('pp', 'target.is_moe', 'expr'), nested ones included."""
    out = []
    for key, want in cond.items():
        if key in _CAPS:
            out += [f"{key}.{cap}" for cap in want]
        elif key in ("any_of",):
            for c in want:
                out += _leaves(c)
        elif key == "not":
            out += _leaves(want)
        elif key == "group_hit":  # a rule of the group firing decides it
            out += [leaf for r in vgates.rules() if r.group == want for leaf in _leaves(r.applies_when)]
        else:
            out.append(key)
    return list(dict.fromkeys(out))


def _domain(rule: GateRule, key: str) -> list[Any]:
    """Candidate values of one context key: what the rule itself mentions, and small sizes."""
    mentioned: list[Any] = []

    def walk(cond: Any) -> None:
        if isinstance(cond, dict):
            for k, v in cond.items():
                if k == "group_hit":
                    for r in vgates.rules():
                        if r.group == v:
                            walk(r.applies_when)
                if k == key:
                    mentioned.extend(v if isinstance(v, list) else v.get("not_in", []) if isinstance(v, dict)
                                     else [v])
                walk(v)
        elif isinstance(cond, list):
            for c in cond:
                walk(c)

    walk(rule.applies_when)
    if key in _NUMERIC:
        return [1, 2, 3, 4, 8, 16, None] if key == "draft_tp" else [1, 2, 3, 4, 8, 16]
    if key in _BOOLEAN:
        return [True, False]
    if key in _STRING:
        return list(dict.fromkeys([m for m in mentioned if isinstance(m, str)] + ["other", None]))
    return [True, False]


def _witness(rule: GateRule, seed: int = 0) -> dict[str, Any] | None:
    """A context in which the rule fires (every rule of the file is verified)."""
    keys = [k for k in _leaves(rule.applies_when) if k != "expr"]
    names = set(keys) | {n for n in ("pp", "tp", "dp", "dcp", "pcp", "draft_tp", "draft_pp", "kv_heads")
                         if "expr" in rule.applies_when and n in rule.applies_when["expr"]}
    names |= {n for n in _BOOLEAN if "expr" in rule.applies_when and n in rule.applies_when["expr"]}
    domains = {k: _domain(rule, k) for k in sorted(names)}
    every = list(vgates.rules())
    verified = {r.id for r in every}
    rng = random.Random(seed)
    combos = list(itertools.product(*domains.values())) if len(domains) <= 6 else None
    tries = combos if combos is not None else (
        tuple(rng.choice(v) for v in domains.values()) for _ in range(20000))
    for values in tries:
        ctx: dict[str, Any] = {"target": {}, "draft": {}, "installed": {}}
        for k, v in zip(domains, values, strict=True):
            if "." in k:
                top, cap = k.split(".", 1)
                ctx[top][cap] = v
            else:
                ctx[k] = v
        if rule_applies(rule, ctx, every, verified) is True:
            return ctx
    return None


def _without(ctx: dict[str, Any], key: str) -> dict[str, Any]:
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in ctx.items()}
    if "." in key:
        top, cap = key.split(".", 1)
        out[top].pop(cap, None)
    else:
        out.pop(key, None)
    return out


def _knowledge() -> Knowledge:
    k = Knowledge(version="9.9.9", tree=None)
    k.gates = {r.id: {"status": "verified", "file": "vllm/x.py", "line": 1} for r in vgates.rules()}
    return k


CASES = [(r.id, key) for r in RULES for key in _leaves(r.applies_when) if key != "expr"]


def test_every_rule_has_a_context_where_it_fires() -> None:
    missing = [r.id for r in RULES if _witness(r) is None]
    assert not missing, f"no firing context found for {missing}; extend the test's domains"


@pytest.mark.parametrize(("rule_id", "key"), CASES, ids=[f"{r}:{k}" for r, k in CASES])
def test_an_undecided_condition_makes_the_rule_unknown_never_ok(rule_id: str, key: str) -> None:
    rule = next(r for r in RULES if r.id == rule_id)
    ctx = _witness(rule)
    assert ctx is not None
    k = _knowledge()
    fired = {f.key: f for f in vgates.findings(k, ctx, {})}
    assert fired[f"gate:{rule_id}"].status in (Status.BLOCKED, Status.WARNING)
    open_ctx = _without(ctx, key)
    hit = rule_applies(rule, open_ctx, list(vgates.rules()), set(k.gates))
    if hit is False:
        return  # the condition is read only through `not`/`any_of`: its absence decides it
    found = {f.key: f for f in vgates.findings(k, open_ctx, {})}
    finding = found.get(f"gate:{rule_id}")
    assert finding is not None, f"{rule_id}: skipped when {key} is undecided (would be ok)"
    if hit is True:  # another rule of its group still fires: blocked by something else
        assert finding.status in (Status.BLOCKED, Status.WARNING)
        return
    assert finding.status == Status.UNKNOWN and key.split(".")[-1] in finding.step, finding.step


def test_the_runner_read_from_each_release_decides_runner_rules() -> None:
    """Before 0.21 the runner was unknown and every rule on it was dropped: now V0 and V1 decide."""
    k = _knowledge()
    for mode, runner in (("v0", "v0"), ("v1", "v1"), ("v1_or_v0", None)):
        k.release_facts = {"runner_default": {"mode": mode}}
        assert vgates.choose_runner(k, {}, None, {}, None) == runner
