"""Rows that hold several rollouts: the dataset of their rollouts, one per row.

Some producers store more than one rollout in one stored row: an Atropos ``ScoredDataGroup``
line holds the G sequences of one prompt's group, an Inspect AI ``.json`` log holds every
sample of an eval in one object. Everything above the row layer (the row table, deep links'
``row=N``, the scans, ``DatasetSource.rollout``) counts rollouts, so a format that declares
``RowFormat.expand`` is read through :class:`ExpandedRows`: the same interface as
:class:`~viewer.sources.rowdata.RowDataset`, whose row N is the N-th rollout, counting through
the stored rows in order.

The stored rows are parsed once to count their rollouts (an index of ``(stored row, k)``,
built on first need within the ``rows_scanned`` budget); the last stored row read is kept,
so paging through one group parses it once. A stored row that cannot be read (or that the
format expands to nothing) stays one row holding its error, never silently dropped.

A format may also read a JSONL line from its bytes (``RowFormat.lines``, a :class:`RawLines`):
counting without decoding it, expanding it without building what it need not (Atropos' token
ids, :mod:`viewer.sources.atropos_lines`). A line its ``count`` or ``expand`` answers None for
is decoded by the row layer and expanded as above, so values and messages are the same.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from viewer.sources.countingfile import CountingFile
from viewer.sources.rowdata import RowDataset, RowReadError
from viewer.sources.rowspans import LINE_BLOCK, SpanReader

__all__ = ["ExpandedRows", "RawLines"]


@dataclass(frozen=True)
class RawLines:
    """A format's reading of a stored JSONL line from its bytes.

    ``count(raw)``: ``(n, state)``, the rollouts ``expand`` finds in the line that the row layer
    decodes from ``raw`` (what counting found, for ``expand_line``); ``expand_line(raw, state)``:
    those rollouts. Either answers None where the row layer must decode the line."""

    count: Callable[[bytes], tuple[int, Any] | None]
    expand_line: Callable[[bytes, Any], list[dict[str, Any]] | None]


class ExpandedRows:
    """A row dataset whose rows are the rollouts ``expand`` finds in each stored row."""

    def __init__(self, base, expand: Callable[[dict[str, Any]], list[dict[str, Any]]], what: str,
                 lines: RawLines | None = None):
        self.base = base
        self.expand = expand
        self.what = what  # the format's name, for messages
        # JSONL lines, and a folder's JSON files that are one row each (an Inspect log a file): read from their bytes
        texts = isinstance(base, RowDataset) and all(f.kind in ("jsonl", "json") for f in base.files)
        self.lines = lines if texts else None
        if self.lines is not None:
            base.objects_are_rows = True  # (a folder's log file is one stored row: the format counts its rollouts)
        self._states: dict[int, Any] = {}  # stored row -> what lines.count found in it
        self._reader: SpanReader | None = None  # the file whose lines were read last (lines only)
        self._raw_bytes = 0
        self._index: list[tuple[int, int]] | None = None
        self._lock = threading.RLock()
        self._last: tuple[int, list[Any]] | None = None  # (stored row, its rollouts)

    # ------------------------------------------------------- the RowDataset interface
    @property
    def files(self):
        return self.base.files

    @property
    def label(self) -> str:
        return self.base.label

    @property
    def bytes_read(self) -> int:
        return self.base.bytes_read + self._raw_bytes

    @property
    def parquet_kv(self):
        return getattr(self.base, "parquet_kv", None)

    def close(self) -> None:
        with self._lock:
            self._last, reader, self._reader = None, self._reader, None
        if reader is not None:
            reader.close()
        self.base.close()

    def count(self, f) -> int:
        """Rollouts in data file ``f``."""
        index = self._build()
        first = self._first_row(f)
        n = self.base.count(f)
        return sum(1 for r, _ in index if first <= r < first + n)

    def __len__(self) -> int:
        return len(self._build())

    def known_rows(self) -> int | None:
        return len(self._index) if self._index is not None else None

    def columns(self) -> list[str]:
        first = self.read_rows([0])[0][1] if len(self) else {}
        return list(first) if isinstance(first, dict) else []

    def read_row(self, row: int, columns: Sequence[str] | None = None) -> dict[str, Any]:
        return self.read_rows([row], columns)[0][1]

    def read_rows(self, rows: Sequence[int], columns: Sequence[str] | None = None
                  ) -> list[tuple[int, dict[str, Any] | RowReadError]]:
        index = self._build()
        out = []
        for r in rows:
            if not 0 <= r < len(index):
                raise IndexError(r)
            stored, k = index[r]
            subs = self._expanded(stored)
            out.append((r, self._pick(subs, k, columns) if k < len(subs) else RowReadError(
                f"row {stored}", f"{self.what}: holds {len(subs)} rollouts now, more when counted (file changed?)")))
        return out

    def scan(self, columns: Sequence[str] | None, batch_rows: int = 512
             ) -> Iterator[tuple[int, dict[str, Any] | RowReadError]]:
        """Every rollout in order (the stored rows are parsed whole: a rollout's columns live inside them)."""
        r = 0
        if self.lines is not None and self._index is not None:  # counted: lines read from their bytes
            for stored in range(len(self.base)):
                with self._lock:
                    subs = self._rollouts(stored)
                for sub in subs:
                    yield r, self._pick_value(sub, columns)
                    r += 1
            return
        for stored, value in self.base.scan(None, batch_rows):
            for sub in self._split(stored, value):
                yield r, self._pick_value(sub, columns)
                r += 1

    # ------------------------------------------------------- the index
    def _split(self, stored: int, value: Any) -> list[Any]:
        if isinstance(value, RowReadError) or not isinstance(value, dict):
            return [value if isinstance(value, RowReadError)
                    else RowReadError(f"row {stored}", f"not an object ({type(value).__name__})")]
        try:
            subs = self.expand(value)
        except RowReadError as e:  # located inside the row by the format: say which row too
            return [e if e.where.startswith(f"row {stored}") else
                    RowReadError(f"row {stored} {e.where}".rstrip(), e.message)]
        except Exception as e:  # a reader bug on odd data: that stored row says so, the others stay readable
            return [RowReadError(f"row {stored}", f"{self.what}: cannot split into rollouts: {type(e).__name__}: {e}")]
        if not subs:
            return [RowReadError(f"row {stored}", f"{self.what}: holds no rollout")]
        return subs

    def _build(self) -> list[tuple[int, int]]:
        with self._lock:
            if self._index is None:
                index: list[tuple[int, int]] = []
                lim = self.base.limits
                for stored, n in self._counts():
                    index.extend((stored, k) for k in range(n))
                    if lim.rows_scanned and len(index) > lim.rows_scanned:
                        from viewer.budgets import BudgetExceeded

                        raise BudgetExceeded("rows_scanned", lim.rows_scanned, len(index),
                                             f"{self.label}: counting the rollouts of every row", lim.public)
                self._index = index
            return self._index

    def _counts(self) -> Iterator[tuple[int, int]]:
        """(stored row, its rollouts) for each stored row, in order."""
        if self.lines is None:
            for stored, value in self.base.scan(None):
                subs = self._split(stored, value)
                self._last = (stored, subs)
                yield stored, len(subs)
            return
        for stored in range(len(self.base)):
            raw = self._line(stored)
            got = self.lines.count(raw) if raw is not None else None
            if got is None or got[0] < 1:  # the row layer decodes it (and says why it holds no rollout)
                subs = self._split(stored, self.base.read_row(stored))
                self._last = (stored, subs)
                yield stored, len(subs)
                continue
            if got[1] is not None:
                self._states[stored] = got[1]
            yield stored, got[0]

    def _line(self, stored: int) -> bytes | None:
        """A stored row's bytes: a line, or a JSON file of a folder that is that one row; None for a line over the
        cell limit or any other row (the row layer says why, or decodes it)."""
        f, local = self.base.locate(stored)
        if f.kind != "jsonl":
            return self.base.one_row_bytes(f)
        a, b = f.line_offsets[local], f.line_offsets[local + 1]
        if b - a > self.base.max_cell_bytes:
            return None
        if self._reader is None or self._reader.path != f.path:
            old = self._reader
            if self.base.progress is not None:
                self.base.progress(f"reading {f.name}")
            fh = self.base.fs.open(f.path, "rb", block_size=LINE_BLOCK, cache_type="none")
            self._reader = SpanReader(f.path, CountingFile(fh, self._count_bytes))
            if old is not None:
                old.close()
        return self._reader.read(a, b)

    def _count_bytes(self, n: int) -> None:
        self._raw_bytes += n

    def _rollouts(self, stored: int) -> list[Any]:
        """A stored row's rollouts: from its bytes where counting left what that takes, else decoded."""
        state = self._states.get(stored)
        if state is not None:
            raw = self._line(stored)
            subs = self.lines.expand_line(raw, state) if raw is not None else None
            if subs:
                return subs
        return self._split(stored, self.base.read_row(stored))

    def _expanded(self, stored: int) -> list[Any]:
        with self._lock:
            if self._last is None or self._last[0] != stored:
                self._last = (stored, self._rollouts(stored))
            return self._last[1]

    def _first_row(self, f) -> int:
        base = 0
        for g in self.base.files:
            if g is f:
                return base
            base += self.base.count(g)
        raise ValueError("not a file of this dataset")

    @staticmethod
    def _pick_value(sub: Any, columns: Sequence[str] | None) -> Any:
        if columns is not None and isinstance(sub, dict):
            return {c: sub[c] for c in columns if c in sub}
        return sub

    def _pick(self, subs: list[Any], k: int, columns: Sequence[str] | None) -> Any:
        return self._pick_value(subs[k], columns)
