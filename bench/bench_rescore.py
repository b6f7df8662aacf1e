"""Rescoring the bundled SmolLM2 sample vs the model's plain forward pass over the same ids.

Both sides run in this process on the same loaded model (bf16, the config's dtype, as the
sampler ran it) over the same trainer rows (trl-contract: 2 rows, 4,938 ids, 256 trained
tokens): ``rescore`` = :func:`viewer.rescore.model.score_rows` (decoder, then the LM head
on trained positions only); ``plain`` = ``model(input_ids).logits`` per row, the forward a
trainer would call, then log_softmax + gather. Runs alternate so machine noise hits both.
Also reports the end-to-end ``rescore()`` call (model already loaded) once.

    .venv/bin/python bench/bench_rescore.py [--repeats 3] [--threads 2] [--dtype auto]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from viewer.config import Settings  # noqa: E402
from viewer.drift import choose_spec, trainer_rows  # noqa: E402
from viewer.rescore import rescore  # noqa: E402
from viewer.rescore.model import load_model, resolve_model, score_rows  # noqa: E402
from viewer.rescore.values import targets  # noqa: E402
from viewer.sources import load_source  # noqa: E402

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data" / "smollm2"


def plain(model, tgts) -> float:
    import torch

    t0 = time.perf_counter()
    with torch.inference_mode():
        for t in tgts:
            ids = torch.tensor([t.input_ids])
            lp = torch.log_softmax(model(ids).logits[0].float(), dim=-1)
            pos = torch.tensor([p - 1 for p in t.positions])
            lp[pos].gather(-1, ids[0, torch.tensor(t.positions)][:, None])
    return time.perf_counter() - t0


def ours(model, tgts) -> float:
    t0 = time.perf_counter()
    score_rows(model, tgts)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dtype", default="auto")
    a = ap.parse_args()
    import torch

    torch.set_num_threads(a.threads)
    ro = load_source(str(SAMPLE), Settings())
    tr = trainer_rows(ro, choose_spec(ro), None)
    tgts = targets(tr.rows)
    ids = sum(len(t.input_ids) for t in tgts)
    scored = sum(len(t.positions) for t in tgts)
    t0 = time.perf_counter()
    model, device, dtype = load_model(resolve_model("smollm2"), "cpu", a.dtype)
    print(f"model smollm2 ({device}, {dtype}, {torch.get_num_threads()} threads) loaded in "
          f"{time.perf_counter() - t0:.2f} s; {len(tgts)} rows, {ids:,} ids, {scored} trained tokens")
    ours(model, tgts[:1])  # warm-up (first-call allocations) for both paths
    a_s, b_s = [], []
    for i in range(a.repeats):
        for name, fn, acc in (("rescore", ours, a_s), ("plain", plain, b_s))[:: 1 if i % 2 == 0 else -1]:
            acc.append(fn(model, tgts))
            print(f"  run {i + 1} {name:8} {acc[-1]:6.2f} s  {ids / acc[-1]:7.0f} ids/s")
    ra, rb = statistics.median(a_s), statistics.median(b_s)
    print(f"rescore: {ra:.2f} s ({ids / ra:.0f} ids/s, {scored / ra:.1f} trained tokens/s) vs plain forward "
          f"{rb:.2f} s ({ids / rb:.0f} ids/s): ratio {ra / rb:.2f}x (median of {a.repeats})")
    t0 = time.perf_counter()
    res = rescore(ro, "smollm2", Settings(), device="cpu", dtype=a.dtype)
    print(f"end to end rescore() (rows + forward + stats, model cached): {time.perf_counter() - t0:.2f} s; "
          f"mean |Δ| {res.totals()['mean_abs_delta']}, max |Δ| {res.totals()['max_abs_delta']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
