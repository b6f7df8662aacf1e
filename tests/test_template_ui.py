"""The Template tab (certify's report card) through its HTTP API and in a real browser."""
from __future__ import annotations


import pytest

from viewer import render
from viewer.config import Settings
from tv_payload import expand


def test_card_escapes_and_views_mark_the_divergence():
    """Case names, causes and token texts are data: escaped in the card; the views open on the divergence."""
    doc = {"tokenizer": "<img src=x onerror=alert(1)>", "chat_template_sha256": "abc",
           "totals": {"cases": 1, "passed": 0, "failed": 1, "errors": 0, "tokens_lost": {"trl-message": 3}},
           "cases": [{"name": "<b>x</b>", "what": "'\"><script>", "status": "fail", "cause": "special_token",
                      "first_divergence": {"check": "trl_rerender", "position": 2, "held": {"id": 27, "text": "<"},
                                           "next_prompt": {"id": 9, "text": "</script>"}},
                      "tokens_lost": {"trl-message": 3, "trl-contract": 0}, "trainer": {}, "notes": ["<i>n</i>"],
                      "error": None}]}
    html = render.certify_card_html(doc, current="<b>x</b>")
    assert "<img" not in html and "<b>x</b>" not in html and "<script" not in html and "<i>" not in html
    assert "&lt;b&gt;x&lt;/b&gt;" in html and "class='ri-d-cur'" in html

    from viewer.tokenizer import load_qwen3, token_table

    tok = load_qwen3()
    a_ids, b_ids = tok.encode(" one two three four"), tok.encode(" one two</script> x")
    seq = {"check": "trl_rerender", "turn": 1, "a": a_ids, "b": b_ids, "a_label": "held", "b_label": "next",
           "position": 2, "prompt_len": 1}
    a, b = render.certify_views(seq, token_table(tok), Settings())
    pa, pb = expand(a), expand(b)
    assert pa["focus"] == [2, 2] and pb["focus"] == [2, 2] and pa["ids"] == a_ids and pb["ids"] == b_ids
    assert "</script" not in b  # the payload escapes "<"


def test_certify_api_shows_qwen3_card_and_a_failing_case(client):
    card, case, view_a, view_b = client.predict("qwen3 (bundled)", api_name="/certify")
    assert "ri-cert-table" in card and "think_dropped" in card and "plain_chat" in card
    case = case.get("value") if isinstance(case, dict) else case  # a Dropdown update comes as its props
    assert case.startswith("plain_chat · fail")  # the first failing case opens
    pa, pb = expand(view_a), expand(view_b)
    k = pa["focus"][0]
    assert pa["ids"][:k] == pb["ids"][:k] and pa["ids"][k] != pb["ids"][k]
    assert pa["t"][k] == "<think>"


@pytest.mark.browser
def test_template_tab_in_browser(page, app_url):
    page.goto(app_url + "/")
    page.get_by_role("tab", name="Template").click()
    page.locator("#template-run").click()
    page.locator("#template-card table.ri-cert-table").wait_for(timeout=120_000)
    assert page.locator("#template-card tr.ri-d-cur").count() == 1
    sel = page.locator("#template-a .tk.sel").first
    sel.wait_for(timeout=60_000)  # the divergence is the selected token, on the page shown
    assert sel.text_content() == "<think>"
    assert page.locator("#template-b .tk.sel").first.text_content() != "<think>"
