"""Row datasets read lazily through an fsspec filesystem: parquet row groups, JSONL lines, JSON files.

One code path for local files and the Hub: a :class:`RowDataset` holds an fsspec filesystem
(``LocalFileSystem``, ``HfFileSystem``, or a stand-in in tests) and data files. Opening row N reads

* **parquet**: the footers of the files up to the one holding N, then only N's row group
  (the column chunks asked for, fetched as coalesced ranges);
* **JSONL**: the file from its start up to line N, in 1 MiB blocks, keeping line offsets; then line N;
* **JSON**: an array of rows, its elements' spans (the file checked whole, never held whole:
  :mod:`viewer.sources.rowarray`), then element N; one object (one row), or an array msgspec would not
  decode, the whole file parsed (size-capped); JSON and JSONL rows are read by :mod:`viewer.sources.rowtext`.
* **Inspect AI ``.eval``** (a zip): the whole file, as one row (:mod:`viewer.sources.evalzip`).

Every file object is wrapped so the bytes really read are counted (``bytes_read``), which the benchmark
and the UI report. Cells over ``max_cell_mb`` are refused with the row and field named; the other rows
stay readable. Rows are parsed with msgspec, as ``json.loads`` would (:mod:`viewer.sources.rowjson`).
Nothing here knows about trace formats.
"""
from __future__ import annotations

import threading
from bisect import bisect_right
from itertools import accumulate
from typing import Any, Callable, Iterator, Sequence

from viewer.budgets import BudgetExceeded, Limits
from viewer.sources.countingfile import CountingFile
from viewer.sources.filekinds import DATA_EXTS, data_kind, sniff_kind
from viewer.sources.rowerror import RowReadError
from viewer.sources.rowgroups import ByteCounter, default_limits, group_rows, group_uncompressed, scan_batch_rows
from viewer.sources.rowspans import SpanReader
from viewer.sources.rowtext import DataFile, TextRows  # DataFile: there, for TextRows

__all__ = ["RowDataset", "DataFile", "RowReadError", "DATA_EXTS", "data_kind", "sniff_kind", "local_dataset"]

_WHOLE_FILE_KINDS = ("json", "zip")  # parsed whole into f.rows (a JSON array: by element, f.spans)
_BLOCK = 1 << 20


class RowDataset(TextRows):
    """A lazily read table of rows spread over data files (see module doc).

    ``label`` is what the user typed (``hf://datasets/o/n`` or a local path); global row
    numbers run over the files in order. Thread-safe for the UI (one lock).
    """

    def __init__(self, fs, files: Sequence[DataFile], label: str, *, max_cell_mb: float = 256,
                 max_file_mb: float = 1024, progress: Callable[[str], None] | None = None,
                 max_scan_mb: float = 0, limits: Limits | None = None):
        if not files:
            raise ValueError("no data files")
        self.fs = fs
        self.files = list(files)
        self.label = label
        self.max_cell_bytes = int(max_cell_mb * 1024 * 1024)
        self.max_file_bytes = int(max_file_mb * 1024 * 1024)
        self.max_scan_bytes = int(max_scan_mb * 1024 * 1024)  # JSONL line scans (0: to any length)
        # The byte count lives in its own object: the parquet file objects (held by ``_pq``)
        # count into it. Had they called back into the dataset, dataset -> ParquetFile -> the
        # C++ reader -> file -> dataset would be a cycle through C++ that gc never sees, and
        # every dataset with its decoded row group would stay in memory for ever (issue 26).
        self._counter = ByteCounter()
        self.limits = limits if limits is not None else default_limits()
        self.progress = progress
        self._lock = threading.RLock()
        self._pq: dict[str, Any] = {}
        self._group_cache: tuple[Any, Any] | None = None
        self._spans: SpanReader | None = None  # the JSONL / JSON-array file read last, kept open
        self._ends: list[int] | None = None  # each file's last row + 1, once every file is counted
        self.parquet_kv: dict[str, str] | None = None  # the key-value metadata of the first parquet file

    # ---------------------------------------------------------------- bookkeeping
    @property
    def bytes_read(self) -> int:
        return self._counter.n

    def close(self) -> None:
        """Drop the open files and the kept row group now (freed anyway once the dataset is unreferenced)."""
        with self._lock:
            self._group_cache = self._object_last = self._raw_last = None
            pqs, self._pq, self._spans = [*self._pq.values(), *([self._spans] if self._spans else [])], {}, None
        for pf in pqs:
            try:
                pf.close()
            except OSError:  # closing is best effort: the file may be gone
                pass

    def _say(self, msg: str) -> None:
        if self.progress is not None:
            self.progress(msg)

    def _open(self, f: DataFile):
        self._say(f"fetching {f.name}")
        # No read-ahead cache: every byte asked for is fetched once and counted (pyarrow
        # coalesces the column-chunk ranges it needs with pre_buffer).
        return CountingFile(self.fs.open(f.path, "rb", block_size=_BLOCK, cache_type="none"), self._counter.add)

    def _parquet(self, f: DataFile):
        pf = self._pq.get(f.path)
        if pf is None:
            import pyarrow.parquet as pq

            self._say(f"reading the parquet footer of {f.name}")
            try:
                pf = pq.ParquetFile(self._open(f), pre_buffer=True)
            except (OSError, ValueError) as e:  # pyarrow.ArrowInvalid is a ValueError
                raise RowReadError(f.name, f"not a readable parquet file: {e}") from None
            md = pf.metadata
            f.row_groups = [md.row_group(i).num_rows for i in range(md.num_row_groups)]
            f.num_rows = md.num_rows
            f.columns = list(pf.schema_arrow.names)
            kv = pf.schema_arrow.metadata or {}
            if kv and not self.parquet_kv:
                self.parquet_kv = {k.decode("utf-8", "replace"): v.decode("utf-8", "replace")
                                   for k, v in kv.items() if k != b"ARROW:schema"}
            self._pq[f.path] = pf
        return pf

    # ---------------------------------------------------------------- sizes
    def count(self, f: DataFile) -> int:
        with self._lock:
            if f.num_rows is None:
                if f.kind == "parquet":
                    self._parquet(f)
                elif f.kind in _WHOLE_FILE_KINDS:
                    self._json_rows(f)
                else:
                    self._scan_lines(f, None)
            return f.num_rows or 0

    def __len__(self) -> int:
        return sum(self.count(f) for f in self.files)

    def known_rows(self) -> int | None:
        """The total if every file is already counted (no I/O), else None."""
        if all(f.num_rows is not None for f in self.files):
            return sum(f.num_rows or 0 for f in self.files)
        return None

    def columns(self) -> list[str]:
        """Column names: the parquet schema, or the keys of the first row."""
        f = self.files[0]
        with self._lock:
            if f.kind == "parquet":
                self._parquet(f)
                return list(f.columns or [])
            if f.columns is None:
                rows = self.read_rows([0]) if self.count(f) else []
                first = rows[0][1] if rows else {}
                f.columns = list(first.keys()) if isinstance(first, dict) else []
            return list(f.columns)

    def locate(self, row: int) -> tuple[DataFile, int]:
        i, local = self._where(row)
        return self.files[i], local

    def _where(self, row: int) -> tuple[int, int]:
        """(index of the file that holds ``row``, the row's place in it)."""
        if row < 0:
            raise IndexError(row)
        if self._ends is None and all(f.num_rows is not None for f in self.files):  # counted: found by bisection
            self._ends = list(accumulate(f.num_rows or 0 for f in self.files))
        if self._ends is not None:
            i = bisect_right(self._ends, row)
            if i == len(self.files):
                raise IndexError(row)
            return i, row - (self._ends[i - 1] if i else 0)
        base = 0
        for i, f in enumerate(self.files):
            n = self.count(f)
            if row < base + n:
                return i, row - base
            base += n
        raise IndexError(row)

    # ---------------------------------------------------------------- reading
    def read_row(self, row: int, columns: Sequence[str] | None = None) -> dict[str, Any]:
        """One row as a dict (a bad row: its RowReadError, returned). Raises IndexError past the end."""
        with self._lock:
            f, local = self.locate(row)
            if f.kind == "jsonl" or f.spans is not None:  # the common case, without read_rows' grouping
                return self._span_row(f, row, local)
            return next(self._read_file_rows(f, [(row, local)], columns))[1]

    def read_rows(self, rows: Sequence[int], columns: Sequence[str] | None = None
                  ) -> list[tuple[int, dict[str, Any] | RowReadError]]:
        """(row, value) for each requested row, in the order given; a bad row's value is the error."""
        with self._lock:
            out: dict[int, Any] = {}
            by_file: dict[int, list[tuple[int, int]]] = {}
            for r in rows:  # (by the file's index: files.index compared DataFiles field by field, n^2 over a folder)
                fi, local = self._where(r)
                by_file.setdefault(fi, []).append((r, local))
            for fi, pairs in by_file.items():
                f = self.files[fi]
                for r, value in self._read_file_rows(f, pairs, columns):
                    out[r] = value
            return [(r, out[r]) for r in rows]

    def _read_file_rows(self, f: DataFile, pairs: list[tuple[int, int]], columns) -> Iterator[tuple[int, Any]]:
        if f.kind in _WHOLE_FILE_KINDS and ((rows := self._json_rows(f)) is not None or f.spans is None):
            # a folder's JSON file counted, not kept, is read at most at its listed size: no cell is longer (a zip's
            # members, decompressed, may be)
            check = rows is not None or f.kind != "json" or f.size is None or f.size > self.max_cell_bytes
            rows = rows if rows is not None else self._object_rows(f)
            for r, local in pairs:
                row = rows[local] if local < len(rows) else rows[0]
                yield r, self._check_cells(r, row) if check else row
        elif f.kind in _WHOLE_FILE_KINDS:
            for r, local in pairs:
                yield r, self._span_row(f, r, local)
        elif f.kind == "jsonl":
            self._scan_lines(f, max(local for _, local in pairs))
            for r, local in sorted(pairs, key=lambda p: p[1]):
                yield r, self._span_row(f, r, local)
        else:
            yield from self._parquet_rows(f, pairs, columns)

    def _parquet_rows(self, f: DataFile, pairs, columns):
        pf = self._parquet(f)
        cols = [c for c in columns if c in (f.columns or [])] if columns else None
        starts, acc = [], 0
        for n in f.row_groups or []:
            starts.append(acc)
            acc += n
        wanted: dict[int, list[tuple[int, int]]] = {}
        for r, local in pairs:
            g = max(i for i, s in enumerate(starts) if s <= local)
            wanted.setdefault(g, []).append((r, local - starts[g]))
        for g, items in sorted(wanted.items()):
            key = (f.path, g, tuple(cols) if cols else None)
            table = self._group_cache[1] if self._group_cache and self._group_cache[0] == key else None
            if table is None:  # read one row as one row: a big group is not kept (rowgroups.group_rows)
                self._say(f"reading row group {g} of {f.name} (rows {starts[g]}..{starts[g] + (f.row_groups or [0])[g] - 1})")
                self._group_cache = None  # the previous group goes before the next one is decoded
                try:
                    table, one = group_rows(pf, f"{f.name} row group {g}", g, cols, self.limits, [k for _, k in items])
                except BudgetExceeded:
                    raise
                except (OSError, ValueError) as e:
                    raise RowReadError(f"{f.name} row group {g}", f"corrupt parquet data: {e}") from None
                self._group_cache = (key, table) if table is not None else None  # the next row is often in it
            for r, k in items:
                yield r, self._parquet_cell_check(r, f, table.slice(k, 1) if table is not None else one[k])

    def _parquet_cell_check(self, r: int, f: DataFile, one) -> Any:
        for name, col in zip(one.schema.names, one.columns):
            size = col.nbytes
            if size > self.max_cell_bytes:
                return RowReadError(f"row {r} .{name}", f"cell is {size / 1048576:.1f} MB, over the "
                                                        f"{self.max_cell_bytes / 1048576:g} MB cell limit; not read")
        return one.to_pylist()[0]

    def scan(self, columns: Sequence[str] | None, batch_rows: int = 512
             ) -> Iterator[tuple[int, dict[str, Any] | RowReadError]]:
        """Every row, in order, restricted to ``columns`` where the storage allows it
        (parquet reads only those column chunks; JSON/JSONL rows are parsed whole)."""
        base = 0
        for f in self.files:
            n = self.count(f)
            if f.kind == "parquet":
                pf = self._parquet(f)
                cols = [c for c in columns if c in (f.columns or [])] if columns is not None else None
                self._say(f"scanning {', '.join(cols) if cols else 'all columns'} of {f.name}")
                r = base
                # one row group at a time: pre_buffer would otherwise fetch every group up front
                for g in range(len(f.row_groups or [])):
                    what = f"{f.name} row group {g}"
                    self.limits.check_bytes("decompressed_mb", group_uncompressed(pf, g, cols), f"{what} (per its footer)")
                    size = scan_batch_rows(pf, g, cols, self.limits, batch_rows)
                    for batch in pf.iter_batches(batch_size=size, row_groups=[g], columns=cols, use_threads=False):
                        self.limits.check_bytes("decompressed_mb", batch.nbytes, f"{what} (decoded)")
                        for rec in batch.to_pylist():
                            yield r, rec
                            r += 1
            else:
                self._say(f"scanning {f.name}")
                for r in range(base, base + n):  # one parsed row at a time (512 held 2x the file), read ahead
                    v = self.read_row(r)
                    if columns is not None and isinstance(v, dict):
                        v = {k: v[k] for k in columns if k in v}
                    yield r, v
            base += n


def local_dataset(paths: Sequence[str], root: str, label: str, *, kinds: dict[str, str] | None = None,
                  sizes: dict[str, int] | None = None, **kwargs) -> RowDataset:
    """A RowDataset over local files (the same code path as the Hub, with ``LocalFileSystem``).
    ``kinds``: the container of a path whose name does not tell (``--format`` given, :func:`sniff_kind`);
    ``sizes``: the paths' sizes where the caller listed them already."""
    import os

    from fsspec.implementations.local import LocalFileSystem

    files = []
    lead = os.path.join(root, "") if root else None
    for p in paths:
        kind = (kinds or {}).get(p) or data_kind(p)
        if kind is None:
            continue
        rel = (p[len(lead):] if lead and p.startswith(lead) else os.path.relpath(p, root)) if root else os.path.basename(p)
        size = sizes.get(p) if sizes is not None else None
        files.append(DataFile(p, rel, kind, size=size if size is not None else os.path.getsize(p)))
    return RowDataset(LocalFileSystem(), files, label, **kwargs)
