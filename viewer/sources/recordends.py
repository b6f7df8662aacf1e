"""Where the records of a streamed JSON array end, found in the byte buffer without Python's parser.

msgspec has no ``raw_decode``: it decodes exactly the bytes it is given. The stream
(:mod:`viewer.sources.jsonstream`) therefore needs each record's extent before decoding it;
these helpers find it, and every answer is proven by the decode that follows, never trusted:

- :func:`batch_end`: the last record opening in the buffer (``{"turn":`` or whatever key the
  current record opens with, found by one ``rfind`` from the buffer's end) marks where a run of
  whole records ends. The run is decoded as one array (``[`` + run + ``]``): when that decodes,
  the run is exactly a sequence of array elements, the same values the stream would decode one
  by one (JSON's grammar is deterministic, and a run that ends inside a string or a record does
  not decode). One search per buffer instead of one per record.
- :func:`guess_end`: the same guess for one record (the next opening after it).
- :func:`value_end`: msgspec's skip, which reports the first byte after a value as an error.
"""
from __future__ import annotations

import re
from typing import Any, Callable

import msgspec

from viewer.sources.recordtypes import ValidationError, decode_generic, decode_generic_many

__all__ = ["NO", "MORE", "value_end", "guess_end", "batch_end", "decode_one", "decode_many"]

_TRAILING = re.compile(r"trailing characters \(byte (\d+)\)")
_skip = msgspec.json.Decoder(msgspec.Raw)  # finds where one value ends without building it
NO = object()  # msgspec refused the bytes: Python's parser decides
MORE = -1  # the buffer ends inside the value
_WS = b" \t\r\n"


def value_end(view: memoryview) -> int | None:
    """Where the JSON value at the start of ``view`` ends (its length; whitespace after it may be
    included), :data:`MORE` when the view ends inside it, or None when msgspec cannot say
    (malformed, or an extension of Python's parser such as NaN). msgspec reports the first character
    after the value as an error with its offset; an offset taken from that message is proven by
    decoding exactly that slice (a JSON value is never a prefix of another)."""
    try:
        _skip.decode(view)
        return len(view)
    except (msgspec.DecodeError, RecursionError) as e:
        text = str(e)
        m = _TRAILING.search(text)
        if m:
            return int(m.group(1)) - 1
        return MORE if "truncated" in text else None


def _opener(buf: bytes, pos: int) -> bytes | None:
    """The record's opening up to its first key's colon (``{"turn":``), or None when it is not an object."""
    colon = buf.find(b":", pos, pos + 64)
    if colon < 0 or buf[pos:pos + 2] != b'{"':
        return None
    return buf[pos:colon + 1]


def _comma_before(buf: bytes, pos: int, nxt: int) -> int | None:
    comma = buf.rfind(b",", pos, nxt)
    if comma < 0 or buf[comma + 1:nxt].strip(_WS):
        return None
    return comma


def guess_end(buf: bytes, pos: int) -> int | None:
    """Where the object at ``pos`` probably ends, unparsed: at the comma before the next object opening
    with the same key. A guess, kept only if that slice decodes whole (a JSON value is never a prefix
    of another)."""
    op = _opener(buf, pos)
    if op is None:
        return None
    nxt = buf.find(op, pos + len(op))
    comma = _comma_before(buf, pos, nxt) if nxt > 0 else None
    return None if comma is None else comma - pos


def batch_end(buf: bytes, pos: int) -> int | None:
    """The comma that probably ends a run of whole records starting at ``pos``: the one before the last
    opening like this record's in ``buf`` (a guess: :func:`decode_many` proves it). None when
    there is no such opening after this one."""
    op = _opener(buf, pos)
    if op is None:
        return None
    nxt = buf.rfind(op, pos + len(op))
    comma = _comma_before(buf, pos, nxt) if nxt > 0 else None
    return comma


def decode_one(view: memoryview, typed: Callable[[Any], Any] | None) -> Any:
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


def decode_many(view: memoryview, many: Callable[[Any], list[Any]] | None) -> list[Any] | None:
    """The records that are exactly ``view`` (elements separated by commas), decoded as one array by
    ``many`` (typed; generic when None); None when that fails for any reason (the stream then takes
    them one by one, with every rule of the single-record path)."""
    wrapped = b"".join((b"[", view, b"]"))
    try:
        out = (many or decode_generic_many)(wrapped)
    except (msgspec.DecodeError, ValidationError, RecursionError):
        return None
    return out if type(out) is list else None
