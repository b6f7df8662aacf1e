"""Helpers of the resource tests (tests/test_budgets*.py): public mode, a bounded call, memory.

Every attack is opened through an entry point a visitor uses (the store, the upload intake,
a Hub source through ``hub.use_filesystem``) in public mode, and must end within its budget
with a message naming the budget, leaving the process memory where it was.
"""
from __future__ import annotations

import ctypes
import gc
import os
import threading
import time
from typing import Any, Callable

from viewer.budgets import BUDGETS, env_name
from viewer.config import Settings


def public(monkeypatch, data_root, **budgets: float) -> Settings:
    """Public mode settings (env too: renders read their budgets from the environment), every
    VIEWER_BUDGET_* cleared except ``budgets``."""
    for b in BUDGETS:
        monkeypatch.delenv(env_name(b.name), raising=False)
    for k, v in budgets.items():
        monkeypatch.setenv(env_name(k), str(v))
    monkeypatch.setenv("VIEWER_PUBLIC", "1")
    monkeypatch.setenv("VIEWER_DATA_ROOT", str(data_root))
    return Settings.from_env()


def bounded(fn: Callable[[], Any], seconds: float) -> tuple[Any, BaseException | None, float]:
    """(result, exception, elapsed) of ``fn`` run in a thread; fails the test if it runs longer
    than ``seconds`` (the thread is left to finish on its own: a daemon)."""
    box: dict[str, Any] = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:  # the caller asserts on it
            box["error"] = e

    t0 = time.monotonic()
    th = threading.Thread(target=run, daemon=True)
    th.start()
    th.join(seconds)
    elapsed = time.monotonic() - t0
    assert not th.is_alive(), f"still running after {seconds} s: the work is not bounded"
    return box.get("value"), box.get("error"), elapsed


def rss_mb() -> float:
    """Resident memory of this process after a full collection and giving freed pages back."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass
    try:
        import pyarrow as pa

        pa.default_memory_pool().release_unused()
    except ImportError:
        pass
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def arrow_mb() -> float:
    """Bytes held by pyarrow's memory pool (decoded row groups live there, not in Python's heap)."""
    gc.collect()
    import pyarrow as pa

    return pa.total_allocated_bytes() / 1048576


def message_of(err: BaseException | None) -> str:
    assert err is not None, "the attack was accepted: no error"
    return str(err)


def mem_margin_mb() -> float:
    return float(os.environ.get("BUDGET_TEST_MEM_MARGIN_MB", "64"))
