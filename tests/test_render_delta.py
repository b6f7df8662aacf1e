"""Rescore in the token view's payload and the panel's summary (values worked by hand)."""
import json
import math

from viewer import render
from viewer.rescore.values import RescoreResult, TurnDelta


def _result(model="tiny-qwen3", context="same"):
    td = TurnDelta(turn=1, row=0, verdict="FIRST", context=context, context_at=None if context == "same" else 7,
                   output_index=[0, 2], sampler=[-1.0, -2.0], trainer=[-1.5, -2.0])
    return RescoreResult(model, "cpu", "float32", 1.0, 0.2, {"mode": "trl-contract"}, [td], seconds=1.25)


def test_turn_delta_places_values_on_output_positions():
    d = render.turn_delta(_result(), 1, prompt_len=3, n=6)
    assert d["tr"] == [None, None, None, -1.5, None, -2.0]
    assert d["dl"] == [None, None, None, -0.5, None, 0.0]
    assert d["ctx"] == "same" and d["verdict"] == "FIRST" and d["thr"] == 0.2
    assert render.turn_delta(None, 1, 3, 6) is None
    empty = render.turn_delta(_result(), 5, 3, 6)  # a turn the trainer trains nothing of
    assert empty["tr"] == [None] * 6 and empty["ctx"] is None


def test_modes_are_data_driven():
    ids, texts, kinds = [1, 2, 3, 4], ["a", "b", "c", "d"], [0, 0, 1, 1]
    cols, turn = render.Tokens(ids, texts, kinds), render.TurnInfo(prompt_len=2)
    plain = json.loads(render.token_payload(render.TokenView(cols, turn, view=render.ViewOptions(mode="delta"))))
    assert plain["modes"] == ["mask", "logprob"] and plain["mode"] == "mask" and "delta" not in plain
    d = render.turn_delta(_result(), 1, 2, 4)
    withd = json.loads(render.token_payload(render.TokenView(cols, turn, view=render.ViewOptions(mode="delta"),
                                                             delta=d)))
    assert withd["modes"] == ["mask", "logprob", "delta"] and withd["mode"] == "delta"
    assert withd["delta"]["dl"] == [None, None, -0.5, None]


def test_summary_escapes_and_counts():
    html = render.rescore_summary_html(_result(model="<img src=x onerror=alert(1)>"))
    assert "<img" not in html and "&lt;img" in html
    assert "0.2500" in html  # mean |Δ| = (0.5 + 0) / 2
    assert "0.607" in html and "1.000" in html  # ratio exp(-0.5) … exp(0)
    assert "No rescore yet" in render.rescore_summary_html(None)
    rows = render.rescore_turn_rows(_result())
    assert rows == [[1, 0, "FIRST", "same", 2, 0.25, 0.5, round(math.exp(-0.5), 3), 1.0, 1]]  # the summary's precision
