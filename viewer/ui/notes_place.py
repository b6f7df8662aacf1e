"""Where an open rollout's notes live, and the rollout's token ids they are checked against.

Beside a local capture (``notes.json`` in its folder) when the capture is a folder inside the
data root, not a bundled sample, not an upload, and the app is not in public mode; otherwise in
the visitor's session only (a dict ``{rollout: notes.json text}`` held in a ``gr.State``). In
public mode nothing is ever written to the server's folders (docs/SECURITY.md, "Notes and decks").
What a session keeps is bounded by the ``session_notes_rollouts`` and ``session_notes_mb`` budgets
(:func:`check_session`), and every notes text, stored or written, fits the talk files' byte limit.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from urllib.parse import parse_qs

from ..config import SAMPLE_DIR, Settings
from ..layout import NOTES, is_capture_dir
from ..sources.upload import UPLOAD_PREFIX
from ..talk import notes as talk_notes
from ..talk.common import TalkError
from ..talk.notes import Notes
from ..views import turn_view
from .opening import link_spec
from .store import Opened, RolloutStore

__all__ = ["rollout_source", "session_key", "notes_file", "load", "save", "turn_ids", "checked", "session_bytes",
           "check_session"]


def rollout_source(op: Opened, settings: Settings) -> tuple[str, int | None]:
    """(source, row) as a deep link names the rollout; ("", None) for one a link cannot name (an upload)."""
    if op.link:
        q = parse_qs(op.link)
        row = q.get("row", [None])[0]
        return q.get("source", [""])[0], int(row) if row is not None and row.isdigit() else None
    return (link_spec(op.path, settings) if op.path is not None else ""), None


def session_key(op: Opened, settings: Settings) -> str:
    src, row = rollout_source(op, settings)
    return f"{src}|{row}" if src else f"path:{op.path}"


def notes_file(op: Opened, settings: Settings) -> Path | None:
    """The ``notes.json`` beside this capture when notes may be written there, else None (session)."""
    if settings.public_mode() or op.link or op.path is None:
        return None
    p = Path(op.path).resolve()
    folder = p if p.is_dir() else p.parent
    root = Path(settings.data_root).expanduser().resolve()
    if (not is_capture_dir(folder) or not folder.is_relative_to(root) or folder.is_relative_to(SAMPLE_DIR.resolve())
            or any(part.startswith(UPLOAD_PREFIX) for part in folder.parts)):
        return None
    return folder / NOTES


def load(op: Opened, settings: Settings, state: dict | None) -> Notes:
    """The rollout's notes (empty when none). Raises TalkError when the stored file is unreadable:
    the caller shows it and writes nothing over it."""
    src, row = rollout_source(op, settings)
    f = notes_file(op, settings)
    text = (f.read_bytes() if f is not None and f.is_file() else None) if f is not None \
        else (state or {}).get(session_key(op, settings))
    if text is None:
        return Notes(source=src, row=row)
    return talk_notes.parse(text, str(f) if f is not None else NOTES)


def save(op: Opened, settings: Settings, state: dict | None, notes: Notes) -> tuple[dict, str]:
    """Keep ``notes``: the file beside the capture (written whole, then renamed over the old one) or
    the session. Returns (the new session dict, where they went)."""
    text = talk_notes.dumps(notes)  # within the talk files' byte limit, or TalkError (nothing kept)
    f = notes_file(op, settings)
    if f is None:
        key = session_key(op, settings)
        kept = {k: v for k, v in (state or {}).items() if k != key}
        if notes.notes:  # a rollout whose notes are all deleted holds no place in the session
            kept[key] = text
        check_session(kept, settings)
        return kept, "kept in this browser session (download to keep)"
    fd, tmp = tempfile.mkstemp(prefix=".notes-", dir=f.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, f)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return dict(state or {}), f"saved to {f.name} beside the capture"


def session_bytes(state: dict | None) -> int:
    """What a session's notes dict holds, in bytes (its keys and texts, UTF-8)."""
    return sum(len(str(k).encode("utf-8")) + len(str(v).encode("utf-8")) for k, v in (state or {}).items())


def check_session(state: dict, settings: Settings) -> None:
    """The session's notes within the ``session_notes_rollouts`` and ``session_notes_mb`` budgets, else
    TalkError (the change is not kept; the session keeps what it had). Issue 36: one session opening
    ``?row=N`` for N = 0, 1, 2… and uploading a 1 MB notes.json each time grew the server without bound."""
    lim = settings.limits()
    keys, cap = len(state), int(lim.session_notes_rollouts)
    if cap and keys > cap:
        raise TalkError(f"This browser session already keeps notes on {cap} rollouts, the most one session may "
                        f"keep on this app (budget session_notes_rollouts): download notes you want to keep and "
                        "delete them, then try again")
    n, most = session_bytes(state), lim.bytes("session_notes_mb")
    if most and n > most:
        raise TalkError(f"This browser session's notes would hold {n / 1048576:,.1f} MB, over the "
                        f"{lim.session_notes_mb:g} MB one session may keep on this app (budget session_notes_mb): "
                        "download notes you want to keep and delete some, then try again")


def turn_ids(store: RolloutStore, op: Opened, index: int) -> list[int] | None:
    """The turn's token-view ids (prompt then output, as the token view numbers them), or None."""
    if not any(t.index == index for t in op.rollout.turns):
        return None
    return store.derived(op.key, ("talk-ids", index),
                         lambda: [int(i) for i in turn_view(op.rollout, index, op.choice.tokenizer, op.table).tokens.ids])


def checked(store: RolloutStore, op: Opened, notes: Notes) -> list[talk_notes.NoteCheck]:
    """Each note against the open rollout (only the turns that have notes are read)."""
    ids = {}
    for t in {n.turn for n in notes.notes}:
        got = turn_ids(store, op, t)
        if got is not None:
            ids[t] = got
    return talk_notes.check(notes, ids)
