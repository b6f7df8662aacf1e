"""Shared look of every figure: colours, the transparent layout, the empty figure, hover labels."""
from __future__ import annotations

import html
import math

import plotly.graph_objects as go
import plotly.io as pio

from ..tokenizer import visible

__all__ = ["TEXT_LIMIT", "MAX_POINTS", "MAX_SHADED_RUNS", "NO_LOGPROBS", "TRAINED", "UNTRAINED", "LOW", "BOOKKEEPING",
           "SHADE", "GRID", "FONT", "MODEBAR_W", "TEMPLATE", "base_layout", "empty", "is_finite", "fmt", "label"]

TEXT_LIMIT = 20000  # points above which hover labels are left out
MAX_POINTS = 4000  # above this many tokens the plot shows windows (min + mean), not every token
MAX_SHADED_RUNS = 400  # trained runs drawn as shapes; beyond this the shading is left out
NO_LOGPROBS = "no logprobs recorded"

TRAINED = "#2f6fdf"
UNTRAINED = "#9a9a9a"
LOW = "#e0443a"
BOOKKEEPING = "rgba(154,154,154,0.45)"
SHADE = "rgba(47,111,223,0.13)"
GRID = "rgba(128,128,128,0.25)"
FONT = "#8a8a8a"

# Plotly's toolbar (the modebar) drawn upright in a strip of the right margin kept for it alone: across the top,
# where plotly puts it, it covered legends, titles and the histogram's threshold label (issue 41, point 7).
# The buttons a reader of these figures does not use (box / lasso select, zoom steps, autoscale) are left out.
MODEBAR_W = 34  # px of the right margin the upright toolbar takes (its buttons are 26 px wide)
MODEBAR = dict(orientation="v", bgcolor="rgba(0,0,0,0)",
               remove=["select2d", "lasso2d", "zoomIn2d", "zoomOut2d", "autoScale2d"])


# Plotly's default template ("plotly"), cut to what 2-D cartesian figures of these trace types read.
# A figure without a template carries all of it (7.1 KB: polar, ternary, geo, 3-D scenes, colour
# scales of 20 trace types) in every plot sent to the browser, three per open and one per turn
# switch; the cut keeps every value those figures use, taken from plotly's own (so they look the same).
_TEMPLATE_LAYOUT = ("autotypenumbers", "colorway", "font", "hovermode", "hoverlabel", "paper_bgcolor",
                    "plot_bgcolor", "xaxis", "yaxis", "shapedefaults", "annotationdefaults", "title")
_TEMPLATE_TRACES = ("scatter", "scattergl", "bar", "histogram")


def _template() -> go.layout.Template:
    full = pio.templates["plotly"].to_plotly_json()
    return go.layout.Template(layout={k: full["layout"][k] for k in _TEMPLATE_LAYOUT if k in full["layout"]},
                              data={k: full["data"][k] for k in _TEMPLATE_TRACES if k in full["data"]})


TEMPLATE = _template()


def base_layout(fig: go.Figure, height: int, **kw) -> go.Figure:
    fig.update_layout(
        template=TEMPLATE,
        height=height,
        margin=dict(l=52, r=16 + MODEBAR_W, t=34, b=40),
        modebar=MODEBAR,
        paper_bgcolor="rgba(0,0,0,0)",
        plot_bgcolor="rgba(0,0,0,0)",
        font=dict(color=FONT, size=12),
        legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="left", x=0, bgcolor="rgba(0,0,0,0)"),
        hovermode="closest",
        **kw,
    )
    fig.update_xaxes(gridcolor=GRID, zerolinecolor=GRID)
    fig.update_yaxes(gridcolor=GRID, zerolinecolor=GRID)
    return fig


def empty(message: str = NO_LOGPROBS, height: int = 260) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=message, xref="paper", yref="paper", x=0.5, y=0.5, showarrow=False,
                       font=dict(size=15, color=FONT))
    base_layout(fig, height)
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return fig


def is_finite(v) -> bool:
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v)


def fmt(v: float) -> str:
    return f"{v:.4f}"


def label(text: str | None, limit: int = 80) -> str:
    if text is None:
        return "—"
    v = visible(text)
    if len(v) > limit:
        v = v[:limit] + f"… ({len(v)} chars)"
    return html.escape(v)


