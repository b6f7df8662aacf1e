"""Recording proxy: an ASGI app in front of an OpenAI-compatible vLLM server.

Every ``POST .../chat/completions`` is forwarded with ``logprobs``, ``top_logprobs``,
``return_token_ids`` and ``return_tokens_as_token_ids`` added (CAPTURE.md §3); the
upstream answer goes back to the client unchanged (streaming SSE bytes are passed through
as they arrive), and one record per call is appended and flushed to a JSONL file when the
call completes, fails or is cut. Other paths (``/v1/models``, ``/health`` ...) are
forwarded untouched and not recorded.

Record (the format :mod:`viewer.sources.capture` reads)::

    {"turn": n, "kind": "main"|"title"|"compaction"|"other", "request": <body as forwarded>,
     "response": <chat.completion, re-assembled when streamed; big id/logprob arrays moved out>,
     "prompt_token_ids": [...], "completion_token_ids": [...], "completion_tokens": ["token_id:N", ...],
     "logprobs": [{"token", "logprob", "bytes", "top_logprobs"}], "per_token_logps": [...],
     "finish_reason", "latency_s", "timestamp", "upstream_status"?, "upstream_error"?, "error"?}

Headers are never recorded (no API key or token reaches the trace). ``upstream_headers``
lets the proxy authenticate to the upstream itself, so the agent only holds a dummy key.

Scripted-expert mode: a :class:`Script` returns a ``structured_outputs`` regex per call;
the proxy adds it to the forwarded body (the model's own logprobs are still recorded).
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import httpx

from viewer.sources.openai_wire import StreamAccumulator, ids_from_entries
from viewer.turns import role_from_prompt

__all__ = ["ProxyConfig", "Recorder", "StreamAssembler", "Script", "make_app", "ProxyServer", "regex_literal",
           "kind_of", "enrich_request"]

# Request fields that carry the ids and logprobs we record (CAPTURE.md §1.1-1.3).
TOKEN_FIELDS = {"logprobs": True, "return_token_ids": True, "return_tokens_as_token_ids": True}
_HOP = {"host", "content-length", "connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
        "proxy-authorization", "proxy-authenticate", "accept-encoding"}


def regex_literal(text: str) -> str:
    """A regex matching exactly ``text`` (only regex metacharacters escaped; newlines as ``\\n``).

    ``re.escape`` also escapes spaces and other harmless characters, which some
    grammar engines reject; this keeps the pattern minimal.
    """
    out = []
    for ch in text:
        if ch in ".^$*+?()[]{}|\\/":
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        else:
            out.append(ch)
    return "".join(out)


def kind_of(body: dict[str, Any]) -> str:
    """main | title | compaction | other, from the request's system prompt and tools."""
    msgs = body.get("messages") if isinstance(body.get("messages"), list) else []
    tools = body.get("tools") if isinstance(body.get("tools"), list) else []
    return role_from_prompt(msgs, tools)


class Script:
    """Scripted expert: a ``structured_outputs`` regex per call (CAPTURE.md §8).

    ``steps`` are the exact assistant outputs of the main agent, in order; the step of a
    call is the number of assistant messages already in its request, so an opencode retry
    of the same call gets the same regex. ``title`` forces the title generator's answer.
    """

    def __init__(self, steps: list[str], title: str | None = "Solve the task",
                 logit_bias: dict[str, float] | None = None):
        self.steps = steps
        self.title = title
        # e.g. {"151657": -100}: makes the grammar spell <tool_call> as ordinary pieces, as a
        # freely sampling model does (CAPTURE.md §2), so the capture shows that drift case
        self.logit_bias = logit_bias or {}

    def regex_for(self, body: dict[str, Any], kind: str) -> str | None:
        if kind == "title":
            return regex_literal(self.title) if self.title else None
        if kind != "main":
            return None
        msgs = body.get("messages") or []
        step = sum(1 for m in msgs if isinstance(m, dict) and m.get("role") == "assistant")
        if step < len(self.steps):
            return regex_literal(self.steps[step])
        return regex_literal(self.steps[-1]) if self.steps else None


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


class Recorder:
    """Appends one JSON line per call and flushes it; thread-safe; counts calls and tokens."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "a", encoding="utf-8")
        self._lock = threading.Lock()
        self.calls = 0
        self.tokens = 0
        self.errors = 0
        self._turn = 0
        self.write_error: str | None = None

    def next_turn(self) -> int:
        with self._lock:
            self._turn += 1
            return self._turn

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False) + "\n"
        with self._lock:
            try:
                self._fh.write(line)
                self._fh.flush()  # to the OS at once: a crash of this process loses at most the call in flight
            except OSError as e:  # a full disk: keep serving, remember why records are missing
                self.write_error = f"cannot write {self.path.name}: {e.strerror or e}"
            self.calls += 1
            self.tokens += len(record.get("completion_token_ids") or [])
            if record.get("upstream_status") or record.get("upstream_error") or record.get("error"):
                self.errors += 1

    def close(self) -> None:
        with self._lock:
            if not self._fh.closed:
                self._fh.close()


def enrich_request(body: dict[str, Any], cfg: ProxyConfig, kind: str) -> dict[str, Any]:
    """The body as forwarded: id/logprob switches added, the scripted regex when scripting."""
    out = dict(body)
    out.update(TOKEN_FIELDS)
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


def build_record(turn: int, kind: str, request: dict[str, Any], response: dict[str, Any] | None,
                 prompt_ids: list[int] | None, token_ids: list[int] | None, entries: list[dict[str, Any]],
                 finish_reason: str | None, started: float, t0: float) -> dict[str, Any]:
    """One trace record (see the module docstring). ``token_ids`` are the engine's sampled ids."""
    strings = ids_from_entries(entries) if entries else None
    ids = list(token_ids or []) or list(strings or [])
    rec: dict[str, Any] = {
        "turn": turn, "kind": kind, "request": request, "response": response,
        "prompt_token_ids": prompt_ids or [],
        "completion_token_ids": ids,
        "completion_tokens": [e.get("token") for e in entries],
        "logprobs": entries,
        "per_token_logps": [e.get("logprob") for e in entries],
        "finish_reason": finish_reason,
        "latency_s": round(time.perf_counter() - t0, 6),
        "timestamp": started,
    }
    if token_ids and strings is not None and list(token_ids) != strings:
        rec["id_mismatch"] = f"token_ids ({len(token_ids)}) differ from token_id:N strings ({len(strings)})"
    return rec


def _slim_response(resp: dict[str, Any]) -> dict[str, Any]:
    """The response without the arrays the record already holds at its top level."""
    out = {k: v for k, v in resp.items() if k not in ("prompt_token_ids", "prompt_logprobs")}
    chs = []
    for ch in resp.get("choices") or []:
        if isinstance(ch, dict):
            ch = {k: v for k, v in ch.items() if k not in ("logprobs", "token_ids")}
        chs.append(ch)
    out["choices"] = chs
    return out


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
            c = state["client"] = httpx.AsyncClient(timeout=httpx.Timeout(cfg.timeout_s, connect=10.0), trust_env=False)
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
            except Exception:  # a progress callback must never break the proxy
                pass

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
            emit(build_record(turn, kind, fwd, _slim_response(resp), resp.get("prompt_token_ids"), ch.get("token_ids"),
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


def read_records(path: Path) -> list[dict[str, Any]]:
    """The records of a proxy JSONL file (a torn last line is skipped)."""
    out = []
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        return out
    for line in text.splitlines():
        if line.strip():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out

