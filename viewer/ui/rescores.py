"""The latest rescore of each open rollout (by store key), shared by the Tokens screen's token
view (which adds the ``delta`` colour mode when one exists) and the rescore panel."""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

__all__ = ["get", "put"]

_SIZE = 16  # rescores kept (each holds a few floats per trained token)
_RESULTS: OrderedDict[str, Any] = OrderedDict()
_LOCK = threading.Lock()


def get(key: str | None) -> Any:
    """The :class:`viewer.rescore.RescoreResult` last computed for store key ``key``, or None."""
    if not key:
        return None
    with _LOCK:
        return _RESULTS.get(key)


def put(key: str, result: Any) -> None:
    with _LOCK:
        _RESULTS[key] = result
        _RESULTS.move_to_end(key)
        while len(_RESULTS) > _SIZE:
            _RESULTS.popitem(last=False)
