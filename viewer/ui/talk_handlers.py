"""What the notes panel and a deck do, one named method each (the layout is viewer/ui/talk_panel.py).

Notes and decks are the validated values of :mod:`viewer.talk` (never parsed here); where notes are
kept is :mod:`.notes_place`. A visitor's value (a typed selection, a note number from the page, a
deck's step) is checked here before it moves anything; a refusal is a visible message.
"""
from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import gradio as gr

from .. import render
from ..config import Settings
from ..layout import DECK, NOTES
from ..render.talk import notes_list_html, talk_payload
from ..talk import deck as talk_deck
from ..talk.common import MAX_TALK_BYTES, TalkError
from ..talk.deck import Deck, Step
from ..talk.notes import Note, Notes, anchor_of
from ..visitor import NOTE_REF, VisitorError, deck_file
from . import notes_place as place, rescores
from .browse import Browse
from .downloads import download as _download
from .store import RolloutStore

__all__ = ["TalkHandlers", "parse_selection"]

_SEL = re.compile(r"\s*(\d{1,9})\s*:\s*(\d{1,9})\s*(?:-\s*(\d{1,9}))?\s*")
TABS = {"tokens": "tokens", "drift": "drift", "compare": "compare"}
LISTED = 20  # steps of the deck in progress named in the panel; the rest are counted


def parse_selection(text: Any) -> tuple[int, tuple[int, int]]:
    """``turn:first-last`` (what the page reads from the token view, or what a visitor types)."""
    m = _SEL.fullmatch(text if isinstance(text, str) else "")
    if not m:
        raise TalkError("Select tokens in the token view first (click a token, shift-click the last), "
                        "or type turn:first-last")
    a, b = int(m.group(2)), int(m.group(3) or m.group(2))
    return int(m.group(1)), (min(a, b), max(a, b))


def _head(path: Path) -> bytes:
    """At most one byte past the talk files' limit: a bigger file is refused by size, never read whole."""
    with open(path, "rb") as f:
        return f.read(MAX_TALK_BYTES + 1)


def _sent(evt, name: str):
    """Field ``name`` of what the page sent with its event (talk.js: ``trigger('click', {note: k})``), read as
    Gradio documents it (``evt.note``); None when the event came without it (an API caller's, with no data)."""
    try:
        return getattr(evt, name, None)
    except TypeError:  # gr.EventData looks the name up in the data sent, and a caller may send none
        return None


class TalkHandlers:
    def __init__(self, settings: Settings, store: RolloutStore, b: Browse, cmp=None, drift=None):
        self.settings, self.store, self.b, self.cmp, self.drift = settings, store, b, cmp, drift

    # --- the panel's values -------------------------------------------------------------------
    def deck_info(self, dk: dict | None) -> dict | None:
        if not dk:
            return None
        deck = talk_deck.parse(dk["text"])
        s = deck.steps[dk["at"]]
        return {"title": deck.title, "n": len(deck.steps), "at": dk["at"], "step": s.title, "note": s.note}

    def view(self, key, turn, state, dk, message: str = "", kind: str = "info") -> list:
        """[list HTML, note picker, talk payload, message] for the open rollout and turn."""
        op = self.store.get(key)
        checks, where, error = [], "", ""
        if op is not None:
            where = ("saved beside the capture" if place.notes_file(op, self.settings) is not None
                     else "kept in this browser session (download them to keep them)")
            try:
                checks = place.checked(self.store, op, place.load(op, self.settings, state))
            except TalkError as e:
                error = f"The notes of this rollout cannot be read: {e}. Nothing is written over them."
        index = int(turn) if isinstance(turn, (int, float)) else None
        picks = [(f"{k}. {c.note.id} · turn {c.note.turn} · {c.note.text[:40]}", c.note.id)
                 for k, c in enumerate(checks, 1)]
        return [notes_list_html(checks, where, error), gr.Dropdown(choices=picks, value=picks[-1][1] if picks else None),
                talk_payload(index, checks, self.deck_info(dk), (dk or {}).get("seq", 0)),
                render.notice_html(message, kind) if message else ""]

    def refresh(self, key, turn, state, dk) -> list:
        return self.view(key, turn, state, dk)

    def _change(self, key, turn, state, dk, fn) -> list:
        """Load the notes, apply ``fn`` (Notes -> (Notes, message)), keep them: [state] + view."""
        op = self.store.get(key)
        if op is None:
            return [gr.skip()] + self.view(key, turn, state, dk, "Open a rollout first.", "error")
        try:
            notes = place.load(op, self.settings, state)
            notes, said = fn(op, notes)
            state, where = place.save(op, self.settings, state, notes)
        except (TalkError, VisitorError) as e:
            return [gr.skip()] + self.view(key, turn, state, dk, str(e), "error")
        except OSError as e:
            return [gr.skip()] + self.view(key, turn, state, dk, f"Notes not saved: {e}", "error")
        return [state] + self.view(key, turn, state, dk, f"{said}; {where}.")

    def add(self, key, sel, text, state, dk) -> list:
        def do(op, notes: Notes):
            t, tok = parse_selection(sel)
            ids = place.turn_ids(self.store, op, t)
            if ids is None:
                raise TalkError(f"Turn {t} is not in this rollout")
            if tok[1] >= len(ids):
                raise TalkError(f"Tokens {tok[0]}–{tok[1]} are past the end of turn {t} ({len(ids):,} tokens)")
            src, row = place.rollout_source(op, self.settings)
            notes = replace(notes, source=notes.source or src, row=notes.row if notes.source else row)
            note = Note(id=notes.next_id(), turn=t, tok=tok, text=self._text(text), anchor=anchor_of(ids, tok),
                        created=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
            return notes.add(note), f"Note {note.id} added on turn {t}, tokens {tok[0]}–{tok[1]}"
        m = _SEL.fullmatch(sel) if isinstance(sel, str) else None  # the view follows the note's turn
        return self._change(key, int(m.group(1)) if m else None, state, dk, do)

    @staticmethod
    def _text(text: Any) -> str:
        if not isinstance(text, str) or not text.strip():
            raise TalkError("Type the note's text first")
        return text.strip()

    def edit(self, key, turn, pick, text, state, dk) -> list:
        return self._change(key, turn, state, dk, lambda op, n: (n.edit(str(pick or ""), self._text(text)),
                                                                 f"Note {pick} changed"))

    def delete(self, key, turn, pick, state, dk) -> list:
        return self._change(key, turn, state, dk, lambda op, n: (n.delete(str(pick or "")), f"Note {pick} deleted"))

    def download(self, key, state, request: gr.Request = None):
        op = self.store.get(key)
        if op is None:
            raise gr.Error("Open a rollout first.")
        try:
            notes = place.load(op, self.settings, state)
        except TalkError as e:
            raise gr.Error(str(e)) from None
        from ..talk.notes import dumps

        return _download(request, NOTES, dumps(notes), "notes")  # the session's, deleted when it ends

    def upload(self, key, turn, file, state, dk) -> list:
        def do(op, old: Notes):
            if not file:
                raise TalkError("No file uploaded")
            from ..talk.notes import parse

            new = parse(_head(Path(file)), Path(file).name)
            src, row = place.rollout_source(op, self.settings)
            other = f" (written for {new.source})" if new.source and src and new.source != src else ""
            return replace(new, source=src or new.source, row=row), \
                f"{len(new.notes)} note{'s' if len(new.notes) != 1 else ''} imported{other}"
        return self._change(key, turn, state, dk, do)

    # --- going to a note ------------------------------------------------------------------------
    def note_target(self, key, ref: Any, state) -> Note | None:
        """A note by its 0-based place (from the page), or ``ref`` as a link spells it: K (1-based) or an id."""
        op = self.store.get(key)
        if op is None:
            return None
        try:
            notes = place.load(op, self.settings, state).notes
        except TalkError:
            return None
        if isinstance(ref, int) and not isinstance(ref, bool):
            return notes[ref] if 0 <= ref < len(notes) else None
        ref = str(ref or "")
        if not NOTE_REF.fullmatch(ref):
            return None
        if ref.isdigit():
            k = int(ref) - 1
            return notes[k] if 0 <= k < len(notes) else None
        return next((n for n in notes if n.id == ref), None)

    def go_note(self, key, note: Note | None) -> list:
        if note is None:
            return [gr.skip()] * len(self.b.turn_outputs)
        # a note on a turn that is gone selects nothing (on_select_turn skips it); the panel flags it
        return self.b.select_fn(key, note.turn, focus=note.tok)

    @staticmethod
    def press_of(inputs: tuple):
        """The page's number for the key press of :meth:`on_page`'s inputs (talk.js), or None."""
        return _sent(inputs[-1], "press")

    @rescores.as_visitor  # view: the visitor's view settings (browse.view)
    def on_page(self, key, state, view, evt: gr.EventData) -> list:
        """The page asked for note k (talk.js, n / N)."""
        k = _sent(evt, "note")
        return self.go_note(key, self.note_target(key, k, state) if isinstance(k, int) else None)

    def on_link_note(self, key, state, request: gr.Request) -> list:
        from ..visitor import deep_link

        link = deep_link(request.query_params if request is not None else {})
        if not link.note:
            return [gr.skip()] * len(self.b.turn_outputs)
        note = self.note_target(key, link.note, state)
        if note is None:
            gr.Warning(f"No note {link.note} on this rollout.")
        return self.go_note(key, note)

    # --- decks ---------------------------------------------------------------------------------
    def open_deck(self, data: bytes | str, what: str, dk) -> tuple[dict | None, str]:
        try:
            deck = talk_deck.parse(data, what)
            text = talk_deck.dumps(deck)  # within the byte limit, or refused (never kept over it)
        except TalkError as e:
            return None, f"Deck refused: {e}"
        return {"text": text, "at": 0, "seq": (dk or {}).get("seq", 0) + 1}, ""

    def on_link_deck(self, dk, request: gr.Request) -> list:
        """?deck=PATH: [deck state, status]."""
        from ..visitor import deep_link

        link = deep_link(request.query_params if request is not None else {})
        if not link.deck:
            return [gr.skip(), gr.skip()]
        try:
            path = deck_file(link.deck, self.settings)
            data = _head(path)
        except (VisitorError, OSError) as e:
            return [gr.skip(), render.notice_html(f"Deck not opened: {e}", "error")]
        new, error = self.open_deck(data, path.name, dk)
        return [new if new else gr.skip(), render.notice_html(error, "error") if error else gr.skip()]

    def on_upload_deck(self, file, dk) -> list:
        if not file:
            return [gr.skip(), render.notice_html("No deck uploaded.", "error")]
        new, error = self.open_deck(_head(Path(file)), Path(file).name, dk)
        return [new if new else gr.skip(), render.notice_html(error, "error") if error else gr.skip()]

    @rescores.as_visitor
    def step_values(self, dk, view=None, request: gr.Request | None = None) -> list:
        """Open the deck's current step: values for ``Browse.outputs`` + [tabs]."""
        n_out = len(self.b.outputs) + 1
        if not dk:
            return [gr.skip()] * n_out
        deck = talk_deck.parse(dk["text"])
        s = deck.steps[dk["at"]]
        say = f"Step {dk['at'] + 1} of {len(deck.steps)}" + (f": {s.title}" if s.title else "") + "."
        from . import signin

        out = list(self.b.open_fn(s.source, s.turn, s.tok, s.mode, s.row, say,
                                  signin.hub_token(request) if request is not None else None))
        return out + [gr.Tabs(selected=TABS[s.view])]

    @rescores.as_visitor
    def on_step(self, dk, view, evt: gr.EventData) -> list:
        """The page asked for step k (talk.js, → / ←): [deck state] + the step's values."""
        k = _sent(evt, "step")
        if not dk or not isinstance(k, int) or isinstance(k, bool):
            return [gr.skip()] * (len(self.b.outputs) + 2)
        n = len(talk_deck.parse(dk["text"]).steps)
        if not 0 <= k < n:
            gr.Info(f"Already at the {'last' if k >= n else 'first'} step of the deck.")
            return [gr.skip()] * (len(self.b.outputs) + 2)
        dk = {**dk, "at": k}
        return [dk] + self.step_values(dk)

    def after_step(self, dk, key, turn) -> list:
        """A drift step fills the Drift tab's report and gradient cost, a compare step the Compare tab."""
        n_cmp = len(self.cmp.outputs) if self.cmp is not None else 0
        n_drift = len(self.drift.outputs) + len(self.drift.cost_outputs) if self.drift is not None else 0
        skip = [gr.skip()] * (n_cmp + n_drift)
        if not dk:
            return skip
        s = talk_deck.parse(dk["text"]).steps[dk["at"]]
        if s.view == "compare" and self.cmp is not None:
            return self.cmp.run(key, s.compare, s.compare_row) + [gr.skip()] * n_drift
        if s.view == "drift" and self.drift is not None:
            return [gr.skip()] * n_cmp + self.drift.show(key, turn) + self.drift.costs(key)
        return skip

    # --- the deck in progress: the session's copy (``built``) and the browser's (``kept``, across reloads) ---
    @staticmethod
    def kept_text(kept: Any) -> str:
        """The deck text this browser kept (``{"deck": text}``; "" for none), checked like an uploaded deck.json:
        it comes from the visitor's localStorage, which the page (or the visitor) may have changed."""
        text = kept.get("deck") if isinstance(kept, dict) else None
        if not text:
            return ""
        if not isinstance(text, str):
            raise TalkError(f"expected a deck.json text, got {type(text).__name__}")
        return talk_deck.dumps(talk_deck.parse(text, "the deck kept in this browser"))

    @staticmethod
    def deck_html(text: str) -> tuple[str, str]:
        """(the panel's line on the deck in progress, the panel's label): both name its steps' count."""
        if not text:
            return render.notice_html("No deck in progress: “Add this view to the deck” starts one."), "Notes and deck"
        steps = talk_deck.parse(text).steps
        n = f"{len(steps)} step{'s' if len(steps) != 1 else ''}"
        shown = "; ".join(f"{k}. {s.source}" + (f" · row {s.row}" if s.row is not None else "")
                          + (f" · turn {s.turn}" if s.turn is not None else "")
                          + (f" · tokens {s.tok[0]}–{s.tok[1]}" if s.tok else "") + f" · {s.mode}"
                          for k, s in enumerate(steps[:LISTED], 1))
        more = f"; … and {len(steps) - LISTED} more" if len(steps) > LISTED else ""
        return (render.notice_html(f"Deck in progress: {n}, kept in this browser (a reload or a link keeps it; "
                                   f"download deck.json to keep it elsewhere): {shown}{more}."),
                f"Notes and deck · deck: {n}")

    def deck_line(self, text: str) -> list:
        html, label = self.deck_html(text)
        return [html, gr.Accordion(label=label)]

    def restore_deck(self, kept, request: gr.Request = None) -> list:
        """The page opened: the deck this browser kept becomes the session's, shown and offered as deck.json.
        [built, line, panel label, deck file]."""
        try:
            text = self.kept_text(kept)
        except TalkError as e:
            return ["", render.notice_html(f"The deck kept in this browser cannot be read ({e}); “Add this view to "
                                           "the deck” starts a new one.", "error"), gr.skip(), gr.skip()]
        if not text:
            return [gr.skip()] * 4
        return [text] + self.deck_line(text) + [_download(request, DECK, text, "deck")]

    def resume_deck(self, built, kept) -> str:
        """Before a step is added: the session's deck, else the one this browser kept (a click that came before
        the page's restore had answered adds to that deck, not to a new one)."""
        if built:
            return built
        try:
            return self.kept_text(kept)
        except TalkError:
            return ""  # the page load said so; the next step starts a new deck over it

    def keep_deck(self, built) -> list:
        """After a step is added: [kept, line, panel label]. Always an object, even for no deck: Gradio does not
        write an empty value to localStorage, and the old deck would come back on the next load."""
        return [{"deck": built or ""}] + self.deck_line(built or "")

    def new_deck(self) -> list:
        """*Start a new deck*: [built, kept, line, panel label, deck file, message]."""
        return ["", {"deck": ""}] + self.deck_line("") + [None, render.notice_html(
            "A new deck: “Add this view to the deck” adds its step 1.")]

    def add_step(self, key, turn, sel, mode, built, request: gr.Request = None) -> list:
        """"Add this view to the deck": [deck text, deck.json file, message]."""
        op = self.store.get(key)
        if op is None or turn is None:
            return [gr.skip(), gr.skip(), render.notice_html("Open a rollout first.", "error")]
        src, row = place.rollout_source(op, self.settings)
        if not src:
            return [gr.skip(), gr.skip(), render.notice_html(
                "An uploaded rollout cannot be a deck step (a deck names its sources); open it from the data "
                "root or the Hub.", "error")]
        tok = None
        if _SEL.fullmatch(sel or ""):
            t, tok = parse_selection(sel)
            tok = tok if t == int(turn) else None
        try:
            deck = talk_deck.parse(built) if built else Deck(title="My talk")
            deck = deck.add(Step(source=src, row=row, turn=int(turn), tok=tok,
                                 mode=mode if mode in ("mask", "logprob", "delta", "drift") else "mask"))
            text = talk_deck.dumps(deck)
        except TalkError as e:
            return [gr.skip(), gr.skip(), render.notice_html(str(e), "error")]
        return [text, _download(request, DECK, text, "deck"),
                render.notice_html(f"Step {len(deck.steps)} added to the deck ({src}, turn {turn}); download deck.json.")]
