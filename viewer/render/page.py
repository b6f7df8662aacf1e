"""The page's own text around the screens: the title block (fixed text, no data)."""
from __future__ import annotations

__all__ = ["title_html"]


def title_html() -> str:
    """The heading above every screen."""
    return ("<div id='ri-title'><h1>Rollout Inspector</h1><p>Coding-agent RL rollouts token by token, the way the "
            "trainer sees them: loss mask, logprobs, and where re-tokenisation drifts from the sampled ids.</p></div>")
