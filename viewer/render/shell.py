"""Static shells of the views the browser draws itself (no data: the JS fills them with textContent)."""
from __future__ import annotations

__all__ = ["token_view_template"]


def token_view_template() -> str:
    """The token view's ``html_template``: bar, body, tooltip, detail panel (viewer/ui/assets/token_view.js)."""
    return ("<div class='ri-tv'><div class='ri-tv-bar'></div><div class='ri-tv-body' tabindex='0'></div>"
            "<div class='ri-tip' hidden></div><div class='ri-tv-detail'></div></div>")
