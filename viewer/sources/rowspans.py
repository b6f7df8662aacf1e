"""Where each row's bytes lie in a JSONL file, and a row's bytes read back (issue 35).

The row layer (:mod:`viewer.sources.rowdata`) keeps a file's rows as byte spans, never as one parsed
document, so a 200 MB file costs its spans, not its Python objects:

* **JSONL**: :func:`scan_lines` finds the lines, one 1 MiB block at a time;
* **a JSON array** (tau-bench's results): each element's span, :mod:`viewer.sources.rowarray`;
* :class:`SpanReader`: the file kept open, a span read with one seek and read; spans read in order
  (a scan, every row one after another) come from one read-ahead block instead, which grows from
  64 KiB to 1 MiB while the reads stay in order; a span of 64 KiB or more is read by itself.
"""
from __future__ import annotations

from typing import Callable

__all__ = ["scan_lines", "SpanReader", "LINE_BLOCK"]

LINE_BLOCK = 1 << 20
_GAP = 4096  # a span starting at most this far after the last one is read in order (whitespace between)
# A span at least this long is read by itself even in order: from a read-ahead block its bytes were copied twice
# (file -> block -> span), ~7 ms of CPU per 200 MB of Atropos lines (~160 KB each) a pass (issue 35)
_DIRECT = 64 << 10


def scan_lines(fh, offsets: list[int], upto: int | None, cap: int, too_far: Callable[[], Exception]) -> int | None:
    """Append the start of each line after ``offsets[-1]`` (``fh`` is at that offset) until line ``upto``
    is known (None: to the end). Returns the file's size when its end was reached, else None.
    ``too_far()`` is raised when the scan passes ``cap`` bytes (0: no cap)."""
    pos = offsets[-1]
    while True:
        block = fh.read(LINE_BLOCK)
        if not block:
            return pos
        i = block.find(b"\n")
        while i >= 0:  # memchr between lines: faster than split (which copies every line) or a regex
            i += 1
            offsets.append(pos + i)
            i = block.find(b"\n", i)
        pos += len(block)
        if upto is not None and len(offsets) > upto + 1:
            return None
        if cap and pos > cap:
            raise too_far()


class SpanReader:
    """One data file kept open (opening it for each row cost more than parsing a small row); spans read
    in order are served from a read-ahead block (see the module doc)."""

    def __init__(self, path: str, fh):
        self.path, self.fh = path, fh
        self.start, self.buf = 0, b""  # the bytes read last and their offset
        self.next = -_GAP - 1  # where the last span served ended: a span starting there is read in order
        self.ahead = 0  # the next read-ahead's size

    def read(self, a: int, b: int) -> bytes:
        s = self.start
        if s <= a and b <= s + len(self.buf):
            self.next = b
            return self.buf[a - s:b - s]
        in_order = 0 <= a - self.next <= _GAP  # (an array's next element is after a comma)
        if in_order and b - a < _DIRECT:  # read ahead, more each time while the reads stay in order
            self.ahead = min(max(self.ahead * 2, 64 << 10), LINE_BLOCK)
            n = max(b - a, self.ahead)
        else:  # (a long span in order: the stream stays in order for the next short one)
            self.ahead, n = self.ahead if in_order else 0, b - a
        self.fh.seek(a)
        self.start, self.buf = a, b""
        self.next = b
        if n == b - a:  # nothing read ahead: the span itself, neither kept nor copied (a 12 MB row held
            return self.fh.read(n)  # twice while it was parsed: tests/test_budgets_records.py)
        self.buf = self.fh.read(n)
        return self.buf[:b - a]

    def close(self) -> None:
        self.buf = b""
        self.fh.close()
