"""The notes panel's downloads as a user meets them, in Debian chromium (issue 41, point 5): no empty
"File" box in the panel; *Download notes.json* is one click that downloads the notes; after *Add this
view to the deck*, *Download deck.json* downloads the deck built so far.

Expected values come from the sample's raw ``trace.json`` and from the downloaded files (plain json).
"""
from __future__ import annotations

import json

import pytest

from test_downloads_browser import _visible_empty_boxes
from viewer.config import SAMPLE_DIR

pytestmark = pytest.mark.browser

TV = "#token-view .ri-tv"


def test_notes_and_deck_download_with_one_click_each(page, app_url, tmp_path):
    trace = json.loads((SAMPLE_DIR / "qwen3-tiny" / "trace.json").read_text())
    p = len(trace[1]["prompt_token_ids"])
    page.goto(f"{app_url}/?source=sample:qwen3-tiny&turn=1&tok={p}-{p + 2}")
    page.wait_for_function(f"document.querySelector('{TV}')?.dataset.selected === '{p}-{p + 2}'", timeout=60000)
    page.locator("#talk-panel").get_by_text("Notes and deck").first.click()
    page.locator("#note-text textarea").wait_for(state="visible")
    assert _visible_empty_boxes(page) == []
    page.locator("#note-text textarea").fill("the first output tokens")
    page.locator("#note-add").click()
    page.wait_for_function(f"document.querySelector('#notes-list')?.textContent.includes('tokens {p}–{p + 2}')",
                           timeout=30000)
    with page.expect_download(timeout=60000) as dl:
        page.locator("#notes-download").click()
    assert dl.value.suggested_filename == "notes.json"
    notes = json.loads((dl.value.path()).read_text())
    assert [(n["turn"], n["tok"], n["text"]) for n in notes["notes"]] == [(1, [p, p + 2], "the first output tokens")]
    assert notes["source"] == "sample:qwen3-tiny"

    page.locator("#deck-add").click()
    page.wait_for_function("document.querySelector('#deck-built')?.textContent.includes('1 step')", timeout=30000)
    with page.expect_download(timeout=60000) as deck_dl:
        page.locator("#deck-file").click()
    assert deck_dl.value.suggested_filename == "deck.json"
    deck = json.loads(deck_dl.value.path().read_text())
    assert [(s["source"], s["turn"], s.get("tok")) for s in deck["steps"]] == [("sample:qwen3-tiny", 1, [p, p + 2])]
    assert _visible_empty_boxes(page) == []
