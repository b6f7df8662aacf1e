"""The new records of a growing JSONL file or JSON array, read from where the last read stopped.

A followed file (a capture's ``proxy_trace.jsonl`` while the proxy appends to it, a ``trace.json``
extended in place) is never parsed whole again: :class:`Tail` keeps the byte offset after the last
complete record and, on each :meth:`Tail.read`, reads only the bytes past it (``bytes_read`` counts
every byte taken from disk). A record still being written (a JSONL line without its newline that does
not decode yet, an array element cut short) is left for the next read, not reported. A file that
shrinks, is replaced (another inode) or whose bytes before the offset changed is read again from the
start, and :attr:`Tail.notes` says so. Decoding is the streaming reader's
(:func:`viewer.sources.jsonvalue.decode_value`, the stdlib's ``json`` for what msgspec refuses), so a
followed record is the value :mod:`viewer.sources.jsonstream` would give.
"""
from __future__ import annotations

import codecs
import json
import os
from pathlib import Path
from typing import Any, Callable

from viewer.rollout import Problem
from viewer.sources.jsonio import SKIP, WHITESPACE_BYTES as _WS, jsonl_record, number_error
from viewer.sources.jsonvalue import MORE, NO, decode_value, value_end

__all__ = ["Tail"]

_GUARD = 64  # bytes before the offset compared on each read: a rewrite with other content is noticed
CHUNK = 16 << 20  # bytes read at most per read: a big file is taken in steps, memory and a poll's work bounded


class Tail:
    """One growing record file. ``read()`` returns the records completed since the last call."""

    def __init__(self, path: Path, label: str | None = None, typed: Callable[[Any], Any] | None = None,
                 max_bytes: int = 0):
        self.path = Path(path)
        self.label = label or self.path.name
        self.typed = typed
        self.max_bytes = max_bytes  # 0: no limit; past it the file is not read further (a problem says so)
        self.bytes_read = 0  # every byte read from disk, restarts included (tests and the bench read it)
        self.restarts = 0
        self.notes: list[str] = []  # what happened to the file (shrank, replaced, rewritten): said to the user
        self.chunk = CHUNK  # doubled while one record is longer than a chunk
        self._reset()

    def _reset(self) -> None:
        self.offset = 0  # bytes consumed: the next read starts here
        self.container: str | None = None  # "jsonl" | "array" once the first byte is seen
        self.problems: list[Problem] = []
        self.count = 0  # records returned since the (re)start
        self.waiting = False  # the file ends inside a record (being written)
        self._ident: tuple[int, int] | None = None
        self._stamp: tuple[int, int] | None = None  # (size, mtime) of the last read: unchanged = nothing to do
        self._guard = b""
        self._lines: list[int] = []
        self._line = 0  # JSONL lines consumed
        self._mid_line = False  # the last record read had no newline yet: the next one ends its line
        self._closed = False  # an array's closing bracket was seen (it may still be extended in place)

    def where(self, index: int, path: str = "") -> str:
        """A record's place, as :class:`~viewer.sources.jsonstream.RecordStream` says it."""
        line = self._lines[index] if 0 <= index < len(self._lines) else None
        loc = f"record {index}" + (f" (line {line})" if line else "")
        return f"{loc} {path}".rstrip() if path else loc

    def _restart(self, why: str) -> None:
        self.notes.append(f"{self.label} {why}: read again from the start")
        self.restarts += 1
        self._reset()

    def read(self) -> tuple[list[Any], bool]:
        """(records completed since the last read, whether the file was read again from the start)."""
        try:
            st = os.stat(self.path)
        except OSError:
            return [], False
        restarted = False
        ident = (st.st_dev, st.st_ino)
        if self._ident is not None and ident != self._ident:
            self._restart("was replaced")
            restarted = True
        elif st.st_size < self.offset:
            self._restart(f"shrank ({st.st_size:,} bytes, {self.offset:,} read)")
            restarted = True
        stamp = (st.st_size, st.st_mtime_ns)
        if stamp == self._stamp:
            return [], restarted
        if self.max_bytes and st.st_size > self.max_bytes:
            if not any(p.message.startswith("over the size limit") for p in self.problems):
                self.problems.append(Problem(self.label, "", f"over the size limit ({self.max_bytes:,} bytes): "
                                                             "not followed further"))
            return [], restarted
        try:
            with open(self.path, "rb") as f:
                start = max(0, self.offset - len(self._guard))
                f.seek(start)
                data = f.read(len(self._guard) + self.chunk)
        except OSError as e:
            self.problems.append(Problem(self.label, "", f"cannot read file: {e.strerror or e}"))
            return [], restarted
        self.bytes_read += len(data)
        if self._guard and data[:len(self._guard)] != self._guard:
            self._restart("was rewritten with other content")
            self._ident, self._stamp = ident, None
            return self.read()[0], True
        data = data[self.offset - start:]
        more = len(data) >= self.chunk  # the file goes on past this chunk: the next read continues (no stamp)
        self._ident, self._stamp = ident, (None if more else stamp)
        records, used = self._parse(data)
        if more and not used:  # one record longer than a chunk: take more next time
            self.chunk *= 2
        if used:
            self.offset += used
            kept = data[max(0, used - _GUARD):used]
            self._guard = (self._guard + kept)[-_GUARD:] if len(kept) < _GUARD else kept
        self.count += len(records)
        return records, restarted

    # ------------------------------------------------------------------ parsing
    def _parse(self, data: bytes) -> tuple[list[Any], int]:
        pos = 0
        if self.container is None:
            if self.offset == 0 and data.startswith(codecs.BOM_UTF8):
                pos = 3
            body = data[pos:].lstrip(_WS)
            if not body:
                self.waiting = False
                return [], 0
            pos = len(data) - len(body)
            if body[:1] == b"[":
                self.container, pos = "array", pos + 1
            elif body[:1] == b"{":
                self.container = "jsonl"
            else:
                self.problems.append(Problem(self.label, "byte 0", "not a JSON array or JSONL records: not followed"))
                self.container = "other"
        if self.container == "jsonl":
            return self._jsonl(data, pos)
        if self.container == "array":
            return self._array(data, pos)
        return [], 0

    def _decode(self, view: memoryview, where: str) -> Any:
        rec = decode_value(view, self.typed)
        if rec is NO:  # Python's parser decides, with its message
            try:
                return json.loads(bytes(view).decode("utf-8", "replace"))
            except (ValueError, RecursionError) as e:
                msg = e.msg if isinstance(e, json.JSONDecodeError) else number_error(e) if isinstance(e, ValueError) else "too deep"
                self.problems.append(Problem(self.label, where, f"invalid record skipped: {msg}"))
                return SKIP
        return rec

    def _jsonl(self, data: bytes, pos: int) -> tuple[list[Any], int]:
        out: list[Any] = []
        view = memoryview(data)
        end_all = len(data)
        if self._mid_line and data[pos:pos + 1] == b"\n":  # the newline of the record read last time
            pos += 1
        self._mid_line = False
        while pos < end_all:
            nl = data.find(b"\n", pos)
            if nl < 0:  # no newline yet: a complete record (the writer's last, unterminated) or one being written
                rec = decode_value(view[pos:], self.typed) if data[pos:].strip(_WS) else SKIP
                if rec is NO or rec is SKIP:
                    self.waiting = rec is NO
                    return out, pos
                self._line += 1
                self._lines.append(self._line)
                out.append(rec)
                self.waiting, self._mid_line = False, True
                return out, end_all
            self._line += 1
            line = data[pos:nl]
            if line.strip(_WS):
                rec = decode_value(view[pos:nl], self.typed)
                if rec is NO:
                    rec = jsonl_record(line.decode("utf-8", "replace"), self._line, self.label, self.problems)
                if rec is not SKIP:
                    self._lines.append(self._line)
                    out.append(rec)
            pos = nl + 1
        self.waiting = False
        return out, pos

    def _array(self, data: bytes, pos: int) -> tuple[list[Any], int]:
        out: list[Any] = []
        view = memoryview(data)
        used = pos
        self.waiting = False
        while True:
            while pos < len(data) and data[pos] in _WS:
                pos += 1
            if pos >= len(data):
                return out, used
            c = data[pos:pos + 1]
            if c == b"]":  # the end for now: an in-place extension replaces it, so the offset stays before it
                self._closed = True
                return out, used
            if c == b",":
                if not self.count and not out:
                    self.problems.append(Problem(self.label, f"byte {self.offset + pos}", "a comma before the first record"))
                pos += 1
                continue
            n = value_end(view[pos:])
            if n == MORE or n is None:  # cut short (being written), or not JSON yet: wait for more bytes
                self.waiting = True
                return out, used
            rec = self._decode(view[pos:pos + n], self.where(self.count + len(out)))
            if rec is not SKIP:
                self._lines.append(0)
                out.append(rec)
            pos += n
            used = pos
