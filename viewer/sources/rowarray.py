"""The byte span of each element of a JSON array file, found without parsing the file whole (issue 35).

tau-bench's results (and any file that is one JSON array of rows) were parsed whole to be indexed: 3x
the file in Python objects. :func:`index_array` reads the file a chunk at a time and answers each
element's span; the row layer then decodes an element when its row is read. It answers only where
that gives exactly what parsing the file whole gives: the file is checked as msgspec would decode it
whole (its structure by msgspec's skip, which builds nothing; the elements' bytes as UTF-8; no integer
longer than Python's json accepts). Anything else answers None and the caller parses the file whole
as before, so values and error messages stay the stdlib's: not an array, a BOM, ``NaN`` or a lone
surrogate (the skip refuses them), a broken or truncated array, ``[1,]``.

Most elements are found many at a time: the elements up to the last one in the buffer that opens as
the first does (``{"task_id":``: inside a string its quote would be escaped) are decoded as one array
of ``msgspec.Raw`` (their bytes, checked, nothing built), in place: the ``[`` or comma before the run
and the comma after it are ``[`` and ``]`` for that decode. Where that guess fails (no such opening,
an element longer than half the buffer), one element at a time, its end found by the skip. The buffer
is one bytearray, read into and reused, and so are the UTF-8 check's work arrays: fresh buffers of a
chunk's size cost as much in page faults as the whole check.
"""
from __future__ import annotations

import re
from array import array
from typing import Callable

import msgspec
from viewer.sources.lazynumpy import np  # imported on first use (a capture open needs none)

from viewer.sources.recordtypes import long_digit_run  # json's limit on an integer's digits
from viewer.sources.jsonio import WHITESPACE_BYTES as _WS  # (JSON's whitespace)

__all__ = ["index_array", "ARRAY_CHUNK"]

ARRAY_CHUNK = 2 << 20
_RAW_LIST = msgspec.json.Decoder(list[msgspec.Raw])  # the elements' bytes, checked, nothing built
_NONWS = re.compile(rb"[^ \t\r\n]")
_HEAD = re.compile(rb'\{[ \t\r\n]*"[^"\\]{1,60}"[ \t\r\n]*:')  # an object's opening and first key
_HIGH = 0x8080808080808080  # the top bit of each byte of a word: set on a non-ASCII byte
_SKIP = msgspec.json.Decoder(msgspec.Raw)  # one value's end, nothing built
_AT = re.compile(r"\(byte (\d+)\)")
MORE = -1
_PEEK = 4096  # the bytes looked at for the array's "[" before the file is indexed


def _end(view: memoryview, eof: bool) -> int | None:
    """Where the value at the start of ``view`` ends (its length, maybe with whitespace after it), MORE
    when the view may end inside it, None when it is malformed. msgspec has no ``raw_decode``: it names
    the first byte after the value as "trailing characters", and where a value is cut short, either says
    "truncated" or (an escape, a literal or a number cut) finds it malformed at the view's last bytes."""
    try:
        _SKIP.decode(view)
        return len(view)
    except (msgspec.DecodeError, RecursionError) as e:
        text = str(e)
    at = _AT.search(text)
    if at is not None and "trailing characters" in text:
        return int(at.group(1)) - 1
    if not eof and ("truncated" in text or at is not None and int(at.group(1)) >= len(view) - 8):
        return MORE
    return None


class _Whole(Exception):
    """The file must be parsed whole (see the module doc)."""


def _decodes(text: bytes) -> bool:
    try:
        text.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class _Index:
    """One pass over the file (see :func:`index_array`): ``buf[:n]`` holds the file from offset ``base``."""

    def __init__(self, fh, accept: Callable[[list[bytes]], bool] | None, chunk: int):
        self.fh, self.accept, self.chunk = fh, accept, chunk
        self.buf, self.n, self.base, self.eof = bytearray(2 * chunk), 0, 0, False
        self.work, self.high = np.empty(2 * chunk >> 3, np.uint64), np.empty(2 * chunk >> 3, np.bool_)
        self.starts, self.ends = array("q"), array("q")
        self.head: list[bytes] | None = [] if accept is not None else None
        self.guess_from = 0  # after a wrong guess, none before this offset: a guess costs a decode of the chunk

    def more(self, keep: int, want: int) -> None:
        """Drop buf[:keep] and read the next ``want`` bytes of the file after the rest."""
        rest = self.n - keep
        if rest + want > len(self.buf):  # an element longer than the buffer: a bigger one
            self.buf = self.buf[keep:self.n] + bytearray(rest + want)
            self.work, self.high = np.empty(len(self.buf) >> 3, np.uint64), np.empty(len(self.buf) >> 3, np.bool_)
        else:
            with memoryview(self.buf) as mv:
                mv[:rest] = mv[keep:self.n]
        self.base += keep
        with memoryview(self.buf) as mv:
            got = self.fh.readinto(mv[rest:rest + want])
        self.n, self.eof = rest + got, not got

    def utf8(self, a: int, b: int) -> bool:
        """Whether ``buf[a:b]`` (whole characters: it starts and ends with an ASCII byte) is UTF-8. A
        character never holds an ASCII byte, so only the 8-byte words that hold a non-ASCII byte are
        decoded, as one text: a run of such words stays whole, an ASCII word (zeros) stands between runs
        (typedrow.utf8_valid's rule, in place and in one decode: a curly quote every kilobyte made a
        decode per run cost as much as the skip)."""
        m = (b - a) >> 3
        w, high = self.work[:m], self.high[:m]
        np.bitwise_and(np.frombuffer(self.buf, np.uint64, m, a), np.uint64(_HIGH), out=w)
        hits = np.flatnonzero(np.not_equal(w, 0, out=high))  # (the nonzero of bools is the fast one)
        tail = bytes(self.buf[a + (m << 3):b])
        if not len(hits):
            return tail.isascii() or _decodes(tail)
        rows = np.frombuffer(self.buf, np.uint8, m << 3, a).reshape(m, 8)[hits]
        rows = np.insert(rows, np.flatnonzero(np.diff(hits) != 1) + 1, 0, axis=0)
        text = rows.tobytes() + (tail if hits[-1] == m - 1 else b"\0" + tail)
        return _decodes(text)

    def run_lengths(self, a: int, b: int) -> list[int] | None:
        """The lengths of the elements of ``buf[a:b]``, an array's ``[``/``,`` ... ``]``/``,``, checked
        and decoded in place as one array (buf[a] and buf[b - 1] are "[" and "]" meanwhile); None where
        msgspec refuses it. Raises _Whole where its bytes are not what json.loads accepts."""
        buf = self.buf
        was = buf[a], buf[b - 1]
        buf[a], buf[b - 1] = 0x5B, 0x5D
        view = memoryview(buf)[a:b]
        try:
            raws = _RAW_LIST.decode(view)
            lengths = list(map(len, raws))
            del raws  # they hold the buffer
            if long_digit_run(view) or not self.utf8(a, b):
                raise _Whole
            return lengths
        except (msgspec.DecodeError, RecursionError):
            return None
        finally:
            view.release()
            buf[a], buf[b - 1] = was

    def note(self, p: int, lengths: list[int]) -> None:
        """Record the spans of elements of these lengths, the first one after ``buf[p]`` (separated by
        whitespace and commas: the decode checked that)."""
        buf, base = self.buf, self.base
        for k in lengths:
            s = _NONWS.search(buf, p).start()
            p = s + k
            self.starts.append(base + s)
            self.ends.append(base + p)
            p = buf.find(b",", p) + 1
        self.check_head(False)

    def check_head(self, done: bool) -> None:
        """Show ``accept`` the first five elements once found (all of a shorter array at the end)."""
        if self.head is None:
            return
        got = self.head
        got += [bytes(self.buf[self.starts[i] - self.base:self.ends[i] - self.base])
                for i in range(len(got), min(5, len(self.starts)))]
        if len(got) == 5 or done:
            self.head = None
            if not self.accept(got):
                raise _Whole

    def cut(self, s: int) -> int:
        """A comma after ``buf[s]`` that probably ends a run of whole elements: the last one before an
        object that opens as the element at ``s`` does. A guess, proven by decoding the run. -1: none."""
        buf, n = self.buf, self.n
        if self.base + s < self.guess_from or (head := _HEAD.match(buf, s, n)) is None:
            return -1
        nxt = buf.rfind(head.group(), s + 1, n)
        comma = buf.rfind(b",", s, nxt) if nxt > 0 else -1
        return comma if comma > 0 and not buf[comma + 1:nxt].strip(_WS) else -1

    def one(self, s: int) -> int | None:
        """The length of the element at ``buf[s]``, MORE when the buffer ends inside it, None when it is
        malformed: msgspec's skip says where it ends, a decode of exactly that proves it."""
        with memoryview(self.buf) as mv, mv[s:self.n] as view:
            k = _end(view, self.eof)
            if k is None or k == MORE:
                return k
            elem = bytes(view[:k]).rstrip(_WS)
        try:
            ok = len(_RAW_LIST.decode(b"[" + elem + b"]")) == 1
        except (msgspec.DecodeError, RecursionError):
            return None
        if not ok or long_digit_run(elem) or not self.utf8(s, s + len(elem)):
            raise _Whole
        return len(elem)

    def run(self) -> tuple[array, array]:
        self.more(0, self.chunk)
        m = _NONWS.search(self.buf, 0, self.n)
        if m is None or self.buf[m.start()] != 0x5B:  # not "[" (a BOM, an object, a long run of whitespace)
            raise _Whole
        p, after_comma = m.start() + 1, False  # buf[p:]: the next element (or "]"), after buf[p - 1], "[" or ","
        while True:
            if not self.eof and self.n - p < self.chunk // 2:
                self.more(p - 1, self.chunk)
                p = 1
                continue
            buf, n = self.buf, self.n
            if self.eof:  # the rest: the last elements, "]" and whitespace
                end = n
                while end > p and buf[end - 1] in _WS:
                    end -= 1
                if buf[end - 1] != 0x5D:
                    raise _Whole
                lengths = self.run_lengths(p - 1, end)
                if lengths is None or (after_comma and not lengths):  # "[1,]": the stdlib says what is wrong
                    raise _Whole
                self.note(p, lengths)
                self.check_head(True)
                return self.starts, self.ends
            q = _NONWS.search(buf, p, n)
            s = q.start() if q is not None else n
            c = self.cut(s) if q is not None else -1
            if c > 0:
                lengths = self.run_lengths(p - 1, c + 1)
                if lengths:
                    self.note(p, lengths)
                    p, after_comma = c + 1, True
                    continue
                self.guess_from = self.base + n  # a wrong guess, or a broken element: one at a time
            # one element (an element longer than half a chunk, no guess, a wrong one)
            if q is not None and buf[s] == 0x5D:  # "]": the end ("[1,]": the stdlib says what is wrong)
                if after_comma:
                    raise _Whole
                return self.finish(s + 1)
            k = self.one(s) if q is not None else None
            t = _NONWS.search(buf, s + k, n) if k is not None and k != MORE else None
            if t is None:
                if k is None and q is not None:
                    raise _Whole
                self.more(p - 1, max(self.chunk, 2 * (n - p)))  # cut by the buffer's end: read on
                p = 1
                continue
            sep = buf[t.start()]
            if sep not in b",]":
                raise _Whole
            self.starts.append(self.base + s)
            self.ends.append(self.base + s + k)
            self.check_head(False)
            p, after_comma = t.start() + 1, True
            if sep == 0x5D:
                return self.finish(p)

    def finish(self, p: int) -> tuple[array, array]:
        """The array closed before ``buf[p]``: only whitespace may follow, to the end of the file."""
        while not self.buf[p:self.n].strip(_WS):
            if self.eof:
                self.check_head(True)
                return self.starts, self.ends
            self.more(self.n, self.chunk)
            p = 0
        raise _Whole


def index_array(fh, accept: Callable[[list[bytes]], bool] | None = None,
                chunk: int = ARRAY_CHUNK) -> tuple[array, array] | None:
    """(starts, ends): the byte span of each element of the JSON array that is the whole of ``fh`` (read
    with ``readinto``), or None when it must be parsed whole (see the module doc). Holds two chunks.
    ``accept`` is shown the first five elements' bytes (all of a shorter array) as soon as they are
    found: False (the array is not a list of rows) stops there, with None."""
    head = fh.read(_PEEK)  # most whole-JSON files are one object (a trajectory, a log): said before the
    first = head.lstrip(_WS)[:1]  # index's two chunks are made (4 MiB zeroed a file: 0.5 ms of a .traj's read)
    if first != b"[" and (first or len(head) < _PEEK):  # (a BOM, an object, an empty file: parsed whole)
        return None
    fh.seek(0)
    try:
        return _Index(fh, accept, chunk).run()
    except _Whole:
        return None
