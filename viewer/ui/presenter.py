"""Presenter mode (``?present=1``, ``#presenter``): a rollout shown to a room, one turn a screen
(docs/GRADIO.md §3.1).

The keyboard, the large type and the hidden chrome are all in the browser
(``assets/presenter.js``, ``app.css``); turns change through the browse screen's own prev/next
buttons and the token cursor through the token view's ``ri-select-token`` event, so what is
shown is exactly what the Tokens tab shows. The server adds one thing: while presenting, the
selected turn's drift marks (:func:`viewer.drift.marks.drift_marks`), which ``d`` highlights,
and whether the turn is the rollout's first or last (the bar says so before ← / → is pressed).
"""
from __future__ import annotations

from pathlib import Path

import gradio as gr

from .. import render
from ..config import Settings
from ..drift import turn_report
from ..drift.marks import drift_marks
from .browse import Browse
from .store import RolloutStore

__all__ = ["build", "PRESENTER_JS"]

PRESENTER_JS = (Path(__file__).parent / "assets" / "presenter.js").read_text()


def build(settings: Settings, store: RolloutStore, b: Browse):
    """The presenter bar; returns ``(present State, on_load handler, its outputs)``."""
    present = gr.State(False)
    view = gr.HTML(render.presenter_payload(None, []), html_template=render.presenter_template(),
                   js_on_load=PRESENTER_JS, elem_id="presenter", apply_default_css=False)

    def marks(on: bool, key: str | None, index) -> str | object:
        if not on:
            return gr.skip()  # outside presenter mode the drift checks are not run for every turn
        op = store.get(key)
        if op is None or index is None:
            return render.presenter_payload(None, [])
        try:
            index = int(index)
        except (TypeError, ValueError, OverflowError):  # the turn comes from state, but never trust it
            return render.presenter_payload(None, [])
        turns = [t.index for t in op.rollout.turns]
        ends = {"first": bool(turns) and index == turns[0], "last": bool(turns) and index == turns[-1]}
        tok = op.choice.tokenizer
        if tok is None:
            return render.presenter_payload(int(index), [], "no tokenizer: drift checks need one", **ends)
        try:
            rep = turn_report(op.rollout, int(index), tok, plain=False)
        except KeyError:
            return render.presenter_payload(None, [])
        except Exception as e:  # a check failing on odd data must not stop the presentation
            return render.presenter_payload(int(index), [], f"drift checks failed: {type(e).__name__}: {e}", **ends)
        return render.presenter_payload(int(index), drift_marks(rep), **ends)

    b.key.change(marks, [present, b.key, b.turn], view, api_visibility="private", show_progress="hidden")
    # a turn switch asks for the marks only while presenting (one event with the other panels': browse.py)
    b.follow_turn("document.body.classList.contains('ri-present')", marks, [present, b.key, b.turn], [view])

    # The Present button and Esc (presenter.js) say so with trigger('focus') / trigger('blur'): the
    # server then computes the marks for this visitor while, and only while, they present.
    def start(key, index):
        return True, marks(True, key, index)

    def stop():
        return False

    view.focus(start, [b.key, b.turn], [present, view], api_visibility="private", show_progress="hidden")
    view.blur(stop, None, present, api_visibility="private", show_progress="hidden")

    def on_load(key, index, request: gr.Request):
        from ..visitor import deep_link

        on = deep_link(request.query_params if request is not None else {}).present
        return on, (marks(True, key, index) if on else gr.skip())

    return present, on_load, [present, view]
