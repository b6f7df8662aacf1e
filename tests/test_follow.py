"""Following a growing source (issue 39, point 2): another process appends to a JSONL trace and extends a
trace.json in place while the shared follower (viewer/live.py) is asked as a page's timer asks it.

Records are copies of the bundled capture's real lines; expected values come from plain ``json`` on those
lines. Each record must be seen within two polling periods of its last byte being written (waited for as a
condition, polled at the page's period), a half-written record is no error, and the bytes read stay at
the file's size plus the small re-reads (never a second pass over the file).
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from viewer.config import Settings
from viewer.live import Live, interval
from viewer.sources.capture import read_capture
from viewer.sources.follow import Follower, followable
from viewer.sources.tail import _GUARD

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "sample_data" / "qwen3-tiny"

# The writer: one command a line on stdin, "ok" on stdout once the bytes are flushed to the OS.
WRITER = r"""
import os, sys
path, mode = sys.argv[1], sys.argv[2]
for cmd in sys.stdin:
    cmd = cmd.rstrip("\n")
    verb, _, arg = cmd.partition(" ")
    data = bytes.fromhex(arg) if verb != "truncate" else b""
    if verb == "append":
        with open(path, "ab") as f:
            f.write(data)
    elif verb == "extend":  # a JSON array written in place: the closing bracket replaced by ,record]
        with open(path, "r+b") as f:
            f.seek(0, 2)
            end = f.tell()
            f.seek(end - 1)
            assert f.read(1) == b"]"
            f.seek(end - 1)
            f.write(data)
    elif verb == "truncate":
        with open(path, "r+b") as f:
            f.truncate(int(arg))
    print("ok", flush=True)
"""


class Writer:
    def __init__(self, path: Path):
        self.p = subprocess.Popen([sys.executable, "-c", WRITER, str(path), "x"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)

    def do(self, verb: str, data: bytes = b"", arg: str | None = None) -> float:
        self.p.stdin.write(f"{verb} {arg if arg is not None else data.hex()}\n")
        self.p.stdin.flush()
        assert self.p.stdout.readline().strip() == "ok"
        return time.monotonic()

    def close(self) -> None:
        self.p.stdin.close()
        self.p.wait(timeout=10)


@pytest.fixture
def records() -> list[bytes]:
    lines = [ln for ln in (SAMPLE / "proxy_trace.jsonl").read_bytes().splitlines() if ln.strip()]
    assert len(lines) >= 4
    return lines


def wait_seen(live: Live, path: Path, settings: Settings, n: int, since: float) -> tuple[object, float]:
    """Poll as a page does (every period) until ``n`` turns are shown; the elapsed time since ``since``."""
    period = interval(settings)
    deadline = since + 2 * period + 0.5  # two periods, and the read itself
    while True:
        got = live.poll(path, settings)
        if got.rollout is not None and len(got.rollout.turns) >= n:
            return got, time.monotonic() - since
        assert time.monotonic() < deadline, f"turn {n} not seen within two polling periods ({2 * period}s)"
        time.sleep(period / 4)  # the page's timer: a tick every period (a quarter here, to measure finely)


def expect_turn(turn, line: bytes) -> None:
    rec = json.loads(line)
    assert list(turn.output_ids) == rec["completion_token_ids"]
    assert [float(x) for x in turn.logprobs] == [e["logprob"] for e in rec["logprobs"]]
    assert turn.call == rec["turn"]


def test_jsonl_appended_by_another_process(tmp_path, records):
    settings = Settings(data_root=str(tmp_path))
    path = tmp_path / "proxy_trace.jsonl"
    path.write_bytes(b"")
    live, w = Live(), Writer(path)
    try:
        first = live.poll(path, settings)
        assert first.rollout is not None and first.rollout.turns == []
        halves = 0
        for k, line in enumerate(records, start=1):
            half = len(line) // 2
            w.do("append", line[:half])  # a record cut in the middle: waited for, not an error
            got = live.poll(path, settings, period=0)
            assert len(got.rollout.turns) == k - 1 and got.waiting
            assert not [p for p in got.rollout.problems if p.severity == "error"], got.rollout.problems
            halves += half
            done = w.do("append", line[half:] + b"\n")
            got, took = wait_seen(live, path, settings, k, done)
            assert len(got.rollout.turns) == k and not got.waiting
            expect_turn(got.rollout.turns[-1], line)
        f = live.follower(path, settings)
        size = path.stat().st_size
        reads = live._entry(path, settings).reads
        # every byte once, plus each half-written record's half again and the guard bytes before each offset
        assert f.bytes_read <= size + halves + reads * _GUARD, (f.bytes_read, size)
        assert f.bytes_read < 2 * size
        for t, line in zip(got.rollout.turns, records):
            expect_turn(t, line)
    finally:
        w.close()


def test_trace_json_extended_in_place(tmp_path, records):
    settings = Settings(data_root=str(tmp_path))
    path = tmp_path / "trace.json"
    path.write_bytes(b"[" + records[0] + b"]")
    live, w = Live(), Writer(path)
    try:
        got, _ = wait_seen(live, path, settings, 1, time.monotonic())
        expect_turn(got.rollout.turns[0], records[0])
        for k, line in enumerate(records[1:], start=2):
            cut = len(line) // 3
            w.do("extend", b",\n" + line[:cut])  # the array is open now: its last element half written
            got = live.poll(path, settings, period=0)
            assert len(got.rollout.turns) == k - 1 and got.waiting
            done = w.do("append", line[cut:] + b"]")
            got, _ = wait_seen(live, path, settings, k, done)
            expect_turn(got.rollout.turns[-1], line)
        size = path.stat().st_size
        assert live.follower(path, settings).bytes_read < 1.5 * size
        # what the follower shows is what opening the finished file shows
        ref = read_capture(path)
        assert [list(t.output_ids) for t in got.rollout.turns] == [list(t.output_ids) for t in ref.turns]
        assert [list(t.mask) for t in got.rollout.turns] == [list(t.mask) for t in ref.turns]
    finally:
        w.close()


def test_shrunk_or_replaced_file_is_read_again_with_a_note(tmp_path, records):
    path = tmp_path / "trace.jsonl"
    path.write_bytes(b"\n".join(records[:3]) + b"\n")
    f = Follower(path)
    assert f.poll() and len(f.rollout().turns) == 3
    w = Writer(path)
    try:
        w.do("truncate", arg=str(len(records[0]) + 1))
    finally:
        w.close()
    assert f.poll()
    ro = f.rollout()
    assert len(ro.turns) == 1
    assert any("shrank" in p.message and "read again from the start" in p.message for p in ro.problems)
    replaced = tmp_path / "other.jsonl"
    replaced.write_bytes(records[1] + b"\n" + records[2] + b"\n")
    replaced.replace(path)  # another file under the name (a new inode)
    assert f.poll()
    ro = f.rollout()
    assert [t.call for t in ro.turns] == [json.loads(records[1])["turn"], json.loads(records[2])["turn"]]
    assert any("was replaced" in p.message for p in ro.problems)


def test_capture_folder_ends_as_the_finished_folder(tmp_path, records):
    """A live capture's folder: proxy_trace.jsonl grows, then the capture writes trace.json and the side
    files; the follower then shows what opening the finished folder shows."""
    folder = tmp_path / "cap"
    folder.mkdir()
    f = Follower(folder)
    for k, line in enumerate(records, start=1):
        with open(folder / "proxy_trace.jsonl", "ab") as fh:
            fh.write(line + b"\n")
        assert f.poll() and len(f.rollout().turns) == k
    for name in ("trace.json", "turns.json", "task.json", "summary.json", "visible_tests.txt", "held_out_tests.json"):
        (folder / name).write_bytes((SAMPLE / name).read_bytes())
    assert f.poll()
    live, ref = f.rollout(), read_capture(folder)
    assert len(live.turns) == len(ref.turns)
    for a, b in zip(live.turns, ref.turns):
        assert (list(a.output_ids), list(a.mask), list(a.logprobs), a.kind, a.trained) == \
               (list(b.output_ids), list(b.mask), list(b.logprobs), b.kind, b.trained)
    assert (live.reward, live.model, live.origin.files) == (ref.reward, ref.model, ref.origin.files)
    summary = json.loads((SAMPLE / "summary.json").read_text())
    assert live.reward == summary.get("reward")


def test_a_room_reads_each_record_once(tmp_path, records):
    """Sixteen visitors asking every period: one read per period, one rollout per version, shared."""
    settings = Settings(data_root=str(tmp_path))
    path = tmp_path / "trace.jsonl"
    path.write_bytes(records[0] + b"\n")
    live = Live()
    seen = [live.poll(path, settings) for _ in range(16)]
    assert len({id(s.rollout) for s in seen}) == 1 and sum(s.read_here for s in seen) == 1
    with open(path, "ab") as fh:
        fh.write(records[1] + b"\n")
    e = live._entry(path, settings)
    e.last = 0.0  # the period has passed
    seen = [live.poll(path, settings) for _ in range(16)]
    assert sum(s.read_here for s in seen) == 1 and len({id(s.rollout) for s in seen}) == 1
    assert len(seen[0].rollout.turns) == 2
    assert live.follower(path, settings).bytes_read <= path.stat().st_size + 2 * _GUARD


def test_a_dataset_of_rows_is_refused_by_name(tmp_path):
    rows = REPO / "tests" / "data" / "realworld" / "atropos" / "objreward.jsonl"  # a real Atropos dataset
    why = followable(rows)
    assert "objreward.jsonl" in why and "dataset of rows" in why
    assert "no such" in followable(tmp_path / "missing.jsonl")
    assert followable(SAMPLE) == "" and followable(SAMPLE / "trace.json") == ""


def test_turns_file_written_entry_by_entry(tmp_path):
    """A turns.json (per-turn ids and masks, no trace) growing as an array: each entry becomes a turn with the
    file's ids and mask, and the end is what opening the file gives."""
    entries = json.loads((SAMPLE / "turns.json").read_text())
    path = tmp_path / "turns.json"
    f = Follower(path)
    text = b"["
    for k, e in enumerate(entries, start=1):
        text += (b"," if k > 1 else b"") + json.dumps(e).encode()
        path.write_bytes(text + b"]") if k == 1 else _extend(path, json.dumps(e).encode())
        assert f.poll()
        ro = f.rollout()
        assert ro.format == "turns" and len(ro.turns) == k
        assert list(ro.turns[-1].output_ids) == e["output_ids"] and list(ro.turns[-1].mask) == e["mask"]
        assert f.poll() is False  # nothing new: nothing read again
    ref = read_capture(path)
    assert [list(t.mask) for t in ro.turns] == [list(t.mask) for t in ref.turns]
    assert f.bytes_read < 1.5 * path.stat().st_size


def _extend(path: Path, element: bytes) -> None:
    with open(path, "r+b") as fh:
        fh.seek(-1, 2)
        fh.write(b"," + element + b"]")


def test_a_big_file_is_taken_a_chunk_at_a_time(tmp_path, records):
    """A read takes at most a chunk (memory and a poll's work bounded); a record longer than the chunk is
    waited for with a bigger chunk, never split; the records come out whole and in order."""
    from viewer.sources.tail import Tail

    path = tmp_path / "trace.jsonl"
    path.write_bytes(b"\n".join(records) + b"\n")
    t = Tail(path)
    t.chunk = 4096  # far below one record (tens of KB)
    got, reads = [], 0
    while len(got) < len(records):
        recs, _ = t.read()
        got += recs
        reads += 1
        assert reads < 100
    assert [r["turn"] for r in got] == [json.loads(ln)["turn"] for ln in records]
    assert [r["completion_token_ids"] for r in got] == [json.loads(ln)["completion_token_ids"] for ln in records]
    assert t.read() == ([], False) and reads > len(records)
