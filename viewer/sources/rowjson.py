"""A row's JSON text decoded into exactly what ``json.loads`` gives, at msgspec's speed (issue 35).

The row layer (:mod:`viewer.sources.rowdata`) parses every JSONL line and every JSON file. msgspec
builds the same dicts, lists, strings and numbers as the stdlib for every document both accept
(:func:`viewer.sources.recordtypes.decode_generic`), 2-4x faster. What msgspec refuses (``NaN``,
``Infinity``, a lone surrogate escape, ``1e400``, an integer longer than Python's limit, a byte-order
mark, invalid UTF-8, a blank or broken line, nesting too deep) is decoded by the stdlib, so its values
and its exceptions (``JSONDecodeError`` with line and column, ``UnicodeDecodeError``, ``RecursionError``)
are the stdlib's exactly: the messages for bad rows do not change.
"""
from __future__ import annotations

import json
from typing import Any

from viewer.sources.jsonvalue import NO, decode_value

__all__ = ["loads"]

_RAISE = object()


def loads(raw: bytes, encoding: str, blank: Any = _RAISE) -> Any:
    """``json.loads(raw.decode(encoding))``; a blank text gives ``blank`` when one is given."""
    value = decode_value(raw, None)
    if value is not NO:
        return value
    text = raw.decode(encoding)
    if blank is not _RAISE and not text.strip():
        return blank
    return json.loads(text)
