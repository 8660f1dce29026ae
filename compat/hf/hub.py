"""config.json from the HF Hub through huggingface_hub, the client vLLM itself uses.

`hf_hub_download(repo_id, "config.json")` brings what a vLLM user already has set up:
their token (`HF_TOKEN` or `hf auth login`), a mirror (`HF_ENDPOINT`), offline mode
(`HF_HUB_OFFLINE=1`: the HF cache only) and the standard HF cache, so a config that
`vllm serve` downloaded before is read from disk. Each hit records the commit sha it
came from (the snapshot folder huggingface_hub filed it under), so a facts lock can pin it.

Failures are reasons, one kind each, always naming the id (a gated repo, a missing
repo or file, a timeout, a body that is not JSON, offline with nothing cached); the
resolver falls through to offline sources and keeps the reason. The token itself is
never formatted into a reason, a log line or a row: huggingface_hub holds it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

FILENAME = "config.json"
TIMEOUT = 10.0  # seconds for the metadata request (huggingface_hub's own default)
WORKERS = 8
_SHA = re.compile(r"[0-9a-f]{40}")

Kind = Literal[
    "ok",
    "gated",
    "unauthorized",
    "not_found",
    "no_config",
    "timeout",
    "invalid_json",
    "offline",
    "error",
]


@dataclass(frozen=True)
class HubResult:
    """One id's config.json from the Hub (or the HF cache huggingface_hub keeps), or why not."""

    model_id: str
    kind: Kind
    config: dict[str, Any] | None = None
    revision: str | None = None  # commit sha
    url: str = ""  # permalink at that revision (no machine path)
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.kind == "ok"


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in seen:
        seen.append(cur)
        cur = cur.__cause__ or cur.__context__
    return seen


def _status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def classify(model_id: str, exc: BaseException, offline: bool) -> tuple[Kind, str]:
    """(kind, one-line reason naming the id) for an exception out of hf_hub_download."""
    from huggingface_hub.errors import (
        GatedRepoError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    chain = _chain(exc)
    for e in chain:
        if isinstance(e, GatedRepoError):
            return "gated", (
                f"hub: {model_id} is gated (HTTP {_status(e) or 401}): accept its terms on the Hub "
                f"and set HF_TOKEN or run `hf auth login`"
            )
    for e in chain:
        if isinstance(e, RepositoryNotFoundError):
            code = _status(e)
            if code in (401, 403):
                return "unauthorized", (
                    f"hub: {model_id} is private or does not exist (HTTP {code}); "
                    f"a token with access may be needed"
                )
            return "not_found", f"hub: no repository {model_id} (HTTP {code or 404})"
        if isinstance(e, RevisionNotFoundError):
            return "not_found", f"hub: {model_id} has no such revision (HTTP {_status(e) or 404})"
        if isinstance(e, RemoteEntryNotFoundError):
            return "no_config", f"hub: {model_id} has no {FILENAME} (HTTP {_status(e) or 404})"
    for e in chain:
        name = type(e).__name__
        if isinstance(e, TimeoutError) or "Timeout" in name:
            return "timeout", f"hub: timed out fetching {FILENAME} of {model_id}"
    if offline or any(isinstance(e, OfflineModeIsEnabled) for e in chain):
        return (
            "offline",
            f"hub: offline (HF_HUB_OFFLINE) and {model_id} has no {FILENAME} in the HF cache",
        )
    for e in chain:
        code = _status(e)
        if code:
            return "error", f"hub: HTTP {code} fetching {FILENAME} of {model_id}"
    if isinstance(exc, LocalEntryNotFoundError):
        return "error", f"hub: cannot reach the Hub for {model_id} and no cached {FILENAME}"
    return "error", f"hub: {type(exc).__name__} fetching {FILENAME} of {model_id}"


def _revision_of(path: Path) -> str | None:
    """The commit sha a cached file belongs to: huggingface_hub files it under snapshots/<sha>/."""
    name = path.parent.name
    return name if _SHA.fullmatch(name) else None


def read_config(model_id: str, path: Path) -> tuple[dict[str, Any] | None, str | None]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"hub: {FILENAME} of {model_id} is not valid JSON ({type(exc).__name__})"
    if not isinstance(data, dict):
        return None, f"hub: {FILENAME} of {model_id} is not a JSON object"
    return data, None


class HubClient:
    """hf_hub_download for config.json files, concurrently, with huggingface_hub's own settings.

    Every argument left as None means "what huggingface_hub does by default", which reads
    HF_ENDPOINT, HF_TOKEN / the stored login, HF_HUB_OFFLINE and HF_HUB_CACHE / HF_HOME.
    Tests pass them explicitly.
    """

    def __init__(
        self,
        *,
        endpoint: str | None = None,
        cache_dir: Path | None = None,
        token: str | bool | None = None,
        offline: bool | None = None,
        timeout: float = TIMEOUT,
        workers: int = WORKERS,
    ) -> None:
        self.endpoint = endpoint.rstrip("/") if endpoint else None
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.token = token
        self._offline = offline
        self.timeout = timeout
        self.workers = max(1, workers)

    @property
    def offline(self) -> bool:
        if self._offline is not None:
            return self._offline
        from huggingface_hub import constants

        return bool(constants.HF_HUB_OFFLINE)

    def url(self, model_id: str, revision: str | None = None) -> str:
        from huggingface_hub import hf_hub_url

        return hf_hub_url(model_id, FILENAME, revision=revision, endpoint=self.endpoint)

    def fetch(self, model_id: str, revision: str | None = None) -> HubResult:
        """config.json of one id at `revision` (default: main).

        One metadata request of our own first (no retries, `timeout` seconds: huggingface_hub
        would retry a slow Hub for a minute), so a gated, missing or slow repo is told
        apart; then hf_hub_download fetches the file into the HF cache (refs/main updated
        as huggingface_hub does) or finds it there. When the Hub cannot be reached, the HF
        cache answers if it can.
        """
        from huggingface_hub import hf_hub_download

        sha: str | None = None
        unreachable: tuple[Kind, str] | None = None
        if not self.offline:
            sha, failure = self._commit_of(model_id, revision)
            if failure is not None:
                if failure[0] not in ("timeout", "error"):  # the Hub answered: gated, missing, ...
                    return HubResult(model_id, failure[0], reason=failure[1])
                unreachable = failure
        try:
            path = Path(
                hf_hub_download(
                    model_id,
                    FILENAME,
                    revision=revision,
                    cache_dir=self.cache_dir,
                    token=self.token,
                    endpoint=self.endpoint,
                    etag_timeout=self.timeout,
                    local_files_only=self.offline or unreachable is not None,
                )
            )
        except Exception as exc:  # noqa: BLE001 (every failure becomes a reason; see classify)
            kind, reason = unreachable or classify(model_id, exc, self.offline)
            return HubResult(model_id, kind, reason=reason)
        sha = _revision_of(path) or sha
        if revision and _SHA.fullmatch(revision):
            sha = revision
        config, why = read_config(model_id, path)
        if config is None:
            return HubResult(model_id, "invalid_json", revision=sha, reason=why)
        return HubResult(model_id, "ok", config=config, revision=sha, url=self.url(model_id, sha))

    def _commit_of(
        self, model_id: str, revision: str | None
    ) -> tuple[str | None, tuple[Kind, str] | None]:
        from huggingface_hub import get_hf_file_metadata

        try:
            meta = get_hf_file_metadata(
                self.url(model_id, revision),
                token=self.token,
                timeout=self.timeout,
                endpoint=self.endpoint,
            )
        except Exception as exc:  # noqa: BLE001
            return None, classify(model_id, exc, False)
        if not meta.commit_hash:
            return None, (
                "error",
                f"hub: no X-Repo-Commit header for {model_id}: not a Hub endpoint?",
            )
        return meta.commit_hash, None

    def upstream_revision(self, model_id: str) -> tuple[str | None, str | None]:
        """(commit sha of main now, why not): one metadata request, nothing downloaded."""
        if self.offline:
            return None, "offline (HF_HUB_OFFLINE)"
        sha, failure = self._commit_of(model_id, None)
        return sha, failure[1] if failure else None

    def fetch_many(
        self,
        model_ids: Iterable[str],
        *,
        progress: bool = True,
        fetch: Callable[[str], Any] | None = None,
    ) -> dict[str, Any]:
        """`fetch` (default: config.json) for every id, `workers` at a time, with a rich progress
        bar on stderr when it is a terminal. Returns {id: result} in the order given."""
        ids = list(dict.fromkeys(model_ids))
        one = fetch or self.fetch
        results: dict[str, Any] = {}
        if not ids:
            return results
        _quiet_hf_bars()
        with (
            ThreadPoolExecutor(max_workers=min(self.workers, len(ids))) as pool,
            _bar(len(ids), progress) as advance,
        ):
            for mid, res in zip(ids, pool.map(one, ids)):
                results[mid] = res
                advance()
        return results


def _quiet_hf_bars() -> None:
    """huggingface_hub draws a tqdm bar per file; one bar for the whole batch is ours."""
    from huggingface_hub.utils import disable_progress_bars

    disable_progress_bars()


class _bar:
    """A rich progress bar on stderr (only on a terminal), as a context giving `advance()`."""

    def __init__(self, total: int, enabled: bool) -> None:
        from rich.console import Console

        console = Console(stderr=True)
        self._progress = None
        if enabled and console.is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self._progress = Progress(
                TextColumn("HF Hub config.json"),
                BarColumn(),
                MofNCompleteColumn(),
                console=console,
                transient=True,
            )
            self._task = self._progress.add_task("hub", total=total)

    def __enter__(self) -> Callable[[], None]:
        progress = self._progress
        if progress is None:
            return lambda: None
        progress.start()
        return lambda: progress.advance(self._task)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()
