"""Handlers that answer in two steps: everything but the plots first, then the plots.

A 50k-token turn's token view is hoverable as soon as its payload is in the page, but the
plots (three plotly figures) take seconds to build and draw. A handler puts
:class:`Later` values in the slots of slow outputs; wrapped with :func:`staged` it becomes
an async generator that yields the fast values first (slow slots skipped) and then everything,
so the browser paints the tokens before the plots arrive. API clients see the final yield:
the same outputs as before.
"""
from __future__ import annotations

import asyncio
import functools
import inspect
import threading
import time
import typing
from typing import Any, Callable

import anyio
import gradio as gr

from ..memo import Miss, hits_only
from .fair import Busy, slot

__all__ = ["Later", "resolve", "staged", "DEFER_S"]

# Drawing the first plotly figure blocks the browser's main thread for ~2 s on a small machine (the
# library is compiled on first use). The plots are held back this long after the token view is sent,
# so the page paints the tokens and answers a hover before that block starts. The default of the
# VIEWER_PLOT_DEFER_S setting (an API client waits this long longer for its final answer).
DEFER_S = 0.4


class Later:
    """An output value computed only after the first answer went out."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], Any]):
        self.fn = fn


def resolve(values: list) -> list:
    """The values with every :class:`Later` computed (for callers that want one answer)."""
    return [v.fn() if isinstance(v, Later) else v for v in values]


def staged(fn: Callable[..., list], defer_s: float = DEFER_S, *, generator: bool = False,
           turn_only: bool = False, inline: bool = False, share: int = 0,
           busy: Callable[[str], list] | None = None) -> Callable[..., Any]:
    """``fn`` as a two-step async generator (one step when it returned no :class:`Later`); each
    step's work runs in a worker thread, as Gradio runs a plain handler (but see ``inline``).

    With ``defer_s`` 0 the plots come in the one answer, and ``fn`` is one coroutine, not a generator
    (unless ``generator``: a caller that ``async for``s it): Gradio sends a generator's answer
    twice (each yield as ``process_generating``, then the last one again as ``process_completed``),
    so a one-step generator cost the browser, the server and API clients every byte two times.

    A visitor who moves on before the second step (←/→ pressed twice in presenter mode) must
    not be sent back: every staged event of a browser session takes a number, and a second
    step that a newer event of the same session has overtaken is dropped. The session comes from Gradio's request, asked for through the signature.

    ``turn_only``: ``fn`` answers only the turn's outputs, which every staged event sets, so when a newer
    one has overtaken it before its first answer went out, it sends nothing at all. For an event that may
    run twice at once (``trigger_mode="multiple"``: ``n n`` in presenter mode), whose answers could
    otherwise arrive in the other order.

    ``inline``: each step is made on the server's event loop when every value it needs is
    already in the shared cache (``fn`` runs under :func:`viewer.memo.hits_only`), and
    in a worker thread, as any handler, only when one is not (a :class:`viewer.memo.Miss`). Only for
    handlers whose work before their first cache read is a lookup (opening a sample or a path,
    picking a turn): on a Miss ``fn`` runs again from the start. A turn switch on a shared link is
    ≈ 0.4 ms of work; handing it to a thread and back cost more than that, and with 16 visitors
    at once the hand-offs queued behind each other (docs/SPEED.md, room round six).

    ``share``: the first step holds one of its visitor's ``share`` slots (viewer/ui/fair.py, the
    ``session_events`` budget); a call past them answers ``busy(message)`` at once (0: no limit)."""
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    n_pos = sum(1 for q in params if q.kind in (q.POSITIONAL_ONLY, q.POSITIONAL_OR_KEYWORD))

    if defer_s <= 0 and not generator:
        @functools.wraps(fn)
        async def run(*args, **kwargs):  # the one-answer form: in a worker thread, as Gradio runs a plain handler
            request = None
            if len(args) > n_pos:  # the request: nothing to order without a second step
                *args, request = args
            try:
                with slot(request, share):
                    return await _made(inline, _answer, fn, tuple(args), kwargs)
            except Busy as e:
                return busy(str(e))
    else:
        # An async generator: its wait for the plots is the event loop's, not a worker thread held
        # asleep for defer_s (a room of visitors switching turns held one thread each).
        @functools.wraps(fn)
        async def run(*args, **kwargs):
            request = None
            if len(args) > n_pos:  # Gradio passed the request it was asked for (a direct call does not)
                *args, request = args
            session = getattr(request, "session_hash", None)
            ticket = _take_ticket(session)
            try:
                with slot(request, share):
                    values = await _made(inline, fn, *args, **kwargs)
            except Busy as e:
                yield busy(str(e))
                return
            if turn_only and _overtaken(session, ticket):
                yield [gr.skip()] * len(values)
                return
            if defer_s > 0 and any(isinstance(v, Later) for v in values):
                yield [gr.skip() if isinstance(v, Later) else v for v in values]
                t0 = time.monotonic()
                values = await _made(inline, resolve, values)  # built meanwhile; only the rest of the wait is slept
                await asyncio.sleep(max(0.0, defer_s - (time.monotonic() - t0)))
                if _overtaken(session, ticket):
                    # End on an answer that changes nothing: Gradio's completion message carries the
                    # last value yielded, and the first step's (this turn's tokens) would be drawn again
                    # over the newer event's answer (→ then ← flipped back to the turn left).
                    yield [gr.skip()] * len(values)
                    return
            elif any(isinstance(v, Later) for v in values):  # one step (defer_s 0): its plots made as the rest
                values = await _made(inline, resolve, values)
            yield values

    # Gradio injects a gr.Request into a positional parameter annotated with it (helpers.special_args)
    extra = inspect.Parameter("_ri_request", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None,
                              annotation=gr.Request)
    keep = [q for q in params if q.kind in (q.POSITIONAL_ONLY, q.POSITIONAL_OR_KEYWORD)]
    rest = [q for q in params if q not in keep]
    run.__signature__ = sig.replace(parameters=[*keep, extra, *rest])
    try:
        hints = typing.get_type_hints(fn)
    except (NameError, TypeError):
        hints = {}
    run.__annotations__ = {**hints, "_ri_request": gr.Request}
    return run


def _answer(fn: Callable[..., list], args: tuple, kwargs: dict) -> list:
    return resolve(fn(*args, **kwargs))


async def _made(inline: bool, fn: Callable[..., Any], *args, **kwargs) -> Any:
    """``fn(*args, **kwargs)`` in a worker thread, as Gradio runs any handler; with ``inline``, first on
    the event loop under :func:`viewer.memo.hits_only`, and in the thread only on a Miss."""
    if inline:
        try:
            with hits_only():
                return fn(*args, **kwargs)
        except Miss:  # something to make (or to wait for): where any handler does it
            pass
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))


_TICKETS: dict[str, int] = {}
_TICKETS_LOCK = threading.Lock()


def _take_ticket(session: str | None) -> int:
    if not session:
        return 0
    with _TICKETS_LOCK:
        n = _TICKETS.get(session, 0) + 1
        _TICKETS[session] = n
        if len(_TICKETS) > 10_000:  # sessions come and go: forget the oldest half
            for k in list(_TICKETS)[:5_000]:
                _TICKETS.pop(k, None)
        return n


def _overtaken(session: str | None, ticket: int) -> bool:
    if not session:
        return False
    with _TICKETS_LOCK:
        return _TICKETS.get(session, ticket) != ticket
