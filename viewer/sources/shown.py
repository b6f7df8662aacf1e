"""What a visitor is shown for a server path: the one place that makes display names.

The inverse of :func:`viewer.sources.upload.resolve_user_path`: a typed path goes in relative to the
data root, and a path comes out the same way. On a local app the person at the screen owns the
machine, so paths are shown as they are. On a public one the server's layout is not the visitor's
business (issue 36, finding 11: the rollout header showed the full source path, the Template card an
upload's ``/tmp/ri-upload-…/tokenizer``, errors and exports the same), so:

* a path inside the data root is shown relative to it (what ``?source=`` and the Path box take);
* a bundled sample as ``sample:NAME/…``; an upload as ``upload:…`` (relative to its own folder);
  Hub downloads as ``hf-cache:…``; the capture output root as ``captures:…``;
* anything else by its last name only.

:func:`shown_text` does the same inside a message (a reader's error names the file it read).
Pure Python: no gradio.
"""
from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

from viewer.config import REPO_ROOT, SAMPLE_DIR, Settings

__all__ = ["shown_path", "shown_text", "shown_rollout"]

_UPLOAD = re.compile(r"(?:/[^/\s'\"<>]+)*/ri-upload-[A-Za-z0-9_]+(?=/|\b)/?")


def _roots(settings: Settings) -> list[tuple[Path, str]]:
    """(server folder, what it is shown as), most specific first."""
    hub = Path(settings.hub_cache or Path(tempfile.gettempdir()) / "rollout-inspector-hub")
    named = [(SAMPLE_DIR, "sample:"), (Path(settings.capture_out_root), "captures:"), (hub, "hf-cache:"),
             (Path(settings.data_root), "")]
    out = []
    for p, label in named:
        for q in {p.expanduser(), p.expanduser().resolve()}:
            out.append((q, label))
    return sorted(out, key=lambda r: len(str(r[0])), reverse=True)


def shown_path(path: str | Path | None, settings: Settings) -> str:
    """How ``path`` (a source, a tokenizer folder, a file a reader names) is shown to a visitor."""
    text = "" if path is None else str(path)
    if not settings.public_mode() or not text or text.startswith("hf://") or ":" in text.split("/", 1)[0]:
        return text  # local app; a Hub source; already a display name (sample:…, upload:…)
    p = Path(text)
    if not p.is_absolute():
        return text
    parts = p.parts
    at = next((i for i, x in enumerate(parts) if x.startswith("ri-upload-")), None)
    if at is not None:
        return "upload:" + "/".join(parts[at + 1:])
    for root, label in _roots(settings):
        if p == root or p.is_relative_to(root):
            rel = p.relative_to(root).as_posix()
            return f"{label}{rel}" if label else (rel if rel != "." else ".")
    return p.name


def shown_text(text: str | None, settings: Settings) -> str:
    """``text`` (an error, a note) with every server folder it names shown as :func:`shown_path` would."""
    if not text or not settings.public_mode():
        return text or ""
    out = _UPLOAD.sub("upload:", text)
    # then the app's own folders (its code, its Python, the temp folder, the home folder): a remainder only
    tail = [(REPO_ROOT, ""), (Path(sys.prefix), ""), (Path(tempfile.gettempdir()).resolve(), ""), (Path.home(), "")]
    for root, label in _roots(settings) + tail:
        r = str(root).rstrip("/")
        if len(r) < 2:
            continue
        # the folder followed by "/": its label takes the place of both; the folder alone: its label, or "."
        out = re.sub(re.escape(r) + r"(/|(?![\w.-]))", lambda m, lab=label: lab if m.group(1) else (lab or "."), out)
    return out


def shown_rollout(r, settings: Settings):
    """``r`` as a visitor sees it named: its source and its problems' files by :func:`shown_path`, the
    problems' messages by :func:`shown_text` (a shallow copy: the turns are the same objects)."""
    if not settings.public_mode():
        return r
    from dataclasses import replace

    return replace(r, source=shown_path(r.source, settings), problems=[
        replace(p, file=shown_path(p.file, settings), message=shown_text(p.message, settings)) for p in r.problems])
