"""Static shells of the views the browser draws itself (no data: the JS fills them with textContent)."""
from __future__ import annotations

from .escape import esc
from .glossary import GLOSSARY, SEE

__all__ = ["token_view_template", "first_steps_html"]

# (attribute suffix, glossary term): the info line's "ids: …" sources, the mask legend, the Δ legend, the IS marks
_BAR_TERMS = (("ids", "ids"), ("mask", "loss mask"), ("delta", "Δ"), ("is", "IS ratio"))


def token_view_template() -> str:
    """The token view's ``html_template``: bar, body, tooltip, detail panel (viewer/ui/assets/token_view.js)."""
    # the bar's terms explained on hover (viewer/render/glossary.py), read by the script from these attributes
    gloss = "".join(f" data-gloss-{k}='{esc(GLOSSARY[t] + ' ' + SEE)}'" for k, t in _BAR_TERMS)
    return (f"<div class='ri-tv'{gloss}><div class='ri-tv-bar'></div><div class='ri-tv-body' tabindex='0'></div>"
            "<div class='ri-tip' hidden></div><div class='ri-tv-detail'></div></div>")


def first_steps_html() -> str:
    """The first screen's one line: what the user is looking at, and what to try."""
    return ("<div class='ri-first' id='ri-first'><b>You are looking at</b> one RL rollout of a coding agent, token "
            "by token, as the trainer sees it (context · trained output · no gradient). <b>Try</b>: hover a token · "
            "colour by <i>logprob</i> · ◀ ▶ to walk turns · the <i>Drift</i> tab · the panel at the top right "
            "for your own files.</div>")
