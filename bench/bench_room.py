"""Room benchmark: N visitors open the same deep link at once and switch turns.

Run: ``.venv/bin/python bench/bench_room.py [--ns 1,4,16,32] [--rounds 3] [--procs 4]``.

The app runs in its own process (as ``app.py`` would, one server); N ``gradio_client``
sessions, spread over ``--procs`` client processes (threads inside each, so the client
side does not serialise on one GIL), each do ``--rounds`` times: open a rollout
(``/open_sample``, what ``?source=sample:qwen3-tiny`` does) then select three turns
(``/select_turn``), all sessions starting together. Two scenarios:

* ``same``: every session opens the bundled ``qwen3-tiny`` (a talk: one link on a slide);
* ``different``: each session opens its own copy of it (``/open_path``, a fresh folder per
  session and N in a temporary data root), so nothing derived from one rollout is shared;
  round 1 parses each copy (later rounds find it in the cache).

For each N it prints median and p95 latency of open and of a turn switch, their ratio to
N=1 of the same scenario in the same run (the baseline), the server's RSS after the
round (and, in brackets, after it collected garbage and returned freed pages to the OS:
what it holds between requests), and the CPU seconds the server and the clients spent
(the clients share the same cores, so their cost is part of what is measured; each
gradio_client call costs ~8 ms of CPU, and it polls for results every 50 ms, which sets
the floor of a single call). Each reply is checked: the payload is for the turn that
session asked for. Sessions created for one N stay alive on the server (Gradio keeps a
session's state for an hour after it goes away), so RSS at N counts every earlier session.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "sample_data" / "qwen3-tiny"
TARGETS = (2.0, 4.0, 2.0)  # issue 24: open median, open p95, switch median vs one visitor, with --plot-defer 0
TURNS = (1, 2, 3)  # qwen3-tiny: 0 is the title call, 1-2 tool calls, 3 the answer

_SERVE = r"""
import ctypes, gc, os, signal, sys, time
sys.path.insert(0, sys.argv[2])

def trim(*_):  # SIGUSR1: hand freed memory back to the OS, so RSS shows what is still held
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    print("trimmed", flush=True)

signal.signal(signal.SIGUSR1, trim)
if os.environ.get("RI_ROOM_PROFILE"):  # --profile: cProfile in every thread (the server's, its workers')
    import cProfile, pstats, threading
    profs = []

    def _thread_profile(*_):
        sys.setprofile(None)
        p = cProfile.Profile()
        profs.append(p)
        p.enable()

    threading.setprofile(_thread_profile)

    def _dump(*_):
        st = None
        for p in profs:
            try:
                st = pstats.Stats(p) if st is None else (st.add(p) or st)
            except TypeError:  # a thread that never ran a profiled call
                pass
        with open(os.environ["RI_ROOM_PROFILE"], "w") as f:
            st.stream = f
            st.sort_stats("tottime").print_stats(30)
            st.sort_stats("cumulative").print_stats(60)
        st.dump_stats(os.environ["RI_ROOM_PROFILE"] + ".pstats")  # for pstats' callers / callees
        os._exit(0)

    signal.signal(signal.SIGTERM, _dump)
from viewer.config import Settings
from viewer.ui import create_app, launch_kwargs
s = Settings.from_env()
demo = create_app(s)
demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=int(sys.argv[1]), quiet=True,
            **launch_kwargs(s))
print("ready", flush=True)
while True:
    time.sleep(3600)
"""


# Python memory a session keeps on the server once it has opened the link and switched turns
# (tracemalloc, in-process, through Gradio's own process_api with one SessionState each).
_SESSION_MEMORY = r"""
import asyncio, gc, os, sys, tracemalloc
sys.path.insert(0, sys.argv[1])
from gradio.state_holder import SessionState
from viewer.config import Settings
from viewer.ui import create_app
demo = create_app(Settings.from_env())  # VIEWER_GRADIO_SEAM=0: Gradio's own behaviour (viewer/ui/seam.py)
fns = {f.api_name: f for f in demo.fns.values()}

async def visit(st):  # the last input of each: the visitor's view State (held by the session)
    await demo.process_api(fns["open_sample"], ["qwen3-tiny", "", None], state=st)
    for t in (1, 2, 3):
        await demo.process_api(fns["select_turn"], [None, t, None], state=st)

async def main(n=20):
    await visit(SessionState(demo))  # the shared cache and one-time tables are filled here
    gc.collect()
    tracemalloc.start()
    base = SessionState(demo)  # Gradio's own per-session copy of the page config, for reference
    gradio_only = tracemalloc.get_traced_memory()[0]
    keep = [base]
    for _ in range(n):
        keep.append(SessionState(demo))
        await visit(keep[-1])
    gc.collect()
    print(gradio_only / 1024, tracemalloc.get_traced_memory()[0] / n / 1024)

asyncio.run(main())
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_stat(pid: int) -> tuple[float, float]:
    """(RSS in MB, user+system CPU seconds) of a process, from /proc."""
    rss = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return rss, cpu


def _session(client, open_call: tuple, turns: list[int], rounds: int, out: dict) -> None:
    for _ in range(rounds):
        t0 = time.perf_counter()
        client.predict(*open_call[1:], api_name=open_call[0])
        out["open"].append(time.perf_counter() - t0)
        for idx in turns:
            t0 = time.perf_counter()
            turn, payload, _, _ = client.predict(idx, api_name="/select_turn")
            out["select"].append(time.perf_counter() - t0)
            if turn != idx or json.loads(payload)["turn"] != idx:
                out["wrong"] += 1


def _worker(url: str, calls: list[tuple], rounds: int, ready, start, results) -> None:
    from gradio_client import Client

    # Plain http on loopback: ssl_verify=False only stops gradio_client building an SSL context
    # (loading the CA bundle) twice per call, ~50 ms of CPU that would compete with the server.
    clients = [Client(url, verbose=False, ssl_verify=False) for _ in calls]
    for c in clients:  # connect and warm each session's HTTP pool before the clock starts
        c.view_api(print_info=False)
    ready.put(len(clients))
    start.wait()
    cpu0 = time.process_time()
    outs = []
    threads = []
    for n, (c, call) in enumerate(zip(clients, calls)):
        out = {"open": [], "select": [], "wrong": 0}
        k = n % len(TURNS)
        turns = list(TURNS[k:] + TURNS[:k])  # sessions ask for different turns at the same moment
        threads.append(threading.Thread(target=_session, args=(c, call, turns, rounds, out)))
        outs.append(out)
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results.put({"outs": outs, "cpu": time.process_time() - cpu0})
    for c in clients:
        c.close()


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


def held_rss(server) -> float:
    """RSS after the server collected garbage and returned freed pages (see _SERVE's trim):
    the memory it keeps between requests (sessions, caches), not the peak of in-flight replies."""
    os.kill(server.pid, signal.SIGUSR1)
    server.stdout.readline()
    return proc_stat(server.pid)[0]


def run_level(ctx, url: str, calls: list[tuple], rounds: int, procs: int, server_pid: int) -> dict:
    nproc = max(1, min(procs, len(calls)))
    groups = [calls[i::nproc] for i in range(nproc)]
    ready, results, start = ctx.Queue(), ctx.Queue(), ctx.Event()
    ps = [ctx.Process(target=_worker, args=(url, g, rounds, ready, start, results)) for g in groups]
    for p in ps:
        p.start()
    for _ in ps:
        ready.get(timeout=300)
    _, cpu0 = proc_stat(server_pid)
    t0 = time.perf_counter()
    start.set()
    got = [results.get(timeout=1800) for _ in ps]
    wall = time.perf_counter() - t0
    rss, cpu1 = proc_stat(server_pid)
    for p in ps:
        p.join(timeout=60)
    opens = [x for g in got for o in g["outs"] for x in o["open"]]
    selects = [x for g in got for o in g["outs"] for x in o["select"]]
    return {"n": len(calls), "open": opens, "select": selects, "wall": wall, "rss": rss,
            "server_cpu": cpu1 - cpu0, "client_cpu": sum(g["cpu"] for g in got),
            "wrong": sum(o["wrong"] for g in got for o in g["outs"])}


def report(name: str, rows: list[dict]) -> None:
    base = rows[0]
    bo, bs = statistics.median(base["open"]), statistics.median(base["select"])
    print(f"\n[{name}] baseline N={base['n']}: open median {bo:.3f} s, turn switch median {bs:.3f} s")
    print("| N | open median | open p95 | open ratio (median / p95 vs N=1 median) | switch median | switch p95 "
          "| switch ratio (median) | server RSS (held) | server CPU | client CPU | wall |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        om, op95 = statistics.median(r["open"]), pct(r["open"], 0.95)
        sm, sp95 = statistics.median(r["select"]), pct(r["select"], 0.95)
        wrong = f" **{r['wrong']} WRONG**" if r["wrong"] else ""
        print(f"| {r['n']} | {om:.3f} s | {op95:.3f} s | {om / bo:.2f}x / {op95 / bo:.2f}x | {sm:.3f} s | {sp95:.3f} s "
              f"| {sm / bs:.2f}x | {r['rss']:.0f} MB ({r['held']:.0f} MB) | {r['server_cpu']:.1f} s | {r['client_cpu']:.1f} s "
              f"| {r['wall']:.1f} s{wrong} |")
    for r in rows[1:]:
        got = (statistics.median(r["open"]) / bo, pct(r["open"], 0.95) / bo, statistics.median(r["select"]) / bs)
        said = ", ".join(f"{what} {g:.2f}x (target <= {t:g}x: {'met' if g <= t else 'NOT met'})"
                         for what, g, t in zip(("open median", "open p95", "switch median"), got, TARGETS))
        print(f"N={r['n']} vs N={base['n']}: {said}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ns", default="1,4,16,32", help="session counts, comma-separated (the first is the baseline)")
    ap.add_argument("--rounds", type=int, default=3, help="open + 3 turn switches, this many times per session")
    ap.add_argument("--procs", type=int, default=4, help="client processes the sessions are spread over")
    ap.add_argument("--scenarios", default="same,different")
    ap.add_argument("--cache-mb", default="", help="VIEWER_CACHE_MB for the server (default: the app's)")
    ap.add_argument("--plot-defer", default="", help="VIEWER_PLOT_DEFER_S for the server (default: the app's, 0.4 s; "
                    "0 = one answer with the plots: what every call then costs is the server's own work, not a wait)")
    ap.add_argument("--profile", default="", help="write a cProfile of the server (every thread; top by own and "
                    "cumulative time) to this file when the run ends; the profiler slows the server")
    args = ap.parse_args()
    ns = [int(x) for x in args.ns.split(",")]
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory() as d:
        root = Path(d) / "data"
        for i in range(sum(ns)):  # the 'different' scenario: one fresh copy per session and level
            shutil.copytree(SAMPLE, root / f"s{i:03d}", ignore=shutil.ignore_patterns("proxy_trace.jsonl"))
        port = free_port()
        env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1",
               "GRADIO_RUN_HISTORY": "False", "NO_PROXY": "127.0.0.1,localhost", "VIEWER_DATA_ROOT": str(root),
               "GRADIO_TEMP_DIR": str(Path(d) / "gradio")}
        if args.cache_mb:
            env["VIEWER_CACHE_MB"] = args.cache_mb
        if args.profile:
            env["RI_ROOM_PROFILE"] = str(Path(args.profile).resolve())
        if args.plot_defer:
            env["VIEWER_PLOT_DEFER_S"] = args.plot_defer
        server = subprocess.Popen([sys.executable, "-c", _SERVE, str(port), str(REPO)], env=env,
                                  stdout=subprocess.PIPE, text=True)
        try:
            if server.stdout.readline().strip() != "ready":
                raise SystemExit("the app did not start")
            url = f"http://127.0.0.1:{port}/"
            rss0, _ = proc_stat(server.pid)
            print(f"server pid {server.pid}, RSS at start {rss0:.0f} MB; {os.cpu_count()} cores, load average "
                  f"{os.getloadavg()[0]:.1f} before the run; plot defer "
                  f"{env.get('VIEWER_PLOT_DEFER_S', 'default 0.4')} s; "
                  f"{args.rounds} rounds of open + {len(TURNS)} turn switches per session; "
                  f"sessions over <= {args.procs} client processes")
            # Warm-up (not timed): the first open parses the rollout and loads the tokenizer.
            run_level(ctx, url, [("/open_sample", "qwen3-tiny", "")], 1, 1, server.pid)
            for name in args.scenarios.split(","):
                rows, first = [], 0
                for n in ns:
                    if name == "same":
                        calls = [("/open_sample", "qwen3-tiny", "")] * n
                    else:
                        calls = [("/open_path", f"s{first + i:03d}", "") for i in range(n)]
                        first += n
                    rows.append(run_level(ctx, url, calls, args.rounds, args.procs, server.pid))
                    rows[-1]["held"] = held_rss(server)
                report(name, rows)
            r = subprocess.run([sys.executable, "-c", _SESSION_MEMORY, str(REPO)], env=env, capture_output=True,
                               text=True, timeout=600)
            if r.returncode == 0:
                empty, per = (float(x) for x in r.stdout.split()[-2:])
                print(f"\n[memory] Python memory each session keeps (tracemalloc, 20 sessions that opened the "
                      f"link and switched 3 turns): {per:.0f} KiB; an empty Gradio session alone: {empty:.0f} KiB")
            else:
                print(f"[memory] failed: {r.stderr.strip()[-300:]}")
        finally:
            server.terminate()
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()


if __name__ == "__main__":
    main()
