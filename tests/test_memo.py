"""The shared byte-bounded cache: sizes against tracemalloc, LRU by bytes, one computation per key."""
from __future__ import annotations

import gc
import os
import json
import threading
import time
import tracemalloc

import numpy as np
import pytest

from viewer.config import SAMPLE_DIR, Settings
from viewer.memo import Memo, Miss, approx_nbytes, hits_only, need_work
from viewer.sources import load_source


_HELD = """
import gc, json, sys, tracemalloc
from viewer.config import SAMPLE_DIR
from viewer.memo import approx_nbytes
from viewer.sources import load_source
load_source(SAMPLE_DIR / sys.argv[1])  # warm imports and module caches out of the measurement
gc.collect()
tracemalloc.start()
ro = load_source(SAMPLE_DIR / sys.argv[1])
held, _ = tracemalloc.get_traced_memory()  # what the rollout keeps alive (parse garbage is freed)
tracemalloc.stop()
print(json.dumps([held, approx_nbytes(ro)]))
"""


@pytest.mark.parametrize("sample", ["qwen3-tiny", "smollm2"])
def test_approx_nbytes_of_a_rollout_is_close_to_what_python_allocated(sample):
    """Measured in a fresh interpreter: tracemalloc counts every thread's allocations, and in the suite a
    server thread an earlier test left running added ≈ 100 KB to the window (a failure of the clean run)."""
    import subprocess
    import sys
    from pathlib import Path

    r = subprocess.run([sys.executable, "-c", _HELD, sample], capture_output=True, text=True, timeout=300,
                       cwd=Path(__file__).resolve().parent.parent, env={**os.environ, "PYTHONPATH": "."})
    assert r.returncode == 0, r.stderr[-2000:]
    held, approx = json.loads(r.stdout.strip().splitlines()[-1])
    # Rollout.nbytes (what approx_nbytes takes for it) is a cheap estimate; erring high keeps
    # the cache under its budget, so allow more above than below.
    assert 0.75 * held <= approx <= 1.5 * held


def test_approx_nbytes_of_long_lists_and_arrays():
    gc.collect()
    tracemalloc.start()
    # 10**5 elements: thousands of times the sample approx_nbytes takes (a few dozen), so it is the
    # sample scaled up that is checked, as with a million (which cost tracemalloc 1.5 CPU s)
    data = {"ids": list(range(10**6, 10**6 + 10**5)), "lp": [float(i) / 7 for i in range(10**5)],
            "text": ["x" * (i % 50) for i in range(10**4)]}
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert 0.8 * held <= approx_nbytes(data) <= 1.2 * held  # sampled, not walked, yet close
    arr = np.zeros(10**6, dtype=np.float32)
    assert 4 * 10**6 <= approx_nbytes(arr) <= 4 * 10**6 + 1024  # numpy's own count
    shared = list(range(1000))
    assert approx_nbytes([shared, shared]) < 1.1 * approx_nbytes([shared])  # counted once


def test_memo_evicts_least_recently_used_by_bytes():
    m = Memo(100)
    m.put("a", "A", nbytes=40)
    m.put("b", "B", nbytes=40)
    assert m.get("a") == "A"  # touch a: b is now the oldest
    m.put("c", "C", nbytes=40)
    assert "b" not in m and m.get("a") == "A" and m.get("c") == "C" and m.bytes == 80
    m.put("huge", "H", nbytes=101)  # larger than the whole budget: returned, never kept
    assert "huge" not in m and m.bytes == 80 and len(m) == 2
    m.put("a", "A2", nbytes=70)  # replacing a key re-weighs it
    assert m.get("a") == "A2" and "c" not in m and m.bytes == 70


def test_memo_makes_each_key_once_for_concurrent_callers():
    m = Memo(10**6)
    calls = []
    start = threading.Barrier(12)

    def make():
        calls.append(1)
        time.sleep(0.2)  # long enough that every other thread arrives while it runs
        return object()

    got = []

    def ask():
        start.wait()
        got.append(m.get_or_make("k", make))

    threads = [threading.Thread(target=ask) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len(got) == 12 and all(g is got[0] for g in got)


def test_hits_only_reads_made_values_and_neither_makes_nor_waits():
    m = Memo(10**6)
    m.put("made", "v")
    made, started, release = [], threading.Event(), threading.Event()

    def slow():
        started.set()
        release.wait(30)
        return "slow"

    maker = threading.Thread(target=lambda: m.get_or_make("running", slow))
    maker.start()
    assert started.wait(30)
    try:
        with hits_only():
            assert m.get_or_make("made", lambda: made.append(1) or "again") == "v"
            with pytest.raises(Miss):  # absent: nothing is made
                m.get_or_make("absent", lambda: made.append(1) or "x")
            t0 = time.monotonic()
            with pytest.raises(Miss):  # being made by another thread: not waited for
                m.get_or_make("running", lambda: made.append(1) or "y")
            assert time.monotonic() - t0 < 10  # (slow() waits up to 30 s)
            with pytest.raises(Miss):
                need_work()
        assert made == [] and "absent" not in m
        need_work()  # outside the block: nothing to say
        assert m.get_or_make("absent", lambda: "made now") == "made now"  # and a miss left nothing behind
    finally:
        release.set()
        maker.join()
    assert m.get("running") == "slow"
    # Miss is not an Exception: a handler's "any error becomes a message" does not swallow it
    assert not issubclass(Miss, Exception)


def test_hits_only_code_changes_nothing_before_a_miss():
    """The rule of hits_only(): a block cut short by a Miss runs again from its start, so the cache
    changes nothing within it (a write is a Miss) and takes back the hits the cut-short run counted."""
    m = Memo(10**6)
    m.put("a", "A")
    m.put("b", "B")
    before = (m.items(), m.bytes, m.stats())
    for write in (lambda: m.put("c", "C"), lambda: m.put("a", "A2"), lambda: m.pop("a"),
                  lambda: m.drop_where(lambda k, v: True)):
        with pytest.raises(Miss), hits_only():
            write()
        assert (m.items(), m.bytes, m.stats()) == before
    with pytest.raises(Miss), hits_only():  # two hits, then a miss: the re-run will count them again
        assert m.get_or_make("a", lambda: "x") == "A" and m.get_or_make("b", lambda: "x") == "B"
        m.get_or_make("absent", lambda: "x")
    assert m.stats()["hits"] == before[2]["hits"]
    with hits_only():  # a block that ends with its answer keeps its hits
        m.get_or_make("a", lambda: "x")
    assert m.stats()["hits"] == before[2]["hits"] + 1
    m.put("c", "C")  # outside the block a write is a write
    assert m.get("c") == "C"


def test_memo_shares_a_failure_then_tries_again():
    m = Memo(10**6)
    start = threading.Barrier(4)
    errors = []

    def bad():
        time.sleep(0.2)
        raise ValueError("unreadable")

    def ask():
        start.wait()
        try:
            m.get_or_make("k", bad)
        except ValueError as e:
            errors.append(e)

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == 4 and "k" not in m
    assert m.get_or_make("k", lambda: 5) == 5  # a failure is not cached


def test_store_keeps_rollouts_within_the_byte_budget():
    from viewer.ui.store import RolloutStore

    def cost(sample: str) -> int:  # the rollout and, counted once, a tokenizer its folder ships (issue 36)
        roomy = RolloutStore(Settings())
        roomy.open(SAMPLE_DIR / sample)
        return roomy.memo.bytes

    sizes = [cost(s) for s in ("qwen3-tiny", "smollm2")]
    assert sizes[1] > approx_nbytes(load_source(SAMPLE_DIR / "smollm2")) + (4 << 20)  # smollm2's tokenizer/
    budget = max(sizes) + min(sizes) // 2  # one sample fits, two do not
    store = RolloutStore(Settings(cache_mb=budget / 2**20))
    a = store.open(SAMPLE_DIR / "qwen3-tiny")
    b = store.open(SAMPLE_DIR / "smollm2")
    assert store.memo.bytes <= budget
    assert store.get(b.key) is b  # the newest stays
    again = store.get(a.key)  # evicted, re-opened from its recipe under the same key
    assert again is not a and again.key == a.key and store.reloads == 1
    raw = json.loads((SAMPLE_DIR / "qwen3-tiny" / "turns.json").read_text())
    assert again.rollout.turn(1).output_ids == raw[0]["output_ids"]  # turn 1 = the first agent call


def test_a_share_is_counted_once_and_goes_with_its_last_holder():
    """What values hold in common (a tokenizer and its table, issue 36) is counted once while any of them is kept."""
    m = Memo(1000, weigh=lambda v: 10)
    m.put("a", 1, shares={"tok": 300})
    m.put("b", 2, shares={"tok": 300})
    assert m.bytes == 320 and m.stats()["shares"] == 1
    m.pop("a")
    assert m.bytes == 310  # b still holds it
    m.put("c", 3, shares={"other": 600})
    assert m.bytes == 920
    m.put("d", 4, shares={"third": 200})  # over the budget: the oldest (b, and with it "tok") goes
    assert "b" not in m and m.bytes == 820 and m.stats()["shares"] == 2
    m.put("e", 5, shares={"huge": 2000})  # bigger than the budget: returned, not kept, nothing evicted for it
    assert "e" not in m and m.bytes == 820
    assert m.get_or_make("f", lambda: 6, lambda v: 0, lambda v: {"third": 200}) == 6 and m.bytes == 820


def test_a_closed_sessions_uploads_leave_the_shared_cache(tmp_path):
    """What a closed session uploaded is deleted by the disk keeper; its parse and what was derived from it
    went on sitting in the shared cache until evicted (issue 36: +130 MB held after three hostile sessions
    left). ``forget_under`` drops them; a rollout opened from elsewhere stays."""
    import shutil

    from viewer.ui.store import RolloutStore

    upload = tmp_path / "ri-upload-s1"
    shutil.copytree(SAMPLE_DIR / "qwen3-tiny", upload / "cap")
    store = RolloutStore(Settings())
    mine, other = store.open(upload / "cap"), store.open(SAMPLE_DIR / "smollm2")
    store.derived(mine.key, ("turn", 1), lambda: "x" * 1000)
    store.derived(other.key, ("turn", 1), lambda: "y" * 1000)
    before = store.memo.bytes
    assert store.forget_under([upload]) == 2
    assert ("rollout", mine.key) not in store.memo and ("derived", mine.key, "turn", 1) not in store.memo
    assert ("rollout", other.key) in store.memo and ("derived", other.key, "turn", 1) in store.memo
    assert store.memo.bytes < before
    assert store.forget_under([]) == 0
