"""Presenter mode: the bar's template and the selected turn's drift marks, as JSON for
viewer/ui/assets/presenter.js."""
from __future__ import annotations

from typing import Any

from .escape import safe_json

__all__ = ["presenter_payload", "presenter_template"]


def presenter_template() -> str:
    """The presenter bar's Gradio ``html_template``: fixed markup only (presenter.js fills it
    with textContent; data never goes into a template). The ◀ ▶ buttons are for touch screens
    (a tap; a swipe works too), where there are no arrow keys."""
    return ("<div class='ri-pr' hidden><button class='ri-pr-prev' aria-label='previous turn'>◀</button>"
            "<span class='ri-pr-title'></span><button class='ri-pr-next' aria-label='next turn'>▶</button>"
            "<span class='ri-pr-state'></span>"
            "<span class='ri-pr-keys'>← → turn · j k token · m colour · d drift · Esc leave</span></div>")


def presenter_payload(turn: int | None, marks: list[Any], note: str = "", *, first: bool = False,
                      last: bool = False) -> str:
    """``{"turn", "marks": [[start, end, label, check], ...], "note", "first", "last"}``: the presenter
    hands the marks to the token view (which paints them with textContent/className only) when ``d``
    is on, and counts them per check as the Drift tab does (a round-trip span is one changed span;
    the re-render and the prefix audit each mark their first divergence). ``first`` / ``last``: the
    turn is the rollout's first / last, which the bar says."""
    return safe_json({"turn": turn,
                      "marks": [[m.start, m.end, f"{m.check}: {m.cause or '?'}", m.check] for m in marks],
                      "note": note, "first": bool(first), "last": bool(last)})
