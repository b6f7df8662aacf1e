"""Live benchmark (issue 39): N visitors on one live link, server CPU per new record.

Run: ``.venv/bin/python bench/bench_live.py [--ns 1,16] [--records 12]``.

A capture folder's ``proxy_trace.jsonl`` grows by one real record at a time (the bundled qwen3-tiny
capture's proxy lines, cycled); after each record every one of N visitors' pages ticks twice, as the
follow timer does (viewer/ui/live_view.py): once finding the new record (the view moves to the newest
turn: header, turn list, token view payload, conversation, plots), once finding nothing new. Each tick
runs the app's real handler path in this process (:func:`viewer.ui.live_view.live_values` on the browse
screen built by :func:`viewer.ui.browse.build`, the shared follower :data:`viewer.live.LIVE`, the store);
what Gradio's queue adds per event (HTTP, SSE, serialising) is not in these figures (bench/bench_room.py
measures that for turn switches). Reported: CPU seconds of this process per new record (after a warm-up
record), for each N and as the ratio to N=1 in the same run (issue 39: within 2x at N=16), with the
follower's reads and bytes read against the file's size.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
SAMPLE = REPO / "sample_data" / "qwen3-tiny"
TARGET = 2.0


def run(n: int, records: int, root: Path) -> dict:
    os.environ["VIEWER_DATA_ROOT"] = str(root)
    import gradio as gr

    from viewer.config import Settings
    from viewer.live import LIVE
    from viewer.ui import browse as browse_mod
    from viewer.ui.live_view import live_values
    from viewer.ui.store import RolloutStore

    settings = Settings.from_env()
    store = RolloutStore(settings)
    with gr.Blocks():
        b = browse_mod.build(settings, store)
    lines = [ln for ln in (SAMPLE / "proxy_trace.jsonl").read_bytes().splitlines() if ln.strip()]
    folder = root / f"live-{n}"
    folder.mkdir()
    trace = folder / "proxy_trace.jsonl"
    trace.write_bytes(b"")
    states: list = [None] * n
    turns: list = [None] * n
    per_record: list[float] = []
    shown = 0
    for r in range(records):
        with open(trace, "ab") as f:
            f.write(lines[r % len(lines)] + b"\n")
        time.sleep(0.55)  # a polling half-period passes: the next tick may read (the follower's own pacing)
        c0 = time.process_time()
        for _ in range(2):  # the tick that finds the record, and the next one, which finds nothing new
            for v in range(n):
                states[v], values = live_values(settings, store, b, folder, states[v], turns[v], lambda ro, p: "")
                if values and values[0] != {"__type__": "update"}:
                    turns[v] = states[v]["shown"]
                    shown += 1
        if r:  # the first record builds what every later one reuses (imports, the tokenizer): a warm-up
            per_record.append(time.process_time() - c0)
    assert all(t == records - 1 for t in turns), turns  # every visitor is on the newest turn
    assert shown == n * records, shown  # each visitor was sent each new version once
    f = LIVE.follower(folder, settings)
    return {"n": n, "cpu_ms": 1000 * statistics.mean(per_record), "p50_ms": 1000 * statistics.median(per_record),
            "reads": LIVE._entry(folder, settings).reads, "bytes_read": f.bytes_read, "size": trace.stat().st_size}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ns", default="1,16")
    ap.add_argument("--records", type=int, default=12)
    a = ap.parse_args()
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    root = Path(tempfile.mkdtemp(prefix="bench-live-"))
    ns = [int(x) for x in a.ns.split(",")]
    rows = [run(n, a.records, root) for n in ns]
    base = rows[0]["cpu_ms"]
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {a.records} records, "
          f"CPU per new record (warm-up record left out)")
    for row in rows:
        ratio = row["cpu_ms"] / base
        print(f"N={row['n']:>3}  cpu/record {row['cpu_ms']:8.1f} ms (median {row['p50_ms']:7.1f})  "
              f"ratio {ratio:5.2f}x (target <= {TARGET}x at 16)  follower reads {row['reads']}  "
              f"bytes read {row['bytes_read']:,} of {row['size']:,}")
    worst = max(r["cpu_ms"] for r in rows) / base
    return 0 if worst <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
