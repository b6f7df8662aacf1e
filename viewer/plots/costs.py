"""The fork-threshold sweep as a figure: trained tokens losing gradient (and rows) per threshold.
Input: the ``gradient`` block of a scan or one rollout (viewer.drift.costs; plain dicts)."""
from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from .style import LOW, TRAINED, base_layout, empty

__all__ = ["gradient_sweep_figure"]


def gradient_sweep_figure(gradient: dict[str, Any] | None, height: int = 300) -> go.Figure:
    """Tokens losing gradient (line) and training rows (bars, right axis) per fork threshold; the
    x axis is categorical so ``inf`` sits after the largest number. ``customdata`` = the threshold."""
    pts = (gradient or {}).get("sweep") or []
    if not pts:
        return empty("no sweep yet: open a rollout or run a scan", height)
    xs = [str(p["fork_threshold"]) for p in pts]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=xs, y=[p["rows"] for p in pts], name="rows", yaxis="y2", marker=dict(color=TRAINED),
                         opacity=0.35, customdata=xs,
                         text=[f"{p['rows']} row(s), {p['forked_rows']} forked" for p in pts], textposition="none",
                         hovertemplate="threshold %{x}: %{text}<extra></extra>"))
    fig.add_trace(go.Scatter(x=xs, y=[p["tokens_losing_gradient"] for p in pts], name="tokens losing gradient",
                             mode="lines+markers", marker=dict(color=LOW, size=9), line=dict(color=LOW),
                             customdata=xs,
                             text=[f"{p['tokens_losing_gradient']:,} of {p['trained_tokens']:,} trained tokens"
                                   for p in pts],
                             hovertemplate="threshold %{x}: %{text} lose their gradient<extra></extra>"))
    base_layout(fig, height, title=dict(text="fork-threshold sweep (the trainer re-run at each)", font=dict(size=13), y=0.98),
                yaxis2=dict(overlaying="y", side="right", title=dict(text="rows"), showgrid=False, rangemode="tozero"))
    fig.update_xaxes(title_text="fork_threshold_tokens", type="category")
    fig.layout.yaxis.title.text = "tokens losing gradient"
    fig.layout.yaxis.rangemode = "tozero"
    return fig
