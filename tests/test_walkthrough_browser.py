"""A newcomer's first walk through the app, in Debian chromium (issue 25, acceptance).

Open the app, open a sample, change the colour mode, walk turns, hover a token, open the drift
report, compare two samples, present, and copy a link, asserting at each step what the user sees.
It takes a 1280×800 screenshot at five of the steps. They go to ``$RI_WALKTHROUGH_SHOTS`` when set
(``RI_WALKTHROUGH_SHOTS=docs bash scripts/test.sh tests/test_walkthrough_browser.py`` refreshes the
ones docs/USING.md shows), else to the test's temporary folder, so a test run leaves the checkout as
it found it.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_data"
TV = "#token-view .ri-tv"
PAINTED = f"document.querySelector('{TV}')?.dataset.painted > 0"
SHOTS = ["walkthrough-1-open.png", "walkthrough-2-logprob-hover.png", "walkthrough-3-drift.png",
         "walkthrough-4-compare.png", "walkthrough-5-present.png"]


def _text(page, sel: str) -> str:
    return page.locator(sel).first.text_content() or ""


def _wait_text(page, sel: str, words: str, timeout=30000):
    page.wait_for_function(f"(document.querySelector({sel!r})?.textContent || '').includes({words!r})",
                           timeout=timeout)


def _wait_turn(page, turn):
    page.wait_for_function(f"document.querySelector('{TV}')?.dataset.turn === '{turn}'", timeout=30000)


def test_newcomer_walkthrough(browser, app_url, tmp_path):
    out = Path(os.environ.get("RI_WALKTHROUGH_SHOTS") or tmp_path)
    if not out.is_absolute():
        out = ROOT / out
    out.mkdir(parents=True, exist_ok=True)
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    ctx.grant_permissions(["clipboard-read", "clipboard-write"], origin=app_url)
    page = ctx.new_page()
    shot = iter(SHOTS)
    try:
        # 1. open the app: the bundled real-weights sample and one line on what to try
        page.goto(app_url)
        page.wait_for_function(PAINTED, timeout=60000)
        model = json.loads((SAMPLES / "smollm2" / "summary.json").read_text())["model"]
        assert model in _text(page, "#rollout-header")
        first = _text(page, "#first-steps")
        assert "You are looking at" in first and "Try" in first
        page.screenshot(path=str(out / next(shot)))

        # 2. open another sample from the picker: the random-weight Qwen3 drift demo, said so
        page.locator("#open-panel").get_by_text("Open a rollout").first.click()
        page.locator("#sample-picker input").click()
        opt = page.get_by_role("option", name="qwen3-tiny", exact=False)
        opt.wait_for(timeout=10000)
        opt.click()
        _wait_text(page, "#rollout-header", "qwen3-tiny")
        _wait_text(page, "#status", "random weights")
        page.wait_for_function(PAINTED, timeout=30000)
        calls = json.loads((SAMPLES / "qwen3-tiny" / "trace.json").read_text())
        start = int(page.locator(TV).get_attribute("data-turn"))

        # 3. change the colour mode: tokens drawn in logprob colours, the address follows
        page.locator(f"{TV} button[data-mode=logprob]").click()
        page.wait_for_function("new URL(location.href).searchParams.get('mode') === 'logprob'", timeout=60000)
        assert page.locator(f"{TV} .tk.k1[class*=' b']").count() > 0
        assert "logprob" in _text(page, f"{TV} .ri-legend")

        # 4. walk turns: next, the list marks it, the mode stays
        nxt = start + 1 if start + 1 < len(calls) else start - 1
        page.locator("#next-turn" if nxt > start else "#prev-turn").click()
        _wait_turn(page, nxt)
        page.wait_for_function("document.querySelector('#turn-list .virtual-row.ri-current .first-column')"
                               f"?.textContent.trim() === '{nxt}'", timeout=15000)
        assert page.locator(f"{TV} .ri-modes button.on").get_attribute("data-mode") == "logprob"

        # 5. hover a token: its id, logprob and alternatives, as the trace recorded them
        rec = calls[nxt]
        p = len(rec["prompt_token_ids"])
        tok = page.locator(f"{TV} .ri-tv-body .tk.k1").first
        tok.scroll_into_view_if_needed()
        tok.hover()
        page.wait_for_function(f"!document.querySelector('{TV} .ri-tip').hidden", timeout=60000)
        tip = _text(page, f"{TV} .ri-tip")
        i = int(page.locator(TV).get_attribute("data-hover"))
        k = i - p
        assert f"id {rec['completion_token_ids'][k]}" in tip and f"logprob {rec['logprobs'][k]['logprob']:.4f}" in tip
        assert "top alternatives:" in tip
        page.screenshot(path=str(out / next(shot)))

        # 6. the drift report of this turn
        page.get_by_role("tab", name="Drift").click()
        page.wait_for_function(f"document.querySelector('#drift-view .ri-drift[data-turn=\"{nxt}\"]') !== null",
                               timeout=60000)
        drift = _text(page, "#drift-view")
        assert "Output round trip" in drift and "Prompt re-render" in drift and "Trainer rows" in drift
        page.screenshot(path=str(out / next(shot)))

        # 7. compare with the other sample: both sides drawn, no error
        page.get_by_role("tab", name="Compare").click()
        src = page.locator("#compare-source input, #compare-source textarea").first
        src.fill("sample:smollm2")
        page.locator("#compare-run").click()
        for side in ("compare-a", "compare-b"):
            page.wait_for_function(f"document.querySelector('#{side} .ri-tv')?.dataset.painted > 0", timeout=60000)
        assert page.locator("#compare-summary .ri-error").count() == 0, _text(page, "#compare-summary")
        page.screenshot(path=str(out / next(shot)))

        # 8. present: large type, chrome hidden, → a turn, the bar says which
        page.get_by_role("tab", name="Tokens").click()
        page.locator(f"{TV} .ri-present-btn").click()
        page.wait_for_function("document.body.classList.contains('ri-present')", timeout=60000)
        assert not page.locator("#turn-list").is_visible() and page.locator("#presenter .ri-pr").is_visible()
        here = int(page.locator(TV).get_attribute("data-turn"))
        there = here + 1 if here + 1 < len(calls) else here - 1
        page.keyboard.press("ArrowRight" if there > here else "ArrowLeft")
        _wait_turn(page, there)
        _wait_text(page, "#presenter .ri-pr-title", f"turn {there}")
        page.keyboard.press("j")
        page.wait_for_function(f"document.querySelector('{TV}').dataset.selected !== undefined", timeout=60000)
        # d: the turn's drift, computed by the server once the Present button told it (every turn of
        # this random-weight sample re-encodes differently somewhere)
        page.wait_for_function(f"Number(document.querySelector('{TV}').dataset.marks) > 0", timeout=30000)
        page.keyboard.press("d")
        _wait_text(page, "#presenter .ri-pr-state", "changed span")
        page.keyboard.press("d")
        page.screenshot(path=str(out / next(shot)))
        page.keyboard.press("Escape")
        page.wait_for_function("!document.body.classList.contains('ri-present')", timeout=60000)

        # 9. copy a link to what is on screen; it opens the same turn in the same colours
        page.locator(f"{TV} .ri-link").click()
        page.wait_for_function(f"document.querySelector('{TV} .ri-link')?.textContent.startsWith('Copied')",
                               timeout=60000)
        link = page.evaluate("navigator.clipboard.readText()")
        assert "source=sample" in link and f"turn={there}" in link and "mode=logprob" in link, link
        other = ctx.new_page()
        other.goto(link)
        other.wait_for_function(PAINTED, timeout=60000)
        assert other.locator(TV).get_attribute("data-turn") == str(there)
        assert other.locator(f"{TV} .ri-modes button.on").get_attribute("data-mode") == "logprob"
        assert "qwen3-tiny" in _text(other, "#rollout-header")
    finally:
        ctx.close()
    for name in SHOTS:  # each step's picture was taken, at the size docs/USING.md shows
        data = (out / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(data[16:20], "big") == 1280
