"""Logprob figures of a rollout: per token of a turn, per turn, and the histogram over trained tokens."""
from __future__ import annotations

import html
from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from ..config import LOW_LOGPROB
from ..rollout import Rollout, Turn
from ..tokenizer import texts_from_output_bytes
from .style import (BOOKKEEPING, FONT, LOW, MAX_POINTS, MAX_SHADED_RUNS, MODEBAR_W, NO_LOGPROBS, SHADE, TEXT_LIMIT,
                    TRAINED, UNTRAINED, base_layout, empty, fmt, is_finite, label)

__all__ = ["histogram_figure", "logprob_figure", "trained_runs", "turns_figure", "turn_mask"]


def turn_mask(turn: Turn) -> list[int]:
    """The output loss mask, one 0/1 per plotted position: :attr:`Turn.loss_mask` (the one
    definition of a trained token), extended over logprobs that have no sampled id."""
    n = max(len(turn.output_ids), len(turn.logprobs))
    m = turn.loss_mask[:n]
    return m + [1 if turn.trained else 0] * (n - len(m))


def trained_runs(mask: Sequence[int]) -> list[tuple[int, int]]:
    """Maximal runs of 1 in ``mask`` as inclusive (start, end) positions."""
    runs: list[tuple[int, int]] = []
    start = None
    for i, v in enumerate(mask):
        if v and start is None:
            start = i
        elif not v and start is not None:
            runs.append((start, i - 1))
            start = None
    if start is not None:
        runs.append((start, len(mask) - 1))
    return runs


def logprob_figure(turn: Turn, token_texts: list[str] | None = None, low: float = LOW_LOGPROB,
                   offset: int = 0, height: int = 300) -> go.Figure:
    """Per-token logprob along one turn's output.

    * x = ``offset + i`` for output position ``i`` (0-based). Pass
      ``offset=len(turn.prompt_ids)`` for absolute positions in prompt+output;
    * ``customdata`` of each point = the output position ``i`` (independent of
      ``offset``). Arrays are numpy, so the JSON carries them as typed arrays
      (``{"dtype": "i4", "bdata": ...}``); plotly.js hands the click handler plain numbers;
    * traces: "trained" (mask 1), "not trained" (mask 0), "low (< low)" (red ``x``
      markers over both); trained runs are shaded by rectangles (``layout.shapes``
      with ``name="trained"``), the threshold is a dashed line (``name="low"``);
    * positions without a finite logprob are left out;
    * ``token_texts`` (one per output position) label the hover; without them the bytes
      the server recorded (``turn.output_bytes``) are used, else ``id N``;
    * always SVG ``go.Scatter``: above :data:`MAX_POINTS` tokens the plot shows windows,
      so no per-token plot is large enough to need WebGL.
    """
    n = max(len(turn.output_ids), len(turn.logprobs))
    lps = np.full(n, np.nan, dtype=np.float64)
    for i, v in enumerate(turn.logprobs):
        if is_finite(v):
            lps[i] = v
    finite = np.isfinite(lps)
    if not finite.any():
        return empty(NO_LOGPROBS, height)
    mask = np.asarray(turn_mask(turn), dtype=bool)
    if int(finite.sum()) > MAX_POINTS:
        return _windowed_figure(lps, finite, mask, low, offset, height)
    ids = list(turn.output_ids) + [None] * (n - len(turn.output_ids))
    if token_texts is None and turn.output_bytes:
        token_texts = texts_from_output_bytes(turn.output_bytes, ids)
    nt = len(token_texts) if token_texts is not None else 0
    probs = np.exp(lps)

    def texts(sel: np.ndarray) -> np.ndarray:
        out = [f"{label(token_texts[i] if i < nt else None)}<br>id {ids[i] if ids[i] is not None else '?'}"
               f" · p {probs[i]:.4f}" for i in sel.tolist()]
        return np.array(out, dtype=object)

    where = "pos %{x} (output %{customdata})" if offset else "output pos %{x}"
    # Per-point hover text costs ~100 bytes a point (19 MB at 200k points). Above
    # TEXT_LIMIT points the hover keeps position and logprob only: a click still selects
    # the token, and the token view shows everything about it.
    with_text = int(finite.sum()) <= TEXT_LIMIT
    template = where + ("<br>%{text}" if with_text else "") + "<br>logprob %{y:.4f}<extra>%{fullData.name}</extra>"
    scatter = go.Scatter
    fig = go.Figure()

    def add(name: str, sel: np.ndarray, marker: dict) -> None:
        if sel.size == 0:
            return
        fig.add_trace(scatter(x=(sel + offset).astype(np.int32), y=lps[sel].astype(np.float32),
                              customdata=sel.astype(np.int32), text=texts(sel) if with_text else None,
                              hovertemplate=template,
                              mode="markers", name=name, marker=marker))

    add("trained", np.flatnonzero(finite & mask), dict(color=TRAINED, size=5))
    add("not trained", np.flatnonzero(finite & ~mask), dict(color=UNTRAINED, size=4))
    low_sel = np.flatnonzero(finite & (np.where(finite, lps, 0.0) < low))
    add(f"low (< {low:g})", low_sel, dict(color=LOW, size=9, symbol="x-thin", line=dict(width=2, color=LOW)))
    runs = trained_runs(mask.tolist())
    title = None
    if len(runs) <= MAX_SHADED_RUNS:
        for a, b in runs:
            fig.add_shape(type="rect", xref="x", yref="paper", x0=offset + a - 0.5, x1=offset + b + 0.5,
                          y0=0, y1=1, fillcolor=SHADE, line=dict(width=0), layer="below", name="trained")
    else:
        title = f"{len(runs)} trained runs: shading left out, trained tokens in blue"
    fig.add_shape(type="line", xref="paper", yref="y", x0=0, x1=1, y0=low, y1=low,
                  line=dict(color=LOW, width=1, dash="dash"), name="low")
    base_layout(fig, height, clickmode="event", dragmode="zoom")
    if title:
        fig.update_layout(title=dict(text=title, font=dict(size=12)))
    fig.update_xaxes(title_text="position (prompt + output)" if offset else "output position")
    fig.update_yaxes(title_text="logprob")
    return fig


def _windowed_figure(lps: np.ndarray, finite: np.ndarray, mask: np.ndarray, low: float, offset: int,
                     height: int) -> go.Figure:
    """Overview of a long turn: per window of k tokens its lowest logprob (a clickable point
    at that token) and its mean (a line). Drawing 50k markers costs seconds in a browser
    without a GPU and blocks the token view; the token view carries the per-token detail.
    """
    n = lps.size
    k = int(np.ceil(n / (MAX_POINTS // 2)))
    pad = (-n) % k
    vals = np.concatenate([np.where(finite, lps, np.inf), np.full(pad, np.inf)]).reshape(-1, k)
    has = np.isfinite(vals).any(axis=1)
    arg = vals.argmin(axis=1) + np.arange(vals.shape[0]) * k  # position of each window's minimum
    arg = arg[has]
    mins = lps[arg]
    sums = np.where(np.isfinite(vals), vals, 0.0).sum(axis=1)[has]
    means = sums / np.isfinite(vals).sum(axis=1)[has]
    centres = (np.arange(vals.shape[0]) * k + k / 2)[has]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=(centres + offset).astype(np.float32), y=means.astype(np.float32), mode="lines",
                             name=f"mean per {k} tokens", line=dict(color=TRAINED, width=1), hoverinfo="skip"))
    tr = mask[arg] if mask.size == n else np.ones(arg.size, dtype=bool)
    where = "pos %{x} (output %{customdata})" if offset else "output pos %{x}"
    for name, sel, marker in (
            ("window min (trained)", tr, dict(color=TRAINED, size=4)),
            ("window min (not trained)", ~tr, dict(color=UNTRAINED, size=4)),
            (f"low (< {low:g})", mins < low, dict(color=LOW, size=7, symbol="x-thin", line=dict(width=2, color=LOW)))):
        if sel.any():
            fig.add_trace(go.Scatter(x=(arg[sel] + offset).astype(np.int32), y=mins[sel].astype(np.float32),
                                     customdata=arg[sel].astype(np.int32), mode="markers", name=name, marker=marker,
                                     hovertemplate=where + "<br>lowest logprob in its window %{y:.4f}<extra></extra>"))
    runs = trained_runs(mask.tolist())
    if len(runs) <= MAX_SHADED_RUNS:
        for a, b in runs:
            fig.add_shape(type="rect", xref="x", yref="paper", x0=offset + a - 0.5, x1=offset + b + 0.5,
                          y0=0, y1=1, fillcolor=SHADE, line=dict(width=0), layer="below", name="trained")
    fig.add_shape(type="line", xref="paper", yref="y", x0=0, x1=1, y0=low, y1=low,
                  line=dict(color=LOW, width=1, dash="dash"), name="low")
    base_layout(fig, height, clickmode="event", dragmode="zoom")
    fig.update_layout(title=dict(text=f"{n:,} tokens: lowest logprob per window of {k} (click one to open it)",
                                 font=dict(size=12)))
    fig.update_xaxes(title_text="position (prompt + output)" if offset else "output position")
    fig.update_yaxes(title_text="logprob")
    return fig


def turns_figure(rollout: Rollout, height: int = 300) -> go.Figure:
    """Per-call summary: mean / min logprob per agent turn, output tokens as bars (right axis).

    Agent turns: bars and points blue when trained, grey when not. Bookkeeping calls
    (title generator, compaction, …) get a faint bar and no logprob points. x = turn
    index; ``customdata`` = turn index.
    """
    if not rollout.turns:
        return empty("no turns in this rollout", height)
    fig = go.Figure()
    agent = [t for t in rollout.turns if t.kind == "agent"]
    book = [t for t in rollout.turns if t.kind != "agent"]

    def label(t: Turn) -> str:
        mean, mn = t.logprob_stats()
        lp = f"mean {fmt(mean)} · min {fmt(mn)}" if mean is not None else NO_LOGPROBS
        state = "bookkeeping" if t.kind != "agent" else ("trained" if t.trained else "not trained")
        tools = ", ".join(t.tool_names)
        return (f"turn {t.index} (call {t.call}) · {html.escape(t.role)} · {state}<br>"
                f"{len(t.output_ids)} output tokens · {t.trained_tokens} trained<br>{lp}"
                + (f"<br>tools: {html.escape(tools)}" if tools else ""))

    bar_sets = [("output tokens (trained)", [t for t in agent if t.trained], TRAINED, 0.35),
                ("output tokens (not trained)", [t for t in agent if not t.trained], UNTRAINED, 0.35),
                ("bookkeeping calls", book, BOOKKEEPING, 1.0)]
    for name, ts, color, opacity in bar_sets:
        if not ts:
            continue
        fig.add_trace(go.Bar(x=[t.index for t in ts], y=[len(t.output_ids) for t in ts],
                             customdata=[t.index for t in ts], text=[label(t) for t in ts],
                             hovertemplate="%{text}<extra></extra>", textposition="none",
                             name=name, marker=dict(color=color), opacity=opacity, yaxis="y2"))
    stats = [(t, *t.logprob_stats()) for t in agent]
    with_lp = [(t, mean, mn) for t, mean, mn in stats if mean is not None]
    if with_lp:
        colors = [TRAINED if t.trained else UNTRAINED for t, _, _ in with_lp]
        xs = [t.index for t, _, _ in with_lp]
        common = dict(customdata=xs, text=[label(t) for t, _, _ in with_lp],
                      hovertemplate="%{text}<extra></extra>")
        fig.add_trace(go.Scatter(x=xs, y=[m for _, m, _ in with_lp], mode="lines+markers",
                                 name="mean logprob", line=dict(color=TRAINED, width=1.5),
                                 marker=dict(color=colors, size=8), **common))
        fig.add_trace(go.Scatter(x=xs, y=[m for _, _, m in with_lp], mode="markers", name="min logprob",
                                 marker=dict(color=colors, size=8, symbol="triangle-down"), **common))
    else:
        fig.add_annotation(text=NO_LOGPROBS, xref="paper", yref="paper", x=0.5, y=0.5, showarrow=False,
                           font=dict(size=15, color=FONT))
    base_layout(fig, height, clickmode="event", barmode="overlay",
                 yaxis2=dict(title=dict(text="output tokens"), overlaying="y", side="right", showgrid=False,
                             rangemode="tozero"))
    fig.update_layout(margin=dict(r=56 + MODEBAR_W))  # the right axis's labels, then the toolbar's strip
    fig.update_xaxes(title_text="turn", dtick=1 if len(rollout.turns) <= 40 else None)
    fig.layout.yaxis.title.text = "logprob"
    return fig


def histogram_figure(rollout: Rollout, low: float = LOW_LOGPROB, bins: int = 60, height: int = 260) -> go.Figure:
    """Histogram of logprobs over all trained tokens (mask 1) with the ``low`` threshold.

    Binned here with numpy and drawn as a bar chart, so the payload stays small for
    millions of tokens. The bars' ``y`` sum to the number of trained tokens with a finite
    logprob; the threshold is a dashed vertical line (``layout.shapes`` ``name="low"``).
    """
    vals: list[float] = []
    for t in rollout.turns:
        m = turn_mask(t)
        vals.extend(v for v, k in zip(t.logprobs, m) if k and is_finite(v))
    if not vals:
        return empty(NO_LOGPROBS + " for trained tokens", height)
    arr = np.asarray(vals, dtype=float)
    lo = min(float(arr.min()), low)
    hi = max(float(arr.max()), 0.0)
    if hi - lo < 1e-9:
        lo -= 0.5
    counts, edges = np.histogram(arr, bins=bins, range=(lo, hi))
    centers = (edges[:-1] + edges[1:]) / 2
    width = float(edges[1] - edges[0])
    n_low = int((arr < low).sum())
    fig = go.Figure(go.Bar(
        x=centers.tolist(), y=counts.tolist(), width=width, name="trained tokens",
        marker=dict(color=[LOW if c < low else TRAINED for c in centers]),
        customdata=np.stack([edges[:-1], edges[1:]], axis=1).tolist(),
        hovertemplate="logprob %{customdata[0]:.3f} … %{customdata[1]:.3f}<br>%{y} tokens<extra></extra>",
    ))
    fig.add_shape(type="line", xref="x", yref="paper", x0=low, x1=low, y0=0, y1=1,
                  line=dict(color=LOW, width=1.5, dash="dash"), name="low")
    right_half = (low - lo) > (hi - lo) / 2  # the label reads inward from the line, never past the plot's edge
    fig.add_annotation(x=low, y=1, xref="x", yref="paper", yanchor="bottom", showarrow=False,
                       xanchor="right" if right_half else "left",
                       text=f"low {low:g}: {n_low} of {arr.size} ({100 * n_low / arr.size:.1f}%)",
                       font=dict(color=LOW, size=11))
    base_layout(fig, height, bargap=0.02, showlegend=False)
    fig.update_xaxes(title_text="logprob (trained tokens)")
    fig.update_yaxes(title_text="tokens")
    return fig


