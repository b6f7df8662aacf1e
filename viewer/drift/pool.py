"""The drift scan's chunks on every core: worker processes forked with the tokenizer in memory.

A chunk's work (batch decode + encode, template renders, aligned diffs, the trainer's rows) is
CPU-bound Python and Rust; one process uses one core. :class:`ChunkPool` forks ``workers``
processes that inherit the tokenizer and its token table from the parent (nothing is loaded or
pickled per worker), sends them chunks of rollouts (packed columns pickle as bytes) and yields
each chunk's per-turn records and partial totals **in submission order**, so merging them gives
exactly the serial scan's result. At most ``2 * workers`` chunks are in flight: memory stays
bounded by the chunk, as in the serial scan. Workers are single-threaded tokenizers (two cores
are used by two processes, not by four threads) and are ended when the pool closes, cancelled
or not (no orphans); each starts its own chat-template render workers
(:mod:`viewer.tokenizer.render_worker` resets its state in a forked child). Only a process with
no other thread forks (:func:`can_fork`).
"""
from __future__ import annotations

import gc
import multiprocessing as mp
import os
import signal
import threading
from collections import deque
from contextlib import contextmanager
from typing import Any, Callable, Iterator

__all__ = ["ChunkPool", "default_workers", "can_fork", "STATS"]

# what the forked worker runs with: set in the parent right before the fork, inherited
_STATE: dict[str, Any] = {}
STATS = {"pools": 0}  # pools started in this process (tests check the workers really ran)
_FORKING = threading.Lock()  # two scans at once (two visitors) must not fork with each other's function


def default_workers() -> int:
    """One per CPU this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def can_fork() -> bool:
    """Whether this process may fork the workers: the platform has fork, and no other Python thread
    runs (a lock one held at the fork would stay held in the child for ever). The command line and
    the benches qualify; the app, a threaded server, scans in process as before."""
    return "fork" in mp.get_all_start_methods() and threading.active_count() == 1


@contextmanager
def _fork_signals() -> Iterator[None]:
    """The workers are born with SIGTERM at its default and Ctrl-C ignored (the parent's handlers are
    back as soon as they are forked). The pool ends its workers with SIGTERM; a handler inherited from
    the parent (a command's own, such as the capture CLI's, which raises KeyboardInterrupt) would run
    in the worker instead, mid-way through the pool's shared queue lock, and the other worker then
    waited on that lock for ever (a hung test run). Set in the parent around the fork, not in the
    worker's initializer: a worker ended before it first ran would still have had the old handler.
    Ctrl-C reaches the whole process group: the parent cancels and ends the workers."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set them
        yield
        return
    old = {sig: signal.signal(sig, h) for sig, h in ((signal.SIGTERM, signal.SIG_DFL), (signal.SIGINT, signal.SIG_IGN))}
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


def _run(chunk: list[Any]) -> Any:
    return _STATE["fn"](chunk)


@contextmanager
def _tokenizers_serial() -> Iterator[None]:
    """Forked children must not use the tokenizers library's thread pool (its threads are not
    copied by fork: it would hang); with the variable set it neither does nor warns about it."""
    old = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = old


class ChunkPool:
    """``fn(chunk)`` for each chunk, in ``workers`` forked processes; results in order."""

    def __init__(self, fn: Callable[[list[Any]], Any], workers: int):
        with _FORKING, _tokenizers_serial(), _fork_signals():
            STATS["pools"] += 1
            _STATE["fn"] = fn
            # what the workers inherit (rollouts, tokenizer, token table, render cache) is kept out of
            # their garbage collector: otherwise each full collection walks all of it, touching (and so
            # copying) every page of the parent's heap in every worker
            gc.freeze()
            try:
                self._pool = mp.get_context("fork").Pool(workers)  # the workers are forked here, fn in them
            finally:
                gc.unfreeze()
            _STATE.clear()
        self.workers = workers
        self._pending: deque = deque()

    def submit(self, chunk: list[Any]) -> Iterator[Any]:
        """Queue ``chunk``; yields the results that are due (the oldest, once too many are in flight)."""
        self._pending.append(self._pool.apply_async(_run, (chunk,)))
        while len(self._pending) > 2 * self.workers:
            yield self._pending.popleft().get()

    def drain(self) -> Iterator[Any]:
        while self._pending:
            yield self._pending.popleft().get()

    def close(self) -> None:
        self._pool.terminate()
        self._pool.join()
