"""(c) A `min_vllm_version` bump, at recipe or variant level, to the first release that works.

The target is the first release on the package index (not only the scanned ones) where
every blocked command of the cause starts and no command that starts at the old pin
breaks: found by bisection for the first, then walking forward for the second. The bump
is made where the pin lives: a variant with its own `min_vllm_version` (which the site
reads first), the variants that fail when only some of them do, else the recipe.

`docker_image` is kept consistent: a vLLM image whose tag names the old pin gets the
new release's tag; a custom tag is left alone and said so.
"""

from __future__ import annotations

import re
from typing import Any

from compat.fix import wording
from compat.fix.context import Case, Context, Proposal, Row
from compat.fix.edits import Edit
from compat.recipes.hardware import docker_pin

KIND = "pin_bump"


def owner(case: Case, variant: str) -> tuple[str, ...]:
    """Path of the `min_vllm_version` a variant's commands are pinned by."""
    own = (case.recipe.variants.get(variant) or {}).get("min_vllm_version")
    return (
        ("variants", variant, "min_vllm_version")
        if own not in (None, "")
        else ("model", "min_vllm_version")
    )


def scopes(case: Case, blocked: list[Row]) -> dict[tuple[str, ...], list[str]]:
    """min_vllm_version path -> the variants whose commands it pins, for the failing variants.

    The recipe pin is bumped as a whole only when every variant it pins fails; otherwise
    the failing variants get their own pin, so the others keep theirs.
    """
    failing = list(dict.fromkeys(r.combo.variant for r in blocked))
    out: dict[tuple[str, ...], list[str]] = {}
    for variant in failing:
        out.setdefault(owner(case, variant), []).append(variant)
    recipe_pin = ("model", "min_vllm_version")
    if recipe_pin in out:
        pinned_by_recipe = [
            v
            for v in case.recipe.variants
            if owner(case, v) == recipe_pin and any(r.combo.variant == v for r in case.rows)
        ]
        if set(out[recipe_pin]) != set(pinned_by_recipe):
            for variant in out.pop(recipe_pin):
                out[("variants", variant, "min_vllm_version")] = [variant]
    return out


def gone_at(ctx: Context, release: str, row: Row, finding_keys: tuple[str, ...]) -> bool:
    """At `release`, does `row`'s command no longer have any of `finding_keys` blocking it?

    A key still there as `unknown` is not gone: at a release whose argument replay is not
    verified, the replay's finding is unknown and the flag check blocks under its own key, so
    counting it gone would bump to a release where the same flag still fails.
    """
    o = ctx.pool.outcome(release, row.combo)
    return o is not None and not any(
        (tag, k) in o.keys for k in finding_keys for tag in ("blocked", "unknown")
    )


def target(
    case: Case, blocked: list[Row], ids: list[int], variants: list[str], ctx: Context
) -> tuple[str | None, str]:
    """(first release where the findings of causes `ids` no longer block `blocked`, and nothing in
    `variants` that starts at the old pin breaks; or None and why not).

    At the target a command may still fail for another cause (which has its own fix) or be
    `unknown` (a missing fact); the proposal's note says how many are unknown.
    """
    if not blocked:
        return None, "nothing to fix"
    old = blocked[0].release
    wanted = [(r, tuple(k for cid in ids for k in r.cause_keys.get(cid, ()))) for r in blocked]

    def cleared(release: str) -> bool | None:
        if ctx.pool.judge_at(release) is None:
            return None
        return all(gone_at(ctx, release, r, keys) for r, keys in wanted)

    first = ctx.pool.first_release(old, cleared)
    if first is None:
        return None, (
            f"no release after {old} on the {'index' if ctx.pool.exhaustive else 'scanned set'} "
            "accepts them"
        )
    working = [
        r.combo
        for r in case.ungated()
        if r.combo.variant in variants and r.starts and r.release == old
    ]
    for release in [first, *ctx.pool.later(first)]:
        if cleared(release) and ctx.pool.starts(release, working):
            return release, ""
    broken = next((c for c in working if not ctx.pool.starts(first, [c])), None)
    example = (
        f" (e.g. {broken.strategy} {broken.feature or 'base'} {broken.variant})" if broken else ""
    )
    return None, f"every release where they start breaks a command that starts at {old}{example}"


def propose(case: Case, cause: dict[str, Any], blocked: list[Row], ctx: Context) -> Proposal | str:
    if not case.pinned:
        return "judged at explicit --vllm releases, not at the recipe's pin"
    edits: list[Edit] = []
    releases: list[str] = []
    notes: list[str] = []
    ids = cause.get("ids") or [cause["id"]]
    for path, variants in scopes(case, blocked).items():
        mine = [r for r in blocked if r.combo.variant in variants]
        release, why = target(case, mine, ids, variants, ctx)
        if release is None:
            return why
        old = mine[0].release
        evidence = next((e for r in mine for e in r.outcome.evidence if e), "")
        comment = wording.comment(
            [
                f"{cause['label']} fails at vLLM {old}: {cause['finding']}; starts from {release}",
                f"{_what(cause)} fails at vLLM {old}; starts from {release}",
                f"fails at vLLM {old}; starts from {release}",
            ],
            evidence,
        )
        edits.append(
            Edit(
                "set",
                path,
                release,
                after="model_id" if path[0] == "variants" else None,
                comment=comment,
            )
        )
        image_edits, note = docker_edits(case, path, old, release)
        edits += image_edits
        if note:
            notes.append(note)
        unknown = sum(
            1 for r in mine if (o := ctx.pool.outcome(release, r.combo)) and o.status == "unknown"
        )
        if unknown:
            notes.append(
                f"{unknown} of the {len(mine)} command(s) are unknown at {release} (a fact is missing)"
            )
        releases.append(release)
    where = ", ".join(".".join(e.path) for e in edits if e.path[-1] == "min_vllm_version")
    return Proposal(
        KIND,
        tuple(edits),
        f"bump {where} to {max(releases)}",
        works_from=max(releases),
        note="; ".join(notes),
    )


def _what(cause: dict[str, Any]) -> str:
    """What a pin comment names: the feature, or the element carrying what a later release has."""
    if cause["kind"] == "pin" and cause.get("carrier"):
        return cause["carrier"]
    return cause["label"]


_TAG = re.compile(r"^(?P<prefix>v?)(?P<version>\d+(?:\.\d+)+)(?P<rest>.*)$")


def docker_edits(
    case: Case, pin_path: tuple[str, ...], old: str, new: str
) -> tuple[list[Edit], str]:
    """Edits that move vLLM image tags naming `old` to `new`, and a note for custom tags."""
    base = pin_path[:-1]
    node: Any = case.recipe.data
    for key in base:
        node = node.get(key) if isinstance(node, dict) else None
    image = node.get("docker_image") if isinstance(node, dict) else None
    entries: list[tuple[tuple[str, ...], str]] = []
    if isinstance(image, str):
        entries.append(((*base, "docker_image"), image))
    elif isinstance(image, dict):
        entries += [((*base, "docker_image", k), v) for k, v in image.items() if isinstance(v, str)]
    edits, custom = [], []
    for path, ref in entries:
        repo, sep, tag = ref.rpartition(":")
        m = _TAG.match(tag) if sep else None
        if m and docker_pin(ref) == m.group("version") and m.group("version") == old:
            edits.append(Edit("set", path, f"{repo}:{m.group('prefix')}{new}{m.group('rest')}"))
        elif docker_pin(ref) not in (None, "nightly") or (sep and tag not in ("latest", "nightly")):
            custom.append(f"{'.'.join(path)} {ref!r}")
    note = (
        f"docker_image tag is custom, left as is: {', '.join(custom)}; check it runs vLLM >= {new}"
        if custom
        else ""
    )
    return edits, note
