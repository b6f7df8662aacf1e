"""Record files decoded with msgspec: generic values, or a proxy record's heavy columns typed.

:func:`decode_generic` is ``json.loads`` at msgspec's speed: the same dicts, lists, strings and
numbers for every document both accept. msgspec refuses what Python's parser takes as an
extension (``NaN``, ``Infinity``, a lone surrogate escape, a float past the double range);
the caller then decodes that record with :mod:`json`, so values never differ.

:func:`decode_trace_record` decodes a proxy trace record (docs/FORMATS.md §2) straight into
typed columns where they are big: the logprob entries become :class:`LogprobEntry` /
:class:`TopEntry` structs (the top-k alternatives' ``bytes``, which the reader never keeps,
are skipped unparsed, and no dict is built per token). Every other key a reader looks at is
kept as msgspec decodes it generically. A record that does not fit the types exactly (a
logprob that is a bool, an entry without ``bytes``, a list where an object should be...)
raises :class:`msgspec.ValidationError`, and the caller decodes it generically instead: the
types only choose the fast path, never what is accepted.
"""
from __future__ import annotations

import sys
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

__all__ = ["TopEntry", "LogprobEntry", "decode_generic", "long_digit_run", "decode_trace_record", "entries_as_dicts",
           "DecodeError", "ValidationError"]

DecodeError = msgspec.DecodeError
ValidationError = msgspec.ValidationError


class TopEntry(msgspec.Struct, gc=False):  # holds no container: the GC need not track it
    """One top-k alternative: ``{"token", "logprob", ["token_id"]}``; other keys skipped."""

    token: str
    logprob: int | float  # an int stays an int, as json.loads gives it (messages show the value)
    token_id: Any = UNSET


class LogprobEntry(msgspec.Struct, gc=False):  # (its lists hold numbers and TopEntry only)
    """One output position's vLLM logprob entry; other keys skipped."""

    token: str
    logprob: int | float
    bytes: list[int]
    top_logprobs: list[TopEntry]


class _Content(msgspec.Struct, gc=False):
    """``"logprobs": {"content": [...]}`` (the OpenAI response shape); other keys are not read."""

    content: list[LogprobEntry] | None = None


# Every key of a trace (or turns) record that a reader or a format check looks at
# (viewer.sources.proxyrecord, turnsfile, capture's record recognition). A key not listed here
# is not needed: the typed decode drops it.
_KEYS = ("turn", "call", "kind", "metadata", "request", "response", "finish_reason", "latency_s", "timestamp",
         "upstream_status", "upstream_error", "error", "completion_token_ids", "token_ids", "completion_tokens",
         "per_token_logps", "prompt_token_ids", "loss_mask", "mask", "trained", "output_ids", "prompt_ids",
         "prompt_ids_source")


class _TraceRecord(msgspec.Struct):
    logprobs: list[LogprobEntry] | _Content | None | UnsetType = UNSET


# the generic keys, added as fields of type Any (decoded as json.loads would)
_TraceRecord = msgspec.defstruct("_TraceRecord", [(k, Any, UNSET) for k in _KEYS], bases=(_TraceRecord,))
_FIELDS = ("logprobs",) + _KEYS

_generic = msgspec.json.Decoder()
_trace = msgspec.json.Decoder(_TraceRecord)


def decode_generic(buf: Any) -> Any:
    """One JSON value (bytes-like), as ``json.loads`` gives it; raises DecodeError / RecursionError."""
    return _generic.decode(buf)


_DIGITS = b"0123456789"
_MAX_DIGITS = sys.get_int_max_str_digits() or 0  # Python's json refuses an int of more digits


_FLAG = bytes(49 if 48 <= b <= 57 else 48 for b in range(256))  # digit -> "1", anything else -> "0"
_SPAN = 16  # a run of more than _MAX_DIGITS digits holds at least this many consecutive samples...
_STEP = _MAX_DIGITS // _SPAN  # ...taken every _STEP bytes (268 for the default limit of 4300)


def long_digit_run(buf: Any) -> bool:
    """Whether ``buf`` may hold an integer of more digits than Python's json accepts. The typed
    decode skips unknown keys unparsed, so it would accept one that :func:`json.loads` refuses.
    Such a run covers at least ``_SPAN`` consecutive bytes of those every ``_STEP``: only those samples
    are looked at, and the text around them only where ``_SPAN`` of them in a row are digits (in a list
    of ids, which is digits but for a comma every few bytes, that is rare: sampling every half-limit
    and looking at each pair of digit samples cost one look every two samples there, issue 35)."""
    if not _MAX_DIGITS or (buf.nbytes if type(buf) is memoryview else len(buf)) <= _MAX_DIGITS:
        return False
    view = memoryview(buf).cast("B")
    n = len(view)
    # first every 8th sample: such a run holds two in a row of those too, and prose seldom does
    if view[::8 * _STEP].tobytes().translate(_FLAG).find(b"11") < 0:
        return False
    flags = view[::_STEP].tobytes().translate(_FLAG)
    k = flags.find(_RUN)
    while k >= 0:
        a, b = k * _STEP, min((k + _SPAN - 1) * _STEP + 1, n)  # the stretch the samples span
        if not bytes(view[a:b]).isdigit():
            k = flags.find(_RUN, k + 1)
            continue
        left, right = bytes(view[max(0, a - _MAX_DIGITS):a]), bytes(view[b:b + _MAX_DIGITS + 1])
        start, end = a - (len(left) - len(left.rstrip(_DIGITS))), b + (len(right) - len(right.lstrip(_DIGITS)))
        if end - start > _MAX_DIGITS:
            return True
        k = flags.find(_RUN, end // _STEP + 1)  # (the next run starts after this one ends)
    return False


_RUN = b"1" * _SPAN


def decode_trace_record(buf: Any) -> dict[str, Any]:
    """A proxy record as a dict of the keys readers use, logprob entries typed (see module doc).
    Raises ValidationError when the record is not of that shape (decode it generically then)."""
    if long_digit_run(buf):
        raise ValidationError("an integer longer than Python's json accepts: decode it generically")
    rec = _trace.decode(buf)
    out = {}
    for k in _FIELDS:
        v = getattr(rec, k)
        if v is not UNSET:
            out[k] = v
    lp = out.get("logprobs")
    if type(lp) is _Content:
        out["logprobs"] = {"content": lp.content}
    return out


def entries_as_dicts(entries: list[LogprobEntry]) -> list[dict[str, Any]]:
    """Typed entries back as the dicts the item-by-item rules read (the keys they read are all kept)."""
    return msgspec.to_builtins(entries)
