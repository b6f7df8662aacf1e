"""Background captures for the app, looked up by job id.

Local and endpoint captures use this machine (vLLM, the agent): one at a time, the others in a
FIFO queue. hf-jobs captures run on the visitor's Hugging Face account and use no server CPU:
they start at once, outside that queue, and are limited per account instead (budget
``captures_per_account``, counted over both kinds).

No gradio here: the UI starts a job, polls :meth:`CaptureRunner.snapshot` from a timer,
and re-attaches with ``?job=<id>``. The registry is a cache, pruned (at most ``keep_finished``
finished jobs, each for ``finished_ttl_s``); the artefact folder on disk is the record. A job's
token (a visitor's sign-in) is dropped from memory as soon as the job ends.
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


def _forget_token(job: Any) -> None:
    """Drop the job's token (a visitor's sign-in or typed token) once it has ended: what it says
    about its error is redacted first, then the spec keeps no secret in this long-lived registry."""
    redact = getattr(job, "redact", None)
    if redact is not None and getattr(job, "error", None):
        job.error = redact(job.error)
    job.spec.token = ""


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

    def __init__(self, keep_finished: int = 64, finished_ttl_s: float = 3600.0) -> None:
        self.keep_finished, self.finished_ttl_s = keep_finished, finished_ttl_s
        self._ended: dict[str, float] = {}  # job id -> when it ended (for pruning)
        self._lock = threading.Lock()
        self.jobs: dict[str, Any] = {}
        self.threads: dict[str, threading.Thread] = {}
        self.active: str | None = None
        self.owners: dict[str, str] = {}
        self.queue: list[str] = []
        self._walls: dict[str, float | None] = {}

    def _busy(self) -> bool:
        return self.active is not None and self.threads[self.active].is_alive()

    def _live(self, job_id: str) -> bool:  # (lock held) running or queued
        t = self.threads.get(job_id)
        return job_id in self.queue or bool(t and t.is_alive())

    def start(self, spec: CaptureSpec, owner: str = "", max_wall_s: float | None = None) -> str:
        """Queue ``spec`` (started at once when nothing runs, or when it runs remotely); the job id
        (unguessable). Raises CaptureBusy when ``owner`` is at its limit of live captures."""
        from viewer.config import Settings

        with self._lock:
            self._prune()
            mine = [j for j in self.jobs if owner and self.owners.get(j) == owner and self._live(j)]
            per_account = int(Settings.from_env().limits().captures_per_account or 1)  # 0 = one per visitor
            if len(mine) >= per_account:
                raise CaptureBusy(f"a capture is already running for you (job {mine[0]}); wait for it or cancel it "
                                  f"(at most {per_account} per account)")
            job_id = secrets.token_hex(16)
            remote = spec.backend == "hf-jobs"
            job = _RemoteJob(spec) if remote else CaptureJob(spec)
            self.jobs[job_id], self.owners[job_id], self._walls[job_id] = job, owner, max_wall_s
            if remote:  # runs on the visitor's account: never waits for, nor holds, the local slot
                self._launch(job_id, local=False)
            elif self._busy():
                self.queue.append(job_id)
            else:
                self._launch(job_id)
            return job_id

    def _launch(self, job_id: str, local: bool = True) -> None:  # (lock held)
        t = threading.Thread(target=self._run, args=(job_id,), name=f"capture-{job_id[:8]}", daemon=True)
        self.threads[job_id] = t
        if local:
            self.active = job_id
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
            _forget_token(job)
            with self._lock:
                self._ended[job_id] = time.time()
                if self.active == job_id:
                    self.active = None
                while self.queue and not self._busy():
                    nxt = self.queue.pop(0)
                    if not getattr(self.jobs[nxt], "cancel_event", threading.Event()).is_set():
                        self._launch(nxt)
                    else:
                        self._ended[nxt] = time.time()
                self._prune()

    def _prune(self) -> None:  # (lock held)
        """Forget finished jobs past the TTL, and the oldest beyond ``keep_finished`` (their folders stay)."""
        now = time.time()
        done = sorted((t, j) for j, t in self._ended.items() if not self._live(j))
        drop = {j for t, j in done if now - t > self.finished_ttl_s}
        keep = [j for _t, j in done if j not in drop]
        drop.update(keep[:max(0, len(keep) - self.keep_finished)])
        for j in drop:
            for d in (self.jobs, self.threads, self.owners, self._walls, self._ended):
                d.pop(j, None)

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
                _forget_token(job)
                self._ended[job_id] = time.time()
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
            _forget_token(self.jobs[j])
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
