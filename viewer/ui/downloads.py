"""Files the app hands a visitor (notes.json, deck.json, repro JSON, the HTML export), who asked, and
the button that hands one over.

Every such file is written by the one disk keeper (:meth:`viewer.sources.keep.Keep.write`) into a
folder of the visitor's session: deleted when the session ends, after ``disk_ttl_s`` unused, oldest
first past ``disk_mb``; a new download of the same kind replaces the session's previous one. The
folders lie in Gradio's cache (``KEEP.downloads``, set by :func:`viewer.ui.create_app`), so Gradio
serves the file itself instead of keeping a copy of its own that nothing would delete.

A download on screen is a button that downloads (issue 41: an empty "File" drop box under the token
view looked broken): :func:`holder` keeps the file the server made out of sight, and :func:`save_after`
chains one browser-side step that saves it, the way Gradio's own ``gr.DownloadButton`` saves its value.
``gr.DownloadButton`` itself cannot be that button here: it saves the value it already holds when
clicked, and these files are made from what is on screen at the click (a token selection, a mode).
"""
from __future__ import annotations

import os

import gradio as gr

from ..sources.keep import KEEP, client_key

__all__ = ["who", "download", "download_all", "holder", "save_after", "SAVE_JS"]

# Gradio's DownloadButton does the same with its value (an <a download> clicked): the file's own URL,
# named as the server named it; a list (a multi-file holder) saves each.
SAVE_JS = """(f) => {
  for (const file of (Array.isArray(f) ? f : [f])) {
    if (!file || !file.url) continue;
    const a = document.createElement('a');
    a.href = file.url;
    a.download = file.orig_name || file.url.split('/').pop().split(/[?#]/)[0] || 'download';
    document.body.appendChild(a);
    a.click();
    a.remove();
  }
}"""


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



def holder(elem_id: str, *, multiple: bool = False) -> gr.File:
    """Where a download's file waits for :func:`save_after`: never drawn (no empty box on screen)."""
    return gr.File(visible=False, interactive=False, elem_id=elem_id, file_count="multiple" if multiple else "single")


def save_after(event, file: gr.File, api_name: str):
    """Save ``file`` in the browser once ``event`` (the server making it) has succeeded; a refused one
    (gr.Error) saves nothing, so a click never hands over the previous file again. Returns the step."""
    return event.success(None, [file], None, js=SAVE_JS, api_name=api_name, api_visibility="private",
                         show_progress="hidden")
