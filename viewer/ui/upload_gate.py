"""Gradio's own upload route under the disk budgets: one ASGI middleware in front of the app.

``POST /gradio_api/upload`` (and every other multipart route of Gradio's) writes what a client
posts into Gradio's cache before any event runs, so an event's checks come too late: ten posts of
40 MB left 400 MB there with ``disk_mb`` at 200. The gate admits a post only when the disk keeper
(:meth:`viewer.sources.keep.Keep.admit`) has room for its ``Content-Length``: within the client's
``disk_client_mb`` share and, after route uploads that no event used went oldest first, within
``disk_mb``, counting posts still arriving. Otherwise it answers 413 with the budget's message,
having read (and dropped) the body, so the client sees the answer instead of a reset connection.
What Gradio wrote is registered with the keeper (:meth:`~viewer.sources.keep.Keep.settle`): counted,
swept after ``disk_ttl_s`` and past ``disk_mb``, and a session's once an event uses it
(``Keep.claim``). In public mode a post must state its length (411 otherwise); a local app keeps
Gradio's behaviour within its (large) local budgets.

Installed through Gradio's public ``launch(app_kwargs={"middleware": [...]})`` (FastAPI's own
argument), by :func:`viewer.ui.launch_kwargs`.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import anyio
from starlette.middleware import Middleware

from ..budgets import BudgetExceeded
from ..config import Settings
from ..sources.keep import KEEP, Keep, client_key

__all__ = ["UploadGate", "middleware", "gradio_cache"]


def gradio_cache() -> Path:
    """Gradio's cache folder as its documentation names it: ``GRADIO_TEMP_DIR``, else ``gradio`` in the
    system temp folder (``tests/test_keep.py`` checks it against Gradio's own answer)."""
    return Path(os.environ.get("GRADIO_TEMP_DIR") or Path(tempfile.gettempdir()) / "gradio").resolve()


def middleware(settings: Settings) -> list[Middleware]:
    return [Middleware(UploadGate, settings=settings)]


class UploadGate:
    def __init__(self, app, settings: Settings, keep: Keep = KEEP):
        self.app, self.settings, self.keep = app, settings, keep

    async def __call__(self, scope, receive, send):
        if scope.get("type") != "http" or scope.get("method") != "POST":
            return await self.app(scope, receive, send)
        raw_headers = scope.get("headers", [])  # ASGI: lower-case names; a queue/join (JSON) passes untouched
        if not next((v for k, v in raw_headers if k == b"content-type"), b"").lower().startswith(b"multipart/"):
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in raw_headers}
        settings = self.settings  # its budgets read live: VIEWER_BUDGET_* as they are now
        public = settings.public_mode()
        raw = headers.get("content-length", "").strip()
        if not raw.isdigit():
            if public:
                return await _answer(receive, send, 411, "An upload must state its size (Content-Length).")
            raw = "0"
        host = (scope.get("client") or (None,))[0]
        client = client_key(host, headers.get("x-forwarded-for"), behind_proxy=bool(os.environ.get("SPACE_ID")))
        try:
            ticket = await anyio.to_thread.run_sync(self.keep.admit, client, int(raw), settings.limits())
        except BudgetExceeded as e:
            return await _answer(receive, send, 413, str(e))
        status, body = [0], []

        async def watch(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            elif message["type"] == "http.response.body" and status[0] == 200 and sum(map(len, body)) < 1 << 20:
                body.append(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            upload = str(scope.get("path", "")).endswith("/upload")
            self.keep.settle(ticket, _paths(b"".join(body)) if upload and status[0] == 200 else [])


def _paths(body: bytes) -> list[str]:
    """The files Gradio's upload route wrote (its answer: a JSON list of paths), each in a folder of
    its own inside Gradio's cache; anything else is not registered (the keeper deletes what it holds)."""
    try:
        out = json.loads(body or b"null")
    except ValueError:
        return []
    cache = gradio_cache()
    return [p for p in (out if isinstance(out, list) else []) if isinstance(p, str)
            and Path(p).resolve().parent.is_relative_to(cache) and Path(p).resolve().parent != cache]


async def _answer(receive, send, status: int, text: str) -> None:
    """Read the request's body (dropping it) and answer ``status``: a client still sending would
    otherwise see its connection reset instead of the reason."""
    more = True
    while more:
        message = await receive()
        more = message.get("type") == "http.request" and message.get("more_body", False)
    data = text.encode("utf-8")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})
