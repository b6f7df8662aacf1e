"""Session notes kept in the visitor's browser, so a reload or a link opened in the tab keeps them.

Notes on a bundled sample, an upload, a Hub source or any rollout of a public app live in the session
(:mod:`viewer.ui.notes_place`, a ``gr.State``), which a reload used to empty. The same dict is now also
kept in the visitor's own localStorage (``gr.BrowserState``, never on the server), as the deck in
progress is (viewer/ui/talk_panel.py). What comes back is the visitor's to change, so it is read like an
uploaded notes.json: each text parsed (byte limit first, a bad one dropped, never shown) and the whole
within the session budgets (``session_notes_rollouts``, ``session_notes_mb``), else nothing is restored.
"""
from __future__ import annotations

from typing import Any

import gradio as gr

from ..config import Settings
from ..talk import notes as talk_notes
from ..talk.common import TalkError
from .notes_place import check_session

__all__ = ["kept_store", "to_kept", "from_kept"]

STORAGE_KEY = "ri-session-notes"


def kept_store() -> gr.BrowserState:
    """The browser's copy: ``{"notes": {rollout: notes.json text}}``. Gradio hands the secret to the page (it
    obfuscates, it protects nothing): a fixed one, so a restart of the app does not make the notes unreadable."""
    return gr.BrowserState({"notes": {}}, storage_key=STORAGE_KEY, secret="rollout-inspector-notes")


def to_kept(state: dict | None) -> dict:
    """The session's notes as the browser keeps them (always an object: Gradio writes no empty value, and the
    old notes would come back on the next load)."""
    return {"notes": dict(state or {})}


def from_kept(kept: Any, settings: Settings) -> dict:
    """The session's notes dict from what the browser kept: each rollout's text checked as an uploaded
    notes.json is; an unreadable one left out; over the session budgets, none."""
    raw = kept.get("notes") if isinstance(kept, dict) else None
    if not isinstance(raw, dict):
        return {}
    out: dict[str, str] = {}
    for key, text in raw.items():
        if not (isinstance(key, str) and isinstance(text, str)):
            continue
        try:
            out[key] = talk_notes.dumps(talk_notes.parse(text, "the notes kept in this browser"))
        except TalkError:
            continue  # one bad entry costs only itself
    try:
        check_session(out, settings)
    except TalkError:
        return {}
    return out
