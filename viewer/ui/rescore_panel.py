"""Trainer-side logprobs, under the token view: rescore the open rollout's trainer rows with a model.

A rescore runs the model's forward pass over the rows the Drift tab shows (TRL's stitching)
and compares each trained token's logprob with the sampler's. The result is kept per
rollout (:mod:`.rescores`); the token view then offers the ``delta`` colour mode, and this
panel shows per-turn stats, the selected turn's Δ plot and the ratio histogram. Work runs
with progress and Cancel, one rescore at a time. Without torch the panel says how to get it.
"""
from __future__ import annotations

import threading
import time
import uuid

import gradio as gr
import pandas as pd

from .. import plots, render
from ..capture.models import MODELS as CAPTURE_MODELS
from ..config import Settings
from ..drift import MODES, choose_spec
from . import rescores
from .browse import wire

__all__ = ["build", "ROLLOUT_MODEL", "MODELS"]

ROLLOUT_MODEL = "(the rollout's model)"
MODELS = [ROLLOUT_MODEL, *CAPTURE_MODELS]
AUTO = "auto (what the source supports)"
_CANCEL: dict[str, threading.Event] = {}


def _model_name(choice: str | None, rollout, public: bool) -> str:
    """The model to load; ValueError when it cannot be named. In public mode only the built-in
    capture models: a typed folder or Hub name would make the server read or fetch what a visitor chose."""
    name = (choice or "").strip()
    if name in ("", ROLLOUT_MODEL):
        name = (rollout.model or "").strip()
        if not name:
            raise ValueError(f"This rollout records no model name: pick one ({', '.join(CAPTURE_MODELS)}, a folder, "
                             "a Hub name).")
    if public and name not in CAPTURE_MODELS:
        raise ValueError(f"In public mode only {', '.join(CAPTURE_MODELS)} can be used for a rescore (got {name!r}).")
    return name


def cached_note(key: str | None, session: str | None) -> str:
    """Said over a rescore this visitor did not run (the result is shared per rollout): whose and when."""
    got = rescores.origin(key)
    if got is None or (got[0] and got[0] == session):
        return ""
    when = time.strftime("%H:%M:%S UTC", time.gmtime(got[1]))
    return f"A cached result: this rollout was rescored by another visitor at {when}. Press Rescore to run it yourself."


def build(settings: Settings, store, browse) -> None:
    """Create the panel inside the current block (the Tokens tab) and wire its events."""
    from ..rescore import TORCH_HINT, rescore, torch_available

    with gr.Accordion("Trainer-side logprobs (rescore with the trainer's forward pass)", open=False,
                      elem_id="rescore-panel"):
        gr.HTML(render.rescore_note_html())
        with gr.Row(equal_height=True):
            model = gr.Dropdown(MODELS, value=ROLLOUT_MODEL, allow_custom_value=True, elem_id="rescore-model",
                                label=f"Model ({' / '.join(CAPTURE_MODELS)}, a folder or a Hub name)", scale=3)
            trainer = gr.Dropdown([AUTO, *MODES], value=AUTO, label="Trainer (whose rows)", elem_id="rescore-trainer",
                                  scale=2)
            run = gr.Button("Rescore", variant="primary", elem_id="rescore-run", scale=1, min_width=90)
            cancel = gr.Button("Cancel", variant="stop", elem_id="rescore-cancel", scale=1, min_width=80)
        summary = gr.HTML(render.notice_html(TORCH_HINT) if not torch_available()
                          else render.rescore_summary_html(None), elem_id="rescore-summary")
        table = gr.Dataframe(headers=render.RESCORE_COLUMNS, interactive=False, elem_id="rescore-turns",
                             max_height=220, wrap=False)
        with gr.Row():
            delta_plot = gr.Plot(elem_id="delta-plot", show_label=False)
            ratio_plot = gr.Plot(elem_id="ratio-plot", show_label=False)
    run_id = gr.State(None)

    def texts(op, index):
        try:
            t = op.rollout.turn(int(index))
        except (KeyError, TypeError, ValueError):
            return None
        return op.table.texts(list(t.output_ids)) if op.table is not None else None

    def panel(key, index, request: gr.Request = None, session: str | None = None) -> list:
        op = store.get(key)
        res = rescores.get(key) if op is not None else None
        if not torch_available() and res is None:
            head = render.notice_html(TORCH_HINT)
        else:
            head = render.rescore_summary_html(res, cached_note(key, session or getattr(request, "session_hash", None)))
        fig = plots.delta_figure(res, int(index), texts(op, index)) if res is not None and index is not None \
            else plots.delta_figure(None, 0)
        return [head, pd.DataFrame(render.rescore_turn_rows(res), columns=render.RESCORE_COLUMNS), fig,
                plots.ratio_histogram(res)]

    def new_run() -> str:
        rid = uuid.uuid4().hex[:12]
        _CANCEL[rid] = threading.Event()
        while len(_CANCEL) > 64:
            _CANCEL.pop(next(iter(_CANCEL)))
        return rid

    def on_run(rid, key, index, model_choice, trainer_choice, request: gr.Request = None, progress=gr.Progress()):
        skip = [gr.skip()] * (3 + len(browse.turn_outputs))

        def fail(message: str) -> list:
            return [render.notice_html(message, "error")] + skip

        op = store.get(key)
        if op is None:
            return fail("Open a rollout first.")
        if not torch_available():
            return [render.notice_html(TORCH_HINT, "error")] + skip
        cancel_ev = _CANCEL.setdefault(rid, threading.Event()) if rid else threading.Event()
        try:
            name = _model_name(model_choice, op.rollout, settings.public_mode())
            mode = trainer_choice if trainer_choice in MODES else None
            spec = choose_spec(op.rollout, mode)
            progress(0.0, desc=f"loading {name} and building the trainer rows")

            def prog(done: int, total: int) -> None:
                progress((done, max(total, 1)), desc="rescoring trained tokens", unit="tokens")

            res = rescore(op.rollout, name, settings, spec=spec, tok=op.choice.tokenizer, progress=prog,
                          cancel=cancel_ev)
        except (ValueError, RuntimeError, OSError) as e:
            return fail(f"Rescore failed: {e}")
        finally:
            if rid:
                _CANCEL.pop(rid, None)
        session = getattr(request, "session_hash", None)
        rescores.put(op.key, res, session)
        turn_vals = browse.select_fn(key, index, "delta") if index is not None else [gr.skip()] * len(
            browse.turn_outputs)
        # postprocess=False (the turn values come serialised from the shared cache): ours too
        return [wire(c, v) for c, v in zip(outs, panel(key, index, session=session))] + list(turn_vals)

    def on_cancel(rid):
        ev = _CANCEL.get(rid) if rid else None
        if ev is None:
            return render.notice_html("No rescore running.")
        ev.set()
        return render.notice_html("Cancelling: the rescore stops after the current batch.")

    outs = [summary, table, delta_plot, ratio_plot]
    run.click(new_run, None, run_id, api_visibility="private", queue=False).then(
        on_run, [run_id, browse.key, browse.turn, model, trainer], outs + list(browse.turn_outputs),
        api_name="rescore", concurrency_limit=1, concurrency_id="rescore", postprocess=False,
        show_progress_on=[summary])  # one progress bar, on the panel (not on each of its outputs)
    cancel.click(on_cancel, [run_id], summary, api_name="rescore_cancel", queue=False)
    for comp in (browse.key, browse.turn):
        comp.change(panel, [browse.key, browse.turn], outs, api_visibility="private", show_progress="hidden")
