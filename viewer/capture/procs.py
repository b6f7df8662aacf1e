"""Process-group helpers: every process a capture starts lives in its own session, and
is stopped by group (TERM, then KILL), so nothing outlives the capture."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

__all__ = ["stop_group", "descendants", "wait_group_gone"]


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
    """TERM the process group of ``proc`` (started with ``start_new_session=True``), then KILL."""
    if proc is None:
        return
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
