"""A local stand-in for the HF Hub's resolve API, for tests and benchmarks (127.0.0.1 only).

It speaks enough of `/{repo}/resolve/{revision}/{filename}` for the real
huggingface_hub client (pointed at it with HF_ENDPOINT or `endpoint=`): HEAD and GET
answer with the headers `get_hf_file_metadata` and `hf_hub_download` read
(X-Repo-Commit, ETag, Content-Length) and, for failures, the X-Error-Code values
huggingface_hub maps to its error classes (RepoNotFound, EntryNotFound, GatedRepo,
RevisionNotFound). Repos can be gated (401 without the token, 403 with another), slow
(sleep before answering: a timeout), or serve a body that is not JSON.

Configs served here measure the pipeline, not model truth; they are never facts.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def sha_of(text: str) -> str:
    """A 40-hex commit id derived from any string (stable across runs)."""
    return hashlib.sha1(text.encode()).hexdigest()


@dataclass
class Repo:
    files: dict[str, bytes]
    commit: str
    token: str | None = None  # gated: requests need `Authorization: Bearer <token>`
    delay: float = 0.0  # seconds to wait before answering

    @classmethod
    def with_config(cls, config: dict[str, Any] | bytes, commit: str | None = None, **kw: Any) -> Repo:
        body = config if isinstance(config, bytes) else json.dumps(config).encode()
        return cls({"config.json": body}, commit or sha_of(body.decode("utf-8", "replace")), **kw)


@dataclass
class FakeHub:
    repos: dict[str, Repo] = field(default_factory=dict)
    requests: list[tuple[str, str, bool]] = field(default_factory=list)  # (method, path, had auth)
    seen_auth: set[str] = field(default_factory=set)  # Authorization values received

    def add(self, repo_id: str, config: dict[str, Any] | bytes, **kw: Any) -> Repo:
        self.repos[repo_id] = Repo.with_config(config, **kw)
        return self.repos[repo_id]

    # -- server ------------------------------------------------------------------------
    def __enter__(self) -> FakeHub:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_a: Any) -> None:  # keep test output clean
                pass

            def do_HEAD(self) -> None:  # noqa: N802
                hub._answer(self, body=False)

            def do_GET(self) -> None:  # noqa: N802
                hub._answer(self, body=True)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # -- the resolve API ---------------------------------------------------------------
    def _answer(self, h: BaseHTTPRequestHandler, body: bool) -> None:
        path = urllib.parse.urlparse(h.path).path
        auth = h.headers.get("Authorization")
        self.requests.append((h.command, path, auth is not None))
        if auth:
            self.seen_auth.add(auth)
        parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/")]
        if len(parts) < 5 or parts[2] != "resolve":
            return self._send(h, 404, {"X-Error-Code": "RepoNotFound"}, b"not found", body)
        repo_id, revision, filename = f"{parts[0]}/{parts[1]}", parts[3], "/".join(parts[4:])
        repo = self.repos.get(repo_id)
        if repo is None:
            return self._send(h, 404, {"X-Error-Code": "RepoNotFound"}, b"Repository not found", body)
        if repo.delay:
            time.sleep(repo.delay)
        if repo.token is not None and auth != f"Bearer {repo.token}":
            code = 401 if auth is None else 403
            return self._send(h, code, {"X-Error-Code": "GatedRepo",
                                        "X-Error-Message": "Access to this model is restricted."},
                              b"gated", body)
        if revision not in ("main", repo.commit):
            return self._send(h, 404, {"X-Error-Code": "RevisionNotFound"}, b"no revision", body)
        data = repo.files.get(filename)
        if data is None:
            return self._send(h, 404, {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": repo.commit},
                              b"Entry not found", body)
        etag = hashlib.sha1(data).hexdigest()
        self._send(h, 200, {"X-Repo-Commit": repo.commit, "ETag": f'"{etag}"',
                            "Content-Type": "application/json"}, data, body)

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, code: int, headers: dict[str, str], data: bytes,
              body: bool) -> None:
        try:
            h.send_response(code)
            for k, v in headers.items():
                h.send_header(k, v)
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            if body:
                h.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
            pass
