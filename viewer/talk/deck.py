"""Decks: an ordered list of steps through one or more rollouts, stored as ``deck.json``.

A step is what a deep link names (source, row, turn, token range, colour mode, a compare source)
plus which view to show and an optional note for the audience. Sources stay text here and are
checked when a step is opened, by the same :func:`viewer.visitor.source` a link goes through.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal, get_args
from urllib.parse import urlencode

from viewer.layout import DECK
from viewer.talk.common import (MAX_ITEMS, TalkError, dump_doc, index_field, mode_field, range_field,
                                read_doc, source_field, text_field)

__all__ = ["Step", "Deck", "View", "VIEWS", "VERSION", "parse", "dumps"]

VERSION = 1
View = Literal["tokens", "drift", "compare"]
VIEWS: tuple[str, ...] = get_args(View)


@dataclass(frozen=True)
class Step:
    source: str
    view: View = "tokens"
    row: int | None = None
    turn: int | None = None
    tok: tuple[int, int] | None = None
    mode: str = "mask"
    compare: str = ""
    compare_row: int | None = None
    note: str = ""
    title: str = ""

    def query(self) -> str:
        """The deep link's query string for this step (``?`` not included), as viewer/visitor.py reads it."""
        q: dict[str, str] = {"source": self.source}
        for key, v in (("row", self.row), ("turn", self.turn), ("compare_row", self.compare_row)):
            if v is not None:
                q[key] = str(v)
        if self.tok is not None:
            q["tok"] = f"{self.tok[0]}-{self.tok[1]}"
        if self.mode != "mask":
            q["mode"] = self.mode
        if self.compare:
            q["compare"] = self.compare
        return urlencode(q)

    def to_json(self) -> dict:
        d = {"source": self.source, "view": self.view, "row": self.row, "turn": self.turn,
             "tok": list(self.tok) if self.tok else None, "mode": self.mode, "compare": self.compare or None,
             "compare_row": self.compare_row, "note": self.note or None, "title": self.title or None}
        return {k: v for k, v in d.items() if v is not None}


@dataclass(frozen=True)
class Deck:
    title: str = ""
    steps: tuple[Step, ...] = field(default_factory=tuple)

    def add(self, step: Step) -> "Deck":
        if len(self.steps) >= MAX_ITEMS:
            raise TalkError(f"deck: at most {MAX_ITEMS} steps")
        return replace(self, steps=self.steps + (step,))

    def to_json(self) -> dict:
        return {"version": VERSION, "title": self.title, "steps": [s.to_json() for s in self.steps]}


def _step(obj: object, where: str) -> Step:
    if not isinstance(obj, dict):
        raise TalkError(f"{where}: expected an object, got {type(obj).__name__}")
    view = obj.get("view") or "tokens"
    if view not in VIEWS:
        raise TalkError(f"{where}.view: expected one of {', '.join(VIEWS)}, got {view!r:.40}")
    compare = source_field(obj, "compare", where)
    if view == "compare" and not compare:
        raise TalkError(f"{where}.compare: a compare step names the second source")
    return Step(source=source_field(obj, "source", where, required=True), view=view,
                row=index_field(obj, "row", where), turn=index_field(obj, "turn", where),
                tok=range_field(obj, "tok", where), mode=mode_field(obj, "mode", where), compare=compare,
                compare_row=index_field(obj, "compare_row", where), note=text_field(obj, "note", where),
                title=text_field(obj, "title", where, 200))


def parse(data: bytes | str, what: str = DECK) -> Deck:
    """Read a deck; raises :class:`TalkError` naming the place and the fault."""
    doc, items = read_doc(data, what, "steps", VERSION)
    if not isinstance(items, list) or not items:
        raise TalkError(f"{what}.steps: expected a non-empty list")
    if len(items) > MAX_ITEMS:
        raise TalkError(f"{what}.steps: {len(items):,} steps, at most {MAX_ITEMS}")
    return Deck(title=text_field(doc, "title", what, 200),
                steps=tuple(_step(s, f"{what}.steps[{k}]") for k, s in enumerate(items)))


def dumps(deck: Deck) -> str:
    return dump_doc(deck.to_json(), DECK)
