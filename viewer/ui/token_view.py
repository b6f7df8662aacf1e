"""The token view component, one factory for every screen that shows tokens (Tokens, the Drift tab's
trainer row, Compare, Template): a fixed template and script, data only through the value
(``render.token_payload``'s JSON, assigned with ``textContent`` in the browser)."""
from __future__ import annotations

from pathlib import Path

import gradio as gr

from ..render.shell import token_view_template

__all__ = ["token_view", "TOKEN_VIEW_JS", "TOKEN_VIEW_TEMPLATE"]

# The payload's reader first (token_payload.js: the compact columns expanded), the correction modes
# (fix_view.js: functions the view calls, defined before it runs), then the view.
TOKEN_VIEW_JS = "\n".join((Path(__file__).parent / "assets" / f).read_text()
                          for f in ("token_payload.js", "fix_view.js", "token_view.js"))
TOKEN_VIEW_TEMPLATE = token_view_template()


def token_view(elem_id: str) -> gr.HTML:
    """An empty token view with DOM id ``elem_id`` (the app's CSS styles it, not Gradio's defaults)."""
    return gr.HTML("", html_template=TOKEN_VIEW_TEMPLATE, js_on_load=TOKEN_VIEW_JS, elem_id=elem_id,
                   apply_default_css=False)
