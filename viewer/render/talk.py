"""Notes and decks in the app: the notes panel's list (escaped HTML) and the talk payload (JSON for
viewer/ui/assets/talk.js, which only ever assigns it with textContent)."""
from __future__ import annotations

from typing import Any, Sequence

from .escape import esc, safe_json

__all__ = ["notes_list_html", "talk_payload", "talk_template"]


def notes_list_html(checks: Sequence[Any], where: str = "", error: str = "") -> str:
    """The notes of the open rollout, in order: place, range, text; a note whose anchor no longer
    holds is flagged (kept, with why). ``where``: where they are kept; ``error``: the file was refused."""
    parts = ["<div class='ri-notes'>"]
    if error:
        parts.append(f"<div class='ri-notice ri-error'>{esc(error)}</div>")
    if where:
        parts.append(f"<div class='ri-notes-where'>Notes are {esc(where)}.</div>")
    if not checks:
        parts.append("<div class='ri-notes-empty'>No notes on this rollout yet: select tokens, type a note, "
                     "press “Add note”.</div>")
    for k, c in enumerate(checks, 1):
        n = c.note
        flag = (f"<span class='ri-note-flag' title='{esc(c.problem)}'>⚠ {esc(c.problem)}</span>"
                if c.problem else "")
        parts.append(f"<div class='ri-note{' ri-note-flagged' if c.problem else ''}' data-id='{esc(n.id)}'>"
                     f"<span class='ri-note-at'>{k}. {esc(n.id)} · turn {n.turn} · tokens {n.tok[0]}–{n.tok[1]}</span> "
                     f"{flag}<div class='ri-note-text'>{esc(n.text)}</div></div>")
    parts.append("</div>")
    return "".join(parts)


def talk_payload(turn: int | None, checks: Sequence[Any], deck: dict | None = None, seq: int = 0) -> str:
    """``{"turn", "marks": [[start, end, text]], "notes": [{k, id, turn, tok, text, flag}], "deck", "seq"}``:
    the open turn's note marks (end exclusive, as the token view's marks), every note for ``n`` / ``N``,
    and the deck being shown (``{"title", "n", "at", "step", "note"}`` or null); ``seq`` changes when
    a deck is (re)opened, so the page enters presenter mode once per opening."""
    notes = [{"k": k, "id": c.note.id, "turn": c.note.turn, "tok": list(c.note.tok), "text": c.note.text,
              "flag": c.problem} for k, c in enumerate(checks)]
    marks = [[c.note.tok[0], c.note.tok[1] + 1, c.note.text] for c in checks
             if turn is not None and c.note.turn == turn and not c.problem]
    return safe_json({"turn": turn, "marks": marks, "notes": notes, "deck": deck, "seq": seq})


def talk_template() -> str:
    """Fixed markup only (talk.js fills it with textContent): the presenter's callout box."""
    return "<div class='ri-callout' hidden><div class='ri-callout-step'></div><div class='ri-callout-notes'></div></div>"
