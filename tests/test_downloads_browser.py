"""Downloads as a user meets them, in Debian chromium (issue 41, point 5): under the token view there is
no empty "File" drop box, only buttons, and *Download as HTML* is one click that downloads one file,
the view on screen.

Expected values come from the sample's raw ``trace.json`` (read here with ``json``) and from the
downloaded file itself, never from the viewer's reader.
"""
from __future__ import annotations

import json
import re

import pytest

from test_export_browser import _offline
from viewer.config import SAMPLE_DIR

pytestmark = pytest.mark.browser

TV = "#token-view .ri-tv"
# Gradio draws a File component that holds nothing as a large box with this label and a file icon (an
# empty plot has the label too, with its own icon, until its data comes: not a file box)
EMPTY_BOX = "[aria-label='Empty value']:has(svg.feather-file)"


def _visible_empty_boxes(page) -> list[str]:
    """The ids (or tags) of the file boxes on screen that hold nothing, with their height."""
    return page.locator(EMPTY_BOX).evaluate_all(
        "els => els.filter(e => e.getClientRects().length && e.getBoundingClientRect().height > 0)"
        ".map(e => (e.closest('[id]') || e).id + ' ' + Math.round(e.getBoundingClientRect().height) + 'px')")


def test_no_empty_file_box_and_download_as_html_is_one_click(page, app_url, tmp_path):
    trace = json.loads((SAMPLE_DIR / "qwen3-tiny" / "trace.json").read_text())
    p = len(trace[2]["prompt_token_ids"])
    page.goto(f"{app_url}/?source=sample:qwen3-tiny&turn=2&tok={p + 1}-{p + 4}")
    page.wait_for_function(f"document.querySelector('{TV}')?.dataset.selected === '{p + 1}-{p + 4}'", timeout=60000)
    # what the user sees under the token view, the notes panel opened too: buttons, no empty box
    page.locator("#talk-panel").get_by_text("Notes and deck").first.click()
    page.locator("#note-text textarea").wait_for(state="visible")
    assert _visible_empty_boxes(page) == []
    btn = page.locator("#export-html-btn")
    assert btn.is_visible() and btn.text_content().strip() == "Download as HTML"

    # one click downloads the file: the turn on screen, its selection
    with page.expect_download(timeout=60000) as dl:
        btn.click()
    assert re.fullmatch(r"[A-Za-z0-9._-]+-turn2\.html", dl.value.suggested_filename), dl.value.suggested_filename
    saved = tmp_path / dl.value.suggested_filename
    dl.value.save_as(saved)
    assert _visible_empty_boxes(page) == []  # and nothing new appeared on screen after it

    # a second click downloads again (the same button, not a link left behind by the first)
    with page.expect_download(timeout=60000) as again:
        btn.click()
    assert again.value.suggested_filename == dl.value.suggested_filename

    # the file is the view that was on screen: opened offline, turn 2 with the same tokens selected
    asked = _offline(page, saved)
    assert page.locator(TV).get_attribute("data-turn") == "2"
    assert page.locator(TV).get_attribute("data-selected") == f"{p + 1}-{p + 4}"
    assert asked == [saved.resolve().as_uri()]
