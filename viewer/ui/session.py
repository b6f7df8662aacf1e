"""What a visitor's own session holds, read and made here: its State values, and a long run's Cancel.

:func:`session_value` reads the value a ``gr.State`` holds for the visitor whose event is running (a
handler that does not take that State as an input: a turn switch reading the visitor's view settings).

A long run's Cancel (a drift scan, a rescore) is held by the visitor's own session, never by a server table.

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

__all__ = ["Run", "run_of", "session_value"]


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


def session_value(state) -> Any:
    """The value the visitor whose event is running holds in ``state`` (a ``gr.State``: the session's own,
    kept by Gradio per session), or None outside an event. For a handler that does not take the State
    as an input (a turn switch reading the visitor's view settings)."""
    from gradio.context import LocalContext

    if state is None:
        return None
    blocks, request = LocalContext.blocks.get(None), LocalContext.request.get(None)
    session = getattr(request, "session_hash", None)
    holder = getattr(blocks, "state_holder", None)
    if holder is None or not session or session not in holder:
        return None
    return holder[session].get(state._id)
