"""Process helpers: nothing a capture starts outlives it.

Every process a capture starts (:func:`popen`) lives in its own session and carries an
environment marker ``ROLLOUT_INSPECTOR_PROC=<capture tag>/<spawn id>``, which every child
inherits — also one that leaves the process group (``setsid sleep 600 &`` in an agent's
bash tool) or is re-parented to PID 1. :func:`stop_group` stops the group (TERM, then
KILL) and then every process still carrying that spawn's marker; :func:`marked` finds them
by scanning ``/proc``, whoever their parent is now (the tests' orphan check uses it too).
"""
from __future__ import annotations

import contextvars
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["MARK", "capture_tag", "current_tag", "new_mark", "mark_env", "popen", "marked", "kill_marked", "stop_group",
           "descendants", "wait_group_gone"]

MARK = "ROLLOUT_INSPECTOR_PROC"
_TAG: contextvars.ContextVar[str] = contextvars.ContextVar("rollout_inspector_capture_tag", default="")


@contextmanager
def capture_tag(tag: str) -> Iterator[str]:
    """Processes spawned inside this block (this thread) are marked as the capture ``tag``'s."""
    token = _TAG.set(tag)
    try:
        yield tag
    finally:
        _TAG.reset(token)


def current_tag() -> str:
    return _TAG.get() or "adhoc"


def new_mark() -> str:
    """A fresh marker ``<capture tag>/<spawn id>``."""
    return f"{current_tag()}/{uuid.uuid4().hex[:12]}"


def mark_env(env: dict[str, str] | None = None, mark: str | None = None) -> dict[str, str]:
    """``env`` (default: ours) plus the marker ``mark`` (default: a fresh one)."""
    out = dict(os.environ if env is None else env)
    out[MARK] = mark or new_mark()
    return out


def popen(cmd, *, env: dict[str, str] | None = None, mark: str | None = None, **kw) -> subprocess.Popen:
    """``subprocess.Popen`` in a new session with a marker; ``proc.ri_mark`` holds it. ``mark``:
    one the caller already placed in the command (a sandbox's ``--setenv``), else a fresh one."""
    e = mark_env(env, mark)
    proc = subprocess.Popen(cmd, env=e, start_new_session=True, **kw)
    proc.ri_mark = e[MARK]  # type: ignore[attr-defined]
    return proc


def _environ_mark(pid: int) -> str | None:
    try:
        data = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    key = MARK.encode() + b"="
    for item in data.split(b"\0"):
        if item.startswith(key):
            return item[len(key):].decode(errors="replace")
    return None


def _state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "X"
    return stat[stat.rfind(")") + 2:].split()[0]


def marked(prefix: str = "") -> dict[int, str]:
    """Live processes whose marker starts with ``prefix`` (all marked ones for ""): pid → marker."""
    me = os.getpid()
    out: dict[int, str] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == me:
            continue
        m = _environ_mark(int(d.name))
        if m is not None and m.startswith(prefix) and _state(int(d.name)) not in ("Z", "X"):
            out[int(d.name)] = m
    return out


def kill_marked(prefix: str, grace: float = 3.0) -> list[int]:
    """TERM every process marked ``prefix``…, KILL what is left after ``grace`` s; the pids found."""
    if not prefix:
        raise ValueError("kill_marked needs a marker prefix (never every marked process)")
    found = list(marked(prefix))
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 2.0)):
        pids = list(marked(prefix))
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + wait
        while marked(prefix) and time.monotonic() < deadline:
            time.sleep(0.1)
    return found


def _ppid_map() -> dict[int, int]:
    out: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        rest = stat[stat.rfind(")") + 2:].split()
        if len(rest) > 2 and rest[0] != "Z":
            out[int(d.name)] = int(rest[1])
    return out


def descendants(pid: int | None = None) -> list[int]:
    """Live (non-zombie) descendant pids of ``pid`` (default: this process)."""
    pid = os.getpid() if pid is None else pid
    m = _ppid_map()
    kids: dict[int, list[int]] = {}
    for c, p in m.items():
        kids.setdefault(p, []).append(c)
    out, stack = [], [pid]
    while stack:
        for c in kids.get(stack.pop(), []):
            out.append(c)
            stack.append(c)
    return out


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def wait_group_gone(pgid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _group_alive(pgid):
            return True
        time.sleep(0.1)
    return not _group_alive(pgid)


def stop_group(proc: subprocess.Popen | None, grace: float = 10.0) -> None:
    """TERM the process group of ``proc`` (started with ``start_new_session=True``), then KILL;
    then every process that still carries ``proc``'s marker (started by :func:`popen`)."""
    if proc is None:
        return
    try:
        _stop_group(proc, grace)
    finally:
        mark = getattr(proc, "ri_mark", None)
        if mark:
            kill_marked(mark, grace=min(grace, 3.0))


def _stop_group(proc: subprocess.Popen, grace: float) -> None:
    pgid = proc.pid
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass
    if not wait_group_gone(pgid, 1.0 if proc.returncode is not None else 0.1):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    wait_group_gone(pgid, 5.0)
