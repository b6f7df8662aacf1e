"""The Tokens tab's **Download as HTML**: what is on screen (the turn, the selected tokens, the colour
mode, a rescore's Δ mode when one was run) as one offline HTML file (docs/TALK.md, "Export").

The browser reads the selection and the mode from the token view (``data-selected``, the mode
button that is on) into two hidden boxes; the server checks them as a visitor's values
(:func:`viewer.talk.export.parse_tok`, the mode list) and builds the file with the CLI's code
(:mod:`viewer.talk.export`, :func:`viewer.render.export.export_html`). The file goes to a folder of
this session's (deleted when it ends, as uploads are: viewer/ui/downloads.py, viewer/sources/keep.py),
and the browser saves it: one click, one file, no box on screen (issue 41).
"""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import gradio as gr

from ..budgets import BudgetExceeded
from ..config import Settings
from ..layout import NOTES, is_capture_dir
from ..render.export import export_html
from ..sources.shown import shown_rollout, shown_text
from ..talk import export as ex
from . import rescores
from .browse import Browse
from .browse_handlers import shown_name
from .downloads import download, holder, save_after
from .store import RolloutStore

__all__ = ["build", "READ_VIEW_JS"]

# The token view's state, read where it is drawn (viewer/ui/assets/token_view.js keeps both on its root).
READ_VIEW_JS = """() => {
  const r = document.querySelector('#token-view .ri-tv');
  const on = document.querySelector('#token-view .ri-modes button.on');
  return [(r && r.dataset.selected) || '', (on && on.dataset.mode) || 'mask'];
}"""


def _name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)[:60].strip("._") or "rollout"


def make_file(settings: Settings, store: RolloutStore, key: str | None, turn, sel: str | None, mode: str | None,
              request=None) -> str:
    """The export of what the visitor sees; raises gr.Error with the reason when it cannot be made."""
    op = store.get(key)
    if op is None or turn is None:
        raise gr.Error("Open a rollout and pick a turn first.")
    try:
        index = int(turn)
        tok = ex.parse_tok(str(sel or "")[:40])
    except (TypeError, ValueError, OverflowError) as e:
        raise gr.Error(f"Cannot export this view: {e}") from None
    mode = mode if mode in ex.MODES else "mask"
    choice = rescores.choice_now()  # the visitor's own IS choice (on_export sets it from their session)
    res = rescores.seen(op.key, choice)
    if mode == "delta" and res is None:
        mode = "mask"
    folder = Path(op.path) if op.path is not None and is_capture_dir(Path(op.path)) else None
    # public: the file names the rollout and its tokenizer as the visitor knows them, not the server's paths
    choice = replace(op.choice, message=shown_text(op.choice.message, settings))
    ld = ex.Loaded(shown_rollout(op.rollout, settings), choice, op.table, shown_name(op), folder, rescore=res)

    def make() -> str:
        return export_html(ex.rollout_doc(ld, settings, turns=[index], tok=tok, mode=mode))

    try:  # made once per view for every visitor (the shared cache holds response_mb for it)
        notes = folder / NOTES if folder is not None else None  # an edited notes.json makes a new file
        stamp = notes.stat().st_mtime_ns if notes is not None and notes.is_file() else 0
        html = store.derived(op.key, ("export-html", index, tok, mode, rescores.stamp(op.key), choice, stamp), make)
    except (ValueError, KeyError, BudgetExceeded) as e:
        raise gr.Error(f"Cannot export this view: {str(e).strip(chr(39))}") from None
    return download(request, f"{_name(shown_name(op))}-turn{index}.html", html, "export")


def build(settings: Settings, store: RolloutStore, b: Browse) -> None:
    """The button, where the caller places it (under the token view); its file is saved, never shown."""
    with gr.Row(elem_id="export-html-row"):  # presenter mode hides the row (app.css)
        btn = gr.Button("Download as HTML", size="sm", elem_id="export-html-btn", min_width=140, scale=0)
    out = holder("export-html-file")
    sel = gr.Textbox(visible=False, elem_id="export-sel")
    mode = gr.Textbox(visible=False, elem_id="export-mode")

    def on_export(key, turn, sel_v, mode_v, view_v, request: gr.Request):
        with rescores.choosing(rescores.choice_now(view_v)):
            return make_file(settings, store, key, turn, sel_v, mode_v, request)

    made = btn.click(None, None, [sel, mode], js=READ_VIEW_JS, api_name="export_read_view",
                     api_visibility="private").then(on_export, [b.key, b.turn, sel, mode, b.view], out,
                                                    api_name="export_html", **b.fast)
    save_after(made, out, "export_save")
