"""viewer/render/compare.py and present.py: hostile token texts and sources stay text."""
from __future__ import annotations

import json

from hostile import HOSTILE
from test_render import live_markup

from viewer import render
from viewer.comparison import Comparison, Divergence, TurnPair
from viewer.drift.marks import Mark
from viewer.rollout import Turn


def _cmp() -> Comparison:
    t = Turn(index=0, call=1, prompt_ids=[1, 2], output_ids=[3])
    pairs = [TurnPair(HOSTILE[i], t, t if i % 2 else None, i,
                      Divergence(i, "output", 3, None if i % 2 == 0 else 4, HOSTILE[i], HOSTILE[-1 - i]))
             for i in range(len(HOSTILE))]
    pairs.append(TurnPair("agent 9", t, t, 3, None))
    return Comparison(HOSTILE[0], HOSTILE[2], pairs, notes=[HOSTILE[5]])


def test_compare_table_escapes_everything_and_marks_the_current_pair():
    res = _cmp()
    html = render.compare_html(res, current=render.pair_label(res.pairs[1]))
    assert live_markup(html) == []
    assert html.count("<tr class='ri-d-cur'>") == 1
    assert html.count("<tr") == len(res.pairs) + 1  # header + one row per pair
    assert "identical" in html and "(no token)" in html


def test_pair_labels_are_plain_text_naming_turns_and_divergence():
    res = _cmp()
    assert render.pair_label(res.pairs[-1]) == "agent 9: A turn 0 ↔ B turn 0 · identical"
    assert render.pair_label(res.pairs[0]).endswith("A turn 0 ↔ B turn - · diverges at 0 (output)")


def test_a_text_aligned_pair_marks_the_diverging_token_on_both_sides_and_stays_text():
    from viewer.text_align import TextAlignment, TokenAt

    t = Turn(index=0, call=1, prompt_ids=[1, 2], output_ids=[3])
    run_a = [TokenAt(i, 10 + i, HOSTILE[i], i, i + 1) for i in range(3)]
    run_b = [TokenAt(i, 20 + i, HOSTILE[-1 - i], i, i + 1) for i in range(2)]
    al = TextAlignment(1, 3, 2, 1, 1, 1, run_a, run_b)
    pair = TurnPair("agent 1", t, t, 1, Divergence(1, "output", 11, 21, HOSTILE[1], HOSTILE[-2]), "text", al)
    res = Comparison(HOSTILE[0], HOSTILE[2], [pair], alignment="text", tokenizers=(HOSTILE[3], "smollm2"))
    html = render.compare_html(res)
    assert live_markup(html) == []
    assert "aligned by text (tokenizers differ:" in html and "byte 1 · output" in html
    assert html.count("ri-cmp-at") == 2  # the token covering byte 1, on each side
    assert render.pair_label(pair) == "agent 1: A turn 0 ↔ B turn 0 · diverges at byte 1 (output): A 1, B 1"


def test_presenter_payload_is_safe_json():
    out = render.presenter_payload(2, [Mark(5, 7, "roundtrip", HOSTILE[0])], note=HOSTILE[5])
    assert "<" not in out
    doc = json.loads(out)
    assert doc == {"turn": 2, "marks": [[5, 7, f"roundtrip: {HOSTILE[0]}", "roundtrip"]], "note": HOSTILE[5],
                   "first": False, "last": False}
