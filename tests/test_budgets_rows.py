"""Parquet: compression bombs stop at ``decompressed_mb``, and an opened dataset gives its memory back (issue 26 §2).

Built here: zstd parquet files whose rows decode to megabytes each (in a zip, as a visitor
uploads them), a dictionary-encoded one whose footer understates the decoded size, and a
dataset opened row after row through the deep-link path (``?source=...parquet&row=N``).
"""
from __future__ import annotations

import zipfile

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from budget_bombs import arrow_mb, bounded, mem_margin_mb, message_of, public, rss_mb
from viewer.sources import SourceError
from viewer.sources.upload import intake_upload
from viewer.ui.opening import open_spec
from viewer.ui.store import RolloutStore

MSG = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]


def _blobs(rows: int, size: int, char: str = "x") -> pa.ChunkedArray:
    """``rows`` equal strings of ``size`` bytes, every row a view of one buffer: the writer still writes
    (and the footer counts) ``rows`` x ``size`` bytes, but the test no longer fills and faults in that
    much memory first (a list of 64 copies of 8.5 MB cost 14 CPU s, most of it the kernel's page faults)."""
    return pa.chunked_array([pa.array([char * size])] * rows)


def _write(t: pa.Table, path, dictionary: bool = False, **kw) -> None:
    pq.write_table(t, path, compression="zstd", use_dictionary=dictionary, **kw)


def _bomb(path, rows: int, mb: float, *, dictionary: bool) -> None:
    size = int(mb * 1048576)
    if dictionary:  # one dictionary value, every row its index: the footer counts the value once
        blob = pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()), pa.array(["x" * size]))
    else:
        blob = _blobs(rows, size)
    # store_schema=False: the file says "a string column" (dictionary-encoded on disk), as the writer
    # made it from a plain list of strings, so a reader decodes every row's value
    _write(pa.table({"messages": [MSG] * rows, "blob": blob}), path, dictionary, row_group_size=rows,
           store_schema=False)


@pytest.mark.slow  # writes a 544 MB parquet to zip it
def test_zip_of_a_parquet_bomb_stops_before_decoding(tmp_path, monkeypatch):
    """The issue's bomb: an ~18 KB zip of a zstd parquet with 64 rows x 8 MB in one row group,
    uploaded and opened at the public defaults. Before: decoded (512 MB) and kept for ever."""
    settings = public(monkeypatch, tmp_path)
    _bomb(tmp_path / "bomb.parquet", 64, 8.5, dictionary=False)
    with zipfile.ZipFile(tmp_path / "bomb.zip", "w", zipfile.ZIP_DEFLATED) as z:
        z.write(tmp_path / "bomb.parquet", "bomb.parquet")
    (tmp_path / "bomb.parquet").unlink()
    assert (tmp_path / "bomb.zip").stat().st_size < 200_000
    store = RolloutStore(settings)
    before, arrow0 = rss_mb(), arrow_mb()
    got = intake_upload(tmp_path / "bomb.zip", tmp_path / "up", settings)
    _, err, elapsed = bounded(lambda: store.open(got.root), 20)
    msg = message_of(err)
    assert isinstance(err, SourceError), err
    assert "512 MB budget" in msg and "per its footer" in msg and "row group 0" in msg, msg
    assert elapsed < 10
    assert arrow_mb() - arrow0 < 1
    assert rss_mb() - before < mem_margin_mb()


def test_dictionary_bomb_is_stopped_while_decoding(tmp_path, monkeypatch):
    """A dictionary-encoded column: the footer counts one 4 MB value, the rows decode to 4 MB
    each. The decoded batches are counted as they come and the read stops at the budget."""
    settings = public(monkeypatch, tmp_path, decompressed_mb=48)
    _bomb(tmp_path / "dict.parquet", 64, 4, dictionary=True)
    store = RolloutStore(settings)
    arrow0 = arrow_mb()
    peak0 = pa.default_memory_pool().max_memory()
    _, err, _ = bounded(lambda: open_spec(store, settings, str(tmp_path / "dict.parquet"), row=3), 20)
    msg = message_of(err)
    assert "48 MB budget" in msg and "(decoded)" in msg, msg
    assert "VIEWER_BUDGET" not in msg  # public mode: no advice to raise it
    assert arrow_mb() - arrow0 < 1
    if peak0 < (48 << 20):  # the pool's peak says how much was decoded at once: the budget plus one batch
        assert pa.default_memory_pool().max_memory() < (48 + 8 * 4 + 16) << 20


def test_each_opened_row_gives_its_memory_back(tmp_path, monkeypatch):
    """``?source=data.parquet&row=N`` for many rows: each open reads a row group of 4 MB. Before,
    every dataset stayed alive (dataset -> parquet file -> byte counter -> dataset, a cycle
    through C++ that gc never collects): +4 MB of arrow memory per row, for ever."""
    monkeypatch.setenv("VIEWER_CACHE_MB", "1")  # the rollouts themselves are evicted: only leaks remain
    settings = public(monkeypatch, tmp_path)
    # 8 rows: a leak would hold 28 MB of arrow memory after the 7 opens below, against the 1 MB allowed
    t = pa.table({"messages": [MSG] * 8, "blob": [f"{i}" + "y" * (4 << 20) for i in range(8)]})
    _write(t, tmp_path / "rows.parquet", row_group_size=1)
    del t
    store = RolloutStore(settings)
    open_spec(store, settings, "rows.parquet", row=0)  # warm: tokenizer, imports
    before, arrow0 = rss_mb(), arrow_mb()
    for n in range(1, 8):
        op, err, _ = bounded(lambda n=n: open_spec(store, settings, "rows.parquet", row=n), 20)
        assert err is None, err
        assert op.rollout.origin.row == n
        del op
    assert arrow_mb() - arrow0 < 1, f"{arrow_mb() - arrow0:.0f} MB of decoded row groups still held"
    assert rss_mb() - before < mem_margin_mb()


def test_a_large_honest_row_group_still_opens_on_a_local_app(tmp_path, monkeypatch):
    """Local defaults (4 GB) let a 96 MB row group through; the same file in public mode with a
    64 MB budget is refused with the budget named and how it is set."""
    from viewer.budgets import BUDGETS, env_name
    from viewer.config import Settings

    for b in BUDGETS:
        monkeypatch.delenv(env_name(b.name), raising=False)
    monkeypatch.delenv("VIEWER_PUBLIC", raising=False)
    monkeypatch.delenv("SPACE_ID", raising=False)
    t = pa.table({"messages": [MSG] * 24, "blob": _blobs(24, 4 << 20, "z")})
    _write(t, tmp_path / "big.parquet", row_group_size=24)
    del t
    local = Settings(data_root=str(tmp_path))
    op = open_spec(RolloutStore(local), local, "big.parquet", row=5)
    assert op.rollout.origin.row == 5
    monkeypatch.setenv("VIEWER_BUDGET_DECOMPRESSED_MB", "64")
    with pytest.raises(SourceError, match=r"over the 64 MB budget .*VIEWER_BUDGET_DECOMPRESSED_MB=N"):
        open_spec(RolloutStore(local), local, "big.parquet", row=5)
