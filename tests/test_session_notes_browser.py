"""Session notes survive a reload in Debian chromium (issue 41's newcomer check: notes on a bundled sample
lived in the session only, and a reload emptied them). The expected range comes from the capture's own
trace.json (plain JSON). Waits for what the user sees; failed on the code before the fix."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

SAMPLES = Path(__file__).resolve().parent.parent / "sample_data"
P1 = len(json.loads((SAMPLES / "qwen3-tiny" / "trace.json").read_text())[1]["prompt_token_ids"])
TV = "#token-view .ri-tv"
STORAGE_KEY = "ri-session-notes"  # (viewer/ui/notes_kept.py: where the browser keeps the notes)
TEXT = "the write call's first pieces"


def _open_panel(page):
    page.locator("#talk-panel").get_by_text("Notes and deck").first.click()
    page.locator("#note-text textarea").wait_for(state="visible")


def _listed(page, words: str):
    page.wait_for_function(f"document.querySelector('#notes-list')?.textContent.includes({words!r})", timeout=60000)


def test_a_note_on_a_sample_survives_a_reload(page, app_url):
    page.goto(f"{app_url}/?source=sample:qwen3-tiny&turn=1&tok={P1}-{P1 + 4}")
    page.wait_for_function(f"document.querySelector('{TV}')?.dataset.selected === '{P1}-{P1 + 4}'", timeout=60000)
    _open_panel(page)
    before = page.evaluate(f"localStorage.getItem({STORAGE_KEY!r})")
    page.locator("#note-text textarea").fill(TEXT)
    page.locator("#note-add").click()
    _listed(page, TEXT)
    assert "kept in this browser session" in page.locator("#talk-msg").text_content()
    # the browser's copy is written after the list is painted: a reload before it would lose the note (the clean
    # run reloaded in between once, on a loaded machine)
    page.wait_for_function(f"localStorage.getItem({STORAGE_KEY!r}) !== {json.dumps(before)}", timeout=60000)
    page.reload()
    page.wait_for_function(f"document.querySelector('{TV}')?.dataset.painted > 0", timeout=60000)
    _open_panel(page)
    _listed(page, TEXT)  # still there
    assert f"turn 1 · tokens {P1}–{P1 + 4}" in page.locator("#notes-list").text_content()
