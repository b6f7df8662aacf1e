"""The Search tab's reward histogram (issue 38, point 3): matching rollouts per reward bin."""
from __future__ import annotations

import plotly.graph_objects as go

from .style import TRAINED, base_layout, empty

__all__ = ["reward_hist_figure"]


def reward_hist_figure(bins: list[tuple[float, float, int]] | None, height: int = 240) -> go.Figure:
    """Bars of ``(lo, hi, count)`` (a search's ``reward_hist``); ``customdata`` = [lo, hi] of the bin."""
    bins = [b for b in (bins or []) if b[2] is not None]
    if not bins or not any(b[2] for b in bins):
        return empty("no rewards among the matching rollouts", height)
    fig = go.Figure(go.Bar(
        x=[(lo + hi) / 2 for lo, hi, _ in bins], y=[n for _, _, n in bins], width=[max(hi - lo, 1e-9) * 0.95
                                                                                  for lo, hi, _ in bins],
        customdata=[[lo, hi] for lo, hi, _ in bins], marker=dict(color=TRAINED),
        hovertemplate="reward %{customdata[0]:.4g} – %{customdata[1]:.4g}: %{y} rollouts<extra></extra>"))
    base_layout(fig, height, title=dict(text="reward of the matching rollouts", font=dict(size=13)), bargap=0.05)
    fig.update_xaxes(title_text="reward")
    fig.layout.yaxis.title.text = "rollouts"
    return fig
