"""Trainer-side logprobs, under the token view: rescore the open rollout's trainer rows with a model.

A rescore runs the model's forward pass over the rows the Drift tab shows (TRL's stitching)
and compares each trained token's logprob with the sampler's. The result is kept per
rollout (:mod:`.rescores`); the token view then offers the ``delta`` colour mode, and this
panel shows per-turn stats, the selected turn's Δ plot and the ratio histogram. Work runs
with progress and Cancel, one rescore at a time. Without torch the panel says how to get it.

:func:`build` places the panel (:func:`_layout`, its components in :class:`Widgets`) and wires its
events to the methods of :class:`RescoreHandlers`, each readable and callable on its own.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import gradio as gr
import pandas as pd

from .. import plots, render
from ..capture.models import MODELS as CAPTURE_MODELS
from ..config import Settings
from ..drift import MODES, choose_spec
from ..rescore import importance as IS
from ..rescore import TORCH_HINT, rescore, torch_available
from ..rescore.recorded import RECORDED_DEVICE
from . import fixes_dataset, rescores
from .browse import wire
from .session import Run, button_on, run_of, start_run

__all__ = ["build", "RescoreHandlers", "Widgets", "ROLLOUT_MODEL", "MODELS"]

ROLLOUT_MODEL = "(the rollout's model)"
MODELS = [ROLLOUT_MODEL, *CAPTURE_MODELS]
AUTO = "auto (what the source supports)"


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
    if got is None or (got[0] and got[0] == session) or getattr(rescores.get(key), "device", None) == RECORDED_DEVICE:
        return ""  # (trainer logprobs the file recorded were not run by anyone)
    when = time.strftime("%H:%M:%S UTC", time.gmtime(got[1]))
    return (f"A cached result: this rollout was rescored by another visitor at {when}. Rescore with the same model "
            "and trainer shows it again (the same numbers); pick another to run a new one.")


def build(settings: Settings, store, browse) -> None:
    """Create the panel inside the current block (the Tokens tab) and wire its events."""
    w = _layout()
    h = RescoreHandlers(settings, store, browse, w.outs)
    outs = w.outs
    turn_outs = outs + list(browse.turn_outputs) + [browse.view]  # + the visitor's view settings
    # the button is off from its click until the run ends: a second click replaced the session's run, so Cancel
    # stopped the queued second run while the first went on (the Datasets tab's Rescore dataset had the same)
    w.run.click(start_run, None, [w.run_id, w.run], api_name="new_run", api_visibility="private", queue=False).then(
        h.on_run, [w.run_id, browse.key, browse.turn, w.model, w.trainer, w.is_mode, w.is_min, w.is_max], turn_outs,
        api_name="rescore", concurrency_limit=1, concurrency_id="rescore", postprocess=False,
        show_progress_on=[w.summary]).then(  # one progress bar, on the panel (not on each of its outputs)
        button_on, None, w.run, api_name="rescore_idle", api_visibility="private", queue=False,
        show_progress="hidden")  # (a then runs whether or not the step before it failed)
    w.cancel.click(on_cancel, [w.run_id], w.summary, api_name="rescore_cancel", queue=False)
    # The panel is filled while it is open: when it opens, and on a new rollout or turn while it is (a
    # turn switch asks only then, in one event with the other panels': browse.wire_turn_followers).
    ins = [browse.key, browse.turn, w.is_mode, w.is_min, w.is_max]
    w.accordion.expand(h.on_open, ins, [w.shown] + outs, api_name="rescore_open", api_visibility="private",
                       show_progress="hidden")
    w.accordion.collapse(on_close, None, w.shown, api_name="rescore_close", api_visibility="private",
                         show_progress="hidden")
    browse.key.change(h.follow, [w.shown] + ins, outs, api_name="rescore_follow", api_visibility="private",
                      show_progress="hidden")
    browse.follow_turn("!!document.querySelector('#rescore-summary')?.checkVisibility()", h.follow, [w.shown] + ins,
                       outs, with_request=True)
    for comp in (w.is_mode, w.is_min, w.is_max):
        comp.change(h.on_is, ins, turn_outs, api_name=f"rescore_{comp.elem_id.replace('-', '_')}",
                    api_visibility="private", postprocess=False, show_progress="hidden")
    fixes_dataset.build()  # the correction methods over a dataset's per-token parquet, below the panel


@dataclass
class Widgets:
    """The panel's components, as :func:`_layout` placed them."""

    accordion: gr.Accordion
    model: gr.Dropdown
    trainer: gr.Dropdown
    run: gr.Button
    cancel: gr.Button
    summary: gr.HTML
    table: gr.Dataframe
    delta_plot: gr.Plot
    ratio_plot: gr.Plot
    is_mode: gr.Dropdown
    is_min: gr.Textbox
    is_max: gr.Textbox
    is_view: gr.HTML
    ex_view: gr.HTML
    run_id: gr.State  # the session's rescore in flight (its Cancel)
    shown: gr.State  # whether the panel is open: it follows the rollout and turn only then

    @property
    def outs(self) -> list:
        """What :meth:`RescoreHandlers.panel` fills, in its order."""
        return [self.summary, self.table, self.delta_plot, self.ratio_plot, self.is_view, self.ex_view]


def _layout() -> Widgets:
    with gr.Accordion("Trainer-side logprobs (rescore with the trainer's forward pass)", open=False,
                      elem_id="rescore-panel") as accordion:
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
        with gr.Row(equal_height=True):  # TRL 1.16 GRPO's importance-sampling correction (docs/MISMATCH.md)
            is_mode = gr.Dropdown(list(IS.MODES), value=IS.DEFAULT_MODE, elem_id="is-mode", scale=2,
                                  label="IS mode (TRL vllm_importance_sampling_mode)")
            # text, not gr.Number: "none" (TRL's default min) must stay distinguishable from 0
            is_min = gr.Textbox(_text(IS.DEFAULT_CLIP_MIN), label="clip min (a number or none)", elem_id="is-min",
                                scale=1, max_lines=1)
            is_max = gr.Textbox(_text(IS.DEFAULT_CLIP_MAX), label="clip max (a number or none)", elem_id="is-max",
                                scale=1, max_lines=1)
        is_view = gr.HTML(render.importance_html(None, IS.DEFAULT_MODE, None, None), elem_id="is-view")
        ex_view = gr.HTML(render.explain_html(None), elem_id="explain-view")  # why they disagree (docs/MISMATCH.md)
    return Widgets(accordion, model, trainer, run, cancel, summary, table, delta_plot, ratio_plot, is_mode, is_min,
                   is_max, is_view, ex_view, run_id=gr.State(None), shown=gr.State(False))


class RescoreHandlers:
    """What the panel's events do. ``outs``: the components :meth:`panel` fills (values are serialised
    for them here: the rescore events run with ``postprocess=False``, as the turn values they carry)."""

    def __init__(self, settings: Settings, store, browse, outs: list):
        self.settings, self.store, self.browse, self.outs = settings, store, browse, outs

    def panel(self, key, index, mode, lo, hi, session: str | None = None) -> list:
        """The values of ``outs`` for this rollout, turn and IS choice, as ``session``'s visitor sees them."""
        op = self.store.get(key)
        res = rescores.get(key) if op is not None else None
        mode, lo, hi, err = _choice(mode, lo, hi)
        if not torch_available() and res is None:
            head = render.notice_html(TORCH_HINT)
        else:
            head = render.rescore_summary_html(res, cached_note(key, session))
        fig = plots.delta_figure(res, int(index), _texts(op, index)) if res is not None and index is not None \
            else plots.delta_figure(None, 0)
        # the histogram draws this visitor's bounds (their own choice: rescores.seen), never another's
        return [head, pd.DataFrame(render.rescore_turn_rows(res), columns=render.RESCORE_COLUMNS), fig,
                plots.ratio_histogram(rescores.seen(key, _checked(mode, lo, hi, err)) if res is not None else None),
                render.notice_html(f"Importance sampling: {err}", "error") if err else
                render.importance_html(res, mode, lo, hi), self.explain(op, res)]

    def explain(self, op, res) -> str:
        """The settings' expected Δ, the residual and its outliers, each linked to its token."""
        if res is None:
            return render.explain_html(None)
        from ..rescore.explain import explain

        return render.explain_html(explain(res, op.rollout), _link_base(op, self.settings))

    def with_turn(self, key, index, mode, lo, hi, session: str | None, show_turn: bool) -> list:
        """The panel, the turn's token view redrawn with this visitor's IS choice (when ``show_turn``: else
        left as it is), and that choice for their session (``browse.view``, the last output). The choice is
        theirs alone: the shared result is never changed (issue 36)."""
        choice = _checked(*_choice(mode, lo, hi))
        with rescores.choosing(choice):  # this event's views: its State is stored when it ends
            turn_vals = self.browse.select_fn(key, index, "delta") if show_turn else \
                [gr.skip()] * len(self.browse.turn_outputs)
        # postprocess=False (the turn values come serialised from the shared cache): ours too
        return [wire(c, v) for c, v in zip(self.outs, self.panel(key, index, mode, lo, hi, session))] + \
            list(turn_vals) + [rescores.view_value(choice)]

    def on_is(self, key, index, mode, lo, hi, request: gr.Request = None) -> list:
        """The visitor changed their IS mode or a bound."""
        shown = self.store.get(key) is not None and index is not None and rescores.get(key) is not None
        return self.with_turn(key, index, mode, lo, hi, _session(request), shown)

    def on_run(self, rid, key, index, model_choice, trainer_choice, is_mode_, is_lo, is_hi,
               request: gr.Request = None, progress=gr.Progress()) -> list:
        """Rescore (the second step of the button's event; ``rid``: the run :func:`new_run` started)."""
        run = run_of(rid)
        if run is None or run.done:  # called without the button's first step (an API call)
            run = Run()
        op = self.store.get(key)
        try:
            if op is None or not torch_available():
                return self._failed("Open a rollout first." if op is None else TORCH_HINT)
            res, asked = self._rescored(op, model_choice, trainer_choice, run.cancel, progress)
        except (ValueError, RuntimeError, OSError) as e:
            return self._failed(f"Rescore failed: {e}")
        finally:
            run.finish()
        session = _session(request)
        if rescores.get(op.key) is not res:  # a new run (the same run again keeps who ran it, and when)
            rescores.put(op.key, res, session, asked)
        return self.with_turn(key, index, is_mode_, is_lo, is_hi, session, index is not None)

    def _rescored(self, op, model_choice, trainer_choice, cancel, progress) -> tuple:
        """(the result, what was asked): the same run again is the kept result, anything else runs the model."""
        name = _model_name(model_choice, op.rollout, self.settings.public_mode())
        spec = choose_spec(op.rollout, trainer_choice if trainer_choice in MODES else None)
        progress(0.0, desc=f"loading {name} and building the trainer rows")
        s = self.settings
        asked = (name, spec, s.rescore_device, s.rescore_dtype, s.rescore_flag_delta)
        res = rescores.same_run(op.key, asked)
        if res is None:
            res = rescore(op.rollout, name, s, spec=spec, tok=op.choice.tokenizer, cancel=cancel,
                          progress=lambda done, total: progress((done, max(total, 1)), desc="rescoring trained tokens",
                                                                unit="tokens"))
        return res, asked

    def _failed(self, message: str) -> list:
        """The message in the summary; every other output as it is."""
        return [render.notice_html(message, "error")] + [gr.skip()] * (len(self.outs) - 1 +
                                                                      len(self.browse.turn_outputs) + 1)

    def follow(self, on, key, index, mode, lo, hi, request: gr.Request = None) -> list:
        """A new rollout or turn: the panel again while it is open (``on``), else nothing."""
        return self.panel(key, index, mode, lo, hi, _session(request)) if on else [gr.skip()] * len(self.outs)

    def on_open(self, key, index, mode, lo, hi, request: gr.Request = None) -> list:
        return [True] + self.panel(key, index, mode, lo, hi, _session(request))


def on_cancel(rid):
    run = run_of(rid)
    if run is None or not run.stop():
        return render.notice_html("No rescore running.")
    return render.notice_html("Cancelling: the rescore stops after the current batch.")


def on_close() -> bool:
    return False


def _session(request) -> str | None:
    return getattr(request, "session_hash", None)


def _texts(op, index):
    """The texts of the turn's output tokens (for the Δ plot's hover), None if there is no such turn."""
    try:
        t = op.rollout.turn(int(index))
    except (KeyError, TypeError, ValueError):
        return None
    return op.table.texts(list(t.output_ids)) if op.table is not None else None


def _link_base(op, settings: Settings) -> str:
    """The query string that reopens this rollout (a dataset row's own, else its path), "" if none."""
    from urllib.parse import urlencode

    from .browse import link_spec

    if op.link:
        return op.link
    spec = link_spec(op.path, settings)
    return urlencode({"source": spec}) if spec else ""


def _checked(mode: str, lo: float | None, hi: float | None, err: str | None = None):
    """The IS choice a visitor's values make, or None (a bound that is not a number, or bounds TRL rejects):
    then nothing is marked."""
    if err:
        return None
    try:
        IS.check_bounds(mode, lo, hi)
    except ValueError:
        return None
    return (mode, lo, hi)


def _text(v: float | None) -> str:
    return "none" if v is None else f"{v:g}"


def _choice(mode, lo, hi) -> tuple[str, float | None, float | None, str | None]:
    """A visitor's mode and bounds as values: a known mode (else TRL's default), each bound a finite number
    or none; the last item names what could not be read (the panel shows it, the token view is unmarked)."""
    errors = []

    def num(v, name):
        text = str(v if v is not None else "").strip()
        if text.lower() in ("", "none"):
            return None
        try:
            f = float(text)
        except ValueError:
            f = float("nan")
        if not math.isfinite(f):
            errors.append(f"clip {name} must be a number or none, not {text[:40]!r}")
            return None
        return f

    lo, hi = num(lo, "min"), num(hi, "max")
    return (mode if mode in IS.MODES else IS.DEFAULT_MODE), lo, hi, "; ".join(errors) or None
