"""Notes and decks in the app (docs/TALK.md): the notes panel under the token view, the deck buttons,
and the page's talk script (note marks, presenter callouts, ``n`` / ``N`` notes, ``→`` / ``←`` deck steps).

Layout and wiring only; what each event does is a method of :class:`.talk_handlers.TalkHandlers`.
"""
from __future__ import annotations

from pathlib import Path

import gradio as gr

from ..config import Settings
from ..render.talk import notes_list_html, talk_payload, talk_template
from ..talk.common import MAX_TEXT
from . import notes_kept
from .browse import Browse
from .browse_handlers import STATUS
from .downloads import holder, save_after
from .staged import staged
from .store import RolloutStore
from .talk_handlers import TalkHandlers

__all__ = ["build", "TALK_JS"]

TALK_JS = (Path(__file__).parent / "assets" / "talk.js").read_text()
# The token view's selection (and colour mode) as the page shows them: "turn:first-last"; the server
# checks it (talk_handlers.parse_selection). Typed text stays when nothing is selected.
READ_SEL = """(sel, mode) => {
  const r = document.querySelector('#token-view .ri-tv');
  const on = document.querySelector('#token-view .ri-modes button.on');
  const s = r && r.dataset.selected && r.dataset.turn !== undefined ? r.dataset.turn + ':' + r.dataset.selected : sel;
  return [s, on ? on.dataset.mode : (mode || 'mask')];
}"""


def build(settings: Settings, store: RolloutStore, b: Browse, cmp=None, drift=None, loaded=None) -> TalkHandlers:
    """The panel (under the token view), the talk script, and their events; ``loaded`` (the page
    load's event) gets the ``?note=`` and ``?deck=`` links chained after it."""
    h = TalkHandlers(settings, store, b, cmp, drift)
    notes_state = gr.State({})  # {rollout: notes.json text}: uploads, Hub sources, public mode
    deck = gr.State(None)  # the deck being shown: {"text", "at", "seq"}
    built = gr.State("")  # the deck "Add this view" builds (deck.json text): this session's copy
    # ... and this browser's, so a reload or a link opened in the tab keeps it (issue 41): in the visitor's own
    # localStorage, never on the server; what comes back is checked like any deck.json (kept_text). Gradio
    # hands the secret to the page (it obfuscates, it protects nothing): a fixed one, so that a restart of
    # the app does not make the kept deck unreadable.
    kept = gr.BrowserState({"deck": ""}, storage_key="ri-deck-in-progress", secret="rollout-inspector-deck")
    kept_notes = notes_kept.kept_store()  # the session's notes, kept across a reload the same way
    with b.under_tokens:
        with gr.Accordion("Notes and deck", open=False, elem_id="talk-panel") as panel:
            with gr.Row(equal_height=True):
                sel = gr.Textbox(label="Selected tokens (turn:first-last)", elem_id="note-sel", scale=1,
                                 placeholder="click a token, shift-click the last")
                text = gr.Textbox(label="Note", elem_id="note-text", lines=2, max_length=MAX_TEXT, scale=3)
                mode = gr.Textbox(label="colour mode", value="mask", elem_id="view-mode", scale=0, min_width=90)
            with gr.Row():
                add_btn = gr.Button("Add note", variant="primary", size="sm", elem_id="note-add")
                # the server checks the id (Notes.edit / delete): a stale or typed one is refused by name
                pick = gr.Dropdown([], label="Note", elem_id="note-pick", scale=2, allow_custom_value=True)
                edit_btn = gr.Button("Save the text to this note", size="sm", elem_id="note-edit")
                del_btn = gr.Button("Delete this note", size="sm", variant="stop", elem_id="note-delete")
            msg = gr.HTML("", elem_id="talk-msg")
            listing = gr.HTML(notes_list_html([]), elem_id="notes-list")
            with gr.Row():
                dl_btn = gr.Button("Download notes.json", size="sm", elem_id="notes-download")
                up_btn = gr.UploadButton("Upload notes.json", size="sm", file_types=[".json"], elem_id="notes-upload")
                deck_add = gr.Button("Add this view to the deck", size="sm", elem_id="deck-add")
                deck_up = gr.UploadButton("Present a deck.json", size="sm", file_types=[".json"], elem_id="deck-upload")
            with gr.Row(equal_height=True):
                line = gr.HTML(h.deck_html("")[0], elem_id="deck-built")
                new_btn = gr.Button("Start a new deck", size="sm", elem_id="deck-new", scale=0, min_width=140)
                # the deck built so far, saved by a click (issue 41: a download is a button, no file box);
                # each step added sets the file it saves
                deck_out = gr.DownloadButton("Download deck.json", size="sm", elem_id="deck-file", scale=0,
                                             min_width=160)
    notes_out = holder("notes-file")  # Download notes.json saves it (viewer/ui/downloads.py)
    carrier = gr.HTML(talk_payload(None, []), html_template=talk_template(), js_on_load=TALK_JS, elem_id="talk",
                      apply_default_css=False)

    quiet = dict(api_visibility="private", show_progress="hidden")
    ins, view_out = [b.key, b.turn, notes_state, deck], [listing, pick, carrier, msg]
    # a new rollout's notes; a turn switch needs no event: talk.js marks the shown turn's notes itself
    b.key.change(h.refresh, ins, view_out, api_name="talk_refresh", **quiet)
    notes_state.change(notes_kept.to_kept, notes_state, kept_notes, api_name="notes_keep", **quiet)
    add_btn.click(None, [sel, mode], [sel, mode], js=READ_SEL, **quiet).then(
        h.add, [b.key, sel, text, notes_state, deck], [notes_state] + view_out, api_name="add_note")
    edit_btn.click(h.edit, [b.key, b.turn, pick, text, notes_state, deck], [notes_state] + view_out,
                   api_name="edit_note")
    del_btn.click(h.delete, [b.key, b.turn, pick, notes_state, deck], [notes_state] + view_out, api_name="delete_note")
    save_after(dl_btn.click(h.download, [b.key, notes_state], notes_out, api_name="download_notes"), notes_out,
               "notes_save")
    up_btn.upload(h.upload, [b.key, b.turn, up_btn, notes_state, deck], [notes_state] + view_out,
                  api_name="upload_notes")
    deck_add.click(None, [sel, mode], [sel, mode], js=READ_SEL, **quiet).then(
        h.resume_deck, [built, kept], built, api_name="deck_resume", **quiet).then(
        h.add_step, [b.key, b.turn, sel, mode, built], [built, deck_out, msg], api_name="deck_add_view").then(
        h.keep_deck, built, [kept, line, panel], api_name="deck_keep", **quiet)
    new_btn.click(h.new_deck, None, [built, kept, line, panel, deck_out, msg], api_name="deck_new", **quiet)

    # n / N: the page names a note by its place; the server opens its turn with its range selected.
    # Staged like every turn switch, so it overtakes a switch still in its plot step: that step's last
    # answer (the turn it opened, sent again with the plots) would otherwise draw the old turn over it.
    # trigger_mode "multiple": Gradio's default for a click ("once") drops a trigger while the previous
    # one is still pending, so a second n pressed before the first note's answer had completed was lost
    # (the callout said note 2, the tokens stayed on note 1); "always_last" would re-send the first
    # press's data. Each press runs; an older one overtaken before it answers sends nothing (turn_only), and
    # one whose request reached the server after a newer press's (talk.js numbers them) answers nothing.
    carrier.click(staged(h.on_page, settings.plot_defer_s, turn_only=True, press=(h.press_of, len(b.turn_outputs))),
                  [b.key, notes_state, b.view], b.turn_outputs, api_name="talk_note", trigger_mode="multiple",
                  **quiet, **b.shows)
    # → / ← with a deck: the page names a step; the server opens its rollout, then its Drift / Compare tab
    after = [c for c in ((cmp.outputs if cmp else []) + (drift.outputs + drift.cost_outputs if drift else []))]

    def then_show(ev):
        return ev.then(h.after_step, [deck, b.key, b.turn], after, api_name="talk_after_step", **quiet).then(
            h.refresh, ins, view_out, api_name="talk_refresh", **quiet)

    then_show(carrier.click(h.on_step, [deck, b.view], [deck] + b.outputs + [b.tabs], api_name="talk_step", **quiet,
                            **b.shows))
    then_show(deck_up.upload(h.on_upload_deck, [deck_up, deck], [deck, msg], api_name="present_deck").then(
        h.step_values, [deck, b.view], b.outputs + [b.tabs], api_name="talk_open_step", **quiet, **b.shows))
    if loaded is not None:
        loaded.then(h.restore_deck, kept, [built, line, panel, deck_out], api_name="deck_restore", **quiet)
        loaded.then(lambda k: notes_kept.from_kept(k, settings), kept_notes, notes_state, api_name="notes_restore",
                    **quiet).then(h.refresh, ins, view_out, api_name="talk_refresh", **quiet)
        loaded.then(h.on_link_note, [b.key, notes_state], b.turn_outputs, api_name="talk_note_link", **quiet, **b.shows)
        then_show(loaded.then(h.on_link_deck, [deck], [deck, b.outputs[STATUS]], api_name="talk_deck_link", **quiet).then(
            h.step_values, [deck], b.outputs + [b.tabs], api_name="talk_open_step", **quiet, **b.shows))
    return h
