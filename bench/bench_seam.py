"""What each entry of the Gradio seam (viewer/ui/seam.py) buys, in-process: server CPU per event.

Run: ``.venv/bin/python bench/bench_seam.py [--sessions 20] [--rounds 2]``.

Each configuration runs in a fresh process (the seam's patches are process-wide once installed): the app is
built with the seam off, then the configuration's entries are enabled for it (none: Gradio's own behaviour;
all; all but one, for each entry that acts per event). One visit fills the shared cache; then ``--sessions``
new visitors each open the bundled qwen3-tiny (their session's first event), open it again and switch to
turns 1, 2 and 3, ``--rounds`` times, through Gradio's own ``process_api`` (no HTTP, plots in the same
answer: ``VIEWER_PLOT_DEFER_S=0``), every session kept alive. Printed per configuration: CPU milliseconds
(all threads: ``time.process_time``) of a session's first event, of a later open and of a turn switch
(medians over the sessions, timed without tracemalloc), the worker-thread hand-offs per event (``anyio.to_thread.run_sync`` calls),
the CPU of the matplotlib wrapper Gradio's HTTP route puts around every event (``process_api`` alone has
none), and the Python memory each session keeps (tracemalloc, over as many further sessions).
Each answer is checked: the turn asked for. Every configuration runs ``--reps`` times, interleaved, and
the lowest figure of each is printed. The load average is printed first and last: the CPU figures are the
process's own, but two shared cores still stretch them. A session's first event includes making its
``SessionState`` (Gradio makes it there).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

_RUN = r"""
import asyncio, dataclasses, gc, json, statistics, sys, time, tracemalloc
sys.path.insert(0, sys.argv[1])
import anyio.to_thread
from gradio.state_holder import SessionState
from viewer.config import Settings
from viewer.ui import create_app, seam

entries, sessions, rounds = json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
demo = create_app(dataclasses.replace(Settings.from_env(), gradio_seam=False, plot_defer_s=0.0))
if entries:
    seam.enable(demo, True, tuple(entries))
fns = {f.api_name: f for f in demo.fns.values()}
handed = [0]
real_run_sync = anyio.to_thread.run_sync

def run_sync(fn, *a, **k):
    handed[0] += 1
    return real_run_sync(fn, *a, **k)

anyio.to_thread.run_sync = run_sync

def matplotlib_wrap_us(n=300):
    # Gradio's HTTP route runs every event inside this (gradio/route_utils.py); process_api alone does not
    from gradio.utils import MatplotlibBackendMananger
    t0 = time.process_time()
    for _ in range(n):
        with MatplotlibBackendMananger():
            pass
    return (time.process_time() - t0) / n * 1e6

async def event(state, name, data):
    t0 = time.process_time()
    out = (await demo.process_api(fns[name], data + [None], state=state, root_path="http://127.0.0.1"))["data"]
    return time.process_time() - t0, out

async def visit(state, times, made=0.0):
    for r in range(rounds):
        dt, _ = await event(state, "open_sample", ["qwen3-tiny", ""])
        times["first" if r == 0 else "open"].append(dt + (made if r == 0 else 0.0))
        dt, _ = await event(state, "open_sample", ["qwen3-tiny", ""])
        times["open"].append(dt)
        for t in (1, 2, 3):
            dt, out = await event(state, "select_turn", [None, t])
            assert out[1] == t, (t, out[1])
            times["switch"].append(dt)

async def main():
    await visit(SessionState(demo), {"first": [], "open": [], "switch": []})  # the shared cache filled
    gc.collect()
    times = {"first": [], "open": [], "switch": []}
    handed[0] = 0
    keep = []
    for _ in range(sessions):  # timed (tracemalloc would slow every allocation)
        t0 = time.process_time()  # Gradio makes a session's SessionState on its first event
        keep.append(SessionState(demo))
        await visit(keep[-1], times, time.process_time() - t0)
    n = sum(len(v) for v in times.values())
    handoffs = handed[0] / n
    gc.collect()
    tracemalloc.start()
    for _ in range(sessions):  # weighed: what further sessions keep
        keep.append(SessionState(demo))
        await visit(keep[-1], {"first": [], "open": [], "switch": []})
    gc.collect()
    kept = tracemalloc.get_traced_memory()[0] / sessions / 1024
    tracemalloc.stop()
    print(json.dumps({k: statistics.median(v) * 1000 for k, v in times.items()}
                     | {"handoffs": handoffs, "mpl": matplotlib_wrap_us(), "kib": kept}))

asyncio.run(main())
"""


def run(entries: list[str], sessions: int, rounds: int) -> dict:
    env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", _RUN, str(REPO), json.dumps(entries), str(sessions), str(rounds)],
                         env=env, capture_output=True, text=True, timeout=600)
    if out.returncode:
        raise SystemExit(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    from viewer.ui.seam import NAMES

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=20, help="new visitors per configuration")
    ap.add_argument("--rounds", type=int, default=2, help="open, open again, three turn switches: this many times")
    ap.add_argument("--reps", type=int, default=2, help="runs of every configuration, interleaved; the least "
                    "disturbed (lowest) figure of each is printed")
    args = ap.parse_args()
    per_event = [n for n in NAMES if n not in ("forget_session", "oauth_session")]  # those two act on no event
    configs = [("off (Gradio's own)", []), ("on (every entry)", list(NAMES))]
    configs += [(f"on without {n}", [x for x in NAMES if x != n]) for n in per_event]
    print(f"load average {os.getloadavg()[0]:.2f}; {args.sessions} sessions x {args.rounds} rounds; "
          "CPU ms (medians): a session's first event / a later open / a turn switch; per event: thread "
          "hand-offs, µs in the matplotlib wrapper of Gradio's HTTP route; KiB kept per session")
    best: dict[str, dict] = {}
    for _ in range(args.reps):
        for label, entries in configs:
            r = run(entries, args.sessions, args.rounds)
            best[label] = {k: min(v, best.get(label, r)[k]) for k, v in r.items()}
    for label, _ in configs:
        r = best[label]
        print(f"{label:34s} {r['first']:6.2f} / {r['open']:5.2f} / {r['switch']:5.2f} ms   "
              f"{r['handoffs']:4.2f} hand-offs  {r['mpl']:6.1f} µs matplotlib  {r['kib']:6.1f} KiB")
    print(f"load average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
