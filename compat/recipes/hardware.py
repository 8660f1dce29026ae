"""Hardware-keyed lookups and which hardware profiles the site offers for a variant.

The recipes schema keys overrides by hardware in two different ways, and the
difference changes command lines, so both are kept apart here exactly as the
synthesizer (recipes `command-synthesis.js` at 8959cf6) reads them:

* `keyed_entry`: exact profile id > generation > lower-case brand > `default`
  (`hardwareKeyedValue`, L48-56). Used for variant `tp`, `strategy_hardware`
  and feature-mode `hardware_overrides`.
* `generation_entry`: the generation key, else `nvidia` on NVIDIA profiles
  (L1256-1257, L1303-1305). Used for recipe, variant and strategy generation
  overrides and for boolean-feature `hardware_overrides`.
"""

from __future__ import annotations

import re
from typing import Any

from compat.recipes.repo import HardwareProfile, Recipe

#: Precisions that, without a variant `precision_hardware`, need NVIDIA Blackwell (L278-281).
PRECISION_HARDWARE_DEFAULTS: dict[str, dict[str, str]] = {
    "nvfp4": {"brand": "NVIDIA", "generation": "blackwell"},
    "fp4": {"brand": "NVIDIA", "generation": "blackwell"},
}


def _present(value: Any) -> bool:
    """JavaScript `??`: only null and undefined fall through."""
    return value is not None


def _truthy(value: Any) -> bool:
    """JavaScript `||`: null, undefined, false, 0 and '' fall through; {} and [] do not."""
    return value is not None and value is not False and value != 0 and value != ""


def keyed_entry(mapping: Any, profile: HardwareProfile) -> tuple[str, Any] | None:
    """(key, value) by exact id > generation > brand > default; None when nothing matches."""
    if not isinstance(mapping, dict):
        return None
    for key in (profile.id, profile.generation, profile.brand_key, "default"):
        if key is not None and _present(mapping.get(key)):
            return key, mapping[key]
    return None


def keyed_value(mapping: Any, profile: HardwareProfile) -> Any:
    entry = keyed_entry(mapping, profile)
    return entry[1] if entry is not None else None


def generation_entry(mapping: Any, profile: HardwareProfile) -> tuple[str, Any] | None:
    """(key, value) for the generation key, else `nvidia` on NVIDIA profiles; None otherwise."""
    if not isinstance(mapping, dict):
        return None
    keys = [profile.generation] if profile.generation is not None else []
    if profile.is_nvidia:
        keys.append("nvidia")
    for key in keys:
        if _truthy(mapping.get(key)):
            return key, mapping[key]
    return None


def as_mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def precision_constraint(variant: dict[str, Any]) -> dict[str, Any] | None:
    """`precisionHardwareConstraint`: the variant's own constraint, else its precision's."""
    own = variant.get("precision_hardware")
    if isinstance(own, dict) and own:
        return own
    precision = variant.get("precision")
    return PRECISION_HARDWARE_DEFAULTS.get(precision) if isinstance(precision, str) else None


def precision_allows(profile: HardwareProfile, variant: dict[str, Any]) -> bool:
    """`isPrecisionCompatible` (L283-285): brand and generation of the precision constraint."""
    constraint = precision_constraint(variant)
    if not constraint:
        return True
    brand = constraint.get("brand")
    if brand and profile.brand != brand:
        return False
    generation = constraint.get("generation")
    return not generation or profile.generation == generation


def fits_single_node(profile: HardwareProfile, variant: dict[str, Any]) -> bool:
    """`fitsSingleNode`: missing sizes count as fitting."""
    need = variant.get("vram_minimum_gb")
    if not isinstance(need, (int, float)) or isinstance(need, bool) or need <= 0:
        return True
    if not profile.vram_gb or profile.vram_gb <= 0:
        return True
    return need <= profile.vram_gb


def offered_hardware(
    recipe: Recipe, variant: dict[str, Any], profiles: dict[str, HardwareProfile]
) -> list[HardwareProfile]:
    """Profiles the site lets a user pick for this variant, in taxonomy order.

    `listCompatibleHardware` (precision, `meta.hardware: unsupported`,
    `supported_hardware`), the API's restricted filter (restricted profiles only
    when declared in `meta.hardware`), and the builder's rule that a variant
    which does not fit one box is not offered on non-scalable hardware.
    """
    declared = as_mapping(recipe.meta.get("hardware"))
    allow = variant.get("supported_hardware")
    allow_list = allow if isinstance(allow, list) and allow else None
    out: list[HardwareProfile] = []
    for hid, profile in profiles.items():
        if not precision_allows(profile, variant):
            continue
        if declared.get(hid) == "unsupported":
            continue
        if allow_list is not None and hid not in allow_list:
            continue
        if profile.restricted and hid not in declared:
            continue
        if not profile.scalable and not fits_single_node(profile, variant):
            continue
        out.append(profile)
    return out


# --- docker image, for the release a recipe pins through its image tag -------------

_DEFAULT_IMAGE = {"nvidia": "vllm/vllm-openai:latest", "amd": "vllm/vllm-openai-rocm:latest"}
_NIGHTLY_IMAGE = {"nvidia": "vllm/vllm-openai:nightly", "amd": "vllm/vllm-openai-rocm:nightly"}
_BRAND_KEYS = ("nvidia", "amd", "tpu", "intel")


def docker_image(recipe: Recipe, variant: dict[str, Any], profile: HardwareProfile) -> str | None:
    """The image `computeDockerMeta` picks for this profile (NVIDIA and AMD only).

    variant exact-profile override > variant image > model image (string = NVIDIA
    only, brand-keyed map, or CUDA map preferring cu130) > brand default.
    """
    brand = {"NVIDIA": "nvidia", "AMD": "amd"}.get(profile.brand)
    if brand is None:
        return None
    exact = as_mapping(as_mapping(variant.get("hardware_overrides")).get(profile.id)).get(
        "docker_image"
    )
    if isinstance(exact, str):
        return exact
    for source in (variant.get("docker_image"), recipe.model.get("docker_image")):
        if isinstance(source, str):
            if brand == "nvidia":
                return source
            continue
        if not isinstance(source, dict):
            continue
        value = (
            source.get(brand)
            if any(k in source for k in _BRAND_KEYS)
            else (source if brand == "nvidia" else None)
        )
        if isinstance(value, str):
            return value
        if brand == "nvidia" and isinstance(value, dict) and ("cu130" in value or "cu129" in value):
            return value.get("cu130") or value.get("cu129")
    defaults = _NIGHTLY_IMAGE if recipe.model.get("nightly_required") is True else _DEFAULT_IMAGE
    return defaults[brand]


_RELEASE_TAG = re.compile(r"v?(\d+\.\d+\.\d+(?:(?:rc|\.post|\.dev)\d+)?)(?:[-_].*)?")
_VLLM_IMAGE = re.compile(r"(?:^|/)vllm/vllm-(?:openai|tpu)[\w.-]*$")


def foreign_image(image: str | None) -> str | None:
    """The image reference when it is set and not one of vLLM's own images (a vendor's or a
    fork's build, e.g. `eugr/spark-vllm-b12x:latest`), else None. vLLM-Omni's image counts as
    foreign too; its recipes are not judged either."""
    if not image:
        return None
    ref = image.split()[-1]
    repository = ref.rpartition(":")[0] or ref
    return None if _VLLM_IMAGE.search(repository) else ref


def docker_pin(image: str | None) -> str | None:
    """The vLLM release an image tag names: 'X.Y.Z', 'nightly', or None (latest, custom tags).

    Only vLLM's own images count; a vllm-omni or vendor image tag names no vLLM release.
    """
    if not image:
        return None
    ref = image.split()[-1]  # tolerate a stray "docker pull" prefix seen in recipes
    repository, sep, tag = ref.rpartition(":")
    if not sep or "/" in tag or not _VLLM_IMAGE.search(repository):
        return None
    if tag.startswith("nightly"):
        return "nightly"
    match = _RELEASE_TAG.fullmatch(tag)
    return match.group(1) if match else None
