"""Files the app hands a visitor (notes.json, deck.json, repro JSON, the HTML export), and who asked.

Every such file is written by the one disk keeper (:meth:`viewer.sources.keep.Keep.write`) into a
folder of the visitor's session: deleted when the session ends, after ``disk_ttl_s`` unused, oldest
first past ``disk_mb``; a new download of the same kind replaces the session's previous one. The
folders lie in Gradio's cache (``KEEP.downloads``, set by :func:`viewer.ui.create_app`), so Gradio
serves the file itself instead of keeping a copy of its own that nothing would delete.
"""
from __future__ import annotations

import os

from ..sources.keep import KEEP, client_key

__all__ = ["who", "download", "download_all"]


def who(request) -> tuple[str | None, str | None]:
    """(browser session, client address) of a Gradio request (None, None without one)."""
    if request is None:
        return None, None
    client = getattr(request, "client", None)
    headers = getattr(request, "headers", None) or {}
    host = getattr(client, "host", None) if client is not None else None
    return (getattr(request, "session_hash", None),
            client_key(host, headers.get("x-forwarded-for"), behind_proxy=bool(os.environ.get("SPACE_ID"))))


def download(request, name: str, data: str | bytes, kind: str) -> str:
    """Write one download for this request's session; returns its path for a ``gr.File``."""
    return str(KEEP.write(name, data, kind, *who(request)))


def download_all(request, files: list[tuple[str, str | bytes]], kind: str) -> list[str]:
    return [str(p) for p in KEEP.write_all(files, kind, *who(request))]

