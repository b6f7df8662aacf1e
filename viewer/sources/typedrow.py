"""A row format's own decode of one stored row: only the fields its reader reads, with exactly the
values and the refusals of ``json.loads`` (issue 35: every reader at parser speed).

A reader that uses a few fields of a big row (an Inspect log's samples less their event transcript, a
SWE-agent trajectory less its per-step copies) declares them as ``TypedDict`` types and decodes a row's
JSON text with :func:`typed` (``RowFormat.decode``, which the row layer calls for every row read once
the format is known): the fields declared ``Any`` are decoded as ``json.loads`` decodes them; the rest
is skipped by msgspec, checked but never built.

Skipping is where a typed decode could accept what ``json.loads`` refuses: msgspec checks a skipped
value's syntax (``NaN``, a broken or lone-surrogate escape, a control character, nesting too deep are
refused as before), but not that its strings are valid UTF-8, nor an integer's length (``json.loads``
refuses one of more digits than ``sys.get_int_max_str_digits()``). Both are checked on the whole text
(:func:`utf8_valid`, ``recordtypes.long_digit_run``). A row that fails a check, that msgspec refuses,
or whose fields have another shape than the types say (a sample that is not an object...) is answered
None: the row layer then decodes it with ``json.loads``'s rules (:mod:`viewer.sources.rowjson`), so the
reader sees the same values and a bad row the same message as before.
"""
from __future__ import annotations

from typing import Any, Callable

import msgspec
from viewer.sources.lazynumpy import np  # imported on first use (a capture open needs none)

from viewer.sources.recordtypes import long_digit_run  # json.loads's integer-length rule, for skipped text

__all__ = ["typed", "utf8_valid"]

_HIGH = 0x8080808080808080  # the top bit of each byte of a word: set on a non-ASCII byte
_SPACES = int.from_bytes(b" " * 8, "little")  # an all-ASCII word, put between two stretches


def utf8_valid(raw: bytes) -> bool:
    """Whether ``raw`` is valid UTF-8, as ``raw.decode("utf-8")`` would say, without decoding all of it. A
    multi-byte character never holds an ASCII byte, so the text is valid exactly when its stretches of
    8-byte words that hold a non-ASCII byte are, each cut where the next word is all ASCII: they are
    gathered, an ASCII word between two stretches, and decoded at once. On mostly-ASCII text that is a
    few words a row, where decoding a whole row that holds one wide character widens all of it (0.2 s
    per 200 MB of an Inspect log)."""
    if raw.isascii():
        return True
    n = len(raw) >> 3
    words = np.frombuffer(raw, np.uint64, n)
    at = np.flatnonzero((words & np.uint64(_HIGH)) != 0)
    tail = raw[n << 3:]
    if len(at) > n >> 2:  # dense (much of the text is non-ASCII): one decode costs less
        return _decodes(raw)
    gaps = np.flatnonzero(np.diff(at) != 1) + 1  # where a stretch ends and the next begins
    picked = np.insert(words[at], gaps, np.uint64(_SPACES)).tobytes()
    if not len(at) or at[-1] != n - 1:  # the bytes after the last whole word: a stretch of their own
        picked += b" "
    return _decodes(picked + tail)


def _decodes(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def typed(kind: Any) -> Callable[[bytes], Any]:
    """A row decoder for ``kind`` (a ``TypedDict`` of the fields a reader uses): the row, or None where the
    row layer must decode it with ``json.loads``'s rules (module doc)."""
    decoder = msgspec.json.Decoder(kind)

    def decode(raw: bytes) -> Any:
        try:
            value = decoder.decode(raw)
        except (msgspec.DecodeError, RecursionError):  # (ValidationError is a DecodeError)
            return None
        if not utf8_valid(raw) or long_digit_run(raw):
            return None
        return value

    return decode
