"""The token payload read in chromium: ``riExpandTokens`` (viewer/ui/assets/token_payload.js) gives
the same ids, texts, kinds and logprobs as the library's decoder (viewer/render/payload.py,
``decode_payload``), written apart from it, on hand-made turns (characters outside the BMP, empty
texts, hostile text, ids at the number columns' edges, a negative id, NaN / infinite / positive
logprobs, an empty turn) and on every turn of both bundled samples; it refuses every broken payload
the Python decoder refuses (tests/tv_payload.py: ``broken_variants``); the token view draws from it
(the text painted is the texts joined, a hover names the exact text after an emoji)."""
from __future__ import annotations

import json

import pytest

from hostile import HOSTILE
from tv_payload import broken_variants, expand, hostile_views
from viewer import render
from viewer.config import SAMPLE_DIR, Settings
from viewer.render.export import _asset, _host
from viewer.render.shell import token_view_template
from viewer.rollout import Turn
from viewer.tokens import TurnTokens

pytestmark = pytest.mark.browser

EXPAND = "p => { const D = riExpandTokens(JSON.parse(p)); return [D.ids, D.t, Array.from(D.k), D.lp]; }"


def _hand_payloads() -> list[str]:
    texts = ["😀", "", "a😀b", "é", "\n", "x", "𝔘\r\n", *HOSTILE]
    n = len(texts)
    turn = Turn(index=0, call=1, trained=True, prompt_ids=[1, 2], output_ids=list(range(3, n + 1)),
                logprobs=[-0.25, None, -1.0, float("nan")] + [-2.0] * (n - 6), mask=[1, 1, 0] + [1, 0] * n)
    tt = TurnTokens(list(range(1, n + 1)), texts, [False] * n, 2, True)
    return [render.token_view_payload(turn, tt, render.ViewOptions()),
            render.token_view_payload(turn, TurnTokens([7], ["only"], [True], 1, True), render.ViewOptions()),
            *(render.token_payload(v) for v in hostile_views().values())]


def _sample_payloads() -> list[str]:
    from viewer.sources import load_source
    from viewer.tokenizer import token_table, tokenizer_for
    from viewer.views import turn_view

    s, out = Settings(), []
    for name in ("qwen3-tiny", "smollm2"):
        r = load_source(SAMPLE_DIR / name, s)
        choice = tokenizer_for(r, s)
        table = token_table(choice.tokenizer, choice.name)
        for t in r.turns:
            tv = turn_view(r, t.index, choice.tokenizer, table)
            out.append(render.token_view_payload(tv.turn, tv.tokens, render.ViewOptions.from_settings(s)))
    return out


@pytest.fixture
def blank(page):
    page.set_content(f"<div id='token-view'>{token_view_template()}</div>")
    page.add_script_tag(content=_asset("token_payload.js") + _host("riTokenView", _asset("token_view.js")))
    return page


def test_the_browser_reads_every_payload_as_the_python_reader_does(blank):
    payloads = _hand_payloads() + _sample_payloads()
    assert len(payloads) >= 16 and any('"ids":[5,-1,7]' in p for p in payloads)  # a list column too
    for p in payloads:
        e = expand(p)
        assert blank.evaluate(EXPAND, p) == [e["ids"], e["t"], e["k"], e["lp"]]


def test_the_view_paints_the_texts_and_hovers_the_exact_text_after_an_emoji(blank):
    p = _hand_payloads()[0]
    e = expand(p)
    blank.evaluate("""p => {
      const props = {value: p}, box = document.getElementById('token-view');
      riTokenView(box, () => {}, props, {}, null, () => {});
    }""", p)
    shown = ["∅" if t == "" else t.replace("\n", "↵\n") for t in e["t"]]
    assert blank.evaluate("() => [...document.querySelectorAll('#token-view .ri-tv-body .tk')].map(s => s.textContent)"
                          ) == shown
    tip = blank.locator("#token-view .ri-tip")
    # "a😀b" after one emoji, "é" after two (each two UTF-16 units where Python counts one character)
    for k, where, text in ((2, "output 0", "a😀b"), (3, "output 1", "é")):
        blank.locator("#token-view .ri-tv-body .tk").nth(k).hover()
        tip.wait_for(state="visible")
        assert f"pos {k} ({where})" in tip.text_content() and f'text "{text}"' in tip.text_content()


def test_a_payload_that_does_not_add_up_is_refused_as_python_refuses_it(blank):
    good = render.token_payload(hostile_views()["texts"])
    cases = {k: v if isinstance(v, str) else json.dumps(v) for k, v in broken_variants(good).items()}
    got = blank.evaluate("""cases => Object.fromEntries(Object.entries(cases).map(([k, p]) => {
      try { riExpandTokens(JSON.parse(p)); return [k, 'read']; } catch (e) { return [k, String(e)]; }
    }))""", {"good": good, **cases})
    assert got.pop("good") == "read"
    for name, p in cases.items():
        with pytest.raises(ValueError):
            expand(p)
        assert got[name].startswith(("Error:", "SyntaxError:")), (name, got[name])
