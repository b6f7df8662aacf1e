"""The visitor's Hugging Face sign-in, read from Gradio's signed session cookie.

A handler that declares a ``gr.OAuthToken`` parameter changes how Gradio's front end runs the
event (its dependency is marked as wanting a token), which broke the page's load chain
(presenter keys stopped answering); and Gradio also accepts a token the caller puts in the
request body in its place. Hub reads only need to know who signed in, so they read the session
that Gradio's OAuth callback wrote (``oauth_info``), and nothing a caller sends.
"""
from __future__ import annotations

import time
from typing import Any

__all__ = ["hub_token"]


def hub_token(request: Any) -> str | None:
    """The signed-in visitor's access token, or None (not signed in, expired, or no OAuth)."""
    underlying = getattr(request, "request", None) or request
    scope = getattr(underlying, "scope", None)
    # the session exists only where Gradio installed its SessionMiddleware (a Space with hf_oauth)
    session = scope.get("session") if isinstance(scope, dict) else None
    info = session.get("oauth_info") if isinstance(session, dict) else None
    if not isinstance(info, dict):
        return None
    expires = info.get("expires_at")
    if isinstance(expires, (int, float)) and expires < time.time():
        return None
    token = info.get("access_token")
    return token if isinstance(token, str) and token else None
