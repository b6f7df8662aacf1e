"""Background captures for the app: one at a time per process, looked up by job id.

No gradio here: the UI starts a job, polls :meth:`CaptureRunner.snapshot` from a timer,
and re-attaches with ``?job=<id>``. The registry is a cache; the artefact folder on disk
is the record (a restarted app can still open it).
"""
from __future__ import annotations

import secrets
import threading
import time
from typing import Any

from viewer.capture.job import CaptureJob, CaptureSpec, run_capture

__all__ = ["CaptureBusy", "CaptureRunner", "RUNNER"]


class CaptureBusy(RuntimeError):
    """A capture is already running in this app."""


class _RemoteJob:
    """An hf-jobs capture behind the same snapshot/cancel interface as CaptureJob."""

    def __init__(self, spec: CaptureSpec):
        self.spec = spec
        self.cancel_event = threading.Event()
        self.events: list[dict[str, Any]] = []
        self.status, self.phase, self.error, self.summary = "running", "remote", None, None
        import time

        self.started = time.time()
        self.finished = None

    def run(self) -> dict[str, Any]:
        import time

        try:
            self.summary = run_capture(self.spec, on_event=self.events.append, cancel=self.cancel_event)
            self.status = self.summary.get("status", "failed")
            self.error = self.summary.get("error")
        except Exception as e:
            self.status, self.error = "failed", f"{type(e).__name__}: {e}"
        self.finished, self.phase = time.time(), "done"
        return self.summary or {}

    def cancel(self) -> None:
        self.cancel_event.set()

    def snapshot(self) -> dict[str, Any]:
        import time

        return {"status": self.status, "phase": self.phase, "error": self.error, "out": self.spec.out,
                "elapsed_s": round((self.finished or time.time()) - self.started, 1), "calls": 0, "tokens": 0,
                "events": self.events[-40:], "summary": self.summary}


class CaptureRunner:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.jobs: dict[str, Any] = {}
        self.threads: dict[str, threading.Thread] = {}
        self.active: str | None = None
        self.owners: dict[str, str] = {}

    def start(self, spec: CaptureSpec, owner: str = "") -> str:
        """Start ``spec`` in the background; ``owner`` (a browser session) is the only one who may cancel it."""
        with self._lock:
            if self.active is not None and self.threads[self.active].is_alive():
                raise CaptureBusy(f"a capture is already running (job {self.active}); wait for it or cancel it")
            job_id = secrets.token_hex(4)
            job = _RemoteJob(spec) if spec.backend == "hf-jobs" else CaptureJob(spec)
            t = threading.Thread(target=job.run, name=f"capture-{job_id}", daemon=True)
            self.jobs[job_id], self.threads[job_id], self.active = job, t, job_id
            self.owners[job_id] = owner
            t.start()
            return job_id

    def get(self, job_id: str | None):
        return self.jobs.get(job_id or "")

    def snapshot(self, job_id: str | None) -> dict[str, Any] | None:
        job = self.get(job_id)
        return job.snapshot() if job is not None else None

    def running(self, job_id: str | None) -> bool:
        t = self.threads.get(job_id or "")
        return bool(t and t.is_alive())

    def cancel(self, job_id: str | None, owner: str | None = None) -> bool:
        """Cancel ``job_id``; with ``owner`` given, only when that session started it."""
        job = self.get(job_id)
        if job is None:
            return False
        if owner is not None and self.owners.get(job_id or "", "") != owner:
            return False
        job.cancel()
        return True

    def wait(self, job_id: str, timeout: float | None = None) -> None:
        t = self.threads.get(job_id)
        if t is not None:
            t.join(timeout)

    def shutdown(self, timeout: float = 60.0) -> list[str]:
        """Cancel every running capture and wait for each to stop its processes and write its
        (incomplete) artefacts; the job ids that were running. Called when the app exits."""
        with self._lock:
            live = [j for j, t in self.threads.items() if t.is_alive()]
        for j in live:
            self.jobs[j].cancel()
        deadline = time.monotonic() + timeout
        for j in live:
            self.threads[j].join(max(0.0, deadline - time.monotonic()))
        return live


RUNNER = CaptureRunner()


def install_shutdown_handlers(runner: CaptureRunner | None = None) -> None:
    """On SIGTERM / SIGINT (main thread only) and at exit: cancel running captures and wait
    for them, so stopping the app never leaves a vLLM server or an agent behind."""
    import atexit
    import signal

    r = runner or RUNNER
    atexit.register(r.shutdown)

    def _stop(signum, frame):
        r.shutdown()
        raise KeyboardInterrupt  # gradio's launch loop closes the server on it

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _stop)
