"""Recording proxy: an ASGI app in front of an OpenAI-compatible vLLM server.

Every ``POST .../chat/completions`` is forwarded with ``logprobs``, ``top_logprobs``,
``return_token_ids`` and ``return_tokens_as_token_ids`` added (docs/CAPTURE.md §3); the
upstream answer goes back to the client unchanged (streaming SSE bytes are passed through
as they arrive), and one record per call is appended and flushed to a JSONL file when the
call completes, fails or is cut. Other paths (``/v1/models``, ``/health`` ...) are
forwarded untouched and not recorded.

Records: :mod:`viewer.capture.records` (the format :mod:`viewer.sources.capture` reads).

Headers are never recorded (no API key or token reaches the trace). ``upstream_headers``
lets the proxy authenticate to the upstream itself, so the agent only holds a dummy key.

Scripted-expert mode (:mod:`viewer.capture.script`): a ``Script`` returns a ``structured_outputs`` regex per call;
the proxy adds it to the forwarded body (the model's own logprobs are still recorded).
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import httpx

from viewer.capture.records import Recorder, build_record, read_records, slim_response
from viewer.capture.script import Script, kind_of, regex_literal
from viewer.sources.openai_wire import StreamAccumulator

_LOG = logging.getLogger(__name__)

# Recorder / records / Script are re-exported: callers of the proxy get one import
__all__ = ["ProxyConfig", "Recorder", "StreamAssembler", "Script", "make_app", "ProxyServer", "regex_literal",
           "kind_of", "enrich_request", "build_record", "read_records"]

# Request fields that carry the ids and logprobs we record (docs/CAPTURE.md §1.1-1.3).
TOKEN_FIELDS = {"logprobs": True, "return_token_ids": True, "return_tokens_as_token_ids": True}
_HOP = {"host", "content-length", "connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
        "proxy-authorization", "proxy-authenticate", "accept-encoding"}


@dataclass
class ProxyConfig:
    upstream: str  # base URL of the vLLM server, e.g. http://127.0.0.1:8011 (with or without /v1)
    trace_path: Path
    top_logprobs: int = 5
    script: Script | None = None
    upstream_headers: dict[str, str] = field(default_factory=dict)  # e.g. Authorization for a remote endpoint
    timeout_s: float = 600.0
    max_tokens_cap: int | None = None
    # added to every main-agent call (e.g. -100 on <tool_call>/</tool_call>: --spell-tool-call-as-pieces)
    logit_bias: dict[str, float] = field(default_factory=dict)
    # a public app's endpoint: connect to the address the policy checked (backends.Pin), never
    # to whatever the name resolves to later
    pin: Any = None
    # temperature / top_p / top_k set on every chat call (viewer.capture.sampling.overrides)
    sampling: dict[str, Any] = field(default_factory=dict)


def enrich_request(body: dict[str, Any], cfg: ProxyConfig, kind: str) -> dict[str, Any]:
    """The body as forwarded: id/logprob switches added, the scripted regex when scripting."""
    out = dict(body)
    out.update(TOKEN_FIELDS)
    out.update(cfg.sampling)  # pinned sampling: the record's request then says what the engine sampled with
    k = out.get("top_logprobs")
    out["top_logprobs"] = k if isinstance(k, int) and not isinstance(k, bool) and k >= 0 else cfg.top_logprobs
    if cfg.max_tokens_cap:
        for key in ("max_tokens", "max_completion_tokens"):
            if isinstance(out.get(key), int) and out[key] > cfg.max_tokens_cap:
                out[key] = cfg.max_tokens_cap
    if cfg.script is not None:
        rx = cfg.script.regex_for(body, kind)
        if rx is not None:
            out["structured_outputs"] = {"regex": rx}
            if cfg.script.logit_bias and kind == "main":
                out["logit_bias"] = {**cfg.script.logit_bias, **(out.get("logit_bias") or {})}
    if cfg.logit_bias and kind == "main":
        out["logit_bias"] = {**cfg.logit_bias, **(out.get("logit_bias") or {})}
    if out.get("stream") and not isinstance(out.get("stream_options"), dict):
        out["stream_options"] = {"include_usage": True}
    return out


class StreamAssembler(StreamAccumulator):
    """The proxy's stream re-assembler: the shared wire parser, plus the first bytes seen (for an
    error message about an answer that is not SSE at all)."""

    def __init__(self) -> None:
        super().__init__()
        self.first = b""

    def feed(self, chunk: bytes | str) -> None:
        if isinstance(chunk, (bytes, bytearray)) and len(self.first) < 60:
            self.first += bytes(chunk[:60 - len(self.first)])
        super().feed(chunk)


def _shape(r: httpx.Response, first: bytes) -> str:
    """What an upstream answer looked like, for an error message: content type and the first bytes."""
    ctype = r.headers.get("content-type") or "no content type"
    head = first[:60].decode("utf-8", "replace")
    return f"{ctype}" + (f" ({head!r}…)" if head else "")


def _error_obj(content: bytes) -> Any:
    try:
        return json.loads(content)
    except ValueError:
        return {"message": content.decode("utf-8", "replace")[:2000]}


def make_app(cfg: ProxyConfig, recorder: Recorder, on_record: Callable[[dict[str, Any]], None] | None = None):
    """The ASGI app (Starlette) forwarding to ``cfg.upstream`` and recording chat calls."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    base = cfg.upstream.rstrip("/")
    if base.endswith("/v1"):
        base = base[:-3]
    state: dict[str, Any] = {}

    def client() -> httpx.AsyncClient:
        c = state.get("client")
        if c is None:
            transport = None
            if cfg.pin is not None:
                from viewer.capture.backends import AsyncPinnedTransport

                transport = AsyncPinnedTransport(cfg.pin)
            c = state["client"] = httpx.AsyncClient(timeout=httpx.Timeout(cfg.timeout_s, connect=10.0), trust_env=False,
                                                    transport=transport)
        return c

    def headers_of(request: Request) -> dict[str, str]:
        h = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        h.update(cfg.upstream_headers)
        return h

    def emit(rec: dict[str, Any]) -> None:
        recorder.append(rec)
        if on_record is not None:
            try:
                on_record(rec)
            except Exception as e:  # a progress callback must never break the proxy: logged, not raised
                _LOG.warning("proxy: record callback failed: %s: %s", type(e).__name__, e)

    async def passthrough(request: Request) -> Response:
        url = base + request.url.path + (("?" + request.url.query) if request.url.query else "")
        try:
            r = await client().request(request.method, url, headers=headers_of(request), content=await request.body())
        except httpx.HTTPError as e:
            return JSONResponse({"error": {"message": f"upstream unreachable: {type(e).__name__}: {e}"}}, 502)
        hdrs = {k: v for k, v in r.headers.items() if k.lower() not in _HOP | {"content-encoding"}}
        return Response(r.content, r.status_code, headers=hdrs)

    async def chat(request: Request) -> Response:
        started, t0 = time.time(), time.perf_counter()
        turn = recorder.next_turn()
        raw = await request.body()
        try:
            body = json.loads(raw)
            assert isinstance(body, dict)
        except (ValueError, AssertionError):
            emit({"turn": turn, "kind": "other", "request": None, "response": None, "error": "request body is not a JSON object",
                  "latency_s": 0.0, "timestamp": started, "upstream_status": None})
            return JSONResponse({"error": {"message": "request body must be a JSON object"}}, 400)
        kind = kind_of(body)
        fwd = enrich_request(body, cfg, kind)
        url = base + request.url.path
        hdrs = headers_of(request)
        hdrs["content-type"] = "application/json"
        payload = json.dumps(fwd).encode()

        def fail(status: int | None, err: Any, message: str) -> dict[str, Any]:
            rec = build_record(turn, kind, fwd, {"choices": [], "usage": None}, None, None, [], None, started, t0)
            rec["upstream_status"] = status
            rec["upstream_error"] = err
            rec["error"] = message
            return rec

        if not fwd.get("stream"):
            try:
                r = await client().post(url, content=payload, headers=hdrs)
            except httpx.HTTPError as e:
                msg = f"upstream unreachable: {type(e).__name__}: {e}"
                emit(fail(None, {"message": msg}, msg))
                return JSONResponse({"error": {"message": msg}}, 502)
            if r.status_code >= 400:
                err = _error_obj(r.content)
                emit(fail(r.status_code, err, f"upstream HTTP {r.status_code}"))
                return Response(r.content, r.status_code, media_type=r.headers.get("content-type"))
            try:
                resp = r.json()
                ch = (resp.get("choices") or [{}])[0]
            except (ValueError, AttributeError, IndexError):
                emit(fail(r.status_code, _error_obj(r.content),
                          f"upstream answered HTTP {r.status_code} with {_shape(r, r.content)}, not a chat.completion JSON"))
                return Response(r.content, r.status_code, media_type=r.headers.get("content-type"))
            entries = ((ch.get("logprobs") or {}).get("content")) or []
            emit(build_record(turn, kind, fwd, slim_response(resp), resp.get("prompt_token_ids"), ch.get("token_ids"),
                              entries, ch.get("finish_reason"), started, t0))
            return Response(r.content, r.status_code, media_type="application/json")

        # Streaming: open the upstream stream first so HTTP errors keep their status.
        req = client().build_request("POST", url, content=payload, headers=hdrs)
        try:
            up = await client().send(req, stream=True)
        except httpx.HTTPError as e:
            msg = f"upstream unreachable: {type(e).__name__}: {e}"
            emit(fail(None, {"message": msg}, msg))
            return JSONResponse({"error": {"message": msg}}, 502)
        if up.status_code >= 400:
            content = await up.aread()
            await up.aclose()
            emit(fail(up.status_code, _error_obj(content), f"upstream HTTP {up.status_code}"))
            return Response(content, up.status_code, media_type=up.headers.get("content-type"))

        asm = StreamAssembler()

        async def relay() -> AsyncIterator[bytes]:
            cut: str | None = None
            try:
                async for chunk in up.aiter_raw():
                    asm.feed(chunk)
                    yield chunk
            except (httpx.HTTPError, asyncio.CancelledError, GeneratorExit) as e:
                cut = f"stream cut: {type(e).__name__}: {e}".rstrip(": ")
                if not isinstance(e, httpx.HTTPError):
                    cut = "stream cut: client disconnected"
                    raise
            finally:
                await up.aclose()
                resp = asm.response()
                rec = build_record(turn, kind, fwd, resp, asm.prompt_token_ids, asm.token_ids, asm.logprobs,
                                   asm.finish_reason, started, t0)
                if cut is None and not asm.done:
                    cut = ("stream cut: upstream closed the stream before [DONE]" if asm.events else
                           f"upstream answered HTTP {up.status_code} with {_shape(up, asm.first)}, "
                           "not an SSE stream (no data: events)")
                if asm.error is not None:
                    rec["upstream_error"] = asm.error
                    rec["error"] = "upstream error inside the stream"
                if cut:
                    rec["error"] = cut
                emit(rec)

        hdrs_out = {"cache-control": "no-cache"}
        return StreamingResponse(relay(), status_code=up.status_code, media_type="text/event-stream", headers=hdrs_out)

    async def route(request: Request) -> Response:
        if request.method == "POST" and request.url.path.rstrip("/").endswith("/chat/completions"):
            return await chat(request)
        return await passthrough(request)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        c = state.pop("client", None)
        if c is not None:
            await c.aclose()

    methods = ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"]
    return Starlette(routes=[Route("/{path:path}", route, methods=methods)], lifespan=lifespan)


class ProxyServer:
    """The proxy served by uvicorn on 127.0.0.1 in a background thread of this process."""

    def __init__(self, cfg: ProxyConfig, port: int = 0, on_record: Callable[[dict[str, Any]], None] | None = None):
        import socket

        self.cfg = cfg
        self.recorder = Recorder(cfg.trace_path)
        self.app = make_app(cfg, self.recorder, on_record)
        if not port:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
        self.port = port
        self.url = f"http://127.0.0.1:{port}/v1"
        self._server = None
        self._thread: threading.Thread | None = None

    def start(self, timeout: float = 15.0) -> "ProxyServer":
        import uvicorn

        config = uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning", access_log=False,
                                lifespan="on", timeout_graceful_shutdown=3)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="capture-proxy", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"recording proxy did not start on 127.0.0.1:{self.port}")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.recorder.close()

    def __enter__(self) -> "ProxyServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
