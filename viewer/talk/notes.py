"""Token-anchored notes: a short text on (rollout, turn, token range), stored as ``notes.json``.

A note keeps the ids of the tokens it was written on (``anchor``, the first
:data:`ANCHOR_IDS` of them), so a note whose range no longer holds those tokens (the file
changed, or the range is past the turn's end) is *flagged* by :func:`check`, never dropped:
a talk's notes survive a re-capture and say which ones need a look.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

from viewer.layout import NOTES
from viewer.talk.common import (MAX_ITEMS, TalkError, dump_doc, index_field, range_field, read_doc,
                                source_field, text_field)

__all__ = ["Note", "Notes", "NoteCheck", "ANCHOR_IDS", "VERSION", "parse", "dumps", "check", "anchor_of"]

VERSION = 1
ANCHOR_IDS = 64
_ID = re.compile(r"[A-Za-z0-9_-]{1,32}")


@dataclass(frozen=True)
class Note:
    """One note. ``turn`` is the turn index and ``tok`` the inclusive token range in the turn's
    token view (prompt ids then output ids), both exactly as a deep link's ``?turn=`` / ``?tok=``."""

    id: str
    turn: int
    tok: tuple[int, int]
    text: str
    anchor: tuple[int, ...] = ()
    created: str = ""

    def to_json(self) -> dict:
        return {"id": self.id, "turn": self.turn, "tok": list(self.tok), "text": self.text,
                "anchor": list(self.anchor), "created": self.created}


@dataclass(frozen=True)
class Notes:
    """The notes of one rollout (``source``; ``row`` for a dataset row), in the order written."""

    source: str = ""
    row: int | None = None
    notes: tuple[Note, ...] = field(default_factory=tuple)

    def add(self, note: Note) -> "Notes":
        if len(self.notes) >= MAX_ITEMS:
            raise TalkError(f"notes: at most {MAX_ITEMS} notes per rollout")
        if any(n.id == note.id for n in self.notes):
            raise TalkError(f"notes: id {note.id!r} is already used")
        return replace(self, notes=self.notes + (note,))

    def edit(self, note_id: str, text: str) -> "Notes":
        text = text_field({"text": text}, "text", f"note {note_id}", required=True)
        if not any(n.id == note_id for n in self.notes):
            raise TalkError(f"notes: no note {note_id!r}")
        return replace(self, notes=tuple(replace(n, text=text) if n.id == note_id else n for n in self.notes))

    def delete(self, note_id: str) -> "Notes":
        if not any(n.id == note_id for n in self.notes):
            raise TalkError(f"notes: no note {note_id!r}")
        return replace(self, notes=tuple(n for n in self.notes if n.id != note_id))

    def next_id(self) -> str:
        used = {n.id for n in self.notes}
        k = len(self.notes) + 1
        while f"n{k}" in used:
            k += 1
        return f"n{k}"

    def to_json(self) -> dict:
        return {"version": VERSION, "source": self.source, "row": self.row,
                "notes": [n.to_json() for n in self.notes]}


def anchor_of(ids: Sequence[int], tok: tuple[int, int]) -> tuple[int, ...]:
    """The ids a note on ``tok`` keeps (the first :data:`ANCHOR_IDS` of the range)."""
    a, b = tok
    return tuple(int(i) for i in ids[a:min(b + 1, a + ANCHOR_IDS)])


def _note(obj: object, where: str) -> Note:
    if not isinstance(obj, dict):
        raise TalkError(f"{where}: expected an object, got {type(obj).__name__}")
    nid = text_field(obj, "id", where, 32, required=True)
    if not _ID.fullmatch(nid):
        raise TalkError(f"{where}.id: letters, digits, '-' and '_' only (1–32)")
    anchor = obj.get("anchor") or []
    if not (isinstance(anchor, list) and len(anchor) <= ANCHOR_IDS
            and all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < 2**31 for i in anchor)):
        raise TalkError(f"{where}.anchor: expected at most {ANCHOR_IDS} token ids")
    return Note(id=nid, turn=index_field(obj, "turn", where, required=True),  # type: ignore[arg-type]
                tok=range_field(obj, "tok", where, required=True),  # type: ignore[arg-type]
                text=text_field(obj, "text", where, required=True), anchor=tuple(anchor),
                created=text_field(obj, "created", where, 64))


def parse(data: bytes | str, what: str = NOTES) -> Notes:
    """Read a notes file; raises :class:`TalkError` naming the place and the fault."""
    doc, items = read_doc(data, what, "notes", VERSION)
    if not isinstance(items, list):
        raise TalkError(f"{what}.notes: expected a list")
    if len(items) > MAX_ITEMS:
        raise TalkError(f"{what}.notes: {len(items):,} notes, at most {MAX_ITEMS}")
    notes = Notes(source=source_field(doc, "source", what), row=index_field(doc, "row", what))
    for k, item in enumerate(items):
        notes = notes.add(_note(item, f"{what}.notes[{k}]"))
    return notes


def dumps(notes: Notes) -> str:
    return dump_doc(notes.to_json(), NOTES)


@dataclass(frozen=True)
class NoteCheck:
    """A note against the rollout now open: ``ok`` or why its anchor no longer holds."""

    note: Note
    problem: str = ""

    @property
    def ok(self) -> bool:
        return not self.problem


def check(notes: Notes, turn_ids: Mapping[int, Sequence[int]]) -> list[NoteCheck]:
    """Each note against the open rollout (``turn_ids``: turn index → the turn's token-view ids).
    Every note comes back, in order; a moved or vanished anchor is a problem, not a removal."""
    out = []
    for n in notes.notes:
        ids = turn_ids.get(n.turn)
        if ids is None:
            out.append(NoteCheck(n, f"turn {n.turn} is not in this rollout"))
        elif n.tok[1] >= len(ids):
            out.append(NoteCheck(n, f"tokens {n.tok[0]}–{n.tok[1]} are past the turn's end ({len(ids)} tokens)"))
        elif n.anchor and anchor_of(ids, n.tok) != n.anchor:
            out.append(NoteCheck(n, f"tokens {n.tok[0]}–{n.tok[1]} changed since the note was written"))
        else:
            out.append(NoteCheck(n))
    return out
