"""The latest rescore of each open rollout (by store key), shared by the Tokens screen's token
view (which adds the ``delta`` colour mode when one exists) and the rescore panel.

The result is the same numbers for everyone; how a visitor looks at it (the importance-sampling
mode and bounds the token view marks and the ratio histogram draws) is theirs alone: it lives in
their session (``Browse.view``, a ``gr.State``) and is applied when a view is made (:func:`seen`), never
stored with the shared result. Issue 36: it was, so one visitor's choice changed every visitor's Δ marks.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Callable

from ..rescore import importance as IS

__all__ = ["get", "put", "forget", "stamp", "origin", "same_run", "DEFAULT_CHOICE", "choice_of", "view_value", "choosing",
           "choice_now", "view_stamp", "as_visitor", "seen"]

_SIZE = 16  # rescores kept (each holds a few floats per trained token)
_RESULTS: OrderedDict[str, Any] = OrderedDict()
_LOCK = threading.Lock()
_STAMPS: dict[str, int] = {}  # key -> number of the rescore last put (0: none): cached views key on it
_COUNT = 0
_ORIGIN: dict[str, tuple[str | None, float]] = {}  # key -> (session that ran it, when): others are told it is cached
_ASKED: dict[str, tuple] = {}  # key -> what its rescore was asked for (model, trainer, device, …): see same_run


def get(key: str | None) -> Any:
    """The :class:`viewer.rescore.RescoreResult` last computed for store key ``key``, or None."""
    if not key:
        return None
    with _LOCK:
        return _RESULTS.get(key)


def stamp(key: str | None) -> int:
    """Which rescore of ``key`` views are built with: changes whenever one is put, 0 when none."""
    with _LOCK:
        return _STAMPS.get(key, 0) if key in _RESULTS else 0


def put(key: str, result: Any, session: str | None = None, asked: tuple | None = None) -> None:
    """Keep ``result`` as ``key``'s rescore, run by browser session ``session`` (now) for the request
    ``asked`` (what :func:`same_run` compares)."""
    with _LOCK:
        _keep(key, result)
        _ORIGIN[key] = (session, time.time())
        if asked is None:
            _ASKED.pop(key, None)
        else:
            _ASKED[key] = asked
        _RESULTS.move_to_end(key)
        while len(_RESULTS) > _SIZE:
            gone = _RESULTS.popitem(last=False)[0]
            _STAMPS.pop(gone, None)
            _ORIGIN.pop(gone, None)
            _ASKED.pop(gone, None)


def forget(key: str) -> None:
    """Drop ``key``'s rescore (a test that planted one leaves the process's results as it found them)."""
    with _LOCK:
        for table in (_RESULTS, _STAMPS, _ORIGIN, _ASKED):
            table.pop(key, None)


def _keep(key: str, result: Any) -> None:
    """Store ``result`` for ``key`` under a new stamp (views cached on the old one rebuild); caller holds _LOCK."""
    global _COUNT
    _COUNT += 1
    _STAMPS[key] = _COUNT
    _RESULTS[key] = result


def origin(key: str | None) -> tuple[str | None, float] | None:
    """(the session that ran ``key``'s rescore, its time.time()), or None when there is none."""
    with _LOCK:
        return _ORIGIN.get(key) if key in _RESULTS else None


def same_run(key: str | None, asked: tuple) -> Any:
    """``key``'s rescore if it was run, to its end, for exactly ``asked`` (the same rollout under the same
    tokenizer, model, trainer, device and dtype give the same numbers): a second Run, by the visitor or
    another one, shows it instead of loading the model and scoring every row again. None otherwise."""
    with _LOCK:
        res = _RESULTS.get(key) if key else None
        if res is None or getattr(res, "cancelled", False) or _ASKED.get(key) != asked:
            return None
        return res


# ---------------------------------------------------------------- a visitor's own view of it
DEFAULT_CHOICE: tuple[str, float | None, float | None] = (IS.DEFAULT_MODE, IS.DEFAULT_CLIP_MIN, IS.DEFAULT_CLIP_MAX)
_UNSET = object()
_NOW: ContextVar[Any] = ContextVar("rescore_view_choice", default=_UNSET)


def view_value(choice: tuple | None) -> dict:
    """What the session's view State holds for an IS choice (None: a choice TRL rejects, no marks)."""
    return {"is": None if choice is None else tuple(choice)}


def choice_of(held: Any) -> tuple[str, float | None, float | None] | None:
    """The IS choice a session's view State value holds; :data:`DEFAULT_CHOICE` (the panel's first values)
    when it holds none. Only a well-formed choice passes: the State is the server's, but be strict."""
    if not isinstance(held, dict) or "is" not in held:
        return DEFAULT_CHOICE
    c = held["is"]
    if c is None:
        return None
    if (isinstance(c, tuple) and len(c) == 3 and c[0] in IS.MODES
            and all(b is None or (isinstance(b, float) and b == b) for b in c[1:])):
        return c
    return DEFAULT_CHOICE


@contextmanager
def choosing(choice: tuple | None) -> Iterator[None]:
    """Views made in this block use ``choice`` (an event that has just changed it: its State is stored
    only when the event ends)."""
    token = _NOW.set(choice)
    try:
        yield
    finally:
        _NOW.reset(token)


def choice_now(held: Any = None) -> tuple[str, float | None, float | None] | None:
    """The choice views are made with now: the one :func:`choosing` set, else the session's (``held``)."""
    c = _NOW.get()
    return choice_of(held) if c is _UNSET else c


def view_stamp(key: str | None) -> tuple[int, tuple | None]:
    """(:func:`stamp`, the IS choice) a view of ``key`` is made with for the visitor whose event is running:
    the one :func:`choosing` (or :func:`as_visitor`) set, else :data:`DEFAULT_CHOICE`. (0, None) when ``key``
    has no rescore."""
    n = stamp(key)
    return (n, choice_now()) if n else (0, None)


def as_visitor(fn: Callable) -> Callable:
    """``fn`` (a handler with a ``view`` parameter: the visitor's view State, ``Browse.view``, one of its
    event's inputs) makes its views with the IS choice that State holds. Gradio keeps a State per session
    and hands its value to the events that take it as an input (its public route: a handler reads no
    session it was not given)."""
    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def run(*args, **kwargs):
        with choosing(choice_now(sig.bind_partial(*args, **kwargs).arguments.get("view"))):
            return fn(*args, **kwargs)
    return run


def seen(key: str | None, choice: tuple | None) -> Any:
    """``key``'s rescore as a visitor with IS ``choice`` sees it (a shallow copy that carries the choice;
    the shared result is never changed), or None."""
    res = get(key)
    if res is None:
        return None
    return res if getattr(res, "is_choice", None) == choice else dataclasses.replace(res, is_choice=choice)
