"""Presenter mode: the bar's template and the selected turn's drift marks, as JSON for
viewer/ui/assets/presenter.js."""
from __future__ import annotations

from typing import Any

from .escape import safe_json

__all__ = ["presenter_payload", "presenter_template"]


def presenter_template() -> str:
    """The presenter bar's Gradio ``html_template``: fixed markup only (presenter.js fills it
    with textContent; data never goes into a template)."""
    return ("<div class='ri-pr' hidden><span class='ri-pr-title'></span><span class='ri-pr-state'></span>"
            "<span class='ri-pr-keys'>← → turn · j k token · m colour · d drift · Esc leave</span></div>")


def presenter_payload(turn: int | None, marks: list[Any], note: str = "") -> str:
    """``{"turn", "marks": [[start, end, label], ...], "note"}``: the presenter hands the marks to the
    token view (which paints them with textContent/className only) when ``d`` is on."""
    return safe_json({"turn": turn, "marks": [[m.start, m.end, f"{m.check}: {m.cause or '?'}"] for m in marks],
                      "note": note})
