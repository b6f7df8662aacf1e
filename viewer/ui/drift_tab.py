"""The Drift screen (placeholder: filled in by its issue's work)."""
from __future__ import annotations

from ..config import Settings  # noqa: F401  (kept: the builder signature uses it)


def build(settings, store, browse) -> None:
    """Create this screen's components inside the current gr.Tab and wire its events."""
