"""The visitor's Hugging Face sign-in, read from Gradio's signed session cookie.

A handler that declares a ``gr.OAuthToken`` parameter changes how Gradio's front end runs the
event (its dependency is marked as wanting a token), which broke the page's load chain
(presenter keys stopped answering); and Gradio also accepts a token the caller puts in the
request body in its place. Hub reads only need to know who signed in, so they read the session
that Gradio's OAuth callback wrote (through the seam: :func:`viewer.ui.seam.oauth_session`), and
nothing a caller sends.
"""
from __future__ import annotations

import os
import time
from typing import Any

from . import seam

__all__ = ["hub_token", "space_sign_in"]


def hub_token(request: Any) -> str | None:
    """The signed-in visitor's access token, or None (not signed in, expired, no OAuth, or the seam off)."""
    info = seam.oauth_session(request)
    if info is None:
        return None
    expires = info.get("expires_at")
    if isinstance(expires, (int, float)) and expires < time.time():
        return None
    token = info.get("access_token")
    return token if isinstance(token, str) and token else None


def space_sign_in(environ: dict[str, str] | None = None) -> bool:
    """Gradio's LoginButton signs a visitor in here: Gradio mounts its real OAuth routes where Hugging Face's
    Space variables say it runs on a Space (``SYSTEM=spaces`` and ``SPACE_ID``), and elsewhere mocked ones
    that sign everyone in as this machine's own HF login, which a public app must never offer. (Whether the
    app is public is ``Settings.public_mode``; tests/test_signin.py checks this rule against Gradio's own.)"""
    env = os.environ if environ is None else environ
    return env.get("SYSTEM") == "spaces" and env.get("SPACE_ID") is not None
