"""Presenter mode follows a live source (issue 39, point 1: "Presenter mode follows it too"), in a real browser.

``?source=…&follow=1&present=1``: another process appends the bundled capture's real proxy records to a
folder's ``proxy_trace.jsonl`` while the room watches. The newest call is shown as it arrives, its bar says
"last turn"; a turn the presenter goes back to (←) stays on screen while calls arrive; back on the newest
(→ →), the next call is followed again.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from urllib.parse import urlencode

import pytest

pytestmark = pytest.mark.browser

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data" / "qwen3-tiny"
APPEND = "import sys; open(sys.argv[1], 'ab').write(sys.stdin.buffer.read())"
TV = "#token-view .ri-tv"
TITLE = "#presenter .ri-pr-title"


def _append(path: Path, data: bytes) -> None:
    subprocess.run([sys.executable, "-c", APPEND, str(path)], input=data, check=True)


def _shown(page, turn: int, title: str, timeout_s: float = 30) -> None:
    """Turn ``turn`` painted in the token view and the presenter's bar saying ``title``."""
    page.wait_for_function(
        "([n, t]) => { const r = document.querySelector('#token-view .ri-tv'); "
        "return r?.dataset.turn === String(n) && r.dataset.painted > 0 && "
        "document.querySelector('#presenter .ri-pr-title')?.textContent === t; }",
        arg=[turn, title], timeout=timeout_s * 1000)


def _read(page, n: int) -> None:
    """The page has the version with ``n`` calls (the status line says so, hidden while presenting)."""
    page.wait_for_function("n => document.querySelector('#status')?.textContent.includes(`: ${n} turns read`)",
                           arg=n, timeout=30000)


def test_presenting_a_followed_source_shows_each_new_call(page, app_url, data_root):
    lines = [ln for ln in (SAMPLE / "proxy_trace.jsonl").read_bytes().splitlines() if ln.strip()]
    folder = data_root / "live-present"
    folder.mkdir()
    trace = folder / "proxy_trace.jsonl"
    _append(trace, lines[0] + b"\n" + lines[1] + b"\n")
    page.goto(f"{app_url}/?{urlencode({'source': 'live-present', 'follow': 1, 'present': 1})}")
    page.wait_for_function("document.body.classList.contains('ri-present')", timeout=60000)
    _read(page, 2)
    _shown(page, 1, "turn 1 · last turn")  # the newest call, and the bar says it is the last
    _append(trace, lines[2] + b"\n")
    _shown(page, 2, "turn 2 · last turn")  # a new call arrives: it is on screen
    page.keyboard.press("ArrowLeft")  # the presenter goes back a turn ...
    _shown(page, 1, "turn 1")
    _append(trace, lines[3] + b"\n")
    _read(page, 4)  # ... and a call arrives meanwhile: the turn they picked stays
    assert page.locator(TV).get_attribute("data-turn") == "1"
    page.keyboard.press("ArrowRight")
    _shown(page, 2, "turn 2")
    page.keyboard.press("ArrowRight")  # on the newest call again (it arrived while they were back)
    _shown(page, 3, "turn 3 · last turn")
    _append(trace, lines[0] + b"\n")  # a fifth call (the first record again)
    _shown(page, 4, "turn 4 · last turn")  # followed again
    assert page.evaluate("document.body.classList.contains('ri-present')")
