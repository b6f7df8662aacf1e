"""Issue 41, point 9 in Debian chromium: the jargon the newcomer met is explained where it appears.

*filtered calls* in the header, *ids: engine / prompt: engine* on the token view's bar, the mask legend,
*FORK / REALIGN* on the Drift tab's verdicts, *trl-contract* under the trainer picker, *unchecked* in a
scan's summary: each carries its one line (the tooltip the browser shows on hover, or the text under the
picker). Expected lines are viewer/render/glossary.py's, the one source docs/USING.md's Glossary equals
(tests/test_glossary.py). Waits for what the user sees; each check failed on the code before it.
"""
from __future__ import annotations

import pytest

from viewer.render.glossary import GLOSSARY

pytestmark = pytest.mark.browser

PAINTED = "document.querySelector('#token-view .ri-tv')?.dataset.painted > 0"


def _title(page, sel: str) -> str:
    return page.locator(sel).first.get_attribute("title") or ""


def test_the_jargon_is_explained_where_it_appears(page, app_url):
    page.goto(f"{app_url}/?source=sample:qwen3-tiny&turn=2")
    page.wait_for_function(PAINTED, timeout=60000)
    # the header's pill
    pill = page.locator("#rollout-header .ri-kv", has_text="filtered calls")
    assert pill.get_attribute("title") == GLOSSARY["filtered calls"]
    # the token view's bar: where the ids come from, and what the mask colours mean
    info = page.locator("#token-view .ri-tv-info")
    assert "ids: engine" in info.text_content()
    assert info.get_attribute("title").startswith(GLOSSARY["ids"])
    assert _title(page, "#token-view .ri-legend").startswith(GLOSSARY["loss mask"])
    # the Drift tab: the verdicts of the trainer's rows, the trainer picker's names
    page.get_by_role("tab", name="Drift", exact=True).click()
    page.wait_for_function("document.querySelector('#drift-view [data-check]') !== null", timeout=60000)
    verdicts = page.locator("#drift-view .ri-d-badge", has_text="row: ")
    verdicts.first.wait_for(timeout=30000)
    word = verdicts.first.text_content().split("row: ", 1)[1].split(",")[0].strip()
    assert word in ("FIRST", "CLEAN", "REALIGN", "FORK")
    assert verdicts.first.get_attribute("title") == GLOSSARY[word]
    picker = page.locator("#drift-trainer")
    assert "trl-contract" in picker.inner_text() and "trl-message" in picker.inner_text()
    # a scan's summary: what "unchecked" counts
    page.locator("#drift-scan").click()
    page.wait_for_function("document.querySelector('#drift-scan-summary [data-scan]')", timeout=60000)
    unchecked = page.locator("#drift-scan-summary .ri-kv", has_text="unchecked")
    assert unchecked.get_attribute("title") == GLOSSARY["unchecked"]
