"""The search index (issue 38): its build against the plain drift scan, and a query over 100,000 rollouts
against opening every rollout and filtering it in Python, both in the same run; a query's peak memory.

1. A folder of ``--rollouts`` copies of the real captures (sample_data/qwen3-tiny, sample_data/smollm2,
   tests/data/capture_ours). The plain drift scan (``scan_source``) and the index build (``build_index``, which
   runs that scan and takes the rows as it reads) of the same folder, alternated, ``--repeat`` times each, after
   one untimed scan that loads the tokenizers. Target: build <= 1.3x the scan (CPU seconds; wall beside).
2. An index of ``--big`` rollouts synthesised by replicating the built index's rows (new ids, labels and
   rewards; the same turns and tokens). Each query of QUERIES timed (median of ``--repeat``), against the
   Python way: read each rollout (``load_source``) and test the same condition, timed on ``--sample``
   rollouts and scaled to ``--big`` (said in the output). Target: <= 0.01x.
3. Each query's peak memory in a fresh interpreter (VmHWM, reset through /proc/self/clear_refs right before the
   search, minus the RSS before it: the imports' peak does not count). Target < 300 MB.

    .venv/bin/python bench/bench_search.py [--rollouts 200] [--big 100000] [--sample 60] [--repeat 3]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from viewer.config import Settings  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
CAPTURES = (REPO / "sample_data" / "qwen3-tiny", REPO / "sample_data" / "smollm2", REPO / "tests" / "data" / "capture_ours")
# (query, the same condition over one Rollout, in Python)
QUERIES = {
    "reward<0.5": lambda r: r.reward is not None and r.reward < 0.5,
    "tool:bash logprob<-15": lambda r: any("bash" in t.tool_names and any(v is not None and v < -15 for v in t.logprobs)
                                           for t in r.agent_turns),
    '"solution.py"': lambda r: any("solution.py" in json.dumps([t.messages, t.response]).lower() for t in r.agent_turns),
    "ids:27,983": lambda r: any(any(t.output_ids[k:k + 2] == [27, 983] for k in range(len(t.output_ids)))
                                for t in r.agent_turns),
    "/printf '[0-9]/ OR cause:special_token": lambda r: any("printf" in json.dumps(t.response) for t in r.agent_turns),
}


def make_folder(root: Path, n: int) -> Path:
    folder = root / "runs"
    folder.mkdir(parents=True)
    for i in range(n):
        src = CAPTURES[i % len(CAPTURES)]
        dst = folder / f"{src.name}-{i:05d}"
        shutil.copytree(src, dst)
        s = json.loads((dst / "summary.json").read_text())
        s["reward"] = (i % 5) / 4
        (dst / "summary.json").write_text(json.dumps(s))
    return folder


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _timed(fn) -> tuple[float, float]:
    w, c = time.perf_counter(), _cpu()
    fn()
    return time.perf_counter() - w, _cpu() - c


def replicate(info, times: int, out: Path):
    """An index of ``times`` copies of ``info``'s rows (rollout ids renumbered, labels and rewards varied)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from viewer.search.columns import ROLLOUTS, TURNS
    from viewer.search.index import VERSION

    ro = pq.read_table(info.files["rollouts"])
    tu = pq.read_table(info.files["turns"])
    base = {rid: k for k, rid in enumerate(ro.column("rid").to_pylist())}
    ro_idx = pa.array([base[x] for x in ro.column("rid").to_pylist()], pa.int64())
    tu_idx = pa.array([base[x] for x in tu.column("rid").to_pylist()], pa.int64())
    n = ro.num_rows
    out.mkdir(parents=True, exist_ok=True)
    files = {"rollouts": "rollouts.big.parquet", "turns": "turns.big.parquet"}
    with pq.ParquetWriter(out / files["rollouts"], ROLLOUTS, compression="zstd") as wr, \
            pq.ParquetWriter(out / files["turns"], TURNS, compression="zstd") as wt:
        for k in range(times):
            rid = pc.add(ro_idx, k * n)
            r = ro.set_column(ro.schema.get_field_index("rid"), "rid", rid)
            r = r.set_column(r.schema.get_field_index("label"), "label",
                             pc.binary_join_element_wise(r.column("label"), pa.scalar(f"~{k}"), ""))
            r = r.set_column(r.schema.get_field_index("reward"), "reward",
                             pa.array([((i + k) % 9) / 8 for i in range(n)], pa.float64()))
            wr.write_table(r.select(ROLLOUTS.names).cast(ROLLOUTS), row_group_size=20_000)
            t = tu.set_column(tu.schema.get_field_index("rid"), "rid", pc.add(tu_idx, k * n))
            wt.write_table(t.select(TURNS.names).cast(TURNS), row_group_size=2000)
    meta = {"version": VERSION, "source": f"{info.source} x{times}", "files": files, "rollouts": n * times,
            "turns": tu.num_rows * times, "stamps": {}}
    (out / "meta.json").write_text(json.dumps(meta))
    return out


_PEAK = r"""
import resource, sys, json
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from viewer.config import Settings
from viewer.search import search
import viewer.search.engine, duckdb, pyarrow  # imported before the baseline: a query's memory, not the imports'
def status(key):
    with open("/proc/self/status") as f:
        return next(int(x.split()[1]) * 1024 for x in f if x.startswith(key + ":"))
before = status("VmRSS")
with open("/proc/self/clear_refs", "w") as f:  # the peak (VmHWM) starts again from here
    f.write("5")
res = search(sys.argv[2], sys.argv[3], Settings(), index_dir=Path(sys.argv[2]), build=False, limit=50)
peak = status("VmHWM")
print(json.dumps({"total": res.total, "delta_mb": (peak - before) / 2**20, "rss_before_mb": before / 2**20}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rollouts", type=int, default=200)
    ap.add_argument("--big", type=int, default=100_000)
    ap.add_argument("--sample", type=int, default=60)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()
    from viewer.drift.corpus import scan_source
    from viewer.search import build_index, search
    from viewer.sources import load_source

    print(f"load average: {os.getloadavg()}")
    settings = Settings()
    with tempfile.TemporaryDirectory() as tmp:
        folder = make_folder(Path(tmp), args.rollouts)
        scan_source(folder, settings, workers=args.workers)  # tokenizers loaded, files in the page cache
        scans, builds, bare = [], [], []
        runs = [(scans, lambda: scan_source(folder, settings, workers=args.workers)),
                (builds, lambda: build_index(folder, settings, workers=args.workers, rebuild=True)),
                (bare, lambda: build_index(folder, settings, workers=args.workers, rebuild=True, lint=False))]
        for k in range(args.repeat):  # the order rotated each round: no measure always runs first or last
            for out, fn in runs[k % 3:] + runs[:k % 3]:
                out.append(_timed(fn))
        sw, sc = statistics.median(x[0] for x in scans), statistics.median(x[1] for x in scans)
        bw, bc = statistics.median(x[0] for x in builds), statistics.median(x[1] for x in builds)
        nw, nc = statistics.median(x[0] for x in bare), statistics.median(x[1] for x in bare)
        print(f"1. {args.rollouts} rollouts, workers={args.workers}: drift scan {sw:.2f} s wall / {sc:.2f} s CPU; "
              f"index build {bw:.2f} s / {bc:.2f} s -> {bc / sc:.2f}x CPU, {bw / sw:.2f}x wall (target <= 1.3x); "
              f"without lint {nw:.2f} s / {nc:.2f} s -> {nc / sc:.2f}x CPU, {nw / sw:.2f}x wall "
              "(CPU: this process and its finished children; the template render workers live on, uncounted)")
        info = build_index(folder, settings, workers=args.workers)
        times = max(1, args.big // info.rollouts)
        t0 = time.perf_counter()
        big = replicate(info, times, Path(tmp) / "big")
        size = sum(p.stat().st_size for p in big.glob("*.parquet")) / 2**20
        print(f"2. index of {info.rollouts * times:,} rollouts ({info.turns * times:,} turns) synthesised in "
              f"{time.perf_counter() - t0:.1f} s: {size:.0f} MB of Parquet")
        every = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
        specs = every[::max(1, len(every) // args.sample)][:args.sample]  # spread over the three captures
        for q, pred in QUERIES.items():
            walls, cpus = [], []
            for _ in range(args.repeat):
                t, c = time.perf_counter(), time.process_time()  # process time: DuckDB's threads included
                res = search(folder, q, settings, index_dir=big, build=False, limit=50)
                walls.append(time.perf_counter() - t)
                cpus.append(time.process_time() - c)
            qw, qc = statistics.median(walls), statistics.median(cpus)
            t, c = time.perf_counter(), time.process_time()
            found = sum(1 for s in specs if pred(load_source(str(s), settings)))
            per = (time.perf_counter() - t) / len(specs)
            per_cpu = (time.process_time() - c) / len(specs)
            py = per * info.rollouts * times
            py_cpu = per_cpu * info.rollouts * times
            peak = subprocess.run([sys.executable, "-c", _PEAK, str(REPO), str(big), q], capture_output=True, text=True)
            mem = json.loads(peak.stdout) if peak.returncode == 0 else {"delta_mb": float("nan")}
            print(f"   {q!r}: {qw * 1000:.0f} ms ({res.total:,} hits in {res.rollouts:,} rollouts) vs Python "
                  f"{py:.0f} s ({per * 1000:.1f} ms a rollout over {len(specs)} read, scaled to "
                  f"{info.rollouts * times:,}; {found} matched) -> {qw / py:.5f}x wall (target <= 0.01x); CPU "
                  f"{qc * 1000:.0f} ms vs {py_cpu:.0f} s -> {qc / py_cpu:.5f}x; peak +{mem['delta_mb']:.0f} MB "
                  "(target < 300)")
    print(f"load average: {os.getloadavg()}")


if __name__ == "__main__":
    main()
