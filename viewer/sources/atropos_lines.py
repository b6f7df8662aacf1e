"""Atropos lines read from their bytes: counted without being decoded, ids parsed straight into packed arrays.

An Atropos line (:mod:`viewer.sources.atropos`) is mostly integers: G ``tokens`` lists and G ``masks``
lists as long. ``json`` and msgspec both build one Python int per entry, which alone costs about half
of ``json.load``'s time on such a file (issue 35). Here:

* :func:`count` finds how many sequences a line holds (``len(tokens)``) with a typed msgspec decode that
  builds nothing (``tokens: list[msgspec.Raw]``), and where the ``tokens`` and ``masks`` lists sit in
  the line. The decode checks the whole line's syntax, so a line it takes is one ``json.loads`` takes
  too, with as many sequences; what it cannot vouch for (invalid UTF-8 in a string, whose bytes the
  skip does not check; an integer too long for Python's json) and anything it refuses answer None:
  the row layer then decodes that line as ever.
* :func:`group` (of a line :func:`count` took, with its spans) decodes the line with those lists cut
  out (``null`` in their place: the strings and scores, at msgspec's speed) and parses each list's text
  with numpy, no Python int built: the tokens of the whole group in one pass, the prefix all sequences
  share parsed once; a mask list that is ``-100`` k times and then exactly its tokens' text from entry
  k on (what ``tokenize_for_trainer`` writes) is built from the tokens without being parsed at all.

Exactness: numpy's parser refuses anything in the text that is not an integer (a float, ``1e3``, a
bool, ``null``, a string, a nested list: it raises), the text was validated as JSON by :func:`count`,
and an id outside [0, 2**31) or a mask outside 32 bits is refused here. Any refusal answers None for
the whole line, which is then decoded by the row layer and read by the item-by-item rules, with their
values and messages.
"""
from __future__ import annotations

from array import array
from typing import Any

import msgspec
from viewer.sources.lazynumpy import np  # imported on first use (a capture open needs none)

from viewer.packed import Packed
from viewer.sources.recordtypes import long_digit_run, decode_generic

__all__ = ["count", "group", "same_run"]

_LIMIT = 2 ** 31
_CONTEXT = array("i", [-100]).tobytes()  # Atropos' ignore index, as one packed int32
_WS = b" \t\r\n"


class _Seqs(msgspec.Struct):
    tokens: list[msgspec.Raw]
    masks: list[msgspec.Raw] | None = None


_SEQS = msgspec.json.Decoder(_Seqs)


def count(raw: bytes) -> tuple[int, tuple[int, int, int, int] | None] | None:
    """(sequences in the line, where its two lists sit or None when :func:`group` cannot read it), or
    None when the line is not one this module can vouch for (the row layer decodes it)."""
    if long_digit_run(raw):
        return None
    try:
        seqs = _SEQS.decode(raw)
    except (msgspec.DecodeError, RecursionError):  # (a ValidationError is a DecodeError)
        return None
    spans = _spans(raw, seqs)
    if not raw.isascii() and not _utf8(raw, spans):  # json refuses invalid UTF-8; msgspec's skip does not look
        return None
    return len(seqs.tokens), spans


def _utf8(raw: bytes, spans: tuple[int, int, int, int] | None) -> bool:
    """Whether ``raw`` is valid UTF-8 (what is not ASCII is decoded: :func:`_utf8_in`); the two lists,
    when they hold no string, are numbers (msgspec checked their syntax): ASCII."""
    parts = [(0, len(raw))]
    if spans is not None:
        (a, b), (c, d) = _in_order(spans)
        if raw.find(b'"', a, b) < 0 and raw.find(b'"', c, d) < 0:
            parts = [(0, a), (b, c), (d, len(raw))]
    return all(_utf8_in(raw, x, y) for x, y in parts)


def _utf8_in(raw: bytes, x: int, y: int) -> bool:
    """Whether ``raw[x:y]`` is valid UTF-8: 4 KiB pieces that are ASCII pass, the others are decoded widened
    to ASCII bytes on both sides (a character's bytes are all non-ASCII: none is cut)."""
    for s in range(x, y, 4096):
        e = min(y, s + 4096)
        if raw[s:e].isascii():
            continue
        while s > 0 and raw[s - 1] > 127:
            s -= 1
        while e < len(raw) and raw[e] > 127:
            e += 1
        try:
            raw[s:e].decode("utf-8")
        except UnicodeDecodeError:
            return False
    return True


def _in_order(spans: tuple[int, int, int, int]) -> list[tuple[int, int]]:
    return sorted(((spans[0], spans[1]), (spans[2], spans[3])))


def _address(buf: Any) -> int:
    return np.frombuffer(buf, np.uint8).ctypes.data


def _spans(raw: bytes, seqs: _Seqs) -> tuple[int, int, int, int] | None:
    """Where ``tokens`` and ``masks`` sit in the line (start, end, start, end); None unless both hold
    G entries (the row layer reads the line)."""
    tokens, masks = seqs.tokens, seqs.masks
    if not tokens or masks is None or len(masks) != len(tokens):
        return None
    base, out = _address(raw), []
    for items in (tokens, masks):
        a = _address(items[0]) - base  # a decoded Raw is a view into the line (see msgspec's Raw.copy)
        b = _address(items[-1]) - base + len(items[-1])
        if not (0 <= a < b <= len(raw) and raw.startswith(bytes(items[0]), a)):
            return None
        start, end = raw.rfind(b"[", 0, a), raw.find(b"]", b)
        if start < 0 or end < 0 or raw[start + 1:a].strip(_WS) or raw[b:end].strip(_WS):
            return None
        out += (start, end + 1)
    return out[0], out[1], out[2], out[3]


def group(raw: bytes, spans: tuple[int, int, int, int]) -> tuple[dict[str, Any], list[int | None]] | None:
    """The line as ``json.loads`` gives it, but ``tokens`` and ``masks`` lists of G :class:`Packed` int32
    arrays, and for each sequence whose masks are -100 k times and then exactly its tokens, k (else None);
    None when anything in the line is not what this reader parses (see module doc)."""
    (a, b), (c, d) = _in_order(spans)
    if d > len(raw):
        return None
    view = memoryview(raw)
    try:  # the line with its two lists as null: strings, scores and the rest, as msgspec decodes them
        value = decode_generic(b"".join((view[:a], b"null", view[b:c], b"null", view[d:])))
    except (msgspec.DecodeError, RecursionError):  # NaN, 1e400...: json decides (the row layer)
        return None
    if not isinstance(value, dict) or value.get("tokens", 0) is not None or value.get("masks", 0) is not None:
        return None
    tokens, masks = _entries(raw, spans[0], spans[1]), _entries(raw, spans[2], spans[3])
    if tokens is None or masks is None or len(tokens) != len(masks):
        return None
    ids = _token_ids(tokens)
    if ids is None:
        return None
    packed, firsts = [], []
    for m, t, ib in zip(masks, tokens, ids):
        k = _context_then_tokens(m, t, len(ib) // 4)
        mb = _CONTEXT * k + ib[4 * k:] if k is not None else _ints(m, -_LIMIT)  # (other masks: parsed)
        if mb is None:
            return None
        packed.append(Packed("i", mb))
        firsts.append(k)
    value["tokens"], value["masks"] = [Packed("i", x) for x in ids], packed
    return value, firsts


def _entries(raw: bytes, a: int, b: int) -> list[bytes] | None:
    """The insides of the lists in ``raw[a:b]``, ``[[...], [...]]`` (a list that holds a "]" holds more
    than ints: numpy refuses what is cut from it); None if an entry does not open as a list."""
    out, pos, end = [], a + 1, b - 1
    while True:
        pos = _skip_ws(raw, pos, end)
        if out:
            if pos == end:
                return out
            if raw[pos] != 0x2C:  # ","
                return None
            pos = _skip_ws(raw, pos + 1, end)
        if pos >= end or raw[pos] != 0x5B:  # "["
            return None
        close = raw.find(b"]", pos, end)
        if close < 0:
            return None
        out.append(raw[pos + 1:close])
        pos = close + 1


def _skip_ws(raw: bytes, pos: int, end: int) -> int:
    while pos < end and raw[pos] in _WS:
        pos += 1
    return pos


def _ints(text: bytes, low: int) -> bytes | None:
    """The ints of a JSON list's inside (``b"1, 2, 3"``) as packed int32 bytes, or None unless every one
    is an integer in [low, 2**31). The text is valid JSON (:func:`count`)."""
    if not text.strip(_WS):
        return b""  # (numpy reads blank text as one 0)
    try:
        a = np.fromstring(text, dtype=np.int64, sep=",")  # raises at anything that is not an integer
    except ValueError:
        return None
    # (an integer past int64 is read as its maximum, whatever its sign: refused here too)
    if a.max() >= _LIMIT or a.min() < low:
        return None
    return a.astype(np.int32).tobytes()


_MARK = b", -1, "  # between the token lists parsed in one pass: no id is negative


def _token_ids(texts: list[bytes]) -> list[bytes] | None:
    """Each token list's ids as int32 bytes, parsed in one pass: the text every list starts with (the
    shared prompt) once, then each list's text after it, with a -1 between lists."""
    lo, hi = min(texts), max(texts)  # the common prefix of all is that of the smallest and the largest
    cut = lo.rfind(b",", 0, same_run(lo, hi, min(len(lo), len(hi))))  # the entries before it are shared
    if cut >= 0:  # (after a comma comes an entry: no piece is blank)
        full = [True] * len(texts)
        pieces = [memoryview(lo)[:cut]] + [memoryview(t)[cut + 1:] for t in texts]
    else:  # (numpy reads blank text as one 0: an empty list is left out)
        full = [bool(t) and not t.isspace() for t in texts]
        pieces = [t for t, f in zip(texts, full) if f]
        if not pieces:
            return [b""] * len(texts)
    try:
        a = np.fromstring(_MARK.join(pieces), dtype=np.int64, sep=",")  # raises at anything not an integer
    except ValueError:
        return None
    marks = np.flatnonzero(a == -1).tolist()
    if len(marks) != len(pieces) - 1 or a.max() >= _LIMIT or a.min() < -1:  # (a real -1: one mark too many)
        return None
    whole = a.astype(np.int32).tobytes()
    bounds = [-1] + marks + [len(a)]
    parsed = [whole[4 * x + 4:4 * y] for x, y in zip(bounds, bounds[1:])]
    if cut >= 0:
        return [parsed[0] + x for x in parsed[1:]]
    it = iter(parsed)
    return [next(it) if f else b"" for f in full]


def _context_then_tokens(m: bytes, t: bytes, n: int) -> int | None:
    """k, when the mask text ``m`` is ``-100`` k times and then exactly the token text ``t`` (``n`` ids)
    from its entry k on (mask = label = the token, what ``tokenize_for_trainer`` writes); else None."""
    j = m.rfind(b"-")  # the tokens hold no "-": the last one starts the last -100
    q = k = 0
    if j >= 0:
        unit = b"-100, " if m.startswith(b"-100, ") else b"-100,"
        k = j // len(unit) + 1
        if j != (k - 1) * len(unit) or not m.startswith(unit * (k - 1) + b"-100"):
            return None
        if m.startswith(unit[4:], j + 4):
            q = j + len(unit)  # the entries after the k-th -100
        elif not m[j + 4:].strip(_WS):  # nothing after it: every position is context
            return k if k == n else None
        else:
            return None
    rest = m[q:] if q else m
    p = len(t) - len(rest)
    if p < 0 or not t.endswith(rest):
        return None
    if p:  # rest starts an entry of t: after a comma (and whitespace)
        c = t.rfind(b",", 0, p)
        if c < 0 or (c + 1 < p and t[c + 1:p].strip(_WS)):
            return None
    # the masks' entry k is the tokens' entry k (counted on the shorter side)
    if (t.count(b",", 0, p) if p < len(rest) else n - 1 - rest.count(b",")) != k:
        return None
    return k


def same_run(a: Any, b: Any, n: int) -> int:
    """The first index (at most ``n``) where ``a`` and ``b`` differ: halving the span by ``==`` of
    slices (C speed for lists, bytes), then item by item over the last few."""
    lo, hi = 0, n
    while hi - lo > 8:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    while lo < hi and a[lo] == b[lo]:
        lo += 1
    return lo
