"""HF model id helpers: splitting, and the quantization suffixes a derived id may drop.

Quantized uploads usually keep their base model's architecture and model_type and
only add a `quantization_config`, so `Qwen/Qwen3.5-27B-FP8` can borrow the facts of
`Qwen/Qwen3.5-27B` when only the latter is known. Only suffixes that name a weight
format are dropped: `-Instruct`, `-Base`, sizes and dates change the model, and
`-BF16` names the unquantized weights themselves.
"""

from __future__ import annotations

import re

# One trailing quantization tag, case-insensitive. Applied repeatedly, so
# `-NVFP4-FP8` and `-NVFP4-QAD` peel one tag at a time.
QUANT_SUFFIX = re.compile(
    r"[-_.](?:"
    r"FP8(?:[-_](?:dynamic|block|static))?"
    r"|NVFP4|MXFP4|MXFP8|FP4"
    r"|AWQ(?:-INT4)?|GPTQ(?:-Int[48])?"
    r"|INT4|INT8|W4A16|W8A8|W4A8|W4A4"
    r"|quantized\.w8a8|qat-w4a16-ct|qat-mobile-ct|w-mxfp4-a-fp8|QAD"
    r")$",
    re.IGNORECASE,
)


def split_id(model_id: str) -> tuple[str, str]:
    """(org, name); org is "" for an id without a slash."""
    org, _, name = model_id.rpartition("/")
    return org, name


def base_candidates(model_id: str) -> list[tuple[str, str]]:
    """(base id, stripped suffixes) for each quantization tag peeled off the end, nearest first."""
    org, name = split_id(model_id)
    out: list[tuple[str, str]] = []
    stripped = ""
    while True:
        m = QUANT_SUFFIX.search(name)
        if not m or m.start() == 0:
            return out
        stripped = name[m.start() :] + stripped
        name = name[: m.start()]
        out.append((f"{org}/{name}" if org else name, stripped))


def norm_name(text: str) -> str:
    """Case-folded, with spaces and underscores read as hyphens (`Kimi K2` == `kimi-k2`)."""
    return re.sub(r"[\s_]+", "-", text.strip()).casefold()
