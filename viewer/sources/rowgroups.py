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

__all__ = ["ByteCounter", "default_limits", "group_uncompressed", "read_group"]

_BATCH_ROWS = 8  # rows decoded at a time while a row group is read: the budget is checked per batch, so
# a dictionary-encoded bomb (small pages, huge decoded rows) overshoots by at most 8 rows


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



def read_group(pf, what: str, g: int, cols: Sequence[str] | None, limits: Limits) -> Any:
    """Row group ``g`` of ParquetFile ``pf`` as a table, within ``decompressed_mb``: checked
    against the footer before anything is read, then on the decoded batches as they come.
    A corrupt group raises pyarrow's error (OSError / ValueError) for the caller to name."""
    limits.check_bytes("decompressed_mb", group_uncompressed(pf, g, cols), f"{what} (per its footer)")
    budget = limits.bytes("decompressed_mb")
    batches, seen = [], 0
    for b in pf.iter_batches(batch_size=_BATCH_ROWS, row_groups=[g], columns=cols, use_threads=False):
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
