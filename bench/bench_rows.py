"""Open row 0 and row N of a ~1 GB multi-file parquet dataset vs reading the whole dataset.

    .venv/bin/python bench/bench_rows.py [--mb 1024] [--files 8] [--dir /tmp/ri-bench-rows]

Rows are Harbor-shaped (conversations + incompressible ~64 kB verifier_output), written
once with pyarrow (row groups of 64 rows). Each measurement uses a fresh RowDataset over
the same fsspec LocalFileSystem path the Hub uses, and reports wall time, bytes read
(counted at the file-object boundary) and peak RSS growth. The baseline reads every row
group of every file in the same run.
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def make(dir_: Path, mb: int, files: int) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    marker = dir_ / f".done-{mb}-{files}"
    if marker.exists():
        return int(marker.read_text())
    dir_.mkdir(parents=True, exist_ok=True)
    for p in dir_.glob("*.parquet"):
        p.unlink()
    row_bytes = 64 * 1024
    per_file = max(1, mb * 1024 * 1024 // row_bytes // files)
    n = 0
    for k in range(files):
        rows = []
        for i in range(per_file):
            r = n + i
            rows.append({"conversations": [{"role": "user", "content": f"task {r}: say hello"},
                                           {"role": "assistant", "content": f"hello from row {r}"}],
                         "agent": "terminus-2", "model": "Qwen/Qwen3-8B", "task": f"task-{r}",
                         "episode": "episode-0", "result": str(r % 2),
                         "verifier_output": os.urandom(row_bytes // 2).hex()})
        pq.write_table(pa.Table.from_pylist(rows), dir_ / f"train-{k:05d}-of-{files:05d}.parquet", row_group_size=64)
        n += per_file
    marker.write_text(str(n))
    return n


def measure(label: str, fn) -> dict:
    rss0 = _rss_mb()
    t0 = time.perf_counter()
    got = fn()
    dt = time.perf_counter() - t0
    return {"what": label, "seconds": dt, "bytes": got, "rss_growth_mb": _rss_mb() - rss0}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--dir", default="/tmp/ri-bench-rows")
    a = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from viewer.sources import open_dataset

    d = Path(a.dir)
    t0 = time.perf_counter()
    n = make(d, a.mb, a.files)
    total = sum(p.stat().st_size for p in d.glob("*.parquet"))
    print(f"dataset: {n} rows, {a.files} files, {total / 1e6:.0f} MB on disk (made in {time.perf_counter() - t0:.1f}s)")
    results = []

    def open_row(r):
        def go():
            src = open_dataset(d)
            ro = src.rollout(r)
            assert ro.task["task"] == f"task-{r}", ro.task
            return src.dataset.bytes_read
        return go

    def read_all():
        src = open_dataset(d)
        ds = src.dataset
        count = 0
        for _r, v in ds.scan(None, batch_rows=64):
            count += 1
        assert count == n
        return ds.bytes_read

    # warm-up outside the timings: imports, the Qwen3 tokenizer and its chat template
    from viewer.sources.derive import derive_turns
    from viewer.tokenizer import load_qwen3

    derive_turns([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}], None, load_qwen3())
    print(f"RSS after warm-up: {_rss_mb():.0f} MB")
    results.append(measure("open row 0", open_row(0)))
    results.append(measure(f"open row {n - 1}", open_row(n - 1)))
    results.append(measure("read the whole dataset", read_all))
    base = results[-1]
    print(f"{'what':<26}{'seconds':>9}{'MB read':>10}{'x less data':>13}{'x faster':>10}{'peak RSS +MB':>14}")
    for r in results:
        print(f"{r['what']:<26}{r['seconds']:>9.3f}{r['bytes'] / 1e6:>10.2f}{base['bytes'] / max(1, r['bytes']):>13.0f}"
              f"{base['seconds'] / r['seconds']:>10.0f}{r['rss_growth_mb']:>14.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
