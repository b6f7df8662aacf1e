"""Presenter mode shows the presentation and nothing else, in Debian chromium (issue 41, point 4): no
rescore panel, no *Download as HTML*, no notes panel or file box on screen; the step / notes callout
covers neither the tokens nor the token's details; and a turn opens on its output (the "▶ output"
boundary on screen), not scrolled into the system prompt, whether presenting from a deck link or
from the token view's *Present* button.

What is expected comes from the bundled deck's raw ``deck.json`` (read with ``json``) and from what the
page lays out (bounding boxes), never from the viewer's own code.
"""
from __future__ import annotations

import json

import pytest

from viewer.config import SAMPLE_DIR

pytestmark = pytest.mark.browser

TV = "#token-view .ri-tv"
BODY = f"{TV} .ri-tv-body"
CHROME = ("#rescore-panel", "#export-html-btn", "#talk-panel", "#notes-file", "#deck-file", "#export-html-file")


def _box(page, sel: str) -> dict:
    box = page.locator(sel).first.bounding_box()
    assert box is not None, f"{sel} is not laid out"
    return box


def _overlap(a: dict, b: dict) -> bool:
    return (a["x"] < b["x"] + b["width"] and b["x"] < a["x"] + a["width"]
            and a["y"] < b["y"] + b["height"] and b["y"] < a["y"] + a["height"])


def _shown(page, sel: str) -> bool:
    """On screen for a user: laid out with a size, and not outside the window."""
    return page.locator(sel).evaluate_all(
        "els => els.some(e => { const r = e.getBoundingClientRect();"
        " return e.getClientRects().length > 0 && r.width > 0 && r.height > 0; })")


def _opens_on_output(page) -> None:
    """The output boundary is inside the token box's scrolled view and inside the window (waited for:
    the large type lays the tokens out again after the view first drew them)."""
    page.wait_for_function(f"""(() => {{
      const body = document.querySelector('{BODY}'), mark = body && body.querySelector('.ri-boundary');
      if (!mark) return false;
      const b = body.getBoundingClientRect(), m = mark.getBoundingClientRect();
      return m.top >= b.top && m.bottom <= b.bottom && m.bottom <= window.innerHeight;
    }})()""", timeout=20000)
    # and it stays there (a late layout of the large type does not push it back into the prompt)
    page.wait_for_timeout(600)
    body, mark = _box(page, BODY), _box(page, f"{BODY} .ri-boundary")
    assert body["y"] <= mark["y"] and mark["y"] + mark["height"] <= body["y"] + body["height"]
    assert page.evaluate(f"document.querySelector('{BODY}').scrollTop") > 0  # the prompt is long: scrolled past it


def test_a_deck_presents_only_the_presentation(page, app_url):
    steps = json.loads((SAMPLE_DIR / "deck.json").read_text())["steps"]
    page.goto(f"{app_url}/?deck=sample:deck.json")
    page.wait_for_function(f"document.querySelector('#talk .ri-callout-step')?.textContent.includes("
                           f"{json.dumps(steps[0]['title'])})", timeout=60000)
    page.wait_for_function("document.body.classList.contains('ri-present')")
    page.wait_for_function(f"document.querySelector('{TV}')?.dataset.painted > 0", timeout=60000)
    for sel in CHROME:
        assert not _shown(page, sel), f"{sel} is on screen in presenter mode"
    callout = _box(page, "#talk .ri-callout")
    for sel in (BODY, f"{TV} .ri-tv-detail", "#presenter .ri-pr", f"{TV} .ri-tv-bar"):
        assert not _overlap(callout, _box(page, sel)), f"the callout covers {sel}"
    assert callout["y"] + callout["height"] <= page.viewport_size["height"]
    _opens_on_output(page)
    # the next step (another turn) opens on its output too, the callout still clear of the tokens
    page.keyboard.press("ArrowRight")
    page.wait_for_function("document.querySelector('#talk .ri-callout-step')?.textContent.startsWith('step 2 /')",
                           timeout=60000)
    page.wait_for_function(f"document.querySelector('{TV}')?.dataset.turn === '{steps[1]['turn']}'", timeout=60000)
    assert not _overlap(_box(page, "#talk .ri-callout"), _box(page, BODY))


def test_the_present_button_opens_on_the_output(page, app_url):
    page.goto(f"{app_url}/?source=sample:qwen3-tiny&turn=1")
    page.wait_for_function(f"document.querySelector('{TV}')?.dataset.painted > 0", timeout=60000)
    page.locator(f"{TV} .ri-present-btn").click()
    page.wait_for_function("document.body.classList.contains('ri-present')")
    for sel in CHROME:
        assert not _shown(page, sel), f"{sel} is on screen in presenter mode"
    _opens_on_output(page)
    page.keyboard.press("Escape")  # leaving brings the chrome back
    page.wait_for_function("!document.body.classList.contains('ri-present')")
    assert _shown(page, "#export-html-btn") and _shown(page, "#rescore-panel")
