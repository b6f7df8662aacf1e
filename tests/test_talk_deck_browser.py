"""A deck in progress survives a reload and a deep link, in Debian chromium (issue 41, point 3: three steps
built with *Add this view to the deck*, a reload, and the next *Add* said "Step 1": the deck had gone, silently).

The user's own clicks: open a sample, add three views (turns 0, 1, 2), reload the page, open a deep link to
another rollout, add a view there, start a new deck, reload. What is checked is what the panel says. The
expected steps are the turns this test clicked and the samples' own names.
"""
from __future__ import annotations

import pytest

from test_talk_browser import PAINTED, TV, _open_panel

pytestmark = pytest.mark.browser

MSG, LINE = "#talk-msg", "#deck-built"


def _text(page, sel: str) -> str:
    return page.locator(sel).first.text_content() or ""


def _add(page, k: int) -> str:
    """*Add this view to the deck*; the panel's answer must name step ``k`` (the answer before it stays on
    screen while this one is pending, so the wait is for this one)."""
    page.locator("#deck-add").click()
    try:
        page.wait_for_function(f"document.querySelector('{MSG}')?.textContent.includes('Step {k} added to the deck')",
                               timeout=60000)
    except Exception:
        raise AssertionError(f"not step {k}: the panel said {_text(page, MSG)!r}") from None
    return _text(page, MSG)


def _turn_to(page, turn: int):
    page.locator("#next-turn").click()
    page.wait_for_function(f"document.querySelector('{TV}')?.dataset.turn === '{turn}'", timeout=60000)


def _opened(page, url: str):
    page.goto(url)
    page.wait_for_function(PAINTED, timeout=60000)
    _open_panel(page)


def _deck_says(page, n: int):
    """The panel names the deck in progress and its steps; a user sees it before adding the next one."""
    page.wait_for_function(f"document.querySelector('{LINE}')?.textContent.includes('Deck in progress: {n} step')",
                           timeout=60000)
    return _text(page, LINE)


def test_a_deck_in_progress_survives_a_reload_and_a_deep_link(page, app_url):
    _opened(page, f"{app_url}/?source=sample:qwen3-tiny&turn=0")
    _add(page, 1)
    _turn_to(page, 1)
    _add(page, 2)
    _turn_to(page, 2)
    _add(page, 3)
    line = _deck_says(page, 3)  # the deck is kept with this line's answer, so the reload comes after it
    assert all(f"{k}. sample:qwen3-tiny · turn {t}" in line for k, t in ((1, 0), (2, 1), (3, 2))), line

    # reload: the next view is the deck's step 4 (it was step 1: the deck had gone), and the panel says so
    page.reload()
    page.wait_for_function(PAINTED, timeout=60000)
    _open_panel(page)
    shown = int(page.locator(TV).get_attribute("data-turn"))
    _add(page, 4)
    assert page.locator("#deck-add").is_visible()  # the panel stays open as its label changes
    line = _deck_says(page, 4)
    assert all(f"{k}. sample:qwen3-tiny · turn {t}" in line for k, t in ((1, 0), (2, 1), (3, 2), (4, shown))), line
    page.reload()
    page.wait_for_function(PAINTED, timeout=60000)
    # said on the panel's closed header, then in it
    page.wait_for_function("document.querySelector('#talk-panel')?.textContent.includes('Notes and deck · deck: 4 steps')",
                           timeout=60000)
    _open_panel(page)
    _deck_says(page, 4)

    # a deep link to another rollout, opened in the same tab: the deck comes along
    _opened(page, f"{app_url}/?source=sample:smollm2&turn=1")
    _deck_says(page, 4)
    _add(page, 5)
    line = _deck_says(page, 5)
    assert "5. sample:smollm2 · turn 1" in line and "1. sample:qwen3-tiny · turn 0" in line, line

    # a new deck is a new deck after a reload too (an empty deck is kept, not the old one brought back)
    page.locator("#deck-new").click()
    page.wait_for_function(f"document.querySelector('{LINE}')?.textContent.includes('No deck in progress')",
                           timeout=60000)
    page.reload()
    page.wait_for_function(PAINTED, timeout=60000)
    _open_panel(page)
    page.wait_for_function(f"document.querySelector('{LINE}')?.textContent.includes('No deck in progress')",
                           timeout=60000)
    _add(page, 1)
