"""The Compare tab (``#compare-view``) in Debian chromium: ``?source=A&compare=B`` opens it on the
first divergence, side by side; a typed B compares with the open rollout; bad input says why; the
B picker lists the bundled samples, and two samples with different tokenizers are aligned by text.

The pair of captures differs at one sampled token, placed by hand (tests/test_comparison.py's
``_edit_output``), so the expected position is known without the viewer.
"""
from __future__ import annotations

import json
import shutil

import pytest
from captures import write_capture
from test_comparison import _edit_output, sample_text_divergence

pytestmark = pytest.mark.browser

A, B = "#compare-a .ri-tv", "#compare-b .ri-tv"


@pytest.fixture(scope="module")
def sibling_pair(data_root, qwen3):
    a = write_capture(data_root / "cmp-a", "List the files.", "I will list the files in this folder first.")
    b = data_root / "cmp-b"
    shutil.copytree(a, b, dirs_exist_ok=True)
    new = qwen3.convert_tokens_to_ids("Ġbanana")
    old = _edit_output(b, 5, new)
    plen = len(json.loads((a / "trace.json").read_text())[0]["prompt_token_ids"])
    return plen + 5, old, new


def test_compare_link_opens_both_views_on_the_first_divergence(page, app_url, sibling_pair):
    pos, old, new = sibling_pair
    page.goto(f"{app_url}/?source=cmp-a&compare=cmp-b")
    page.wait_for_function(f"document.querySelector('{B}')?.dataset.selected === '{pos}-{pos}'", timeout=60000)
    assert page.locator("#compare-view").is_visible()  # the Compare tab is the one shown
    assert page.locator(A).get_attribute("data-selected") == f"{pos}-{pos}"
    assert f"id {old}" in page.locator(f"{A} .ri-tv-detail").text_content()
    assert f"id {new}" in page.locator(f"{B} .ri-tv-detail").text_content()
    for side in (A, B):  # scrolled to the divergence
        box, body = page.locator(f"{side} .tk.sel").bounding_box(), page.locator(f"{side} .ri-tv-body").bounding_box()
        assert body["y"] <= box["y"] <= body["y"] + body["height"]
    summary = page.locator("#compare-summary").text_content()
    assert f"{pos:,} · output" in summary and str(old) in summary and str(new) in summary
    assert "banana" in summary


def test_typed_b_compares_with_the_open_rollout(page, app_url):
    page.goto(f"{app_url}/?source=sample:qwen3-tiny")
    page.wait_for_function("document.querySelector('#token-view .ri-tv')?.dataset.painted > 0", timeout=60000)
    page.get_by_role("tab", name="Compare").click()
    page.locator("#compare-source textarea, #compare-source input").first.fill("sample:qwen3-tiny")
    page.locator("#compare-run").click()
    page.wait_for_function("document.querySelector('#compare-summary')?.textContent.includes('identical')",
                           timeout=60000)
    raw = json.loads((__import__("pathlib").Path(__file__).resolve().parent.parent / "sample_data" / "qwen3-tiny"
                      / "trace.json").read_text())
    rows = page.locator("#compare-summary tbody tr")
    assert rows.count() == len(raw)
    assert rows.nth(0).text_content().count("identical") == 1
    # a B that cannot be opened says why and keeps the app working
    page.locator("#compare-source textarea, #compare-source input").first.fill("../../etc/passwd")
    page.locator("#compare-run").click()
    page.wait_for_function("document.querySelector('#compare-summary')?.textContent.includes('outside the allowed')",
                           timeout=30000)
    assert "root:x:0:0" not in page.content()


def test_picker_lists_the_samples_and_two_tokenizers_align_by_text(page, app_url, qwen3):
    """qwen3-tiny (Qwen3 vocabulary) against smollm2 (SmolLM2's), picked from the list: the
    expected byte and tokens come from each tokenizer's own decode of the samples' trace.json."""
    from pathlib import Path

    from viewer.tokenizer import load_local

    samples = Path(__file__).resolve().parent.parent / "sample_data"
    recs = [json.loads((samples / s / "trace.json").read_text()) for s in ("qwen3-tiny", "smollm2")]
    smol = load_local(str(samples / "smollm2" / "tokenizer"))
    first = next(i for i, (ra, rb) in enumerate(zip(*recs)) if sample_text_divergence(qwen3, smol, ra, rb))
    k, pa, pb = sample_text_divergence(qwen3, smol, recs[0][first], recs[1][first])
    ids_a, ids_b = (r[first]["prompt_token_ids"] + r[first]["completion_token_ids"] for r in recs)

    page.goto(f"{app_url}/?source=sample:qwen3-tiny")
    page.wait_for_function("document.querySelector('#token-view .ri-tv')?.dataset.painted > 0", timeout=60000)
    page.get_by_role("tab", name="Compare").click()
    page.locator("#compare-source input").first.click()
    options = page.get_by_role("option")
    options.first.wait_for(timeout=30000)
    texts = options.all_text_contents()
    assert any("sample:qwen3-tiny" in t for t in texts) and any("sample:smollm2" in t for t in texts)
    options.filter(has_text="sample:smollm2").first.click()
    page.locator("#compare-run").click()
    page.wait_for_function("document.querySelector('#compare-summary')?.textContent.includes('aligned by text')",
                           timeout=120000)
    summary = page.locator("#compare-summary").text_content()
    assert "tokenizers differ" in summary and f"byte {k:,}" in summary
    assert page.locator("#compare-summary .ri-d-cur .ri-cmp-at").count() == 2  # marked on both sides
    # each token view opens on its own token covering the first differing byte
    page.wait_for_function(f"document.querySelector('{B}')?.dataset.selected === '{pb}-{pb}'", timeout=60000)
    assert page.locator(A).get_attribute("data-selected") == f"{pa}-{pa}"
    assert f"id {ids_a[pa]}" in page.locator(f"{A} .ri-tv-detail").text_content()
    assert f"id {ids_b[pb]}" in page.locator(f"{B} .ri-tv-detail").text_content()
    assert page.locator(f"{A} .tk.sel").count() == 1 and page.locator(f"{B} .tk.sel").count() == 1
