"""What a followed source shows as it grows (issue 39, the points its first landing left): the values the follow
timer and the Capture tab's timer send (:func:`viewer.ui.live_view.live_values`) through the real browse screen
(built in a Blocks, as the app builds it) and the real shared follower.

* A capture folder gets its side files at the end (summary.json, the tests): they are a new version, so the
  Task & reward tab, the header's reward and everything keyed by the rollout (the drift checks, the plots)
  fill in without a reload.
* The visitor's turn-list filters stay when a new version arrives: only the new turns they list are added.
* The view follows the newest turn while the visitor is on it; a turn picked before it stays, until the
  visitor comes back to the newest (the presenter's ← / → are the same buttons).

Records are the bundled capture's real lines, appended by another process; expected values come from plain
``json`` on those lines and on summary.json.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import gradio as gr
import pytest

from viewer.config import Settings
from viewer.live import interval
from viewer.ui import browse as browse_screen
from viewer.ui.browse_handlers import FILTERS, STATUS
from viewer.ui.live_view import live_values
from viewer.ui.store import RolloutStore

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data" / "qwen3-tiny"
APPEND = "import sys; open(sys.argv[1], 'ab').write(sys.stdin.buffer.read())"
SKIP = {"__type__": "update"}
TASK, TABLE, HEADER = 7, 3, 1  # places in the browse outputs (viewer/ui/browse.py's order)


def _append(path: Path, data: bytes) -> None:
    """Another process appends ``data``, as the capture's proxy does."""
    subprocess.run([sys.executable, "-c", APPEND, str(path)], input=data, check=True)


@pytest.fixture
def screen(tmp_path):
    settings = Settings(data_root=str(tmp_path))
    store = RolloutStore(settings)
    with gr.Blocks():
        b = browse_screen.build(settings, store)
    assert b.outputs[TASK].elem_id == "task" and b.outputs[TABLE].elem_id == "turn-list"
    assert b.outputs[HEADER].elem_id == "rollout-header"
    return settings, store, b


@pytest.fixture
def lines() -> list[bytes]:
    return [ln for ln in (SAMPLE / "proxy_trace.jsonl").read_bytes().splitlines() if ln.strip()]


def _note(ro, polled) -> str:
    return f"{len(ro.turns)} read"


def _next_version(screen, folder: Path, st, turn, filters=(), timeout_s: float | None = None):
    """Ask as the page's timer asks (every polling period) until a new version is shown: (state, values)."""
    settings, store, b = screen
    period = interval(settings)
    deadline = time.monotonic() + (timeout_s or 2 * period + 5)
    while True:
        st2, values = live_values(settings, store, b, folder, st, turn, _note, filters=filters)
        if any(v != SKIP for v in values):
            return st2, values
        assert time.monotonic() < deadline, "no new version within two polling periods"
        st = st2
        time.sleep(period / 4)


def _listed(table) -> list[int]:
    return [int(row[0]) for row in table["data"]]


def _with_summary(folder: Path) -> dict:
    for name in ("task.json", "held_out_tests.json"):
        (folder / name).write_bytes((SAMPLE / name).read_bytes())
    raw = (SAMPLE / "summary.json").read_bytes()
    (folder / "summary.json").write_bytes(raw)  # written last, as the capture does
    return json.loads(raw)


def test_the_reward_and_the_tests_fill_in_when_the_capture_writes_them(screen, tmp_path, lines):
    folder = tmp_path / "live-summary"
    folder.mkdir()
    trace = folder / "proxy_trace.jsonl"
    _append(trace, b"".join(ln + b"\n" for ln in lines))
    st, values = _next_version(screen, folder, None, None)
    assert "reward <b>unknown</b>" in values[TASK] and "Held-out tests" not in values[TASK]
    key = values[0]
    summary = _with_summary(folder)
    held_out = json.loads((SAMPLE / "held_out_tests.json").read_text())
    st, values = _next_version(screen, folder, st, st["shown"])  # no new record: the side files alone
    assert f"reward <b>{summary['reward']:.3g}</b>" in values[TASK]
    assert summary["task_id"] in values[TASK]
    assert f"Held-out tests ({len(held_out)})" in values[TASK]
    assert f"{summary['reward']:.3g}" in values[HEADER] and "unknown" not in values[HEADER]
    # a new key: every view of the rollout (the Drift tab's checks and badges, the plots) follows it
    assert values[0] != key
    assert _listed(values[TABLE]) == list(range(len(lines)))


def test_a_new_version_keeps_the_visitors_filters(screen, tmp_path, lines):
    """The visitor filters the list to calls with a token below -1.78; two more calls arrive: the boxes stay as
    they are, the list adds the new calls the filter lists (and only those), and the view follows the newest
    listed call."""
    at = -1.78
    recs = [json.loads(ln) for ln in lines]
    below = [k for k, r in enumerate(recs) if min(r["per_token_logps"]) < at]
    assert below and below != list(range(len(recs)))  # the filter hides some calls and lists others
    folder = tmp_path / "live-filters"
    folder.mkdir()
    trace = folder / "proxy_trace.jsonl"
    _append(trace, lines[0] + b"\n" + lines[1] + b"\n")
    st, values = _next_version(screen, folder, None, None)
    assert values[FILTERS:FILTERS + 2] == [False, False]  # the first version is an open: filters start clear
    filters = (False, True, at, "(any)")  # the visitor ticks "has a token below" (its turn stays: 1 is listed)
    _append(trace, b"".join(ln + b"\n" for ln in lines[2:]))
    st, values = _next_version(screen, folder, st, st["shown"], filters)
    assert values[FILTERS] == SKIP and values[FILTERS + 1] == SKIP  # the boxes are the visitor's
    assert _listed(values[TABLE]) == below
    assert f"{len(below)} of {len(recs)} turns match" in values[FILTERS + 2]
    assert st["shown"] == below[-1] and values[len(values) - 5] == below[-1]  # the turn State: newest listed
    assert "error" not in str(values[STATUS]).lower()


def test_the_view_follows_the_newest_turn_unless_another_is_picked(screen, tmp_path, lines):
    folder = tmp_path / "live-pick"
    folder.mkdir()
    trace = folder / "proxy_trace.jsonl"
    _append(trace, lines[0] + b"\n" + lines[1] + b"\n")
    st, _ = _next_version(screen, folder, None, 0)  # the page opened on its default turn: following begins
    assert st["shown"] == 1
    _append(trace, lines[2] + b"\n")
    st, _ = _next_version(screen, folder, st, 0)  # the visitor picked turn 0 (◀, the list): it stays
    assert st["shown"] == 0
    _append(trace, lines[3] + b"\n")
    # back on the newest turn shown (→ → to turn 2): the next call is followed again
    st, _ = _next_version(screen, folder, st, 2)
    assert st["shown"] == 3
    _append(trace, lines[0] + b"\n")  # one more call (the first record again: a fifth call)
    st, _ = _next_version(screen, folder, st, 3)
    assert st["shown"] == 4
