"""A dataset rescore: throughput against a plain forward, and Ray's scaling from 1 to 2 workers.

The dataset is N copies of the bundled SmolLM2 capture in a temporary folder (each: 2 trainer rows,
4,938 ids, 256 trained tokens; bf16, the config's dtype, as the sampler ran it).

1. ``rescore_dataset`` (the local engine: read, trainer rows, forward, per-token table with the four
   IS modes) vs the plain ``model(ids).logits`` + log_softmax + gather over the same trainer rows of the
   same rollouts, one after the other, in this process, model loaded once beforehand (alternating,
   median of ``--repeats``).
2. ``rescore_with_ray`` with ``VIEWER_RAY_WORKERS`` 1 and 2 (an embedded Ray with 2 CPUs; each actor
   loads its own model, one torch thread each): wall time of the whole call, Ray's start and the
   actors' model loads included, and the table checked equal to the local run's.

    .venv/bin/python bench/bench_rescore_dataset.py [--copies 3] [--repeats 1] [--threads 2] [--no-ray]
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from viewer.config import Settings  # noqa: E402
from viewer.drift import choose_spec, trainer_rows  # noqa: E402
from viewer.rescore.dataset import RescoreOptions, rescore_dataset  # noqa: E402
from viewer.rescore.model import load_model, resolve_model  # noqa: E402
from viewer.rescore.values import targets  # noqa: E402
from viewer.sources import load_source  # noqa: E402

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data" / "smollm2"


def make_folder(root: Path, copies: int) -> list[Path]:
    out = []
    for i in range(copies):
        d = root / f"smollm2-{i:02d}"
        shutil.copytree(SAMPLE, d)
        out.append(d)
    return out


def plain(model, folders: list[Path]) -> float:
    """The trainer's own forward over every rollout's trainer rows: full logits, log_softmax, gather."""
    import torch

    t0 = time.perf_counter()
    with torch.inference_mode():
        for f in folders:
            ro = load_source(str(f), Settings())
            for t in targets(trainer_rows(ro, choose_spec(ro), None).rows):
                ids = torch.tensor([t.input_ids])
                lp = torch.log_softmax(model(ids).logits[0].float(), dim=-1)
                pos = torch.tensor([p - 1 for p in t.positions])
                lp[pos].gather(-1, ids[0, torch.tensor(t.positions)][:, None])
    return time.perf_counter() - t0


def ours(source: Path, opts: RescoreOptions) -> tuple[float, object]:
    t0 = time.perf_counter()
    res = rescore_dataset(str(source), Settings(), opts)
    return time.perf_counter() - t0, res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--copies", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-ray", action="store_true")
    a = ap.parse_args()
    import torch

    torch.set_num_threads(a.threads)
    root = Path(tempfile.mkdtemp(prefix="bench-rescore-ds-"))
    try:
        folders = make_folder(root, a.copies)
        ro = load_source(str(folders[0]), Settings())
        tg = targets(trainer_rows(ro, choose_spec(ro), None).rows)
        ids = a.copies * sum(len(t.input_ids) for t in tg)
        scored = a.copies * sum(len(t.positions) for t in tg)
        model, device, dtype = load_model(resolve_model("smollm2"), "cpu", "auto")
        opts = RescoreOptions(model="smollm2", device="cpu", dtype="auto")
        print(f"{a.copies} rollouts (smollm2 copies), {ids:,} ids, {scored:,} trained tokens; {device}, {dtype}, "
              f"{torch.get_num_threads()} threads")
        ours(folders[0], opts)  # warm-up: first-call allocations, the reader's imports
        a_s, b_s = [], []
        local = None
        for i in range(a.repeats):
            for name in (("dataset", "plain") if i % 2 == 0 else ("plain", "dataset")):
                if name == "dataset":
                    s, local = ours(root, opts)
                    a_s.append(s)
                else:
                    b_s.append(plain(model, folders))
                print(f"  run {i + 1} {name:8} {(a_s if name == 'dataset' else b_s)[-1]:6.2f} s")
        ra, rb = statistics.median(a_s), statistics.median(b_s)
        print(f"dataset rescore: {ra:.2f} s ({ids / ra:,.0f} ids/s, {scored / ra:.1f} trained tokens/s) vs plain "
              f"forward {rb:.2f} s ({ids / rb:,.0f} ids/s): {ra / rb:.2f}x the time (median of {a.repeats})")
        if a.no_ray:
            return 0
        from viewer.rescore.ray_rescore import rescore_with_ray

        times = {}
        for workers in (1, 2):
            t0 = time.perf_counter()
            res = rescore_with_ray(str(root), Settings(ray_num_cpus=2, ray_workers=workers), opts)
            times[workers] = time.perf_counter() - t0
            same = res["table"].equals(local["table"])
            print(f"  ray, {workers} worker(s): {times[workers]:6.2f} s (Ray start and model loads included); "
                  f"table equal to the local run's: {same}")
        print(f"ray scaling 1 -> 2 workers: {times[1] / times[2]:.2f}x faster "
              f"({times[1]:.1f} s -> {times[2]:.1f} s)")
        print(json.dumps({"copies": a.copies, "dataset_s": ra, "plain_s": rb, "ray_s": times}))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
