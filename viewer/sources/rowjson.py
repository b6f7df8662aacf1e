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

import msgspec

__all__ = ["loads"]

_RAISE = object()
_decode = msgspec.json.Decoder().decode  # recordtypes.decode_generic's decoder, called without a step between


def loads(raw: bytes, encoding: str, blank: Any = _RAISE) -> Any:
    """``json.loads(raw.decode(encoding))``; a blank text gives ``blank`` when one is given."""
    try:
        return _decode(raw)  # one call per row: a row is read in a few microseconds
    except (msgspec.DecodeError, RecursionError):  # ValidationError (a number out of range) is a DecodeError
        pass
    text = raw.decode(encoding)
    if blank is not _RAISE and not text.strip():
        return blank
    return json.loads(text)
