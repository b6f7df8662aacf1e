"""Issue 41, point 6 in Debian chromium: the turn list's filters as a user meets them.

An editable low-logprob threshold, a filter that matches nothing says so (and how to clear it), a newly
opened rollout starts unfiltered, and the token view never keeps showing a turn the filter hides. Expected
turns come from the capture's own files (trace.json, summary.json), read here as plain JSON. Each
test waits for what the user would see (never a fixed sleep) and was checked to fail on the code before
its fix.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

SAMPLES = Path(__file__).resolve().parent.parent / "sample_data"
TV = "#token-view .ri-tv"
PAINTED = f"document.querySelector('{TV}')?.dataset.painted > 0"
ROWS = "#turn-list .virtual-row"
CURRENT = "document.querySelector('#turn-list .virtual-row.ri-current .first-column')?.textContent.trim()"


def _raw_calls(sample: str) -> list[dict]:
    """The capture's record of each model call (trace.json): its number ("turn", from 1), its kind and its
    output tokens' logprobs (per_token_logps, the ones the app shows)."""
    return json.loads((SAMPLES / sample / "trace.json").read_text())


def _open(page, app_url, query: str):
    page.goto(f"{app_url}/?{query}")
    page.wait_for_function(PAINTED, timeout=60000)
    # The open's second step (its plots) sends the turn list again: act once it has landed.
    page.wait_for_function("document.querySelector('#turns-plot .js-plotly-plot') !== null", timeout=60000)


def _column(page, n: int, col: int) -> list[str]:
    """Column ``col`` of the turn list once it shows exactly ``n`` rows (0: the turn, 1: the call)."""
    page.wait_for_function(f"document.querySelectorAll('{ROWS}').length === {n}", timeout=30000)
    return page.evaluate(f"[...document.querySelectorAll('{ROWS}')]"
                         f".map(r => r.querySelectorAll('.body-cell')[{col}].textContent.trim())")


def _wait_text(page, sel: str, words: str):
    page.wait_for_function(f"document.querySelector({sel!r})?.innerText.includes({words!r})", timeout=30000)


def test_low_logprob_threshold_is_editable_and_filters_the_list(page, app_url):
    from viewer.config import LOW_LOGPROB

    calls = _raw_calls("qwen3-tiny")
    mins = sorted(min(c["per_token_logps"]) for c in calls)
    assert len(mins) == 4  # the premise: four calls with distinct lowest logprobs
    _open(page, app_url, "source=sample:qwen3-tiny&turn=1")
    box = page.locator("#f-low-at input")
    assert float(box.input_value()) == LOW_LOGPROB  # the default is the one constant
    for cut in ((mins[1] + mins[2]) / 2, (mins[0] + mins[1]) / 2):
        at = round(cut, 4)
        want = [str(c["turn"]) for c in calls if min(c["per_token_logps"]) < at]
        box.fill(str(at))
        box.press("Enter")
        if not page.locator("#f-low input").is_checked():
            page.locator("#f-low input").check()
        assert _column(page, len(want), 1) == want  # the calls whose lowest logprob is under the typed value
    assert page.locator("#f-low").is_visible() and page.locator("#f-low-at").is_visible()


def test_a_filter_that_matches_nothing_says_so_and_clears(page, app_url):
    calls = _raw_calls("qwen3-tiny")
    below_all = int(min(min(c["per_token_logps"]) for c in calls)) - 5  # no token of the capture is that low
    _open(page, app_url, "source=sample:qwen3-tiny&turn=1")
    box = page.locator("#f-low-at input")
    box.fill(str(below_all))
    box.press("Enter")
    page.locator("#f-low input").check()
    note = page.locator("#turn-filter-note")
    _wait_text(page, "#turn-filter-note", "No turns match")
    assert note.is_visible() and "clear filters" in note.inner_text()
    # the list lists nothing (Gradio may draw one blank row for an empty table)
    assert page.evaluate(f"[...document.querySelectorAll('{ROWS} .first-column')].every(c => !c.textContent.trim())")
    page.locator("#f-clear").click()  # the way out the note names
    assert len(_column(page, len(calls), 0)) == len(calls)
    assert not page.locator("#f-low input").is_checked()
    page.wait_for_function("!document.querySelector('#turn-filter-note')?.innerText.includes('No turns match')",
                           timeout=30000)


def test_opening_another_rollout_resets_the_filters(page, app_url):
    summary = json.loads((SAMPLES / "qwen3-tiny" / "summary.json").read_text())
    _open(page, app_url, "source=sample:smollm2")
    page.locator("#f-trained input").check()
    _column(page, json.loads((SAMPLES / "smollm2" / "summary.json").read_text())["trained_turns"], 0)
    page.locator("#open-panel").get_by_text("Open a rollout").first.click()
    page.locator("#sample-picker input").click()
    opt = page.get_by_role("option", name="qwen3-tiny", exact=False)
    opt.wait_for(timeout=10000)
    opt.click()
    _wait_text(page, "#rollout-header", "qwen3-tiny")
    page.wait_for_function("document.querySelector('#turns-plot .js-plotly-plot') !== null", timeout=60000)
    assert len(_column(page, summary["calls"], 0)) == summary["calls"]  # every call of the new rollout
    assert not page.locator("#f-trained input").is_checked()  # and the box says the list is unfiltered
    assert page.locator("#f-tool input").input_value() == "(any)"


def test_the_token_view_leaves_a_turn_the_filter_hides(page, app_url):
    calls = _raw_calls("qwen3-tiny")
    title = [str(c["turn"] - 1) for c in calls if c["kind"] == "title"]  # turns count from 0, calls from 1
    assert title == ["0"]
    _open(page, app_url, "source=sample:qwen3-tiny&turn=0")  # the title call: bookkeeping, never trained
    assert page.locator(TV).get_attribute("data-turn") == "0"
    summary = json.loads((SAMPLES / "qwen3-tiny" / "summary.json").read_text())
    page.locator("#f-trained input").check()
    listed = _column(page, summary["trained_turns"], 0)
    assert "0" not in listed
    page.wait_for_function(f"document.querySelector('{TV}')?.dataset.turn === '{listed[0]}'", timeout=30000)
    page.wait_for_function(f"{CURRENT} === '{listed[0]}'", timeout=15000)  # marked in the list too
    _wait_text(page, "#turn-filter-note", "Turn 0 is hidden")  # and the user is told why it moved
