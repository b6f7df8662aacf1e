"""One JSON value in a byte chunk, found and decoded in place by msgspec (the streaming readers' core).

msgspec has no ``raw_decode``: :func:`value_end` finds where a value ends from its "trailing
characters" error, :func:`guess_end` guesses it without parsing, and :func:`decode_value` decodes
exactly a slice (typed when it fits), answering :data:`NO` where Python's parser must decide.
"""
from __future__ import annotations

import re
from typing import Any, Callable

import msgspec

from viewer.sources.jsonio import WHITESPACE_BYTES
from viewer.sources.recordtypes import ValidationError, decode_generic

__all__ = ["NO", "MORE", "value_end", "guess_end", "decode_value"]

_TRAILING = re.compile(r"trailing characters \(byte (\d+)\)")
_SKIP_VALUE = msgspec.json.Decoder(msgspec.Raw)  # finds where one value ends without building it
NO = object()
MORE = -1


def value_end(view: memoryview) -> int | None:
    """Where the JSON value at the start of ``view`` ends (its length; whitespace after it may be
    included), :data:`MORE` when the view ends inside it, or None when msgspec cannot say
    (malformed, or an extension of Python's parser such as NaN). msgspec has no ``raw_decode``: it
    reports the first character after the value as an error with its offset; an offset taken from
    that message is proven by decoding exactly that slice (a JSON value is never a prefix of another)."""
    try:
        _SKIP_VALUE.decode(view)
        return len(view)
    except (msgspec.DecodeError, RecursionError) as e:
        text = str(e)
        m = _TRAILING.search(text)
        if m:
            return int(m.group(1)) - 1
        return MORE if "truncated" in text else None


def guess_end(buf: bytes, pos: int) -> int | None:
    """Where the object at ``pos`` probably ends, unparsed: at the comma before the next object opening
    with the same key (a trace's records all open with ``{"turn":`` or the like). A guess, kept only if
    that slice decodes whole (a JSON value is never a prefix of another): saves msgspec's skip."""
    colon = buf.find(b":", pos, pos + 64)
    if colon < 0 or buf[pos:pos + 2] != b'{"':
        return None
    nxt = buf.find(buf[pos:colon + 1], colon)
    if nxt < 0:
        return None
    comma = buf.rfind(b",", pos, nxt)
    if comma < 0 or buf[comma + 1:nxt].strip(WHITESPACE_BYTES):
        return None
    return comma - pos


def decode_value(view: memoryview, typed: Callable[[Any], Any] | None) -> Any:
    """The value that is exactly ``view`` (typed when the record fits), or NO when msgspec refuses it."""
    try:
        if typed is not None:
            try:
                return typed(view)
            except ValidationError:
                pass  # not the shape the types describe: generic dicts, read by the item-by-item rules
        return decode_generic(view)
    except (msgspec.DecodeError, RecursionError):
        return NO  # Python's parser decides (NaN, a lone surrogate, 1e400, too deep, broken)
