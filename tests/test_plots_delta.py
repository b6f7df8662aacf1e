"""Rescore figures: Δ per trained token and the ratio histogram (values worked by hand)."""
import math

import pytest

from viewer import plots
from viewer.rescore.values import RescoreResult, TurnDelta


def _result(context="same"):
    td = TurnDelta(turn=2, row=0, verdict="REALIGN", context=context, output_index=[0, 3, 4],
                   sampler=[-1.0, -2.0, -0.1], trainer=[-1.5, -2.0, None])
    return RescoreResult("m", "cpu", "float32", 1.0, 0.2, {}, [td])


def test_delta_figure_points_and_threshold_lines():
    fig = plots.delta_figure(_result(), 2, token_texts=["<b>", "x", "y", "z", "w"])
    (tr,) = fig.data
    assert list(tr.x) == [0, 3] and list(tr.y) == pytest.approx([-0.5, 0.0])  # the unscored token is left out
    assert list(tr.customdata) == [0, 3]
    assert "&lt;b&gt;" in tr.hovertext[0] and "ratio 0.6065" in tr.hovertext[0]
    assert sorted(s.y0 for s in fig.layout.shapes) == [-0.2, 0.2]
    assert "numerics" in tr.name
    assert "drift" in plots.delta_figure(_result("changed"), 2).data[0].name


def test_delta_figure_without_data_says_why():
    assert plots.delta_figure(None, 1).layout.annotations[0].text == "no rescore yet"
    assert "no trained token" in plots.delta_figure(_result(), 9).layout.annotations[0].text


def test_ratio_histogram():
    fig = plots.ratio_histogram(_result())
    assert list(fig.data[0].x) == pytest.approx([math.exp(-0.5), 1.0])
    assert sorted(s.x0 for s in fig.layout.shapes) == pytest.approx([math.exp(-0.2), math.exp(0.2)])
