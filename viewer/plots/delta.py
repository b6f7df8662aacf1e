"""Rescore figures (plotly, no gradio): Δ per trained token of a turn, and the ratio histogram.

Same conventions as the other figures (:mod:`viewer.plots`: height, transparent backgrounds, escaped hover
text, ``customdata`` = the output position so a click selects the token).
"""
from __future__ import annotations

import html
import math
from typing import Any, Sequence

import plotly.graph_objects as go

from ..tokenizer import visible
from .style import LOW as FLAG
from .style import TRAINED as NUMERIC
from .style import base_layout, empty

__all__ = ["delta_figure", "ratio_histogram"]

DRIFT = "#9333ea"  # the token view's "context changed" colour


def _text(texts: Sequence[str] | None, k: int) -> str:
    if not texts or k >= len(texts):
        return ""
    return html.escape(visible(texts[k])[:60])


def delta_figure(result: Any, turn: int, token_texts: Sequence[str] | None = None, height: int = 260) -> go.Figure:
    """Δ = trainer − sampler per trained token of ``turn`` (x: output position), ±threshold lines;
    tokens whose context the trainer changed in purple, flagged ones ringed red."""
    td = result.turn(turn) if result is not None else None
    pts = [(k, s, t) for k, s, t in zip(td.output_index, td.sampler, td.trainer)
           if t is not None and math.isfinite(s)] if td is not None else []
    if not pts:
        why = "no rescore yet" if result is None else f"turn {turn}: no trained token in the trainer rows"
        return empty(why, height)
    thr = result.threshold
    xs = [k for k, _, _ in pts]
    ds = [t - s for _, s, t in pts]
    hover = [f"output {k} “{_text(token_texts, k)}”<br>sampler {s:.4f} · trainer {t:.4f}<br>"
             f"Δ {t - s:+.4f} · ratio {math.exp(t - s):.4f}" for k, s, t in pts]
    drift = td.context == "changed"
    fig = go.Figure()
    fig.add_trace(go.Scattergl(
        x=xs, y=ds, mode="markers", customdata=xs, hovertext=hover, hoverinfo="text",
        name="context changed by the trainer (drift)" if drift else f"same context ({td.context}): numerics",
        marker=dict(size=5, color=DRIFT if drift else NUMERIC,
                    line=dict(width=[1.5 if abs(d) > thr else 0 for d in ds], color=FLAG))))
    for y in (thr, -thr):
        fig.add_hline(y=y, line=dict(color=FLAG, width=1, dash="dot"))
    base_layout(fig, height, showlegend=True)
    fig.update_xaxes(title_text=f"turn {turn}: output position")
    fig.update_yaxes(title_text="Δ = trainer − sampler")
    return fig


def ratio_histogram(result: Any, bins: int = 60, height: int = 260) -> go.Figure:
    """Histogram of ratio = exp(Δ) over every rescored token, split by numeric vs drifted context."""
    if result is None or not result.turns:
        return empty("no rescore yet", height)
    groups: dict[bool, list[float]] = {False: [], True: []}
    for td in result.turns:
        groups[td.context == "changed"].extend(math.exp(d) for d in td.deltas)
    if not groups[False] and not groups[True]:
        return empty("no rescored tokens", height)
    fig = go.Figure()
    for drift, vals in groups.items():
        if vals:
            fig.add_trace(go.Histogram(x=vals, nbinsx=bins, name="context changed" if drift else "same context",
                                       marker_color=DRIFT if drift else NUMERIC, opacity=0.75))
    for x in (math.exp(-result.threshold), math.exp(result.threshold)):
        fig.add_vline(x=x, line=dict(color=FLAG, width=1, dash="dot"))
    choice = getattr(result, "is_choice", None)  # the IS mode's bounds the panel chose (docs/MISMATCH.md)
    for b in (choice[1:] if choice else ()):
        if b is not None:
            fig.add_vline(x=b, line=dict(color="#111827", width=2), annotation_text=f"{choice[0]} bound {b:g}")
    base_layout(fig, height, barmode="overlay", showlegend=True)
    fig.update_xaxes(title_text="importance ratio exp(Δ), every rescored token")
    fig.update_yaxes(title_text="tokens")
    return fig
