"""Record files read one record at a time, so a 700 MB trace is never held as one document.

:func:`open_records` returns a :class:`RecordStream`: iterating it yields the records of a
JSON array or a JSONL file as each is parsed (the file is read in byte chunks; an array's
elements and a JSONL file's lines are decoded in place by msgspec, :mod:`viewer.sources.recordtypes`,
falling back to the stdlib's ``json`` for what msgspec refuses); the caller turns each record
into compact values and drops it. Peak memory is one chunk plus one record instead of the
whole text plus every Python object of every record.

Anything else (a wrapper object, one record, an empty file, a file over the size limit)
is read whole by :func:`viewer.sources.jsonio.read_records`, whose messages, line numbers
and salvage rules the stream reproduces exactly for arrays and JSONL: a broken element
ends the array with the complete records before it kept, a bad JSONL line is skipped.
Callers pause the cyclic GC around the whole read (:func:`viewer.sources.jsonio.gc_paused`).
"""
from __future__ import annotations

import codecs
import json
import re
from pathlib import Path
from typing import Any, Callable, Iterator


from viewer.budgets import Limits
from viewer.rollout import Problem
from viewer.sources.recordtypes import decode_trace_record
from viewer.sources.jsonvalue import MORE as _MORE, NO as _NO, decode_value as _decode, guess_end as _guess_end, value_end as _value_end
from viewer.sources.jsonio import (SKIP, WHITESPACE as _WS, RecordFile, jsonl_record, nesting_exceeded, number_error,
                                   read_records, size_problem)

__all__ = ["RecordStream", "open_records", "CHUNK_CHARS"]

CHUNK_CHARS = 4 << 20  # bytes read at a time (a record cut by the end is found again: keep chunks >> records)
_decoder = json.JSONDecoder()


class RecordStream:
    """The records of one file, parsed as they are iterated (once).

    Same reading surface as :class:`~viewer.sources.jsonio.RecordFile` for its users:
    ``label``, ``problems``, ``parsed``, ``container``, ``wrapper``, :meth:`where`. Problems
    found while streaming are appended as they are met, so read them after iterating.
    """

    def __init__(self, path: Path, label: str, whole: RecordFile | None, limits: Limits | None = None,
                 typed: Callable[[Any], Any] | None = None):
        self.path, self.label = path, label
        self.limits = limits
        self.typed = typed  # a streamed array's records decoded with these types when they fit
        self._whole = whole  # set when the file was read whole (not an array or JSONL)
        self.problems: list[Problem] = whole.problems if whole is not None else []
        self.parsed = whole.parsed if whole is not None else True
        self.container = whole.container if whole is not None else "array"
        self.wrapper = whole.wrapper if whole is not None else None
        self._lines: list[int] = []

    def line_of(self, index: int) -> int | None:
        if self._whole is not None:
            return self._whole.line_of(index)
        return self._lines[index] if 0 <= index < len(self._lines) else None

    def where(self, index: int, path: str = "") -> str:
        line = self.line_of(index)
        loc = f"record {index}" + (f" (line {line})" if line else "")
        return f"{loc} {path}".rstrip() if path else loc

    def first(self) -> Any:
        """The first record without consuming the stream (None when there is none)."""
        if self._whole is not None:
            return self._whole.records[0] if self._whole.records else None
        if not hasattr(self, "_peek"):
            self._iter = self._records()
            self._peek = next(self._iter, None)
        return self._peek

    def __iter__(self) -> Iterator[Any]:
        """The records; past the ``records`` budget parsing stops and :class:`BudgetExceeded` is raised."""
        limit = int(self.limits.records) if self.limits is not None else 0
        n = 0
        for rec in self._all():
            n += 1
            if limit and n > limit:
                self.limits.check("records", n, f"{self.label}: {self.where(n - 1)}")
            yield rec

    def _all(self) -> Iterator[Any]:
        if self._whole is not None:
            yield from self._whole.records
            return
        if hasattr(self, "_peek"):
            it, peek = self._iter, self._peek
            del self._peek
            if peek is None:
                return
            yield peek
            yield from it
            return
        yield from self._records()

    def _records(self) -> Iterator[Any]:
        try:
            with open(self.path, "rb") as f:
                reader = _Reader(f, self)
                if self.container == "jsonl":
                    yield from _jsonl(reader, self)
                else:
                    yield from _array(reader, self)
        except OSError as e:
            self.problems.append(Problem(self.label, "", f"cannot read file: {e.strerror or e}"))


def open_records(path: Path, label: str | None = None, max_mb: float | None = None,
                 limits: Limits | None = None, trace: bool = False) -> RecordStream:
    """Stream a JSON array or JSONL file; read anything else whole (see the module doc).
    ``limits``: iterating stops at its ``records`` budget (BudgetExceeded). ``trace``: the records
    are proxy records; an array's or a JSONL file's are decoded with their logprob entries typed
    (:func:`viewer.sources.recordtypes.decode_trace_record`)."""
    label = label or path.name
    if size_problem(path, label, max_mb) is None:
        kind = _sniff(path)
        if kind is not None:
            s = RecordStream(path, label, None, limits, decode_trace_record if trace else None)
            s.container = kind
            return s
    return RecordStream(path, label, read_records(path, label, max_mb, limits), limits)


def _sniff(path: Path) -> str | None:
    """"array" or "jsonl" when the file can be streamed, else None (read it whole)."""
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 16)
            if head.startswith(codecs.BOM_UTF8):
                head = head[3:]
            body = head.lstrip(_WS.encode())
            if body[:1] == b"[":
                return "array"
            if body[:1] != b"{":
                return None
            # JSONL: the first line is a complete object and another line follows
            nl = body.find(b"\n")
            while nl < 0 and len(head) == 1 << 16:
                more = f.read(1 << 20)
                if not more:
                    break
                body += more
                nl = body.find(b"\n")
            if nl < 0:
                return None
            first = _decode(memoryview(body)[:nl], None)  # msgspec: a long first line costs no stdlib parse
            if first is _NO:
                try:
                    first = json.loads(body[:nl])
                except (ValueError, RecursionError):  # not JSON (UnicodeDecodeError is a ValueError), too deep
                    return None
            ok = isinstance(first, dict)
            rest = body[nl + 1:]
            while not rest.strip():
                more = f.read(1 << 20)
                if not more:
                    return None
                rest = more
            return "jsonl" if ok else None
    except OSError:
        return None


class _Reader:
    """The file's bytes in chunks, as valid UTF-8: an undecodable byte is replaced (U+FFFD) and
    reported once, at its byte offset. ASCII chunks (the usual trace) pass through uncopied."""

    def __init__(self, f, stream: RecordStream):
        self.f, self.stream = f, stream
        self.dec = codecs.getincrementaldecoder("utf-8")("strict")
        self.bytes_done = 0
        self.first = True
        self.eof = False
        self.ascii = True  # every chunk so far was ASCII: a character offset is a byte offset

    def read(self, n_bytes: int) -> bytes:
        raw = self.f.read(n_bytes)
        self.eof = not raw
        if self.first:
            self.first = False
            if raw.startswith(codecs.BOM_UTF8):
                raw = raw[3:]
                self.bytes_done += 3
        if raw.isascii() and not self.dec.getstate()[0]:
            self.bytes_done += len(raw)
            return raw
        try:
            text = self.dec.decode(raw, final=self.eof)
        except UnicodeDecodeError as e:
            at = self.bytes_done - len(self.dec.getstate()[0]) + e.start
            self.stream.problems.insert(0, Problem(self.stream.label, f"byte {at}",
                                                   "not valid UTF-8; undecodable bytes replaced"))
            pending = self.dec.getstate()[0]
            self.dec = codecs.getincrementaldecoder("utf-8")("replace")
            text = self.dec.decode(pending + raw, final=self.eof)
        self.bytes_done += len(raw)
        self.ascii = self.ascii and text.isascii()
        return text.encode("utf-8")

    def nchars(self, b: bytes) -> int:
        """Characters in ``b`` (whole characters: it starts and ends on boundaries)."""
        return len(b) if self.ascii else len(b.decode("utf-8"))


_NONWS = re.compile(rb"[^ \t\r\n]")


def _array(r: _Reader, s: RecordStream) -> Iterator[Any]:
    """Elements of a top-level array; the rules and messages of jsonio's array salvage.

    Each element is decoded by msgspec from the bytes (one skip to find its end, one decode of
    that slice); where msgspec refuses an element, :mod:`json` decodes it, so values and error
    messages are the stdlib's. Positions: bytes here, reported as the characters an editor shows."""
    buf = r.read(CHUNK_CHARS)
    pos = 0
    line0, col0 = 1, 0  # line and 0-based column (characters) of buf[0]
    seen, seen_line = 0, 1  # newlines counted up to buf[seen]
    want = CHUNK_CHARS

    def refill() -> bool:
        """Drop what was consumed and append the next chunk; False once the file is exhausted."""
        nonlocal buf, pos, line0, col0, seen, seen_line
        if r.eof:
            return False
        line = line_at(pos)
        if line != line0:
            line0 = line
            nl = buf.rfind(b"\n", 0, pos)
            col0 = r.nchars(buf[nl + 1:pos])
        else:
            col0 += r.nchars(buf[:pos]) if not r.ascii else pos
        rest, buf = buf[pos:], b""  # the consumed chunk is freed before the next is read: peak memory
        buf = rest + r.read(want)
        del rest
        pos = seen = 0
        seen_line = line0
        return True

    def line_at(p: int) -> int:
        """Line of buf[p], counting newlines only since the last call (records come in order)."""
        nonlocal seen, seen_line
        nl = buf.find(b"\n", seen, p)  # memchr: a trace written by json.dumps has no newline to count
        if nl >= 0:
            seen_line += buf.count(b"\n", nl, p)
        seen = p
        return seen_line

    def skip_ws() -> bool:
        nonlocal pos
        while True:
            m = _NONWS.search(buf, pos)
            if m is not None:
                pos = m.start()
                return True
            pos = len(buf)
            if not refill():
                return False

    def line_col(p: int) -> tuple[int, int]:
        nl = buf.count(b"\n", 0, p)
        if nl:
            return line0 + nl, r.nchars(buf[buf.rfind(b"\n", 0, p) + 1:p]) + 1
        return line0, col0 + r.nchars(buf[:p]) + 1

    skip_ws()
    pos += 1  # the "[" _sniff saw
    n = 0
    msg = ""
    while True:
        if not skip_ws():
            msg = "truncated: the array is not closed"
            break
        if buf[pos] == 0x5D and n == 0:  # "]"
            pos += 1
            break
        view = memoryview(buf)[pos:]
        k, value = _guess_end(buf, pos), _NO
        if k is not None:  # decoded whole, the guess is proven; else the skip below finds the end
            value = _decode(view[:k], s.typed)
        if value is _NO:
            k = _value_end(view)
            if (k == _MORE or k is not None and k >= len(view)) and not r.eof:  # may continue (a number cut
                view.release()  # by the chunk, a record longer than it): read on
                want = max(want, 2 * (len(buf) - pos))
                refill()
                continue
            value = _decode(view[:k], s.typed) if k is not None and k >= 0 else _NO
        view.release()
        if value is _NO:
            text = buf[pos:].decode("utf-8")  # valid: the reader made it so
            try:
                value, end = _decoder.raw_decode(text)
                if end >= len(text) and not r.eof:
                    raise json.JSONDecodeError("may continue", text, end)  # a number cut by the chunk
            except RecursionError:
                raise nesting_exceeded(s.label, s.where(n), s.limits) from None
            except ValueError as e:  # JSONDecodeError, or a number of too many digits (no position: stop here)
                if not isinstance(e, json.JSONDecodeError):
                    msg = f"invalid JSON: {number_error(e)}"
                    break
                if not r.eof:
                    want = max(want, 2 * (len(buf) - pos))  # a record longer than a chunk: read more next time
                    refill()
                    continue
                msg, pos = f"invalid or truncated JSON: {e.msg}", pos + len(text[:e.pos].encode("utf-8"))
                break
            k = len(text[:end].encode("utf-8"))
        s._lines.append(line_at(pos))
        n += 1
        yield value
        value = None
        pos += k
        if not skip_ws():
            msg = "truncated: the array is not closed"
            break
        if buf[pos] == 0x2C:  # ","
            pos += 1
            continue
        if buf[pos] == 0x5D:  # "]"
            pos += 1
            if skip_ws():
                msg = "unexpected content after the array"
            break
        msg = "expected ',' or ']' between records"
        break
    if msg:
        ln, col = line_col(min(pos, len(buf)))
        s.problems.append(Problem(s.label, f"line {ln}, column {col}",
                                  f"{msg}; kept the {n} complete record(s) before it"))


def _jsonl(r: _Reader, s: RecordStream) -> Iterator[Any]:
    """One record a line; a bad line is reported and skipped (jsonio's JSONL rules).

    Lines are split as bytes and each is decoded like an array element (:func:`_decode`: typed
    when it fits, msgspec's generic values otherwise); only a line msgspec refuses goes to
    :func:`~viewer.sources.jsonio.jsonl_record` (the stdlib), which says what is wrong with it or
    accepts Python's extensions (NaN, a blank line of Unicode spaces), so values and messages are
    the stdlib's."""
    tail = b""
    n_line = 0
    while True:
        # a line longer than a chunk: read at least as much as is pending, so a long line costs
        # a few concatenations, not one per chunk
        buf = tail + r.read(max(CHUNK_CHARS, len(tail)))
        whole = len(buf) if r.eof else buf.rfind(b"\n") + 1  # the complete lines end here
        tail = buf[whole:]
        view = memoryview(buf)  # lines are decoded in place: no copy of the chunk
        pos = 0
        while pos < whole:
            nl = buf.find(b"\n", pos, whole)
            end = whole if nl < 0 else nl
            n_line += 1
            rec = _decode(view[pos:end], s.typed)
            if rec is _NO:  # whole characters: the reader keeps a cut one back, and "\n" is never inside one
                rec = jsonl_record(buf[pos:end].decode("utf-8"), n_line, s.label, s.problems, s.limits)
            pos = end + 1
            if rec is not SKIP:
                s._lines.append(n_line)
                yield rec
            rec = None
        del view, buf
        if r.eof:
            break
