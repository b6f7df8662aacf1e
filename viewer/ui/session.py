"""A long run's Cancel (a drift scan, a rescore), held by the visitor's own session, never by a server table.

(A handler reads a session's State only as one of its event's inputs, Gradio's public route: the events
that show a turn take the visitor's view settings so, ``viewer.ui.rescores.as_visitor``.)

The "new run" events (the Scan and Rescore buttons' first step) are unqueued (``queue=False``), so any
visitor may call them as often as they like. They kept each run's cancel event in a server-wide dict
of the newest 64: 70 calls by another visitor pushed a running scan out of it, and its owner's Cancel
then said "No scan running." while the scan kept the one long-work slot (issue 36). Now a new run is
a :class:`Run` returned into the session's ``gr.State``: only that session holds it (another session
can neither reach nor evict it), and making one keeps nothing on the server. The run's handler takes
it from the same State and marks it finished when it ends. No work starts in the unqueued event.
"""
from __future__ import annotations

import threading
import uuid
from typing import Any

import gradio as gr

__all__ = ["Run", "run_of", "start_run", "button_on"]


class Run:
    """One run of a long task: its id (what its results are kept under) and its Cancel."""

    __slots__ = ("id", "cancel", "done")

    def __init__(self) -> None:
        self.id = uuid.uuid4().hex[:12]
        self.cancel = threading.Event()
        self.done = False

    def __deepcopy__(self, memo: dict) -> "Run":
        return self  # a handle: a copy would cancel nothing

    def stop(self) -> bool:
        """Ask the run to stop; False when it has already ended (nothing to cancel)."""
        if self.done:
            return False
        self.cancel.set()
        return True

    def finish(self) -> None:
        self.done = True


def run_of(value: Any) -> Run | None:
    """The session State's run, or None (nothing started, or a value that is not a run)."""
    return value if isinstance(value, Run) else None



def start_run() -> list:
    """A long run's button, first step: a new :class:`Run` for the session's State, and the button off until
    :func:`button_on` (its last step). A second click while it ran replaced the session's run, so Cancel stopped
    the queued second run while the first went on to its end."""
    return [Run(), gr.update(interactive=False)]


def button_on() -> Any:
    """A long run's button, last step (a ``.then``: it runs whether or not the run failed): on again."""
    return gr.update(interactive=True)
