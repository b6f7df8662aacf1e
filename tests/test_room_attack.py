"""Room for an ordinary visitor (issue 36, "What to build" 4): hostile clients, each doing a mix of what a
public app lets anyone do, against one ordinary visitor on the same server; afterwards the server is as
they found it.

In the suite (marked slow); ``-s`` prints the figures (``.venv/bin/python -m pytest tests/test_room_attack.py -s``)
and ``RI_ROOM_HOSTILE=0`` runs the visitor alone, the baseline of its own growth (docs/SECURITY.md, Resources).

The app is the real one, public, in its own process (``tests/attack_server.py``, launched by
``attack_kit.start_server`` as app.py launches it), so its memory is that process's RSS (``/proc``) and
its disk is what lies in its temp folder (the disk keeper's folders) and Gradio's upload cache. The
clients and the visitor are :class:`attack_kit.Visitor` s (Gradio's queue protocol, one session each).

Each hostile session repeats, a bounded number of times: upload a capture through Gradio's upload route
(its own ``tokenizer/`` and chat template, new bytes each time) and open it, *Apply tokenizer* with a
fresh text, start a drift scan and cancel it, Certify with the uploaded template, upload a notes file,
and click the downloads (notes.json, deck, repro JSON). Then the sessions end as Gradio ends them (the
tab's heartbeat stream closes: the app's ``unload``).
"""
from __future__ import annotations

import io
import json
import os
import statistics
import threading
import time
import zipfile
from pathlib import Path

import httpx
import pytest

import attack_kit as kit
from attack_kit import Visitor
from viewer.config import SAMPLE_DIR
from viewer.sources.keep import folder_bytes

pytestmark = pytest.mark.slow  # a server process and ≈ a minute of attack on a shared 2-core machine

HOSTILE = int(os.environ.get("RI_ROOM_HOSTILE", 3))  # hostile sessions (sized for 2 cores)
ROUNDS = 6          # each session's mix, at most this many times (and only while the visitor measures)
SCANNED = 200       # captures in the visitor's scan folder: the scan outlasts its Cancel
HOSTILE_SCAN = 40   # captures in the hostile clients' scan folder
RSS_MARGIN_MB = 150
DISK_MARGIN_MB = 50
VISITS = 26         # captures the visitor opens, each once (2 warm, 5 idle, 7 + 7 under attack, 5 idle again)
SLOWER = 3.0        # the visitor's open under attack: at most this many times idle
CAPTURE_FILES = ("trace.json", "turns.json", "summary.json", "task.json")
SMOL = SAMPLE_DIR / "smollm2" / "tokenizer"


def _capture_zip(nonce: str) -> bytes:
    """qwen3-tiny's capture shipping SmolLM2's tokenizer with its own chat template, made new by ``nonce``
    (new bytes: a new tokenizer, a new template for Certify, a new upload)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in CAPTURE_FILES:
            zf.writestr(f"cap/{name}", (SAMPLE_DIR / "qwen3-tiny" / name).read_bytes())
        zf.writestr("cap/tokenizer/tokenizer.json", (SMOL / "tokenizer.json").read_bytes())
        config = json.loads((SMOL / "tokenizer_config.json").read_text())
        config["variant"] = nonce
        zf.writestr("cap/tokenizer/tokenizer_config.json", json.dumps(config))
        zf.writestr("cap/tokenizer/chat_template.jinja",
                    f"{{# {nonce} #}}" + (SMOL / "chat_template.jinja").read_text())
    return buf.getvalue()


def _notes(nonce: str, n: int = 60) -> bytes:
    doc = {"version": 1, "source": "", "row": None,
           "notes": [{"id": f"n{k + 1}", "turn": 1, "tok": [0, 0], "text": f"{nonce} " + "x" * 1500,
                      "anchor": [], "created": ""} for k in range(n)]}
    return json.dumps(doc, separators=(",", ":")).encode()


def _rss_mb(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


class App:
    def __init__(self, server: kit.Server, tmp: Path, cache: Path):
        self.server, self.tmp, self.cache = server, tmp, cache
        self.deps = server.config["dependencies"]

    def fn(self, api_name: str) -> int:
        return next(i for i, d in enumerate(self.deps) if d.get("api_name") == api_name)

    def call(self, v: Visitor, api_name: str, *values, event_data=None) -> kit.Reply:
        i = self.fn(api_name)
        n = len(self.deps[i]["inputs"])
        r = v.call(i, list(values) + [None] * (n - len(values)), event_data)
        assert r.completed, (api_name, r.text[-2000:])
        return r

    def disk_mb(self) -> float:
        return (folder_bytes(self.tmp) + folder_bytes(self.cache)) / 2**20

    def memory(self, trim: bool) -> dict:
        """The server's own account (``attack_server``'s diagnosis route): RSS, the store's cache in MB and,
        with ``trim``, the RSS after ``gc.collect()`` + ``malloc_trim(0)``. For the report only."""
        return httpx.get(self.server.url + "/__sweep__/memory", params={"trim": int(trim)}, timeout=120,
                         trust_env=False).json()

    def rss_mb(self) -> float:
        return _rss_mb(self.server.pid)

    def scan(self, v: Visitor, folder: str, limit: int) -> tuple[threading.Event, dict, threading.Thread]:
        """The Scan button: ``new_scan`` (unqueued), then ``drift_scan`` read in a thread: (started, answer,
        thread); ``started`` is set at the scan's first progress message."""
        assert self.call(v, "new_scan").success
        i = self.fn("drift_scan")
        return kit.stream_event(self.server.url, v, i, (self.deps[i].get("targets") or [[None]])[0][0],
                                [None, "folder of captures", folder, "", limit, None, "(all turns)", "local", "per turn"])


def _end_session(url: str, session: str) -> None:
    """What closing the tab does: the session's heartbeat stream ends (Gradio then runs the app's unload)."""
    with httpx.Client(timeout=30, trust_env=False) as http:
        with http.stream("GET", f"{url}/gradio_api/heartbeat/{session}") as resp:
            next(resp.iter_bytes())


def _wait(cond, timeout_s: float) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.5)
    return cond()


@pytest.fixture
def room(tmp_path):
    from conftest import free_port

    p = kit.plant(tmp_path / "p")
    data = tmp_path / "data"
    for i in range(SCANNED):
        kit.linked_capture(data / "scan" / f"c{i:03d}")
    for i in range(HOSTILE_SCAN):
        kit.linked_capture(data / "hscan" / f"c{i:03d}")
    for i in range(VISITS):
        kit.nonce_capture(data / f"visit{i}", f"visit {i}")
    tmp, cache = tmp_path / "tmp", tmp_path / "gradio"
    tmp.mkdir()
    cache.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "OAUTH_", "SPACE_", "CAPTURE_", "VIEWER_"))}
    env.update({
        "VIEWER_PUBLIC": "1", "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1", "NO_PROXY": "127.0.0.1,localhost", "HF_HOME": str(tmp_path / "hf-home"),
        "VIEWER_DATA_ROOT": str(data), "VIEWER_HUB_CACHE": str(tmp_path / "hub"),
        "CAPTURE_OUT_ROOT": str(tmp_path / "captures"), "GRADIO_TEMP_DIR": str(cache), "TMPDIR": str(tmp),
        "VIEWER_PLOT_DEFER_S": "0", "CAPTURE_AUTO_SETUP": "0", "PYTHONPATH": str(kit.REPO),
    })
    server = kit.start_server(p, env, free_port())
    try:
        yield App(server, tmp, cache)
    finally:
        server.stop()


def test_hostile_clients_leave_an_ordinary_visitor_fast_and_the_server_as_they_found_it(room):
    app = room
    visitor = Visitor(app.server)

    def open_capture(i: int) -> float:
        """The visitor opens a capture it has not opened before (a parse, its views, its renders): the
        issue's 0.42 s sample open. (A second open of the same rollout is a cache hit of ≈ 10 ms, which
        times the machine's scheduler, not the app: not what is bounded here.)"""
        t0 = time.monotonic()
        r = app.call(visitor, "open_path", f"visit{i}", "")
        assert r.success and "ri-error" not in str(r.output[:3]), r.text[-1000:]
        return time.monotonic() - t0

    open_capture(0)
    open_capture(1)  # warm: the tokenizer, the page's first answers
    idle_before = statistics.median(open_capture(2 + i) for i in range(5))
    rss0, disk0 = app.rss_mb(), app.disk_mb()
    mem0 = app.memory(trim=False)  # (what the store's cache counts now: for the report)

    # ---- the hostile sessions
    stop = threading.Event()
    rounds = [0] * HOSTILE
    errors: list[str] = []
    cancels: list[str] = []
    sessions: list[Visitor] = []
    opened = [threading.Event() for _ in range(HOSTILE)]

    def hostile(k: int) -> None:
        v = Visitor(app.server)
        sessions.append(v)
        for n in range(ROUNDS):
            if stop.is_set():
                return
            nonce = f"h{k}r{n}{os.urandom(4).hex()}"
            try:
                up = v.upload("capture.zip", _capture_zip(nonce))
                r = app.call(v, "open_upload", [up], "", None)
                assert r.success, r.text[-1000:]
                opened[k].set()
                app.call(v, "set_tokenizer", None, f"Qwen/Qwen3-{nonce}", 0)
                started, answer, t = app.scan(v, "hscan", HOSTILE_SCAN)
                cancels.append(app.call(v, "drift_cancel", None).output[0])
                t.join(120)
                assert answer, "a hostile scan did not end within 120 s of its Cancel"
                app.call(v, "certify", "the open rollout's tokenizer", None)
                notes = v.upload("notes.json", _notes(nonce))
                app.call(v, "upload_notes", None, None, notes)
                app.call(v, "download_notes", None, None)
                app.call(v, "deck_add_view", None, 1, "", "mask", None)
                app.call(v, "drift_repro", None, 1)
            except Exception as e:  # noqa: BLE001 - reported by the test
                errors.append(f"session {k} round {n}: {type(e).__name__}: {str(e)[:300]}")
            opened[k].set()
            rounds[k] = n + 1

    threads = [threading.Thread(target=hostile, args=(k,), daemon=True) for k in range(HOSTILE)]
    t_attack = time.monotonic()
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + 120
        for e in opened:  # every client has opened its first upload: the attack is under way
            e.wait(max(0.0, deadline - time.monotonic()))
        busy_times = [open_capture(7 + i) for i in range(7)]
        busy = statistics.median(busy_times)
        if busy > SLOWER * idle_before:  # a second batch while the attack goes on: a spike of the machine's other
            busy_times = [open_capture(19 + i) for i in range(7)]  # work (the suite's other worker) passes, a
            busy = min(busy, statistics.median(busy_times))        # visitor starved by the attack does not
        rss_opens = app.rss_mb()
        # the visitor's own scan, started while the clients scan and cancel theirs: its Cancel still holds
        started, answer, t = app.scan(visitor, "scan", SCANNED)
        assert started.wait(180), "the visitor's scan did not start within 180 s"
        said = app.call(visitor, "drift_cancel", None).output[0]
        t.join(180)
    finally:
        stop.set()
        for th in threads:
            th.join(300)
    attack_s = time.monotonic() - t_attack
    peak_rss, peak_disk = app.rss_mb(), app.disk_mb()
    # idle again, the clients still connected but quiet: "idle" is the slower of the two idle medians, so a
    # machine that got busier meanwhile (the suite's other worker) is not taken for the attack's doing
    idle_after = statistics.median(open_capture(14 + i) for i in range(5))
    idle = max(idle_before, idle_after)

    # ---- the clients leave, as Gradio sees a tab leave
    for v in sessions:
        _end_session(app.server.url, v.session)
        v.close()
    back = _wait(lambda: app.rss_mb() - rss0 <= RSS_MARGIN_MB and app.disk_mb() - disk0 <= DISK_MARGIN_MB, 180)
    rss1, disk1 = app.rss_mb(), app.disk_mb()
    visitor.close()
    mem = app.memory(trim=True)  # after the measurement: how much of the rest is freed memory glibc kept
    print(f"\nopen: idle {idle_before:.3f} s / {idle_after:.3f} s, under attack {busy:.3f} s ({[round(x, 2) for x in busy_times]}); "
          f"{sum(rounds)} hostile rounds in {attack_s:.0f} s; server RSS {rss0:.0f} -> {peak_rss:.0f} -> {rss1:.0f} MB; "
          f"disk {disk0:.1f} -> {peak_disk:.1f} -> {disk1:.1f} MB; visitor's Cancel: {said[:80]!r}; "
          f"hostile Cancels: {len(cancels)}; RSS after the visitor's opens under attack {rss_opens:.0f} MB; "
          f"at the start {mem0}, at the end {mem}")
    assert not errors, errors[:5]
    assert "Cancelling" in said, said
    assert answer.get("success") and "cancelled: partial results" in answer["output"]["data"][1], \
        str(answer)[:800]
    assert busy <= SLOWER * idle, f"the visitor's open took {busy:.3f} s under attack, {idle:.3f} s idle"
    assert back, (f"after the clients left: server RSS {rss0:.0f} -> {rss1:.0f} MB (margin {RSS_MARGIN_MB}), "
                  f"disk {disk0:.1f} -> {disk1:.1f} MB (margin {DISK_MARGIN_MB})")
