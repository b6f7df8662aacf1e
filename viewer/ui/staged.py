"""Handlers that answer in two steps: everything but the plots first, then the plots.

A 50k-token turn's token view is hoverable as soon as its payload is in the page, but the
plots (three plotly figures) take seconds to build and draw. A handler puts
:class:`Later` values in the slots of slow outputs; wrapped with :func:`staged` it becomes
an async generator that yields the fast values first (slow slots skipped) and then everything,
so the browser paints the tokens before the plots arrive. API clients see the final yield:
the same outputs as before.

Read :func:`staged` top down: it picks one of two shapes (one answer, or answers), each a few
named steps below it. Three things stay ours, not Gradio's, and each says why where it is:

* the two steps are one event, not an event and a ``.then()``: an API client's call (``select_turn``)
  returns the plots with the tokens, and a turn switch stays one queue round trip;
* :data:`ORDER`, the newest staged event of each browser session: Gradio orders one trigger's
  own events (``trigger_mode``) but not different triggers' (open a rollout, then → before the
  plots came), and ``cancels=`` would list every staged event in every other's; so a second step
  that a newer event overtook is dropped here (and :data:`PRESSES`: a key press older than one its page
  numbered since, whose request arrived last);
* the wrapper's signature is ``fn``'s plus a ``gr.Request`` parameter (:func:`_asking_for_request`):
  Gradio hands a handler the request only through a parameter annotated with it (public API), and
  :data:`ORDER` and :func:`viewer.ui.fair.slot` need the visitor's session.
"""
from __future__ import annotations

import asyncio
import functools
import inspect
import threading
import time
import typing
from typing import Any, AsyncIterator, Callable

import anyio
import gradio as gr

from ..memo import Miss, hits_only
from .fair import Busy, slot

__all__ = ["Later", "resolve", "staged", "DEFER_S", "ORDER", "PRESSES"]

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


class SessionOrder:
    """Which staged event of each browser session is the newest: each event takes a number when it
    starts, and one whose number is no longer its session's last was overtaken. Events without a
    session (a direct call) take 0 and are never overtaken."""

    _FORGET_PAST = 10_000  # sessions come and go: past this many, the oldest half is forgotten

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[str, int] = {}

    def take(self, session: str | None) -> int:
        if not session:
            return 0
        with self._lock:
            return self._remember(session, self._last.get(session, 0) + 1)

    def _remember(self, session: str, n: int) -> int:
        """(under the lock)"""
        self._last[session] = n
        if len(self._last) > self._FORGET_PAST:
            for k in list(self._last)[:self._FORGET_PAST // 2]:
                del self._last[k]
        return n

    def overtaken(self, session: str | None, n: int) -> bool:
        if not session:
            return False
        with self._lock:
            return self._last.get(session, n) != n


class PagePresses(SessionOrder):
    """The newest key press each page numbered (talk.js numbers n, N, → and ←). Two presses' requests can
    reach the server in either order (each is its own HTTP request), and :data:`ORDER` numbers events as
    they arrive: the older press, arriving last, was the one answered (``n n``: the tokens on the second
    note, the callout on the third). A press older than one already seen is stale: it answers nothing."""

    def stale(self, session: str | None, press: Any) -> bool:
        if not session or type(press) is not int:  # (a page that numbers nothing: arrival order decides)
            return False
        with self._lock:
            if press <= self._last.get(session, 0):
                return True
            self._remember(session, press)
            return False


ORDER = SessionOrder()
PRESSES = PagePresses()


def staged(fn: Callable[..., list], defer_s: float = DEFER_S, *, generator: bool = False,
           turn_only: bool = False, inline: bool = False, share: int = 0,
           busy: Callable[[str], list] | None = None,
           press: tuple[Callable[[tuple], Any], int] | None = None) -> Callable[..., Any]:
    """``fn`` as a two-step async generator (one step when it returned no :class:`Later`); each
    step's work runs in a worker thread, as Gradio runs a plain handler (but see ``inline``).

    With ``defer_s`` 0 the plots come in the one answer, and ``fn`` is one coroutine, not a generator
    (unless ``generator``: a caller that ``async for``s it): Gradio sends a generator's answer
    twice (each yield as ``process_generating``, then the last one again as ``process_completed``),
    so a one-step generator cost the browser, the server and API clients every byte two times.

    A visitor who moves on before the second step (←/→ pressed twice in presenter mode) must
    not be sent back: a second step that a newer staged event of the same session has overtaken
    (:data:`ORDER`) sends nothing.

    ``turn_only``: ``fn`` answers only the turn's outputs, which every staged event sets, so when a newer
    one has overtaken it before its first answer went out, it sends nothing at all. For an event that may
    run twice at once (``trigger_mode="multiple"``: ``n n`` in presenter mode), whose answers could
    otherwise arrive in the other order.

    ``inline``: each step is made on the server's event loop when every value it needs is already in
    the shared cache, and in a worker thread, as any handler, only when one is not; on a Miss ``fn``
    runs again from the start. What such a handler may do is :func:`viewer.memo.hits_only`'s rule.
    A turn switch on a shared link is ≈ 0.4 ms of work; handing it to a thread and back cost more than
    that, and with 16 visitors at once the hand-offs queued behind each other (docs/SPEED.md, room
    round six).

    ``share``: the first step holds one of its visitor's ``share`` slots (viewer/ui/fair.py, the
    ``session_events`` budget); a call past them answers ``busy(message)`` at once (0: no limit).

    ``press``: (the page's number for the key press that sent the inputs, read from them; how many
    outputs there are): a press older than one of its page's already seen (:data:`PRESSES`) answers
    nothing and ``fn`` does not run."""
    n_in = _positional_count(fn)

    if defer_s <= 0 and not generator:
        async def run(*args, **kwargs):
            inputs, request = _split_request(args, n_in)
            if _stale(press, inputs, request):
                return [gr.skip()] * press[1]
            try:
                with slot(request, share):
                    return await _made(inline, _answer, fn, inputs, kwargs)
            except Busy as e:
                return busy(str(e))
    else:
        # An async generator: its wait for the plots is the event loop's, not a worker thread held
        # asleep for defer_s (a room of visitors switching turns held one thread each).
        async def run(*args, **kwargs):
            inputs, request = _split_request(args, n_in)
            if _stale(press, inputs, request):
                yield [gr.skip()] * press[1]
                return
            async for answer in _answers(fn, inputs, kwargs, request, defer_s, turn_only, inline, share, busy):
                yield answer

    return _asking_for_request(functools.wraps(fn)(run), fn)


def _stale(press: tuple[Callable[[tuple], Any], int] | None, inputs: tuple, request: Any) -> bool:
    return press is not None and PRESSES.stale(getattr(request, "session_hash", None), press[0](inputs))


async def _answers(fn: Callable[..., list], args: tuple, kwargs: dict, request: Any, defer_s: float,
                   turn_only: bool, inline: bool, share: int, busy: Callable[[str], list] | None
                   ) -> AsyncIterator[list]:
    """The generator form's answers: the first step, then (defer_s later) the plots, unless overtaken."""
    session = getattr(request, "session_hash", None)
    n = ORDER.take(session)
    try:
        with slot(request, share):
            values = await _made(inline, fn, *args, **kwargs)
    except Busy as e:
        yield busy(str(e))
        return
    if turn_only and ORDER.overtaken(session, n):
        yield _nothing(values)
        return
    if not any(isinstance(v, Later) for v in values):
        yield values
    elif defer_s <= 0:  # one step (a generator's caller with no wait): its plots made as the rest
        yield await _made(inline, resolve, values)
    else:
        yield [gr.skip() if isinstance(v, Later) else v for v in values]
        values = await _plots_after(defer_s, inline, values)
        # Overtaken: end on an answer that changes nothing. Gradio's completion message carries the last
        # value yielded, and the first step's (this turn's tokens) would be drawn again over the newer
        # event's answer (→ then ← flipped back to the turn left).
        yield _nothing(values) if ORDER.overtaken(session, n) else values


async def _plots_after(defer_s: float, inline: bool, values: list) -> list:
    """``values`` resolved, no sooner than ``defer_s`` from now (built meanwhile: only the rest is slept)."""
    t0 = time.monotonic()
    values = await _made(inline, resolve, values)
    await asyncio.sleep(max(0.0, defer_s - (time.monotonic() - t0)))
    return values


def _nothing(values: list) -> list:
    return [gr.skip()] * len(values)


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


def _positional_count(fn: Callable) -> int:
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(1 for q in inspect.signature(fn).parameters.values() if q.kind in kinds)


def _split_request(args: tuple, n_in: int) -> tuple[tuple, Any]:
    """``fn``'s inputs and the request after them: Gradio passes the request it was asked for (see
    :func:`_asking_for_request`), a direct call may pass it last or not at all."""
    return (args[:n_in], args[n_in]) if len(args) > n_in else (args, None)


def _asking_for_request(run: Callable, fn: Callable) -> Callable:
    """``run`` told to Gradio as ``fn``'s parameters plus a ``gr.Request`` one after its positional ones.

    Gradio reads a handler's parameters with ``inspect.signature`` (which honours ``__signature__``)
    and its type hints, and passes the request to a positional parameter annotated ``gr.Request``."""
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    n_in = _positional_count(fn)
    request = inspect.Parameter("_ri_request", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None,
                                annotation=gr.Request)
    run.__signature__ = sig.replace(parameters=[*params[:n_in], request, *params[n_in:]])
    try:
        hints = typing.get_type_hints(fn)
    except (NameError, TypeError):
        hints = {}
    run.__annotations__ = {**hints, "_ri_request": gr.Request}
    return run
