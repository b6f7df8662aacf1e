"""Running a coroutine from a test, whatever ran before it on this pytest process.

Once a browser test has run in a process (an xdist worker takes tests of many files), the session's
Playwright (sync API) keeps an event loop running in the main thread, and ``asyncio.run`` refuses to
start there ("cannot be called from a running event loop"). A serial run ordered the files so that it
never showed. The coroutine runs in a thread of its own, with its own loop.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any, Coroutine


def run(coro: Coroutine[Any, Any, Any], timeout: float = 300) -> Any:
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result(timeout=timeout)


def where() -> str:
    """Where the caller runs: "event loop" (a coroutine's own thread) or "thread" (a worker's)."""
    try:
        asyncio.get_running_loop()
        return "event loop"
    except RuntimeError:
        return "thread"
