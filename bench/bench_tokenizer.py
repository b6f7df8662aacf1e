"""Token table: build once per tokenizer, then look up display texts, special flags and
out-of-vocab positions for 50,000 ids — against the tokenizer's own per-id conversion.

    .venv/bin/python bench/bench_tokenizer.py [--ids 50000] [--repeat 3]

Baseline (same run): ``tok.convert_ids_to_tokens(ids)`` + ``tok.decode([i])`` per id is what
a naive viewer would call; the table answers from arrays built once. Prints absolute times
and the ratio (moved here from a wall-clock assert in the unit tests).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ids", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    from viewer.tokenizer import TokenTable, load_qwen3

    tok = load_qwen3()
    ids = [(i * 7919) % 151_669 for i in range(a.ids)]
    build, look, base = [], [], []
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        table = TokenTable.from_tokenizer(tok)
        build.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        table.texts(ids), table.special(ids), table.out_of_vocab(ids)
        look.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        tok.convert_ids_to_tokens(ids)
        [tok.decode([i]) for i in ids]
        base.append(time.perf_counter() - t0)
    b, lk, bs = min(build), min(look), min(base)
    print(f"table build (once per tokenizer): {b * 1000:.0f} ms")
    print(f"lookup of {a.ids:,} ids (texts + special + out-of-vocab): {lk * 1000:.1f} ms")
    print(f"baseline per-id convert_ids_to_tokens + decode: {bs * 1000:.0f} ms")
    print(f"ratio lookup / baseline: {lk / bs:.3f}  (table is {bs / lk:.0f}x faster)")


if __name__ == "__main__":
    main()
