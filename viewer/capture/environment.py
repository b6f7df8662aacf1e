"""The capture environment, installed when a capture first needs it.

Browsing needs none of it, so ``make app`` installs only the viewer; the first local or
endpoint capture on a machine installs the rest with ``scripts/setup_capture.sh`` (the vLLM
environment ``.venv-vllm``, about 3.5 GB, and the pinned opencode binary; idempotent and
stamped, the same script ``make setup`` and CI run). Its output streams into the capture's
log, so the Capture tab shows progress, and Cancel stops it (the script runs as a marked
process group, like everything a capture starts).
"""
from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from viewer.capture.agent import find_opencode
from viewer.capture.backends import BackendError, CaptureCancelled, vllm_python
from viewer.capture.models import repo_root
from viewer.capture.procs import popen, stop_group

__all__ = ["missing", "install", "SETUP_SCRIPT"]

SETUP_SCRIPT = Path("scripts") / "setup_capture.sh"


def missing(backend: str, vllm_python_path: str = "", opencode_bin: str = "") -> list[str]:
    """What a capture on ``backend`` needs and this machine lacks (empty: ready)."""
    out = []
    if backend == "local":
        try:
            vllm_python(vllm_python_path)
        except BackendError:
            out.append("the vLLM environment (.venv-vllm)")
    if backend in ("local", "endpoint"):
        try:
            find_opencode(opencode_bin)
        except FileNotFoundError:
            out.append("the opencode agent")
    return out


def install(log: Callable[[str], None], cancel: threading.Event | None = None,
            script: Path | None = None, timeout_s: float = 3600.0, quiet_s: float = 15.0) -> None:
    """Run the capture set-up script, each output line to ``log``; CaptureCancelled when
    ``cancel`` is set (the script's whole process group is stopped), BackendError on failure.
    A pip or npm install prints nothing for minutes: after ``quiet_s`` without a line, ``log`` gets the
    time spent so far (and again every ``quiet_s``), so a long install never looks stuck."""
    path = script or (repo_root() / SETUP_SCRIPT)
    t0 = time.monotonic()
    proc = popen(["bash", str(path)], cwd=str(repo_root()), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                 stderr=subprocess.STDOUT, text=True, bufsize=1)
    tail: list[str] = []
    last_line = [t0]
    done = threading.Event()
    timed_out = threading.Event()

    def watch() -> None:  # cancel / time limit / heartbeat, while the main loop blocks reading lines
        deadline = t0 + timeout_s
        while not done.wait(0.2):
            now = time.monotonic()
            if now - last_line[0] >= quiet_s:
                last_line[0] = now
                log(f"setup: still installing, {now - t0:.0f} s so far (the step above prints nothing until done)")
            late = now > deadline
            if late or (cancel is not None and cancel.is_set()):
                if late:
                    timed_out.set()
                stop_group(proc, grace=5.0)
                return

    threading.Thread(target=watch, daemon=True, name="capture-setup-watch").start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip()
            if line:
                last_line[0] = time.monotonic()
                tail = (tail + [line])[-20:]
                log(f"setup: {line}")
        rc = proc.wait()
    finally:
        done.set()
        if proc.poll() is None:
            stop_group(proc, grace=5.0)
    if cancel is not None and cancel.is_set():
        raise CaptureCancelled("cancelled while installing the capture environment")
    if timed_out.is_set():
        raise BackendError(f"installing the capture environment took over {timeout_s:.0f} s; stopped")
    if rc != 0:
        raise BackendError(f"installing the capture environment failed (exit {rc}): " + " | ".join(tail[-5:]))


def ensure(spec, log: Callable[[str], None], cancel: threading.Event | None = None) -> None:
    """Install what ``spec``'s backend lacks (when ``spec.auto_setup``), else say how to."""
    need = missing(spec.backend, spec.vllm_python, spec.opencode_bin)
    if not need:
        return
    if not spec.auto_setup:
        raise BackendError(f"{' and '.join(need)} not installed: run `make setup` (or bash {SETUP_SCRIPT})")
    log(f"installing {' and '.join(need)}: the first capture on this machine, a few minutes, once")
    install(log, cancel)
