"""Issue 36, finding 9: opening one row of a big parquet row group holds one row, not the group.

Before: the whole row group (40 rows, ~100 MB decoded here) was decoded and kept by the dataset for the next
row, so one click on one row held the group (+375 MB for a 240 MB group in the issue). Now a group over
``KEEP_GROUP_BYTES`` is decoded a batch at a time and only the rows asked for are copied out; what a dataset
keeps is the Arrow form of a small group, bounded in bytes. Measured in pyarrow's pool (where decoded data
lives) and with tracemalloc (Python objects), not RSS: both are exact and need no other process.
"""
from __future__ import annotations

import gc
import tracemalloc

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from viewer.sources.rowdata import local_dataset  # noqa: E402
from viewer.sources.rowgroups import KEEP_GROUP_BYTES  # noqa: E402

ROWS, CELL = 40, 5 << 19  # 40 rows of 2.5 MB: a 100 MB row group, well inside decompressed_mb's 512 MB


@pytest.fixture(scope="module")
def big_group(tmp_path_factory):
    path = tmp_path_factory.mktemp("rg") / "big.parquet"
    texts = [f"{i:04d}" + "x" * CELL for i in range(ROWS)]
    pq.write_table(pa.table({"id": list(range(ROWS)), "text": texts}), path, row_group_size=ROWS,
                   compression="zstd", use_dictionary=False)  # a small file that decodes to 100 MB
    del texts
    return path


def _held(fn):
    """(bytes pyarrow's pool and Python still hold after ``fn()``, its value)."""
    gc.collect()
    pool0 = pa.total_allocated_bytes()
    tracemalloc.start()
    try:
        value = fn()
        gc.collect()
        py, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return pa.total_allocated_bytes() - pool0 + py, value


def test_one_row_of_a_big_group_holds_one_row(big_group):
    ds = local_dataset([str(big_group)], str(big_group.parent), "big")
    ds.read_rows([0])  # footers and file handles: not what is measured
    ds.close()
    ds = local_dataset([str(big_group)], str(big_group.parent), "big")
    ds.count(ds.files[0])
    held, rows = _held(lambda: ds.read_rows([17]))
    (r, row), = rows
    assert r == 17 and row["id"] == 17 and row["text"].startswith("0017") and len(row["text"]) == CELL + 4
    # one row is 2.5 MB (held twice at most: the row's str and a transient copy); the old code held the 100 MB group
    assert held < 4 * CELL + (4 << 20), f"one row of a 100 MB row group held {held / 2**20:.0f} MB"
    # the next row of the same big group is read the same way (nothing kept), and answers right
    held2, [(r2, row2)] = _held(lambda: ds.read_rows([39]))
    assert row2["id"] == 39 and held2 < 4 * CELL + (4 << 20)
    ds.close()


def test_small_group_still_kept_for_the_next_row(tmp_path):
    path = tmp_path / "small.parquet"
    pq.write_table(pa.table({"id": list(range(100)), "text": [f"row {i}" for i in range(100)]}), path)
    ds = local_dataset([str(path)], str(tmp_path), "small")
    assert [v["id"] for _, v in ds.read_rows([3, 7, 99])] == [3, 7, 99]
    kept = ds._group_cache[1]
    assert kept is not None and kept.nbytes <= KEEP_GROUP_BYTES
    assert ds.read_row(50)["text"] == "row 50" and ds._group_cache[1] is kept  # no second decode
