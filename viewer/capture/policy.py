"""Who may start which capture, where: the rules of public hosting (README "Hosting").

On a public deployment (a Hugging Face Space: ``SPACE_ID`` set, or ``VIEWER_PUBLIC=1``)
nothing a visitor types may run on the server or make it call an arbitrary address:

* ``local`` and ``endpoint`` captures are off, unless the owner lists the visitor's Hugging
  Face username in ``CAPTURE_ALLOW_USERS`` (then the visitor must be signed in);
* ``hf-jobs`` runs under the visitor's own sign-in token (Gradio's login), on their account,
  never under the Space's token;
* an endpoint must be http(s); in public mode it may not resolve to a loopback, link-local,
  private, reserved or multicast address.

Pure functions (no gradio): the Capture tab asks :func:`check_start` and shows its message.
"""
from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from viewer.config import Settings

__all__ = ["is_public", "allowed_users", "Decision", "check_start", "check_endpoint"]


def is_public(settings: Settings, environ: dict[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    return settings.public_mode(env)


def allowed_users(settings: Settings) -> set[str]:
    return {u.strip().lower() for u in settings.capture_allow_users.split(",") if u.strip()}


@dataclass(frozen=True)
class Decision:
    allowed: bool
    message: str = ""
    token: str = ""          # the token the capture may use ("" = none)
    owner: str = ""          # who the capture belongs to (username when signed in)
    needs_login: bool = False


def check_endpoint(url: str, public: bool, resolve=socket.getaddrinfo) -> str | None:
    """Why ``url`` may not be used as an endpoint (None: it may)."""
    try:
        parts = urlsplit(url.strip())
    except ValueError as e:
        return f"not a URL: {e}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "the endpoint must be an http:// or https:// URL with a host"
    if not public:
        return None
    try:
        infos = resolve(parts.hostname, parts.port or (443 if parts.scheme == "https" else 80),
                        proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError) as e:
        return f"{parts.hostname}: does not resolve ({e})"
    for info in infos:
        addr = ipaddress.ip_address(info[4][0].split("%")[0])
        if (addr.is_loopback or addr.is_link_local or addr.is_private or addr.is_reserved or addr.is_multicast
                or addr.is_unspecified):
            return (f"{parts.hostname} resolves to {addr}, an internal address: a public app does not call "
                    "loopback, link-local or private-range addresses")
    return None


def check_start(settings: Settings, backend: str, *, public: bool, username: str = "", oauth_token: str = "",
                typed_token: str = "", endpoint: str = "") -> Decision:
    """May this visitor start a ``backend`` capture? With which token, owned by whom?"""
    user = (username or "").strip()
    if not public:
        why = check_endpoint(endpoint, False) if backend == "endpoint" else None
        if why:
            return Decision(False, f"Endpoint refused: {why}.")
        return Decision(True, token=typed_token or os.environ.get("HF_TOKEN", ""), owner=user)
    if not user:
        return Decision(False, "Sign in with Hugging Face to start a capture: on this public app a capture runs "
                               "as a Hugging Face Job on your own account.", needs_login=True)
    if backend == "hf-jobs":
        if not oauth_token:
            return Decision(False, "Your sign-in did not grant a token: sign out and in again.", needs_login=True)
        return Decision(True, token=oauth_token, owner=user)  # never the Space's own token
    if backend in ("local", "endpoint"):
        if user.lower() not in allowed_users(settings):
            return Decision(False, f"The {backend} backend is off on this public app: it would run the agent on, or "
                                   "make calls from, this server. Use hf-jobs (runs on your account). The owner can "
                                   "allow named users with CAPTURE_ALLOW_USERS=user1,user2.", owner=user)
        if backend == "endpoint":
            why = check_endpoint(endpoint, True)
            if why:
                return Decision(False, f"Endpoint refused: {why}.", owner=user)
        return Decision(True, token=oauth_token if backend == "endpoint" else "", owner=user)
    return Decision(False, f"Unknown backend {backend!r}.", owner=user)
