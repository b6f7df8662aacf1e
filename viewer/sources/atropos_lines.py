"""Atropos lines read from their bytes: counted without being decoded, ids parsed straight into packed arrays.

An Atropos line (:mod:`viewer.sources.atropos`) is mostly integers: G ``tokens`` lists and G ``masks``
lists as long. ``json`` and msgspec both build one Python int per entry, which alone costs about half
of ``json.load``'s time on such a file (issue 35). Here:

* :func:`count` finds how many sequences a line holds (``len(tokens)``) with a typed msgspec decode that
  builds nothing (``tokens: list[msgspec.Raw]``), and where the ``tokens`` and ``masks`` lists sit in
  the line. The decode checks the whole line's syntax, so a line it takes is one ``json.loads`` takes
  too, with as many sequences; what it cannot vouch for (invalid UTF-8 in a string, whose bytes the
  skip does not check; an integer too long for Python's json) and anything it refuses answer None:
  the row layer then decodes that line as ever. Where the masks are what ``tokenize_for_trainer``
  writes (``-100`` k times, then the tokens' own text), the masks list is found in the text and
  compared with the tokens' text instead of being decoded, and the tokens' shared prompt is checked
  once (:func:`_placed`): the decode, whose cost is the numbers, then skips less than half of them.
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
from codecs import utf_8_decode
from typing import Any

import msgspec
from viewer.sources.lazynumpy import np  # imported on first use (a capture open needs none)

from viewer.packed import Packed
from viewer.sources.recordtypes import long_digit_run, decode_generic
from viewer.sources.jsonio import WHITESPACE_BYTES as _WS  # (JSON's whitespace)

__all__ = ["count", "group", "same_run"]

_LIMIT = 2 ** 31
_CONTEXT = array("i", [-100]).tobytes()  # Atropos' ignore index, as one packed int32


class _Seqs(msgspec.Struct):
    tokens: list[msgspec.Raw]
    masks: list[msgspec.Raw] | None = None


_SEQS = msgspec.json.Decoder(_Seqs)


class _Placed(msgspec.Struct):
    tokens: msgspec.Raw
    masks: msgspec.Raw


_PLACED = msgspec.json.Decoder(_Placed)
_ARRAYS = msgspec.json.Decoder(list[msgspec.Raw])  # checks each array's syntax, builds nothing


def count(raw: bytes) -> tuple[int, tuple[int, int, int, int] | None] | None:
    """(sequences in the line, where its two lists sit or None when :func:`group` cannot read it), or
    None when the line is not one this module can vouch for (the row layer decodes it)."""
    if long_digit_run(raw):
        return None
    got = _placed(raw)
    if got is not None:  # (both lists hold no string: numbers, and -100s before a copy of the tokens' text)
        n, spans = got
    else:
        try:
            seqs = _SEQS.decode(raw)
        except (msgspec.DecodeError, RecursionError):  # (a ValidationError is a DecodeError)
            return None
        spans, n = _spans(raw, seqs), len(seqs.tokens)
    if not raw.isascii() and not _utf8(raw, spans, got is not None):  # json refuses invalid UTF-8; msgspec's
        return None  # skip does not look
    return n, spans


def _placed(raw: bytes) -> tuple[int, tuple[int, int, int, int]] | None:
    """:func:`count`'s quick way (its spans), for a line whose masks are what ``tokenize_for_trainer``
    writes: the two lists found in the text; each mask entry -100 k times and then its tokens' text from
    entry k on (:func:`_mask_tail`), which makes the masks list valid JSON wherever the tokens
    list is; the line with both lists as ``null`` validated by msgspec, which also vouches that they are
    the line's own ``tokens`` and ``masks`` (a decoded Raw is a view into the line); the token entries
    validated apart, the text they all start with (the shared prompt) once. The slow part of a decode is
    the numbers: this skips less than half of them. None: the whole line is decoded."""
    tok = _list_at(raw, b'"tokens"', 0)
    msk = _list_at(raw, b'"masks"', tok[1]) if tok is not None else None  # (where it usually is: after the tokens)
    msk = msk or _list_at(raw, b'"masks"', 0)
    if tok is None or msk is None or len(tok[2]) != len(msk[2]) or not (tok[1] <= msk[0] or msk[1] <= tok[0]):
        return None
    (a, b, tents), (c, d, ments) = tok, msk
    if raw.find(b'"', a, b) >= 0:  # no string in the tokens: each comma in an entry separates two of its items
        return None
    if any(_mask_tail(raw, u, v, x, y) is None for (x, y), (u, v) in zip(tents, ments)):
        return None
    view, ((p, q), (r, t)) = memoryview(raw), _in_order((a, b, c, d))
    line = b"".join((view[:p], b"null", view[q:r], b"null", view[t:]))  # the rest of the line, both lists null
    try:
        placed = _PLACED.decode(line)
    except (msgspec.DecodeError, RecursionError):
        return None
    base, back = _address(line), r - (q - p) + 4  # (where the second list's null is)
    if (_address(placed.tokens) - base, _address(placed.masks) - base) != ((p, back) if a < c else (back, p)):
        return None  # the nulls are not the line's own tokens and masks
    # each token entry valid JSON: the text they all start with checked once, then each one's rest
    texts = [raw[x:y] for x, y in tents]
    lo, hi = min(texts), max(texts)
    cut = lo.rfind(b",", 0, same_run(lo, hi, min(len(lo), len(hi))))  # (the tokens hold no string)
    pieces = [lo[:cut]] + [x[cut + 1:] for x in texts] if cut >= 0 else texts
    if cut >= 0 and any(not x or x.isspace() for x in pieces):  # (an item on each side of that comma)
        return None
    try:
        _ARRAYS.decode(b"[[" + b"],[".join(pieces) + b"]]")
    except (msgspec.DecodeError, RecursionError):
        return None
    return len(tents), (a, b, c, d)


def _list_at(raw: bytes, key: bytes, start: int) -> tuple[int, int, list[tuple[int, int]]] | None:
    """Where the list of lists after the first ``key`` from ``start`` on sits, (start, end, the insides of its
    entries), each entry cut at its first "]" (:func:`_placed` checks the cuts); None if that is not what follows."""
    n = len(raw)
    i = raw.find(key, start)
    if i < 0:
        return None
    j = _skip_ws(raw, i + len(key), n)
    if j >= n or raw[j] != 0x3A:  # ":"
        return None
    start = _skip_ws(raw, j + 1, n)
    got = _cuts(raw, start)
    return (start, got[0], got[1]) if got is not None else None


def _utf8(raw: bytes, spans: tuple[int, int, int, int] | None, no_string: bool = False) -> bool:
    """Whether ``raw`` is valid UTF-8 (decoded in place, no copy); the two lists, when they hold no string
    (``no_string``: known so; else looked for), are numbers (msgspec checked their syntax): ASCII, not decoded."""
    parts = [(0, len(raw))]
    if spans is not None:
        (a, b), (c, d) = _in_order(spans)
        if no_string or (raw.find(b'"', a, b) < 0 and raw.find(b'"', c, d) < 0):
            parts = [(0, a), (b, c), (d, len(raw))]
    view = memoryview(raw)
    try:
        for x, y in parts:
            utf_8_decode(view[x:y], "strict", True)
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
    tokens, masks = _cuts(raw, spans[0]), _cuts(raw, spans[2])
    if tokens is None or masks is None or tokens[0] != spans[1] or masks[0] != spans[3] or len(tokens[1]) != len(masks[1]):
        return None
    texts = [raw[x:y] for x, y in tokens[1]]
    lo, hi = min(texts), max(texts)  # the common prefix of all is that of the smallest and the largest
    common = same_run(lo, hi, min(len(lo), len(hi)))
    ids = _token_ids(texts, lo, common)
    if ids is None:
        return None
    packed, firsts, commas = [], [], {}
    for (u, v), (x, y), ib in zip(masks[1], tokens[1], ids):
        k = _first_trained(raw, (u, v, x, y), len(ib) // 4, lo, common, commas)
        mb = _CONTEXT * k + ib[4 * k:] if k is not None else _ints(raw[u:v], -_LIMIT)  # (other masks: parsed)
        if mb is None:
            return None
        packed.append(Packed("i", mb))
        firsts.append(k)
    value["tokens"], value["masks"] = [Packed("i", x) for x in ids], packed
    return value, firsts


def _cuts(raw: bytes, start: int) -> tuple[int, list[tuple[int, int]]] | None:
    """The list of lists that opens at ``raw[start]``: (where it ends, the insides of its entries), each
    entry cut at its first "]" (a list that holds a "]" holds more than ints: :func:`_placed` and numpy
    refuse what is cut from it); None if it is not a list of lists."""
    if raw[start:start + 1] != b"[":
        return None
    n, ents, pos = len(raw), [], start + 1
    while True:  # pos: after the "[" that opens the list, or after a "," between entries
        if pos < n and raw[pos] in _WS:
            pos = _skip_ws(raw, pos, n)
        if pos >= n or raw[pos] != 0x5B:  # "["
            return None
        close = raw.find(b"]", pos)
        if close < 0:
            return None
        ents.append((pos + 1, close))
        pos = close + 1
        if pos < n and raw[pos] in _WS:
            pos = _skip_ws(raw, pos, n)
        if pos >= n:
            return None
        if raw[pos] == 0x5D:  # "]"
            return pos + 1, ents
        if raw[pos] != 0x2C:  # ","
            return None
        pos += 1


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


def _token_ids(texts: list[bytes], lo: bytes, common: int) -> list[bytes] | None:
    """Each token list's ids as int32 bytes, parsed in one pass: the text every list starts with (the
    shared prompt: ``lo[:common]``) once, then each list's text after it, with a -1 between lists."""
    cut = lo.rfind(b",", 0, common)  # the entries before it are shared
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


_UNITS = {u: u * 4096 for u in (b"-100, ", b"-100,")}


def _mask_tail(raw: bytes, u: int, v: int, x: int, y: int) -> tuple[int, int] | None:
    """(k, s) when the mask entry ``raw[u:v]`` is ``-100`` k times and then the token entry ``raw[x:y]``
    from offset ``s`` on, where one of its items starts (``s == -1``: nothing after the -100s); else None.
    Such a mask is valid JSON wherever the token entry is (:func:`_placed`). Compared in place."""
    j = raw.rfind(b"-", u, v)  # ids hold no "-": the last one starts the last -100
    q, k = u, 0  # where the tokens' text starts in the mask
    if j >= 0:
        unit = b"-100, " if raw.startswith(b"-100, ", u) else b"-100,"
        w = len(unit)
        k = (j - u) // w + 1
        head = (k - 1) * w + 4  # "-100, " k - 1 times, then "-100"
        units = _UNITS[unit] if head <= len(_UNITS[unit]) else unit * k
        if j - u != (k - 1) * w or not raw.startswith(units[:head], u):
            return None
        if not raw.startswith(unit[4:], j + 4):  # nothing after it but blanks: every position is context
            return None if raw[j + 4:v].strip(_WS) else (k, -1)
        q = j + w
    s = y - (v - q)  # where that text starts in the token entry
    if s < x or not raw.startswith(raw[q:v], s):
        return None
    if s > x:  # after a comma (and blanks) of the token entry: an item starts there
        c = raw.rfind(b",", x, s)
        if c < 0 or raw[c + 1:s].strip(_WS):
            return None
    elif q != u and not raw[x:y].strip(_WS):  # after "-100, " comes an item
        return None
    return k, s


def _first_trained(raw: bytes, cut: tuple[int, int, int, int], n: int, lo: bytes, common: int,
                   commas: dict[int, int]) -> int | None:
    """k, when the mask entry ``raw[u:v]`` is ``-100`` k times and then exactly the token entry ``raw[x:y]``
    (``n`` ids) from its entry k on (mask = label = the token, what ``tokenize_for_trainer`` writes). The
    entries are counted by their commas, once for the text all token entries share (``lo[:common]``)."""
    u, v, x, y = cut
    got = _mask_tail(raw, u, v, x, y)
    if got is None:
        return None
    k, s = got
    if s < 0:  # all context: as many -100s as tokens
        return k if k == n else None
    e = s - x
    if 0 < e <= common:  # the masks' entry k is the tokens' entry k
        if e not in commas:
            commas[e] = lo.count(b",", 0, e)
        return k if commas[e] == k else None
    return k if (raw.count(b",", x, s) if e < y - s else n - 1 - raw.count(b",", s, y)) == k else None


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
