"""Two visitors (two browser contexts) on one server: the second cannot open the first's
upload by its path, nor cancel the first's capture through a ?job= link."""
from __future__ import annotations

import re
import time

import pytest

from requires import need

pytestmark = [pytest.mark.browser, pytest.mark.slow]
PAINTED = "document.querySelector('#token-view .ri-tv')?.dataset.painted > 0"


def _press_cancel(page, within: float = 90.0) -> None:
    """Capture's Cancel pressed, going back to the Capture tab for as long as something moves the page away."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    end = time.monotonic() + within
    while True:
        page.get_by_role("tab", name="Capture").click()
        try:
            page.locator("#capture-cancel").click(timeout=5000)
            return
        except PlaywrightTimeout:
            if time.monotonic() > end:
                raise


def test_second_visitor_cannot_open_the_firsts_upload_or_cancel_its_capture(browser, app_url, tmp_path):
    from capture_helpers import ReplayUpstream
    from captures import write_capture
    from viewer.capture.agent import find_opencode

    try:
        find_opencode()
    except FileNotFoundError as e:
        need("opencode (scripts/setup_capture.sh)", str(e))
    a_ctx, b_ctx = browser.new_context(), browser.new_context()
    a, b = a_ctx.new_page(), b_ctx.new_page()
    try:
        # visitor A uploads a capture; its header shows where the server keeps it
        folder = write_capture(tmp_path / "mine", "A's private task", "A's answer", tool_command=None)
        a.goto(app_url + "/")
        a.wait_for_function(PAINTED, timeout=60000)
        a.get_by_text("Open a rollout").click()
        a.locator("#upload input[type=file]").set_input_files([str(folder / "trace.json")])
        a.wait_for_function("document.querySelector('#rollout-header')?.textContent.includes('ri-upload-')",
                            timeout=60000)
        path = re.search(r"(/\S*ri-upload-[^/\s]+/trace\.json)", a.locator("#rollout-header").text_content()).group(1)
        # visitor B knows that path and tries it as a link: refused, nothing of A's shown
        b.goto(f"{app_url}/?source={path}")
        b.wait_for_function("document.querySelector('#status')?.textContent.includes('refused')", timeout=60000)
        assert "A's private task" not in b.content()
        # A starts a capture (an endpoint that answers 500: opencode keeps retrying until stopped)
        with ReplayUpstream("http500") as up:
            a.get_by_role("tab", name="Capture").click()
            a.locator("#capture-backend input").fill("endpoint")
            a.keyboard.press("Enter")
            a.locator("#capture-endpoint textarea, #capture-endpoint input").first.fill(up.url)
            a.locator("#capture-agent-timeout input").fill("120")
            a.locator("#capture-start").click()
            a.wait_for_function("document.querySelector('#capture-progress')?.textContent.includes('phase agent')",
                                timeout=60000)
            job = re.search(r"job (\w+)", a.locator("#capture-progress").text_content()).group(1)
            # B re-attaches with ?job= and presses Cancel: refused, the capture keeps running
            b.goto(f"{app_url}/?job={job}")
            b.get_by_role("tab", name="Capture").click()
            b.wait_for_function(f"document.querySelector('#capture-progress')?.textContent.includes('{job}')",
                                timeout=60000)
            # the refusal is shown until the next progress tick (1 s) redraws the panel: record it
            # when it appears instead of polling for it (a busy machine can miss a short window)
            b.evaluate("window.__refused = false; new MutationObserver(() => { if (document.querySelector("
                       "'#capture-progress')?.textContent.includes('started by someone else')) window.__refused = "
                       "true; }).observe(document.body, {subtree: true, childList: true, characterData: true})")
            # (the live view moves a watcher to the Tokens tab at the first recorded call, which may come after
            # the tab was clicked: back to Capture until its Cancel is there to press)
            _press_cancel(b)
            b.wait_for_function("window.__refused === true", timeout=30000)
            assert "running" in a.locator("#capture-progress").text_content()
            # A can cancel its own
            _press_cancel(a)
            a.wait_for_function("document.querySelector('#capture-progress')?.textContent.includes('cancelled')",
                                timeout=90000)
    finally:
        a_ctx.close()
        b_ctx.close()
