"""Parquet row groups read within the ``decompressed_mb`` budget, and the byte counter of a row dataset.

Kept apart from :mod:`viewer.sources.rowdata` (which uses them) for size. Why a row group is
checked twice: the footer's uncompressed sizes are known before anything is read (a
zstd bomb of 64 rows x 8 MB is refused without decoding a byte), but a footer may lie and
dictionary-encoded columns decode to far more than their pages, so the decoded batches are
counted as they come too.
"""
from __future__ import annotations

from typing import Any, Sequence

from viewer.budgets import Limits

__all__ = ["ByteCounter", "KEEP_GROUP_BYTES", "default_limits", "group_rows", "group_uncompressed", "read_group",
           "scan_batch_rows"]

_BATCH_ROWS = 64  # rows decoded at a time while a row group is read, when nothing in the footer says a row may be huge
# A row group that decodes to at most this many bytes is read whole and kept (in Arrow form) by its dataset for
# the next row; a bigger one is read a batch at a time and only the rows asked for are kept (issue 36, finding 9).
KEEP_GROUP_BYTES = 32 << 20


class ByteCounter:
    """Bytes read through the dataset's file objects (see RowDataset.__init__ for why it is its own object)."""

    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0

    def add(self, k: int) -> None:
        self.n += k


def default_limits() -> Limits:
    from viewer.config import Settings

    return Settings.from_env().limits()


def group_uncompressed(pf, g: int, cols: Sequence[str] | None) -> int:
    """Bytes row group ``g`` decompresses to (the columns ``cols``, or all), per the file's footer."""
    rg = pf.metadata.row_group(g)
    total = 0
    for i in range(rg.num_columns):
        c = rg.column(i)
        if cols is None or c.path_in_schema.split(".")[0] in cols:
            total += max(int(c.total_uncompressed_size or 0), 0)
    return total



def scan_batch_rows(pf, g: int, cols: Sequence[str] | None, limits: Limits, wanted: int) -> int:
    """Rows to decode at a time in row group ``g`` so that one batch stays within half the
    ``decompressed_mb`` budget, whatever the dictionary pages hold: a dictionary-encoded value may
    be as big as its column chunk, and every row may repeat it (the dictionary bomb), so a batch
    may decode to (plain bytes of its share) + rows x (dictionary chunk bytes). Honest small
    dictionaries keep ``wanted``; a group whose worst case is over the budget goes row by row."""
    budget = limits.bytes("decompressed_mb")
    rg = pf.metadata.row_group(g)
    dict_bytes = plain = 0
    for i in range(rg.num_columns):
        c = rg.column(i)
        if cols is None or c.path_in_schema.split(".")[0] in cols:
            n = max(int(c.total_uncompressed_size or 0), 0)
            if c.has_dictionary_page:
                dict_bytes += n
            else:
                plain += n
    if not budget or not dict_bytes or dict_bytes * wanted + plain <= budget // 2:
        return wanted
    return max(1, min(wanted, (budget // 2) // dict_bytes))


def read_group(pf, what: str, g: int, cols: Sequence[str] | None, limits: Limits) -> Any:
    """Row group ``g`` of ParquetFile ``pf`` as a table, within ``decompressed_mb``: checked
    against the footer before anything is read, then on the decoded batches as they come.
    A corrupt group raises pyarrow's error (OSError / ValueError) for the caller to name."""
    limits.check_bytes("decompressed_mb", group_uncompressed(pf, g, cols), f"{what} (per its footer)")
    budget = limits.bytes("decompressed_mb")
    batches, seen = [], 0
    rows = scan_batch_rows(pf, g, cols, limits, _BATCH_ROWS)
    for b in pf.iter_batches(batch_size=rows, row_groups=[g], columns=cols, use_threads=False):
        seen += b.nbytes
        if budget and seen > budget:
            batches.clear()
            del b  # the error's traceback keeps this frame: it must not keep the decoded rows
            limits.check_bytes("decompressed_mb", seen, f"{what} (decoded)")
        batches.append(b)
    if not batches:
        return pf.read_row_group(g, columns=cols, use_threads=False)
    import pyarrow as pa

    return pa.Table.from_batches(batches)


def group_rows(pf, what: str, g: int, cols: Sequence[str] | None, limits: Limits,
               ks: Sequence[int]) -> tuple[Any | None, dict[int, Any]]:
    """Rows ``ks`` (positions in row group ``g``) as one-row tables, and the whole group as a table
    when it decodes to at most :data:`KEEP_GROUP_BYTES` (worth keeping for the next row), else None.
    A bigger group is decoded a batch of at most ``KEEP_GROUP_BYTES`` at a time (each batch within
    ``decompressed_mb``) and each row asked for is copied out of its batch: one row of a 240 MB
    group holds one row, not the group. Batches after the last row asked for are not decoded."""
    size = group_uncompressed(pf, g, cols)
    if size <= KEEP_GROUP_BYTES:
        table = read_group(pf, what, g, cols, limits)
        return table, {k: table.slice(k, 1) for k in ks}
    limits.check_bytes("decompressed_mb", size, f"{what} (per its footer)")
    n = max(pf.metadata.row_group(g).num_rows, 1)
    rows = min(scan_batch_rows(pf, g, cols, limits, _BATCH_ROWS), max(1, KEEP_GROUP_BYTES * n // size))
    left, out, base = sorted(set(ks)), {}, 0
    import pyarrow as pa

    for b in pf.iter_batches(batch_size=rows, row_groups=[g], columns=cols, use_threads=False):
        limits.check_bytes("decompressed_mb", b.nbytes, f"{what} (decoded)")
        while left and left[0] < base + b.num_rows:
            k = left.pop(0)  # a copy: a slice would keep the whole batch's buffers
            out[k] = pa.Table.from_batches([b]).take([k - base])
        base += b.num_rows
        del b
        if not left:
            break
    if left:  # the caller names the group: "corrupt parquet data: ..."
        raise ValueError(f"{what} has {base} rows, fewer than its footer says")
    return None, out
