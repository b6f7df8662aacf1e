"""Who may start which capture, where: the rules of public hosting (docs/HOSTING.md).

On a public deployment (a Hugging Face Space: ``SPACE_ID`` set, or ``VIEWER_PUBLIC=1``)
nothing a visitor types may run on the server or make it call an arbitrary address:

* ``local`` and ``endpoint`` captures are off, unless the owner lists the visitor's Hugging
  Face username in ``CAPTURE_ALLOW_USERS`` (then the visitor must be signed in);
* ``hf-jobs`` runs under the visitor's own sign-in token (Gradio's login), on their account,
  never under the Space's token;
* an endpoint must be http(s); in public mode every address its name resolves to must be
  globally routable (``is_global``, and no 6to4 / Teredo / NAT64 / IPv4-mapped form that embeds
  a non-global IPv4 address), and the capture connects to the address that was checked
  (:func:`pin_endpoint`; the name is not resolved again, so DNS rebinding cannot redirect it).

Pure functions (no gradio): the Capture tab asks :func:`check_start` and shows its message.
"""
from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from viewer.config import Settings

__all__ = ["is_public", "allowed_users", "Decision", "check_start", "check_endpoint", "pin_endpoint",
           "address_problem", "EndpointRefused"]


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


class EndpointRefused(ValueError):
    """The endpoint URL may not be used (the message says why, for the user)."""


# Ranges ``is_global`` lets through on some Python versions yet no public app should call:
# IETF protocol assignments (192.0.0.8 and friends), shared address space (100.64/10, where
# cloud metadata services such as 100.100.100.200 live), IPv4-compatible IPv6 (::/96) and the
# local-use NAT64 prefix.
_NOT_GLOBAL = tuple(ipaddress.ip_network(n) for n in ("192.0.0.0/24", "100.64.0.0/10", "::/96", "64:ff9b:1::/48"))
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def _embedded_v4(addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries (6to4, Teredo, IPv4-mapped, NAT64)."""
    if addr.version != 6:
        return []
    out = [a for a in (addr.sixtofour, addr.ipv4_mapped) if a is not None]
    if addr.teredo:
        out += list(addr.teredo)
    if addr in _NAT64:
        out.append(ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF))
    return out


def address_problem(addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """Why a public app may not connect to ``addr`` (None: it is globally routable)."""
    for a in [addr, *_embedded_v4(addr)]:
        if not a.is_global or any(a.version == n.version and a in n for n in _NOT_GLOBAL):
            inner = "" if a is addr else f" (it embeds {a})"
            return f"{addr}{inner} is not a globally routable address"
    return None


def _split(url: str) -> tuple[str, str, int]:
    try:
        parts = urlsplit((url or "").strip())
        port = parts.port
    except ValueError as e:
        raise EndpointRefused(f"not a URL: {e}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EndpointRefused("the endpoint must be an http:// or https:// URL with a host")
    return parts.scheme, parts.hostname, port or (443 if parts.scheme == "https" else 80)


def pin_endpoint(url: str, public: bool, resolve=None) -> tuple[str, str] | None:
    """Resolve the endpoint's host once and check every address; ``(host, address)`` to connect
    to (the first one), or None when no pin is needed (not public). Raises EndpointRefused."""
    _scheme, host, port = _split(url)
    if not public:
        return None
    try:
        infos = (resolve or socket.getaddrinfo)(host, port, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError) as e:
        raise EndpointRefused(f"{host}: does not resolve ({e})") from None
    addrs = [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]
    if not addrs:
        raise EndpointRefused(f"{host}: does not resolve")
    for addr in addrs:
        why = address_problem(addr)
        if why:
            raise EndpointRefused(f"{host} resolves to {why} (an internal address): a public app only calls "
                                  "globally routable addresses")
    return host, str(addrs[0])


def check_endpoint(url: str, public: bool, resolve=None) -> str | None:
    """Why ``url`` may not be used as an endpoint (None: it may)."""
    try:
        pin_endpoint(url, public, resolve)
    except EndpointRefused as e:
        return str(e)
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
