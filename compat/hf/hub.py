"""config.json from the HF Hub, only when the caller allows network access.

One GET of `https://huggingface.co/<id>/resolve/main/config.json` with a short
timeout and no credentials: gated or private repos (401/403) simply miss. Any
failure is returned as a reason and the resolver falls through to offline sources.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

HUB = "https://huggingface.co"
TIMEOUT = 5.0

Opener = Callable[..., Any]


def config_url(model_id: str) -> str:
    return f"{HUB}/{model_id}/resolve/main/config.json"


def fetch_config(
    model_id: str, opener: Opener | None = None, timeout: float = TIMEOUT
) -> tuple[dict[str, Any] | None, str, str | None]:
    """(config dict or None, URL, why not)."""
    url = config_url(model_id)
    open_ = opener or urllib.request.urlopen
    req = urllib.request.Request(url, headers={"User-Agent": "vllm-compat"})
    try:
        with open_(req, timeout=timeout) as resp:
            body = resp.read()
    except urllib.error.HTTPError as exc:
        return None, url, f"hub: HTTP {exc.code} for {url}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return None, url, f"hub: {type(exc).__name__}: {getattr(exc, 'reason', exc)}"
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return None, url, f"hub: {url} is not JSON ({exc})"
    if not isinstance(data, dict):
        return None, url, f"hub: {url} is not a JSON object"
    return data, url, None
