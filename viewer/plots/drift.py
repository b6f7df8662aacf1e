"""Drift scan figures: inputs are viewer.drift.scan results (plain dicts)."""
from __future__ import annotations

import html
from typing import TYPE_CHECKING

import plotly.graph_objects as go

from .style import base_layout, empty

if TYPE_CHECKING:  # the type only: rendering needs no analysis code
    from ..drift.results import ScanResult

__all__ = ["drift_cause_figure", "drift_rollout_figure"]

CHECK_COLORS = {"round trip": "#6366f1", "re-render": "#f59e0b", "prefix": "#ef4444"}
CAUSE_COLOR = "#6366f1"
MAX_ROLLOUT_BARS = 60  # rollouts shown in the per-rollout figure (most drifted first)


def _scan_causes(rec: dict) -> dict[str, set[str]]:
    """cause -> checks naming it, for one scan turn record."""
    out: dict[str, set[str]] = {}
    for check, key in (("round trip", "retokenize"), ("re-render", "template"), ("prefix", "prefix")):
        c = (rec.get(key) or {}).get("cause")
        if c:
            out.setdefault(c, set()).add(check)
    return out


def drift_cause_figure(result: ScanResult, cause: str | None = None, height: int = 300) -> go.Figure:
    """Drifted turns per cause, split by the check that found it (a turn counts once per
    check and cause). The bar of ``cause`` (the active filter) is outlined."""
    turns = result.get("turns") or []
    counts: dict[str, dict[str, int]] = {}
    for rec in turns:
        for c, checks in _scan_causes(rec).items():
            for ch in checks:
                counts.setdefault(c, {}).setdefault(ch, 0)
                counts[c][ch] += 1
    if not counts:
        return empty("no drift found" if turns else "nothing scanned yet", height)
    order = sorted(counts, key=lambda c: -sum(counts[c].values()))
    fig = go.Figure()
    for check, color in CHECK_COLORS.items():
        ys = [counts[c].get(check, 0) for c in order]
        if not any(ys):
            continue
        fig.add_trace(go.Bar(x=order, y=ys, name=check, marker=dict(
            color=color, line=dict(width=[3 if c == cause else 0 for c in order], color="#111")),
            customdata=order, hovertemplate="%{x}: %{y} turn(s) (" + check + ")<extra></extra>"))
    base_layout(fig, height, barmode="stack", clickmode="event")
    fig.update_xaxes(title_text="cause")
    fig.layout.yaxis.title.text = "turns"
    return fig


def drift_rollout_figure(result: ScanResult, height: int = 300, max_bars: int = MAX_ROLLOUT_BARS) -> go.Figure:
    """Drifted turns per rollout (stacked by check), most drifted first; the hover names
    the rollout and its tokens losing gradient. ``customdata`` = the rollout name."""
    per: dict[str, dict[str, int]] = {}
    for rec in result.get("turns") or []:
        d = per.setdefault(rec["rollout"], {"round trip": 0, "re-render": 0, "prefix": 0, "lost": 0, "turns": 0})
        d["turns"] += 1
        d["round trip"] += int((rec.get("retokenize") or {}).get("equal") is False)
        d["re-render"] += int((rec.get("template") or {}).get("equal") is False)
        d["prefix"] += int((rec.get("prefix") or {}).get("status") == "broken")
        d["lost"] += int((rec.get("row") or {}).get("tokens_losing_gradient") or 0)
    if not per:
        return empty("nothing scanned yet", height)
    names = sorted(per, key=lambda n: (-(per[n]["round trip"] + per[n]["re-render"] + per[n]["prefix"]), n))
    shown = names[:max_bars]
    labels = [f"{k}: {html.escape(n[-40:])}" for k, n in enumerate(shown)]
    fig = go.Figure()
    for check, color in CHECK_COLORS.items():
        fig.add_trace(go.Bar(
            x=list(range(len(shown))), y=[per[n][check] for n in shown], name=check, marker=dict(color=color),
            customdata=shown, text=[f"{lab}<br>{per[n]['turns']} turns · {per[n]['lost']} tokens losing gradient"
                                    for lab, n in zip(labels, shown)],
            hovertemplate="%{text}<br>" + check + ": %{y}<extra></extra>", textposition="none"))
    title = "drifted checks per rollout" + (f" (top {len(shown)} of {len(names)})" if len(names) > len(shown) else "")
    base_layout(fig, height, barmode="stack", clickmode="event", title=dict(text=title, font=dict(size=13)))
    fig.update_xaxes(title_text="rollout (most drifted first)", dtick=1 if len(shown) <= 30 else None)
    fig.layout.yaxis.title.text = "turns"
    return fig


__all__ += ["drift_cause_figure", "drift_rollout_figure"]
