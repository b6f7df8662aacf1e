"""The latest rescore of each open rollout (by store key), shared by the Tokens screen's token
view (which adds the ``delta`` colour mode when one exists) and the rescore panel."""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any

__all__ = ["get", "put", "restyle", "stamp", "origin", "same_run"]

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


def restyle(key: str, result: Any) -> None:
    """Replace ``key``'s rescore by the same result under another view choice (the IS mode and bounds):
    views rebuild (a new stamp), but who ran it and when stay (the cached-result note stays true)."""
    with _LOCK:
        if key in _RESULTS:
            _keep(key, result)


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
