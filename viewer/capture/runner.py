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

    def cancel(self, reason: str = "cancelled by the user", status: str = "cancelled") -> None:
        self.cancel_event.set()

    def mark_cancelled_before_start(self) -> None:
        self.status, self.phase, self.error = "cancelled", "done", "cancelled before it started"

    def snapshot(self) -> dict[str, Any]:
        import time

        return {"status": self.status, "phase": self.phase, "error": self.error, "out": self.spec.out,
                "elapsed_s": round((self.finished or time.time()) - self.started, 1), "calls": 0, "tokens": 0,
                "events": self.events[-40:], "summary": self.summary}


class CaptureRunner:
    """Captures run one at a time (they share this machine's CPU/GPU); others wait in a FIFO
    queue with their position shown. A visitor (``owner``) has at most one capture running or
    waiting, and only that owner may cancel it. ``max_wall_s`` cancels a capture that runs
    longer (status ``timeout``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.jobs: dict[str, Any] = {}
        self.threads: dict[str, threading.Thread] = {}
        self.active: str | None = None
        self.owners: dict[str, str] = {}
        self.queue: list[str] = []
        self._walls: dict[str, float | None] = {}

    def _busy(self) -> bool:
        return self.active is not None and self.threads[self.active].is_alive()

    def start(self, spec: CaptureSpec, owner: str = "", max_wall_s: float | None = None) -> str:
        """Queue ``spec`` (started at once when nothing runs); the job id (unguessable)."""
        with self._lock:
            mine = [j for j in ([self.active] if self._busy() else []) + self.queue if owner and self.owners[j] == owner]
            if mine:
                raise CaptureBusy(f"a capture is already running for you (job {mine[0]}); wait for it or cancel it")
            job_id = secrets.token_hex(16)
            job = _RemoteJob(spec) if spec.backend == "hf-jobs" else CaptureJob(spec)
            self.jobs[job_id], self.owners[job_id], self._walls[job_id] = job, owner, max_wall_s
            if self._busy():
                self.queue.append(job_id)
            else:
                self._launch(job_id)
            return job_id

    def _launch(self, job_id: str) -> None:  # (lock held)
        t = threading.Thread(target=self._run, args=(job_id,), name=f"capture-{job_id[:8]}", daemon=True)
        self.threads[job_id], self.active = t, job_id
        t.start()

    def _run(self, job_id: str) -> None:
        job, wall = self.jobs[job_id], self._walls.get(job_id)
        timer = None
        if wall:
            timer = threading.Timer(wall, lambda: job.cancel(f"wall-clock limit of {wall:g} s reached", "timeout"))
            timer.daemon = True
            timer.start()
        try:
            job.run()
        finally:
            if timer is not None:
                timer.cancel()
            with self._lock:
                if self.active == job_id:
                    self.active = None
                while self.queue and not self._busy():
                    nxt = self.queue.pop(0)
                    if not getattr(self.jobs[nxt], "cancel_event", threading.Event()).is_set():
                        self._launch(nxt)

    def get(self, job_id: str | None):
        return self.jobs.get(job_id or "")

    def position(self, job_id: str | None) -> int:
        """1-based place in the queue (0: running or finished)."""
        with self._lock:
            return self.queue.index(job_id) + 1 if job_id in self.queue else 0

    def snapshot(self, job_id: str | None) -> dict[str, Any] | None:
        job = self.get(job_id)
        if job is None:
            return None
        snap = job.snapshot()
        pos = self.position(job_id)
        if pos:
            snap.update(status="queued", phase=f"waiting: position {pos} in the queue", position=pos)
        return snap

    def running(self, job_id: str | None) -> bool:
        """Running or waiting in the queue (the UI keeps polling)."""
        t = self.threads.get(job_id or "")
        return bool(t and t.is_alive()) or self.position(job_id) > 0

    def owner(self, job_id: str | None) -> str | None:
        return self.owners.get(job_id or "")

    def cancel(self, job_id: str | None, owner: str | None = None) -> bool:
        """Cancel ``job_id``; with ``owner`` given, only when that visitor started it."""
        job = self.get(job_id)
        if job is None:
            return False
        if owner is not None and self.owners.get(job_id or "", "") != owner:
            return False
        with self._lock:
            if job_id in self.queue:  # never started: nothing to stop
                self.queue.remove(job_id)
                job.cancel()
                job.mark_cancelled_before_start()
                return True
        job.cancel()
        return True

    def wait(self, job_id: str, timeout: float | None = None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.position(job_id):
            if deadline is not None and time.monotonic() > deadline:
                return
            time.sleep(0.05)
        t = self.threads.get(job_id)
        if t is not None:
            t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))

    def shutdown(self, timeout: float = 60.0) -> list[str]:
        """Cancel every running or waiting capture and wait for each to stop its processes and
        write its (incomplete) artefacts; the job ids that were live. Called when the app exits."""
        with self._lock:
            queued, self.queue = list(self.queue), []
            live = [j for j, t in self.threads.items() if t.is_alive()]
        for j in queued:
            self.jobs[j].cancel()
            self.jobs[j].mark_cancelled_before_start()
        for j in live:
            self.jobs[j].cancel()
        deadline = time.monotonic() + timeout
        for j in live:
            self.threads[j].join(max(0.0, deadline - time.monotonic()))
        return live + queued


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
