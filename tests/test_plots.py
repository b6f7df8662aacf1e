"""viewer.plots: figures built from Turn / Rollout values, checked trace by trace."""
from __future__ import annotations

import json
import math

import pytest

from viewer.plots import (
    MAX_POINTS,
    MAX_SHADED_RUNS,
    NO_LOGPROBS,
    histogram_figure,
    logprob_figure,
    trained_runs,
    turn_mask,
    turns_figure,
)
from viewer.rollout import Rollout, Turn

LOW = -2.5
#            0     1     2      3     4     5     6      7     8     9
LOGPROBS = [-0.1, -3.0, -0.5, None, -4.2, -0.01, -2.6, -0.2, -2.5, -1.0]
MASK = [0, 0, 1, 1, 1, 0, 0, 1, 1, 0]


def _turn(**kw) -> Turn:
    base = dict(index=0, call=0, trained=True, output_ids=list(range(100, 110)), logprobs=list(LOGPROBS),
                mask=list(MASK), output_source="engine")
    base.update(kw)
    return Turn(**base)


def _trace(fig, prefix: str):
    found = [t for t in fig.data if t.name.startswith(prefix)]
    assert len(found) == 1, [t.name for t in fig.data]
    return found[0]


def _ints(a) -> list[int]:
    return [int(v) for v in a]


def _annotations(fig) -> list[str]:
    return [a.text for a in fig.layout.annotations]


# ---------------------------------------------------------------------------- logprob_figure

def test_points_split_by_mask_and_missing_logprob_dropped():
    fig = logprob_figure(_turn(), low=LOW)
    trained = _trace(fig, "trained")
    untrained = _trace(fig, "not trained")
    # position 3 has no logprob: left out; the others by mask
    assert _ints(trained.customdata) == [2, 4, 7, 8]
    assert _ints(untrained.customdata) == [0, 1, 5, 6, 9]
    assert _ints(trained.x) == [2, 4, 7, 8]
    assert [round(float(v), 5) for v in trained.y] == [-0.5, -4.2, -0.2, -2.5]
    assert trained.type == untrained.type == "scatter"


def test_low_markers_at_the_right_positions():
    fig = logprob_figure(_turn(), low=LOW)
    low = _trace(fig, "low")
    # strictly below -2.5: positions 1 (-3.0), 4 (-4.2), 6 (-2.6); -2.5 itself is not low
    assert _ints(low.customdata) == [1, 4, 6]
    assert low.marker.symbol != _trace(fig, "trained").marker.symbol
    assert low.marker.color != _trace(fig, "trained").marker.color
    # a stricter threshold flags fewer
    assert _ints(_trace(logprob_figure(_turn(), low=-4.0), "low").customdata) == [4]
    # none below: no low trace at all
    assert not [t for t in logprob_figure(_turn(), low=-10).data if t.name.startswith("low")]


def test_trained_region_shaded_and_threshold_line():
    fig = logprob_figure(_turn(), low=LOW)
    rects = [s for s in fig.layout.shapes if s.type == "rect" and s.name == "trained"]
    # mask runs of 1: positions 2..4 and 7..8 → rectangles covering whole token cells
    assert sorted((s.x0, s.x1) for s in rects) == [(1.5, 4.5), (6.5, 8.5)]
    assert all(s.yref == "paper" and s.layer == "below" for s in rects)
    lines = [s for s in fig.layout.shapes if s.name == "low"]
    assert len(lines) == 1 and lines[0].y0 == lines[0].y1 == LOW


def test_offset_moves_x_but_not_customdata():
    fig = logprob_figure(_turn(prompt_ids=list(range(50))), offset=50)
    trained = _trace(fig, "trained")
    assert _ints(trained.x) == [52, 54, 57, 58]
    assert _ints(trained.customdata) == [2, 4, 7, 8]
    rects = sorted((s.x0, s.x1) for s in fig.layout.shapes if s.name == "trained")
    assert rects == [(51.5, 54.5), (56.5, 58.5)]


def test_hover_text_is_escaped_and_whitespace_visible():
    texts = ["<script>alert(1)</script>", " a\n", "&", "x", "y", "z", "é", "\u200b", "q", "w"]
    fig = logprob_figure(_turn(), token_texts=texts)
    by_pos = {}
    for tr in fig.data:
        for cd, tx in zip(tr.customdata, tr.text):
            by_pos[int(cd)] = tx
    assert "<script>" not in by_pos[0] and "&lt;script&gt;" in by_pos[0]
    assert "␣a↵" in by_pos[1]
    assert "&amp;" in by_pos[2]
    assert "\\u200b" in by_pos[7]
    # id and probability are in the hover; the template adds position and logprob
    assert "id 104" in by_pos[4] and f"p {math.exp(-4.2):.4f}" in by_pos[4]
    tmpl = _trace(fig, "trained").hovertemplate
    assert "%{x}" in tmpl and "%{y" in tmpl and "%{text}" in tmpl


def test_hover_falls_back_to_recorded_bytes():
    ob = [b"a", b" b", b"\xf0\x9f", None, b"c", b"d", b"e", b"f", b"g", b"h"]
    fig = logprob_figure(_turn(output_bytes=ob))
    texts = {int(c): t for tr in fig.data for c, t in zip(tr.customdata, tr.text)}
    assert texts[1].startswith("␣b") and texts[2].startswith("\\xf0\\x9f")


def test_the_largest_per_token_plot_stays_svg():
    """MAX_POINTS tokens (the most drawn one per token) make one SVG trace set, no WebGL."""
    n = MAX_POINTS
    t = Turn(index=0, call=0, output_ids=[5] * n, logprobs=[-0.5 - (i % 7) for i in range(n)], mask=[1] * n)
    fig = logprob_figure(t)
    assert {tr.type for tr in fig.data} == {"scatter"}
    assert sum(len(tr.x) for tr in fig.data if tr.name != "low (< -2.5)") == n


def test_long_turns_plot_window_minima_that_point_at_real_tokens():
    n = 3 * MAX_POINTS
    lps = [-0.1] * n
    dips = [7, 5000, n - 1]  # one deep dip in three different windows
    for d in dips:
        lps[d] = -9.0
    t = Turn(index=0, call=0, output_ids=list(range(n)), logprobs=lps, mask=[1] * n)
    fig = logprob_figure(t, offset=100)
    points = sum(len(tr.x) for tr in fig.data if tr.mode == "markers" and "window min" in tr.name)
    assert points <= MAX_POINTS // 2 + 1  # bounded, whatever n is
    low_tr = _trace(fig, "low")
    assert sorted(int(c) for c in low_tr.customdata) == dips  # each dip is its window's minimum
    assert [int(x) for x in sorted(low_tr.x)] == [d + 100 for d in dips]
    small = logprob_figure(Turn(index=0, call=0, output_ids=[5] * 100, logprobs=[-1.0] * 100, mask=[1] * 100))
    assert {tr.type for tr in small.data} == {"scatter"}


def test_too_many_runs_leave_out_shading():
    n = 2 * (MAX_SHADED_RUNS + 1)
    t = Turn(index=0, call=0, output_ids=[1] * n, logprobs=[-1.0] * n, mask=[1, 0] * (MAX_SHADED_RUNS + 1))
    fig = logprob_figure(t)
    assert not [s for s in fig.layout.shapes if s.name == "trained"]
    assert "shading left out" in fig.layout.title.text
    assert len(_trace(fig, "trained").x) == MAX_SHADED_RUNS + 1


@pytest.mark.parametrize("turn", [
    Turn(index=0, call=0),
    Turn(index=0, call=0, output_ids=[1, 2, 3], logprobs=[None, None, None], mask=[1, 1, 1]),
    Turn(index=0, call=0, output_ids=[1, 2], logprobs=[float("nan"), float("-inf")]),
])
def test_no_logprobs_gives_annotation(turn):
    fig = logprob_figure(turn)
    assert len(fig.data) == 0
    assert NO_LOGPROBS in _annotations(fig)
    assert fig.layout.height


def test_layout_theme_neutral():
    fig = logprob_figure(_turn())
    assert fig.layout.height and fig.layout.height > 100
    assert fig.layout.paper_bgcolor == "rgba(0,0,0,0)" == fig.layout.plot_bgcolor
    assert fig.layout.clickmode == "event"
    doc = json.loads(fig.to_json())  # serialises (numpy arrays become typed arrays)
    assert doc["layout"]["height"] == fig.layout.height


def test_turn_mask_rules():
    assert turn_mask(Turn(index=0, call=0, output_ids=[1, 2, 3], trained=True)) == [1, 1, 1]
    assert turn_mask(Turn(index=0, call=0, output_ids=[1, 2, 3], trained=False)) == [0, 0, 0]
    # a recorded mask counts only when it covers every output token (Turn.loss_mask): else the turn's flag
    assert turn_mask(Turn(index=0, call=0, output_ids=[1, 2, 3], mask=[1])) == [0, 0, 0]
    assert turn_mask(Turn(index=0, call=0, output_ids=[1, 2, 3], mask=[1], trained=True)) == [1, 1, 1]
    assert turn_mask(Turn(index=0, call=0, output_ids=[1, 2, 3], mask=[0, 1, 0], trained=True)) == [0, 1, 0]
    assert trained_runs([1, 1, 0, 1, 0, 0, 1]) == [(0, 1), (3, 3), (6, 6)]
    assert trained_runs([]) == [] and trained_runs([0, 0]) == []


def test_empty_mask_on_trained_turn_shades_all():
    fig = logprob_figure(_turn(mask=[]))
    assert not [t for t in fig.data if t.name == "not trained"]
    rects = [s for s in fig.layout.shapes if s.name == "trained"]
    assert [(s.x0, s.x1) for s in rects] == [(-0.5, 9.5)]


# ---------------------------------------------------------------------------- turns_figure

def _rollout() -> Rollout:
    return Rollout(source="mem", format="test", turns=[
        Turn(index=0, call=0, trained=True, output_ids=[1] * 4, logprobs=[-1.0, -2.0, -3.0, -2.0],
             mask=[1] * 4),
        Turn(index=1, call=1, kind="bookkeeping", role="title", output_ids=[1] * 3, logprobs=[-0.1] * 3),
        Turn(index=2, call=2, trained=False, output_ids=[1] * 2, logprobs=[-0.5, -1.5], mask=[0, 0]),
        Turn(index=3, call=3, trained=True, output_ids=[1] * 5, logprobs=[None] * 5, mask=[1] * 5),
    ])


def test_turns_figure_stats_and_bars():
    fig = turns_figure(_rollout())
    mean = _trace(fig, "mean")
    mn = _trace(fig, "min")
    # agent turns with logprobs only; the bookkeeping call and turn 3 (no logprobs) are left out
    assert list(mean.x) == [0, 2] and list(mean.customdata) == [0, 2]
    assert list(mean.y) == pytest.approx([-2.0, -1.0])
    assert list(mn.y) == pytest.approx([-3.0, -1.5])
    assert mean.marker.color[0] != mean.marker.color[1]  # trained vs not trained
    tr_bar = _trace(fig, "output tokens (trained)")
    un_bar = _trace(fig, "output tokens (not trained)")
    bk_bar = _trace(fig, "bookkeeping")
    assert (list(tr_bar.x), list(tr_bar.y)) == ([0, 3], [4, 5])
    assert (list(un_bar.x), list(un_bar.y)) == ([2], [2])
    assert (list(bk_bar.x), list(bk_bar.y)) == ([1], [3])
    assert {b.yaxis for b in (tr_bar, un_bar, bk_bar)} == {"y2"}
    assert fig.layout.yaxis2.overlaying == "y"
    assert fig.layout.height and fig.layout.paper_bgcolor == "rgba(0,0,0,0)"


def test_turns_figure_empty_and_no_logprobs():
    assert "no turns" in _annotations(turns_figure(Rollout(source="x", format="y")))[0]
    r = Rollout(source="x", format="y", turns=[Turn(index=0, call=0, output_ids=[1, 2], mask=[1, 1])])
    fig = turns_figure(r)
    assert NO_LOGPROBS in _annotations(fig)
    assert [t.type for t in fig.data] == ["bar"]


# ---------------------------------------------------------------------------- histogram_figure

def test_histogram_counts_trained_tokens_only():
    fig = histogram_figure(_rollout(), low=LOW)
    (bars,) = fig.data
    # trained & finite: turn 0 (4 values); turn 2 is mask 0, turn 3 has no logprobs,
    # the bookkeeping call has an empty mask and is not trained
    assert sum(bars.y) == 4
    lines = [s for s in fig.layout.shapes if s.name == "low"]
    assert len(lines) == 1 and lines[0].x0 == lines[0].x1 == LOW
    # the bin holding -3.0 lies left of the threshold and is coloured apart
    colors = {c for x, c in zip(bars.x, bars.marker.color) if x < LOW}
    assert colors and colors.isdisjoint({c for x, c in zip(bars.x, bars.marker.color) if x > LOW})
    assert any("1 of 4" in a for a in _annotations(fig))


def test_histogram_bins_cover_values():
    vals = [-0.001 * i for i in range(1000)] + [-7.0]
    r = Rollout(source="x", format="y", turns=[Turn(index=0, call=0, output_ids=[1] * len(vals),
                                                    logprobs=vals, mask=[1] * len(vals))])
    (bars,) = histogram_figure(r, bins=40).data
    assert len(bars.x) == 40 and sum(bars.y) == len(vals)
    assert min(bars.x) < -6.5 and max(bars.x) < 0


def test_histogram_empty():
    fig = histogram_figure(Rollout(source="x", format="y"))
    assert len(fig.data) == 0 and any(NO_LOGPROBS in a for a in _annotations(fig))
    t = Turn(index=0, call=0, output_ids=[1], logprobs=[-1.0], mask=[0])
    r = Rollout(source="x", format="y", turns=[t])
    assert any(NO_LOGPROBS in a for a in _annotations(histogram_figure(r)))


# Parts of plotly's default template that only other kinds of figure read (polar, ternary, 3-D, maps)
# or that colour numeric arrays (colour scales): the cut template may leave these out, nothing else.
_OTHER_FIGURES = {"polar", "ternary", "scene", "geo", "coloraxis", "colorscale"}


@pytest.mark.parametrize("make", [
    lambda: logprob_figure(_turn(), token_texts=[f"t{i}" for i in range(10)]),
    lambda: logprob_figure(_turn(logprobs=[-1.0] * (MAX_POINTS + 10), output_ids=[1] * (MAX_POINTS + 10), mask=[1] * (MAX_POINTS + 10))),
    lambda: logprob_figure(_turn(logprobs=[None] * 10)),
    lambda: turns_figure(_rollout()),
    lambda: histogram_figure(_rollout()),
], ids=["logprob", "logprob-windows", "empty", "turns", "histogram"])
def test_figures_carry_a_small_template_that_looks_like_plotlys(make):
    """Each figure sent to the browser carried plotly's whole default template (7.1 KB of 16 KB for a
    turn's logprob plot, docs/SPEED.md room): now only the parts its traces and axes read, with
    plotly's own values (compared with the installed plotly's template, not with ours)."""
    import plotly.io as pio

    upstream = pio.templates["plotly"].to_plotly_json()
    doc = json.loads(make().to_json())
    template = doc["layout"]["template"]
    assert len(json.dumps(template)) < 1500, len(json.dumps(template))
    for key, value in template["layout"].items():
        assert value == upstream["layout"][key], key
    assert set(upstream["layout"]) - set(template["layout"]) <= _OTHER_FIGURES
    for trace in doc["data"]:  # every trace type drawn keeps plotly's defaults for it
        assert template["data"][trace["type"]] == upstream["data"][trace["type"]], trace["type"]
        color = (trace.get("marker") or {}).get("color")
        assert not (isinstance(color, list) and color and isinstance(color[0], (int, float))), \
            "a numeric colour array would need the colour scales left out of the template"
    assert not _OTHER_FIGURES & set(doc["layout"]) - {"colorscale"}
