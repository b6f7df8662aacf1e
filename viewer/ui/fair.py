"""A fair share per visitor: at most a few heavy events in flight per session and per signed-in account.

Issue 36, finding 5: eight clients each kept two *Apply tokenizer* calls running on their own upload,
each a whole re-parse in the shared browse group, and another visitor's sample open went from 0.42 s
to 9.4 s. Gradio's concurrency limits are per event, shared by everyone: nothing kept one visitor to
their share. Here every heavy event (an open, an upload, a tokenizer change, a row of a file, a
comparison, a Certify) takes a slot of its visitor's before it starts work: at most the
``session_events`` budget (public mode: 2; a local app: no limit) per browser session, and the same
number per signed-in account (a visitor with many tabs is still one visitor). A call past it is
answered at once, "busy, try again", without queueing behind the visitor's own work. An unqueued event
that could start work is gated the same way (``queue=False`` is no way around it).

The one mechanism: :data:`FAIR` and :func:`slot`, taken by :func:`viewer.ui.staged.staged` (``share``: the
browse opens) and by compare_tab.py and template_tab.py; the visitor is the ``gr.Request`` Gradio hands a
handler that asks for it (public API). What still waits is bounded by Gradio's public ``queue(max_size=...)`` (the
``queue_size`` budget): past it a new event is refused with Gradio's "queue is full".
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Fair", "FAIR", "Busy", "slot", "request_keys"]


class Busy(Exception):
    """The visitor already has their share of heavy events running (the message is for them)."""


def request_keys(request: Any) -> list[str]:
    """Who an event is from: its browser session and, when signed in, its account."""
    keys = []
    session = getattr(request, "session_hash", None)
    if session:
        keys.append("s:" + str(session))
    user = getattr(request, "username", None)
    if user:
        keys.append("u:" + str(user))
    return keys


class Fair:
    """Heavy events in flight per key (a session, an account); keys with none running are forgotten."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[str, int] = {}

    def running(self, key: str) -> int:
        with self._lock:
            return self._running.get(key, 0)

    def enter(self, keys: list[str], limit: int) -> list[str]:
        """Take a slot under every key, or raise :class:`Busy` taking none. Returns what to :meth:`leave`."""
        if limit <= 0 or not keys:
            return []
        with self._lock:
            if any(self._running.get(k, 0) >= limit for k in keys):
                raise Busy(f"Busy: you already have {limit} heavy action{'s' if limit != 1 else ''} running "
                           "(opening, uploading, a tokenizer change, a comparison or a Certify); try again when "
                           "one has finished. This public app keeps each visitor within the session_events budget.")
            for k in keys:
                self._running[k] = self._running.get(k, 0) + 1
        return keys

    def leave(self, keys: list[str]) -> None:
        with self._lock:
            for k in keys:
                n = self._running.get(k, 0) - 1
                if n > 0:
                    self._running[k] = n
                else:
                    self._running.pop(k, None)


FAIR = Fair()


@contextmanager
def slot(request: Any, limit: int) -> Iterator[None]:
    """Hold one of the slots of ``request``'s visitor (its session, its account) while the block runs;
    :class:`Busy` at once when they are all taken (``limit`` 0: no limit). ``request`` is the
    ``gr.Request`` Gradio gives a handler that asks for one (public API: a parameter annotated with it)."""
    held = FAIR.enter(request_keys(request), limit) if limit > 0 else []
    try:
        yield
    finally:
        FAIR.leave(held)
