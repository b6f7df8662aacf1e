"""*Rescore dataset*, under the Datasets tab's table: every rollout of the open dataset rescored, ranked by |Δ|.

Issue 38, point 1: the newcomer's "which rollout has the largest |Δ|" answered in the app. The button runs
:func:`viewer.rescore.dataset.rescore_dataset` (the command line's ``rescore SOURCE``: the same rows, forward
pass and Δ as the one-rollout panel) over the dataset the session holds, with a progress bar and Cancel. A run
that finishes fills the table's ``|Δ|`` (mean |trainer − sampler| over a rollout's trained tokens) and
``max ratio`` (its largest exp(trainer − sampler)) columns, sorts the table by ``|Δ|``, largest first, and is
saved beside the dataset's search index (:func:`viewer.search.rescored.beside`), where the next index build
takes its figures (``delta>0.5``, ``ratio>2``). A cancelled run keeps nothing: its finished rollouts are shown
in the ranking below, said to be partial, and neither the table nor the saved rescore changes. The ranking names
each rollout's row of the dataset, and a click on one opens it on the Tokens tab, as a click in the table does.

Who may run it follows the rescore panel (:mod:`.rescore_panel`): in public mode only the built-in capture
models (a typed folder or Hub name, or "each rollout's own model", would have the server load what a visitor
or their data names), within the visitor's share of heavy events (:mod:`.fair`) and the rows budget; one
forward pass at a time on this machine (the panel's ``rescore`` queue).
"""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable

import gradio as gr
import pandas as pd

from .. import render
from ..capture.models import MODELS as CAPTURE_MODELS
from ..capture_set import CaptureSet
from ..config import Settings
from ..sources.shown import shown_path, shown_text
from .fair import Busy, slot
from .session import Run, button_on, run_of, start_run

__all__ = ["build", "DatasetRescore", "EACH_MODEL", "RANK_COLUMNS"]

EACH_MODEL = "(each rollout's model)"
RANK_COLUMNS = ["row", "rollout", "mean |Δ|", "max |Δ|", "max ratio", "min ratio", "trained tokens"]


def build(settings: Settings, w: Any, h: Any, browse: Any) -> SimpleNamespace:
    """Place the control under the Datasets table (``w``: its widgets, ``h``: its handlers, ``browse``: the Tokens
    screen a row opens on) and wire it."""
    with gr.Accordion("Rescore dataset (trainer-side logprobs of every rollout, ranked by |Δ|)", open=False,
                      elem_id="ds-rescore-panel"):
        with gr.Row(equal_height=True):
            choices = list(CAPTURE_MODELS) if settings.public_mode() else [EACH_MODEL, *CAPTURE_MODELS]
            model = gr.Dropdown(choices, value=choices[0], allow_custom_value=not settings.public_mode(),
                                label="Model (the trainer's weights; a folder or a Hub name on a local app)",
                                elem_id="ds-rescore-model", scale=3)
            run = gr.Button("Rescore dataset", variant="primary", elem_id="ds-rescore-run", scale=1, min_width=120)
            cancel = gr.Button("Cancel", variant="stop", elem_id="ds-rescore-cancel", scale=1, min_width=80)
        status = gr.HTML(render.notice_html("Rescores every rollout of the open dataset with the model, then ranks "
                                            "them by mean |Δ|."), elem_id="ds-rescore-status")
        ranked = gr.Dataframe(headers=RANK_COLUMNS, interactive=False, elem_id="ds-rescore-table", max_height=260,
                              wrap=False)
    run_id = gr.State(None)
    r = DatasetRescore(settings)
    # queued (not unqueued: those are the known lookups, tests/test_attacks_fairness.py) with no limit: at once.
    # The button is off until the run and its page are done: a second click replaced the session's run, so Cancel
    # stopped the queued second run while the first went on to the end (and the second then rescored it all again)
    run.click(start_run, None, [run_id, run], api_name="ds_rescore_new", concurrency_limit=None,
              show_progress="hidden").then(
        r.on_run, [run_id, w.key, model], [status, ranked, w.sort, w.desc], api_name="ds_rescore",
        concurrency_id="rescore", concurrency_limit=1, show_progress_on=[status]).then(
        h.on_filter, [w.key] + w.filters, w.page_outputs, api_name="ds_rescore_page").then(  # the table, re-sorted
        button_on, None, run, api_name="ds_rescore_idle", api_visibility="private", concurrency_limit=None,
        show_progress="hidden")  # (a then runs whether or not the step before it failed)
    cancel.click(r.on_cancel, [run_id], status, api_name="ds_rescore_cancel", concurrency_limit=None,
                 show_progress="hidden")
    # the ranking is where the answer is on screen (the table's |Δ| column is far right): a click opens that row,
    # through the table's own handler (its first column is the row, as the table's is)
    ranked.select(h.on_table_select, [w.key, browse.view], list(browse.outputs) + [browse.tabs, w.status],
                  api_name="ds_rescore_open", api_visibility="private", **browse.shows)
    return SimpleNamespace(model=model, run=run, cancel=cancel, status=status, ranked=ranked, run_id=run_id)


@dataclass
class Outcome:
    """What a run gave: the ranking rows, the status message and its kind, whether the table took it."""

    rows: list[dict[str, Any]]
    message: str
    kind: str = "info"
    filled: bool = False


class DatasetRescore:
    """The control's handlers; :meth:`rescore` is the work, callable without the app."""

    def __init__(self, settings: Settings):
        self.settings = settings

    @staticmethod
    def on_cancel(rid) -> str:
        run = run_of(rid)
        if run is None or not run.stop():
            return render.notice_html("No dataset rescore running.")
        return render.notice_html("Cancelling: the rescore stops within the rollout it is on; nothing is kept.")

    def on_run(self, rid, held, model_choice, request: gr.Request = None, progress=gr.Progress()) -> list:
        """The second step of the button's event: the status, the ranking, and (when the table took the figures)
        the sort set to |Δ|, largest first."""
        run = run_of(rid)
        if run is None or run.done:  # called without the button's first step (an API call)
            run = Run()
        try:
            with slot(request, int(self.settings.limits().session_events)):
                out = self.rescore(held, model_choice, run.cancel, _reporter(progress))
        except Busy as e:
            out = Outcome([], str(e), "error")
        finally:
            run.finish()
        table = pd.DataFrame(out.rows, columns=RANK_COLUMNS)
        sort = (gr.update(value="|Δ|"), True) if out.filled else (gr.skip(), gr.skip())
        return [render.notice_html(shown_text(out.message, self.settings), out.kind), table, *sort]

    def model_name(self, choice: str | None) -> str:
        """The model to run (:data:`viewer.rescore.dataset.AUTO_MODEL` for each rollout's own); ValueError when a
        public app may not load it (the rescore panel's rule)."""
        from ..rescore.dataset import AUTO_MODEL

        name = (choice or "").strip() or EACH_MODEL
        if self.settings.public_mode() and name not in CAPTURE_MODELS:
            raise ValueError(f"In public mode only {', '.join(CAPTURE_MODELS)} can be used for a rescore "
                             f"(got {name[:80]!r}).")
        return AUTO_MODEL if name == EACH_MODEL else name

    def rescore(self, held: Any, model_choice: str | None, cancel: threading.Event | None = None,
                progress: Callable[[int, int | None], None] | None = None) -> Outcome:
        """Rescore the dataset ``held`` (the Datasets tab's session value) and rank its rollouts; a finished run is
        saved for the search index and fills a folder of captures' columns."""
        from ..budgets import BudgetExceeded
        from ..drift.corpus import ScanInputError
        from ..rescore import TORCH_HINT, torch_available
        from ..rescore.dataset import RescoreOptions, rescore_dataset
        from ..search.index import index_path
        from ..search.rescored import beside, rollout_figures, save

        src = getattr(held, "src", None)
        if src is None:
            return Outcome([], "Open a dataset first.", "error")
        source = str(src.label)
        if source.startswith("hf://"):
            return Outcome([], "A Hub dataset is rescored from the command line: python -m viewer rescore "
                               f"{source} --model M --out FILE.parquet (docs/MISMATCH.md).", "error")
        if not torch_available():
            return Outcome([], TORCH_HINT, "error")
        try:
            name = self.model_name(model_choice)
        except ValueError as e:
            return Outcome([], str(e), "error")
        lim = self.settings.limits().rows_scanned
        try:
            res = rescore_dataset(source, self.settings, RescoreOptions(model=name), limit=int(lim) or None,
                                  progress=progress, cancel=cancel)
        except ScanInputError as e:
            return Outcome([], e.message, "error")
        except (ValueError, RuntimeError, OSError, BudgetExceeded) as e:  # a model that will not load, a budget
            return Outcome([], f"Rescore failed: {e}", "error")
        figs = rollout_figures(res["table"], res["rollouts"])
        rows = _ranked(figs, src, self.settings)
        failed = f"; {len(res['errors'])} could not be rescored ({_first_error(res['errors'])})" if res["errors"] \
            else ""
        if res["cancelled"]:
            total = f" of {res['total']}" if res.get("total") is not None else ""
            return Outcome(rows, f"Partial: cancelled after {len(res['rollouts'])}{total} rollout(s); the ranking below "
                                 f"is theirs only, and nothing was kept (the table and any saved rescore are as they "
                                 f"were){failed}.", "warn")
        filled = isinstance(src, CaptureSet)
        if filled:
            for folder, f in figs.items():
                if f["mean_abs_delta"] is not None:
                    src.deltas[folder] = f["mean_abs_delta"]
                    src.ratios[folder] = f["max_ratio"]
        where = beside(index_path(source, self.settings))
        try:
            save(where, res["table"], source=source, model=name, failed=len(res["errors"]))
            kept = f"saved for search ({shown_path(where, self.settings)})"
        except OSError as e:
            kept = f"not saved for search ({e.strerror or e})"
        said = "; the table is sorted by |Δ|, largest first" if filled else ""
        return Outcome(rows, f"Rescored {len(res['rollouts'])} rollout(s) with {model_choice or EACH_MODEL}{failed}; "
                             f"{kept}{said}.", "info", filled)


def _ranked(figs: dict[str, dict[str, Any]], src: Any, settings: Settings) -> list[dict[str, Any]]:
    """The ranking's rows, largest mean |Δ| first (a rollout without one last); a folder of captures names each
    rollout as its table does, a data file's row as a visitor is shown its path."""
    short = {f: r["rollout"] for f, r in zip(src.folders, src.rows)} if isinstance(src, CaptureSet) else {}
    at = {f: i for i, f in enumerate(src.folders)} if isinstance(src, CaptureSet) else None
    rows = [{"row": _row_of(n, at, src), "rollout": short.get(n) or shown_text(n, settings),
             "mean |Δ|": f["mean_abs_delta"], "max |Δ|": f["max_abs_delta"], "max ratio": f["max_ratio"],
             "min ratio": f["min_ratio"], "trained tokens": f["tokens"]}
            for n, f in figs.items()]
    return sorted(rows, key=lambda r: (r["mean |Δ|"] is None, -(r["mean |Δ|"] or 0.0)))


def _row_of(name: str, at: dict[str, int] | None, src: Any) -> int | str:
    """The dataset's row of the rollout the rescore named ``name`` (what the table's ``row`` column says and a click
    opens): a folder of captures' by its folder (``at``: folder -> row), a data file's from the reader's
    ``<file> row N`` source, a lone capture's 0; "" when there is none (a click then asks for a row)."""
    if at is not None:
        return at.get(name, "")
    m = re.search(r" row (\d+)$", name)
    if m:
        return int(m.group(1))
    return 0 if getattr(src, "is_capture", False) else ""


def _first_error(errors: list[dict[str, str]]) -> str:
    e = errors[0]
    return f"{e.get('source', '')}: {str(e.get('error', '')).splitlines()[0][:200] if e.get('error') else ''}"


def _reporter(progress) -> Callable[[int, int | None], None]:
    def prog(done: int, total: int | None) -> None:
        progress((done, total) if total else 0.0, desc="rescoring rollouts", unit="rollouts")
    return prog
