"""The drift scan on every core (viewer.drift.pool): forked workers, results identical to the
serial scan on real captures, in order, cancellable, no process left behind."""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import shutil
import threading
from pathlib import Path

import pytest

from viewer.config import Settings
from viewer.drift.corpus import scan_source
from viewer.drift.pool import STATS, ChunkPool, can_fork

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="needs fork (Linux)")


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """The two bundled real captures, three copies each, interleaved (two tokenizers: the scan
    groups consecutive rollouts by tokenizer, each group chunked)."""
    root = tmp_path_factory.mktemp("caps")
    for i in range(3):
        for name in ("qwen3-tiny", "smollm2"):
            shutil.copytree(REPO / "sample_data" / name, root / f"{i}-{name}")
    shutil.copytree(REPO / "sample_data" / "qwen3-tiny", root / "3-qwen3-tiny")
    shutil.copytree(REPO / "sample_data" / "qwen3-tiny", root / "4-qwen3-tiny")
    return root


def _canon(res: dict) -> str:
    return json.dumps(res, sort_keys=False, default=str)


def _in_fresh_process(body: str, *args: str) -> None:
    """Run ``body(*args)`` of this module in a new interpreter. The pool forks only from a process with
    no other thread (``can_fork``), as the CLI and the benches are; in a full pytest run earlier tests
    leave threads in this process (render pools, servers), so a test that must see workers fork runs
    where the command line would. Its assertion text comes back in the failure."""
    import subprocess
    import sys

    code = ("import sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]; import test_drift_pool as t; "
            f"t.{body}(*sys.argv[3:])")
    p = subprocess.run([sys.executable, "-c", code, str(REPO / "tests"), str(REPO), *args],
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, f"{body} failed in a fresh interpreter:\n{p.stderr[-4000:]}"


def _run_bodies(out: str, plan: str) -> None:
    """In the fresh interpreter: each body of ``plan`` (JSON: [[name, args], ...]) in turn, its
    traceback ("" when it passed) written to ``out`` as JSON. One failing does not stop the next."""
    import traceback

    done = {}
    for name, args in json.loads(plan):
        try:
            globals()[name](*args)
            done[name] = ""
        except BaseException:
            done[name] = traceback.format_exc()
    Path(out).write_text(json.dumps(done))


@pytest.fixture(scope="module")
def fresh(folder, tmp_path_factory) -> dict[str, str]:
    """The scans that must see their workers fork, run one after the other in one new interpreter
    (see ``_in_fresh_process``): one start and one tokenizer load, where one interpreter per test paid
    both each time. Each test reads its own body's outcome (its traceback, "" when it passed)."""
    out = tmp_path_factory.mktemp("fresh") / "outcomes.json"
    plan = [["_parallel_equals_serial_on_captures", [str(folder)]], ["_parallel_equals_serial_in_memory", []]]
    _in_fresh_process("_run_bodies", str(out), json.dumps(plan))
    return json.loads(out.read_text())


def test_parallel_scan_equals_the_serial_scan_on_real_captures(fresh):
    assert fresh["_parallel_equals_serial_on_captures"] == "", fresh["_parallel_equals_serial_on_captures"][-4000:]


def _parallel_equals_serial_on_captures(folder: str) -> None:
    assert can_fork(), "a fresh interpreter has one thread"
    settings = Settings()
    from viewer.tokenizer import render_worker

    render_worker.shutdown(clear_cache=True)  # the workers render for themselves, not from the parent's cache
    pools = STATS["pools"]
    par = scan_source(folder, settings, workers=2, chunk_rollouts=1, sweep=(0.5, 1.0))
    assert STATS["pools"] > pools  # the chunks really ran in worker processes
    serial = scan_source(folder, settings, workers=1, chunk_rollouts=1, sweep=(0.5, 1.0))
    assert serial["totals"]["rollouts"] == 8 and serial["totals"]["turns"] > 0
    assert _canon(par) == _canon(serial)
    assert mp.active_children() == []  # the workers were ended


def test_parallel_scan_reports_progress_in_order(folder):
    seen: list[int] = []
    scan_source(folder, Settings(), workers=2, chunk_rollouts=1, progress=lambda d, t: seen.append(d))
    assert seen == sorted(seen) and seen[-1] == 8


def test_workers_are_other_processes_and_results_come_in_order():
    pool = ChunkPool(lambda chunk: (os.getpid(), [x * 2 for x in chunk]), 2)
    try:
        out = []
        for i in range(10):
            out.extend(pool.submit([i, i + 100]))
        out.extend(pool.drain())
    finally:
        pool.close()
    assert [r[1] for r in out] == [[2 * i, 2 * i + 200] for i in range(10)]
    assert os.getpid() not in {r[0] for r in out}
    assert mp.active_children() == []


def _pools_under_a_raising_sigterm_handler() -> None:
    import signal

    def term(signum, frame):  # what the capture command installs while it runs
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, term)
    for n in range(8):
        pool = ChunkPool(lambda chunk: [x + 1 for x in chunk], 2)
        try:
            out = [r for i in range(6) for r in pool.submit([i])] + list(pool.drain())
        finally:
            pool.close()
        assert sorted(x for r in out for x in r) == list(range(1, 7)), out
        ChunkPool(lambda chunk: chunk, 2).close()  # ended at once: a worker may not have run a line yet
    assert mp.active_children() == []


def test_workers_end_by_sigterm_whatever_handler_the_parent_has():
    """The pool ends its workers with SIGTERM: they must die by it, not run a handler inherited from
    the parent (one raising KeyboardInterrupt left the pool's queue lock held and the other worker
    waiting for ever: a hung test run). In a fresh interpreter (the pool forks only without threads)."""
    import subprocess
    import sys

    code = ("import sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]; import test_drift_pool as t; "
            "t._pools_under_a_raising_sigterm_handler()")
    p = subprocess.run([sys.executable, "-c", code, str(REPO / "tests"), str(REPO)], capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0 and "KeyboardInterrupt" not in p.stderr, p.stderr[-3000:]


def test_cancelled_parallel_scan_stops_and_leaves_no_process(folder):
    cancel = threading.Event()

    def progress(done, total):
        if done >= 2:
            cancel.set()

    res = scan_source(folder, Settings(), workers=2, chunk_rollouts=1, progress=progress, cancel=cancel)
    assert res["totals"]["cancelled"] is True and res["totals"]["rollouts"] < 8
    assert mp.active_children() == []


def test_scan_workers_setting_default_is_every_core(monkeypatch):
    from viewer.drift.pool import default_workers

    assert Settings().scan_workers == 0 and default_workers() >= 1
    monkeypatch.setenv("VIEWER_SCAN_WORKERS", "1")
    assert Settings.from_env().scan_workers == 1


def test_a_forked_child_starts_its_own_render_workers():
    """The parent's idle chat-template workers are the parent's: a forked scan worker writing to
    their pipes while the parent does would mix two processes' requests. Before: the child saw them."""
    from viewer.tokenizer import render_worker

    text = render_worker.render("{{ messages[0]['content'] }}!", [{"role": "user", "content": "fork"}], None,
                                False, {}, Settings().limits())
    assert text == "fork!" and render_worker._idle  # the parent keeps an idle worker
    pid = os.fork()
    if pid == 0:  # the child: report, never return into pytest
        os._exit(0 if not render_worker._idle and render_worker._busy == 0 else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    render_worker.shutdown()


def test_parallel_scan_of_rollouts_in_memory_equals_serial(fresh):
    """A list of rollouts (what the app and the bench pass): the workers index the list they
    inherited at the fork, and the result is the serial scan's."""
    assert fresh["_parallel_equals_serial_in_memory"] == "", fresh["_parallel_equals_serial_in_memory"][-4000:]


def _parallel_equals_serial_in_memory() -> None:
    assert can_fork(), "a fresh interpreter has one thread"
    from viewer import drift
    from viewer.sources import load_source
    from viewer.tokenizer import load_qwen3, render_worker

    render_worker.shutdown(clear_cache=True)  # the workers render for themselves, not from the parent's cache

    ro = load_source(REPO / "sample_data" / "qwen3-tiny", Settings())
    rollouts = [ro, ro, ro, ro, ro]
    tok = load_qwen3()
    pools = STATS["pools"]
    par = drift.scan(rollouts, tok, chunk_rollouts=2, workers=2, sweep=(1.0,))
    assert STATS["pools"] == pools + 1
    serial = drift.scan(rollouts, tok, chunk_rollouts=2, workers=1, sweep=(1.0,))
    assert serial["totals"]["rollouts"] == 5 and _canon(par) == _canon(serial)
    assert mp.active_children() == []


def test_one_chunk_is_scanned_in_process():
    """A single rollout (the app's Drift tab, one capture on the command line) forks no workers."""
    from viewer import drift
    from viewer.sources import load_source
    from viewer.tokenizer import load_qwen3

    ro = load_source(REPO / "sample_data" / "qwen3-tiny", Settings())
    pools = STATS["pools"]
    res = drift.scan([ro], load_qwen3(), workers=2)
    assert STATS["pools"] == pools and res["totals"]["rollouts"] == 1


def test_workers_do_not_collect_what_they_inherit():
    """The parent's heap (rollouts, tokenizer, render cache) is frozen out of the workers' garbage
    collector, which would otherwise walk and copy all of it; the parent collects as before."""
    _in_fresh_process("_workers_inherit_a_frozen_heap")


def _workers_inherit_a_frozen_heap() -> None:
    import gc

    assert can_fork() and gc.get_freeze_count() == 0
    pool = ChunkPool(lambda chunk: gc.get_freeze_count(), 1)
    try:
        counts = list(pool.submit([0])) + list(pool.drain())
    finally:
        pool.close()
    assert counts and counts[0] > 1000, counts
    assert gc.get_freeze_count() == 0
