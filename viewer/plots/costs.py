"""The fork-threshold sweep as a figure: trained tokens losing gradient (and rows) per threshold.
Input: the ``gradient`` block of a scan or one rollout (viewer.drift.costs; plain dicts)."""
from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .style import LOW, TRAINED, base_layout, empty

__all__ = ["gradient_sweep_figure", "rows_note"]

X_TITLE = "fork threshold: tokens of drift a row absorbs before it forks (inf: never forks)"


def rows_note(p: dict[str, Any]) -> str:
    """Why a sweep point has the rows it has, in words: 0 rows is never left unexplained (issue 41, point 8)."""
    if p["rows"]:
        return f"{p['rows']} row(s), {p['forked_rows']} forked"
    if not p.get("trained_tokens"):
        return "0 rows: no trained token in the input (nothing to train)"
    return ("0 rows: every row lost all its trained tokens (a REALIGN overwrote them), "
            "and the trainer drops a row with nothing to train")


def gradient_sweep_figure(gradient: dict[str, Any] | None, height: int = 340) -> go.Figure:
    """Two panels over one threshold axis, each with its own y axis on the left: tokens losing gradient
    (line, top) and training rows (bars, bottom). One panel with a second y axis on the right read as one
    scale (issue 41, point 7). The x axis is categorical so ``inf`` sits after the largest number;
    ``customdata`` = the threshold. A threshold with 0 rows says why, on the bar and in its hover."""
    pts = (gradient or {}).get("sweep") or []
    if not pts:
        return empty("no sweep yet: open a rollout or run a scan", height)
    xs = [str(p["fork_threshold"]) for p in pts]
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.12, row_heights=[0.6, 0.4])
    fig.add_trace(go.Scatter(x=xs, y=[p["tokens_losing_gradient"] for p in pts], name="tokens losing gradient",
                             mode="lines+markers", marker=dict(color=LOW, size=9), line=dict(color=LOW),
                             customdata=xs, showlegend=False,
                             text=[f"{p['tokens_losing_gradient']:,} of {p['trained_tokens']:,} trained tokens"
                                   for p in pts],
                             hovertemplate="threshold %{x}: %{text} lose their gradient<extra></extra>"), row=1, col=1)
    notes = [rows_note(p) for p in pts]
    fig.add_trace(go.Bar(x=xs, y=[p["rows"] for p in pts], name="rows", marker=dict(color=TRAINED), opacity=0.55,
                         customdata=xs, text=notes, textposition="none", showlegend=False,
                         hovertemplate="threshold %{x}: %{text}<extra></extra>"), row=2, col=1)
    for i, p in enumerate(pts):
        if not p["rows"]:  # a bar of height 0 is invisible: the reason stands in its place
            # x by the category's index: plotly reads a string such as "64" on a category axis as index 64
            fig.add_annotation(x=i, y=0, xref="x2", yref="y2", yanchor="bottom", showarrow=False,
                               text="0 rows (why: hover)", font=dict(size=10, color=LOW), hovertext=notes[i])
    base_layout(fig, height, title=dict(text="fork-threshold sweep (the trainer re-run at each)", font=dict(size=13),
                                        x=0, xref="paper", xanchor="left", y=0.98))
    fig.update_xaxes(type="category")
    fig.update_xaxes(title_text=X_TITLE, row=2, col=1)
    fig.update_yaxes(title_text="tokens losing<br>gradient", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="training<br>rows", rangemode="tozero", row=2, col=1)
    return fig
