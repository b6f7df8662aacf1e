"""The Drift screen's event handlers, as named methods a test can call without a browser.

:class:`TurnPanel` answers for the selected turn (its drift report, trainer rows, repro
export); :class:`ScanPanel` for the dataset scan (run, cancel, filter, open a row).
:mod:`.drift_tab` lays the components out and wires these methods to their events; the
lists they return are in the order of the outputs it wires them to.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd

from .. import plots, render
from ..budgets import limits
from ..capture_set import ROLLUP_COLUMNS, rollup_rows, trainer_hook
from ..config import Settings
from ..drift import MODES, TRAIN_TURNS, choose_spec, trainer_rows, turn_report
from ..drift.costs import DEFAULT_SWEEP, merge_gradient, new_gradient_block, rollout_costs
from ..drift.corpus import ScanInputError, scan_source
from ..drift.ray_engine import scan_with_ray
from ..drift.results import SCAN_COLUMNS, scan_table
from ..sources import SourceError
from ..sources.shown import shown_path, shown_text
from ..memo import approx_nbytes
from ..visitor import local_path
from . import rescores
from .downloads import download_all
from .session import Run, run_of

__all__ = ["TurnPanel", "ScanPanel", "keep_unpathed", "open_scanned", "SCOPES", "ALL", "DRIFTED", "AUTO",
           "TRAINERS", "EMPTY", "VIEW_OUTPUTS"]

SCOPES = ["open rollout", "folder of captures", "Hub dataset"]
PER_TURN, PER_ROLLOUT = "per turn", "per rollout"  # the scan table's two views (issue 38)
ALL, DRIFTED = "(all turns)", "(drifted turns)"
AUTO = "auto (what the source supports)"
TRAINERS = [AUTO, *MODES]
EMPTY = "Open a rollout and pick a turn: its drift shows here."
VIEW_OUTPUTS = 4  # TurnPanel.show's answer: turn box, drift HTML, trainer-row picker, row token view
_KEEP_UNPATHED = 64  # rollouts without a path of their own (Hub, data-file rows) kept per scan to reopen


def keep_unpathed(entry: dict[str, Any]):
    """An ``on_rollout`` hook: keep the scanned rollouts that cannot be reopened by path (a Hub
    dataset's, a data file's rows), so a click on their table row opens them."""
    def keep(r) -> None:
        if len(entry["kept"]) < _KEEP_UNPATHED and not Path(str(r.source)).exists():
            entry["kept"][r.source] = r
    return keep


def open_scanned(entry: dict[str, Any], name: str, store, settings: Settings):
    """The rollout a scan table row names: the open one, one kept by the scan, else by path
    (inside the data root). None when it is gone (the caller asks to scan again)."""
    if name in entry["keys"]:
        return store.get(entry["keys"][name])
    if name in entry["kept"]:
        return store.put(entry["kept"][name])
    return store.open(local_path(name, settings))


def _shown_scan(res, entry: dict[str, Any], settings: Settings):
    """A scan's result as a visitor sees it on a public app: rollouts, errors and tokenizer named by
    :func:`viewer.sources.shown.shown_path` (the table, plot and summary show these; a table pick
    finds its rollout by the same name, or opens it by that data-root path)."""
    if not settings.public_mode():
        return res
    name = lambda s: shown_path(s, settings)  # noqa: E731
    for part in ("keys", "kept", "trainers"):
        entry[part] = {name(k): v for k, v in entry[part].items()}
    out = dict(res, turns=[dict(r, rollout=name(r["rollout"])) for r in res.get("turns", [])],
               errors=[dict(e, source=name(e["source"]), error=shown_text(e["error"], settings))
                       for e in res.get("errors", [])])
    for k in ("source", "tokenizer"):
        if res.get(k):
            out[k] = shown_text(str(res[k]), settings)
    return out


def _spec(rollout, trainer: str | None, train_turns: str | None):
    """The trainer the Drift screen's selectors name (auto: :func:`choose_spec`'s pick). Values
    the selectors cannot hold fall back to auto, so choose_spec never sees a bad name."""
    mode = trainer if trainer in MODES else None
    turns = train_turns if mode == "trl-message" and train_turns in TRAIN_TURNS else None
    return choose_spec(rollout, mode, turns)


def _report(store, key: str | None, index, trainer: str | None = None,
            train_turns: str | None = None) -> tuple[Any, Any] | None:
    op = store.get(key)
    if op is None or index is None:
        return None
    try:
        index = int(index)
    except (TypeError, ValueError):
        return None
    spec = _spec(op.rollout, trainer, train_turns)
    # Shared cache (bytes-bounded, with the rollout's other derived values): one report per
    # (rollout, turn, trainer) for every visitor. KeyError when the turn is absent.
    rep = store.derived(op.key, ("drift", index, spec),
                        lambda: turn_report(op.rollout, index, op.choice.tokenizer, tokenizer_name=op.choice.name,
                                            spec=spec))
    return op, rep


def _rollout_gradient(op, spec) -> tuple[dict[str, Any] | None, str | None]:
    """The open rollout's ``gradient`` block under ``spec`` (sweep + measured what-ifs), or why not."""
    tok = op.choice.tokenizer
    tr = trainer_rows(op.rollout, spec, tok)
    if tr.error is not None:
        return None, f"No trainer rows ({spec.mode}): {tr.error}"
    block = new_gradient_block()
    merge_gradient(block, rollout_costs(op.rollout, tr, tok, thresholds=DEFAULT_SWEEP).to_dict(),
                   rollout=str(op.rollout.source))
    return block, None


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._")[-60:] or "rollout"


class TurnPanel:
    """The selected turn: drift report, trainer rows as a token view, repro files, the turn box."""

    def __init__(self, settings: Settings, store, browse=None):
        self.settings, self.store, self.browse = settings, store, browse

    def rows_of(self, rep) -> list[tuple[str, Any]]:
        return render.trainer_rows(rep.trainer.rows)

    def row_payload(self, op, rep, label: str | None) -> str:
        return self.store.derived(op.key, ("drift-row", rep.turn.index, rep.trainer.spec, label),
                                  lambda: self.make_row_payload(op, rep, label))

    def make_row_payload(self, op, rep, label: str | None) -> str:
        rows = self.rows_of(rep)
        if not rows:
            return ""
        by_label = dict(rows)
        row = by_label.get(label) if label else None
        if row is None:  # default: the row holding this turn's output
            row = next((r for _, r in rows if any(s.turn == rep.turn.index for s in r.spans)), rows[0][1])
            label = next(lab for lab, r in rows if r is row)
        return render.row_view_payload(row, op.table, turn=rep.turn.index, label=label,
                                       view=render.ViewOptions.from_settings(self.settings))

    def show(self, key: str | None, index, trainer: str | None = AUTO, train_turns: str | None = "tool-calls") -> list:
        """[turn box, drift HTML, row picker, row token view] for turn ``index`` of rollout ``key``."""
        got = None
        try:
            got = _report(self.store, key, index, trainer, train_turns)
        except KeyError:
            pass
        except Exception as e:  # an analysis bug on odd data: say so, keep the app alive
            return [gr.skip(), render.drift_empty_html(f"Drift check failed: {type(e).__name__}: {e}"),
                    gr.Dropdown(choices=[], value=None), ""]
        if got is None:
            return [gr.skip(), render.drift_empty_html(EMPTY), gr.Dropdown(choices=[], value=None), ""]
        op, rep = got
        html = self.store.derived(op.key, ("drift-html", rep.turn.index, rep.trainer.spec),
                                  lambda: render.drift_turn_html(rep, op.table,
                                                                 "" if op.choice.ok else op.choice.message))
        rows = self.rows_of(rep)
        labels = [lab for lab, _ in rows]
        default = next((lab for lab, r in rows if any(s.turn == rep.turn.index for s in r.spans)),
                       labels[0] if labels else None)
        return [rep.turn.index, html, gr.Dropdown(choices=labels, value=default), self.row_payload(op, rep, default)]

    def on_row(self, key: str | None, index, label: str | None, trainer: str | None = AUTO,
               train_turns: str | None = "tool-calls") -> str:
        got = (_report(self.store, key, index, trainer, train_turns)
               if self.store.get(key) is not None and index is not None else None)
        if got is None:
            return ""
        return self.row_payload(*got, label)

    def export(self, key: str | None, index, request: gr.Request = None) -> list[str] | None:
        """One repro JSON file per drift case of the turn (None when it has none)."""
        try:
            got = _report(self.store, key, index)
        except KeyError:
            got = None
        if got is None:
            raise gr.Error("Open a rollout and pick a turn first.")
        op, rep = got
        tok = op.choice.tokenizer
        if tok is None:
            raise gr.Error("No tokenizer for this rollout: a repro needs one (choose it under “Open a rollout”).")
        cases = rep.repros(tok)
        if not cases:
            gr.Info(f"Turn {rep.turn.index}: no drift, nothing to export.")
            return None
        stem = _safe_name(Path(str(op.rollout.source)).name)
        files = [(f"{stem}-turn{rep.turn.index}-{kind}-{_safe_name(str(doc.get('cause') or 'unknown'))}.json",
                  json.dumps(self.shown(doc), indent=1, ensure_ascii=False)) for kind, doc in cases.items()]
        return download_all(request, files, "repro")  # the session's, deleted when it ends

    def shown(self, doc: dict) -> dict:
        """A repro as a visitor may see it: its rollout and tokenizer named without the server's paths."""
        return dict(doc, **{k: shown_path(doc[k], self.settings) for k in ("rollout", "tokenizer") if doc.get(k)})

    def costs(self, key: str | None, trainer: str | None = AUTO, train_turns: str | None = "tool-calls") -> list:
        """[gradient-cost HTML, sweep figure] of the open rollout under the selected trainer."""
        op = self.store.get(key)
        if op is None:
            return [render.gradient_cost_html(None), plots.gradient_sweep_figure(None)]
        spec = _spec(op.rollout, trainer, train_turns)
        block, error = self.store.derived(op.key, ("gradient", spec), lambda: _rollout_gradient(op, spec))
        if error:
            return [render.notice_html(error, "error"), plots.gradient_sweep_figure(None)]
        return [render.gradient_cost_html(block, f"open rollout, {spec.label}"), plots.gradient_sweep_figure(block)]

    def costs_follow(self, on: bool, key, trainer, train_turns) -> list:
        return self.costs(key, trainer, train_turns) if on else [gr.skip(), gr.skip()]

    @rescores.as_visitor  # view: the visitor's view settings (browse.view)
    def jump_turn(self, key: str | None, index, view=None):
        if self.store.get(key) is None or index is None:
            return [gr.skip()] * len(self.browse.turn_outputs)
        return self.browse.select_fn(key, index)

    # Drift checks cost a full decode/encode and template render of the turn: computed only
    # while the tab is on screen (and when it is opened), not on every turn change.
    def on_tab(self, key, index, trainer, train_turns, evt: gr.SelectData):
        on = evt is not None and str(evt.value) == "Drift"
        return [on] + (self.show(key, index, trainer, train_turns) if on else [gr.skip()] * VIEW_OUTPUTS)

    def follow(self, on: bool, key, index, trainer, train_turns):
        return self.show(key, index, trainer, train_turns) if on else [gr.skip()] * VIEW_OUTPUTS


class ScanPanel:
    """The dataset scan: one scan at a time, cancellable; its table filtered by cause, a row reopened.

    A scan is a :class:`.session.Run` in the visitor's session State (its Cancel: no server table another
    visitor can fill). Its results (the table, and up to 64 rollouts without a path of their own) are
    kept in the store's shared cache, weighed within ``cache_mb`` like every other derived value; an
    evicted scan's table is empty and a click on it asks to scan again."""

    def __init__(self, settings: Settings, store, browse=None):
        self.settings, self.store, self.browse = settings, store, browse

    @staticmethod
    def new_scan() -> Run:
        return Run()

    def keep(self, run: Run, entry: dict[str, Any]) -> None:
        """A finished scan's entry, in the shared cache within ``cache_mb`` (issue 36: a table of the last
        8 scans, each with up to 64 rollouts, was kept outside it)."""
        self.store.memo.put(("scan", run.id), entry, approx_nbytes(entry))

    def entry(self, sid) -> dict[str, Any] | None:
        run = run_of(sid)
        return self.store.memo.get(("scan", run.id)) if run is not None else None

    def results(self, sid, cause: str | None, view: str = PER_TURN) -> list:
        """[table, cause plot] of scan ``sid`` (the session's run), its rows filtered by ``cause`` (or drifted ones),
        one per turn or (``view`` PER_ROLLOUT) one per rollout, worst first, with the trainer that ran on it."""
        return self.table_of(self.entry(sid), cause, view)

    @staticmethod
    def table_of(entry: dict[str, Any] | None, cause: str | None, view: str = PER_TURN) -> list:
        if entry is None:
            return [pd.DataFrame(columns=SCAN_COLUMNS), plots.drift_cause_figure({})]
        res = entry["result"]
        c = None if cause in (None, "", ALL, DRIFTED) else cause
        if view == PER_ROLLOUT:
            rows = rollup_rows(res, entry.get("trainers"), cause=c, drifted_only=cause == DRIFTED)
            return [pd.DataFrame(rows, columns=ROLLUP_COLUMNS), plots.drift_cause_figure(res, c)]
        rows = scan_table(res, cause=c, drifted_only=cause == DRIFTED)
        return [pd.DataFrame(rows, columns=SCAN_COLUMNS), plots.drift_cause_figure(res, c)]

    def run_scan(self, sid, what: str, folder_text: str, hub_text: str, n, key: str | None,
                 cause: str | None, engine: str = "local", view: str = PER_TURN, progress=gr.Progress()):
        """[scan run, summary HTML, table, cause plot, rollout plot] of a scan of ``what`` (a SCOPES entry)."""
        settings, store = self.settings, self.store
        run = run_of(sid)
        if run is None or run.done:  # called without the Scan button's first step (an API call)
            run = self.new_scan()
        sid, cancel = run, run.cancel
        entry: dict[str, Any] = {"keys": {}, "kept": {}, "trainers": {}}
        keep, trainer_of = keep_unpathed(entry), trainer_hook(entry["trainers"])
        seen = lambda r: (keep(r), trainer_of(r))  # noqa: E731  (rows to reopen; each rollout's trainer)
        lim = int(n) if n not in (None, "") and int(n) > 0 else None
        # 0 / blank means "every row": on a public app, never more than the rows_scanned budget
        budget = limits(settings.public_mode()).rows_scanned
        capped = bool(settings.public_mode() and budget and (lim is None or lim > budget))
        if capped:
            lim = int(budget)

        def prog(done: int, total: int | None) -> None:
            if total:
                progress((done, total), desc="scanning rollouts", unit="rollouts")
            else:
                progress(0.0, desc=f"scanned {done} rollouts")

        def fail(message: str) -> list:
            return [sid, render.notice_html(message, "error"), pd.DataFrame(columns=SCAN_COLUMNS),
                    plots.drift_cause_figure({}), plots.drift_rollout_figure({})]

        try:
            if what == "folder of captures":
                try:
                    p = local_path(folder_text or ".", settings)
                except ValueError as e:
                    return fail(str(e))
                if engine == "ray":  # blocks scanned by Ray actors; totals as the local engine's
                    res = scan_with_ray(p, settings, limit=lim, progress=prog, cancel=cancel, sweep=DEFAULT_SWEEP)
                else:  # rows of data files in the folder have no path of their own: kept to reopen
                    res = scan_source(p, settings, limit=lim, progress=prog, cancel=cancel,
                                      on_rollout=seen, sweep=DEFAULT_SWEEP)
            elif what == "Hub dataset":
                spec = (hub_text or "").strip()
                if not spec.startswith("hf://"):
                    return fail("Give a Hub dataset as hf://datasets/OWNER/NAME.")
                if engine == "ray":
                    res = scan_with_ray(spec, settings, limit=lim, progress=prog, cancel=cancel, sweep=DEFAULT_SWEEP)
                else:
                    res = scan_source(spec, settings, limit=lim, progress=prog, cancel=cancel,
                                      on_rollout=seen, sweep=DEFAULT_SWEEP)
            else:
                op = store.get(key)
                if op is None:
                    return fail("Open a rollout first (or scan a folder of captures).")
                entry["keys"][op.rollout.source] = op.key
                trainer_of(op.rollout)
                res = scan_source(op.rollout, settings, tok=op.choice.tokenizer, tok_name=op.choice.name,
                                  progress=prog, cancel=cancel, sweep=DEFAULT_SWEEP, whatifs=True)
                if op.choice.tokenizer is None:
                    res["tokenizer_note"] = op.choice.message
        except ScanInputError as e:
            return fail(e.message)
        except SourceError as e:
            return fail(e.message)
        finally:
            run.finish()
        entry["result"] = res = _shown_scan(res, entry, settings)  # public: names without server paths
        self.keep(run, entry)
        notes = [f"tokenizer: {res.get('tokenizer') or 'none (round trip and re-render unchecked)'}"]
        if res["errors"]:
            notes.append(f"{len(res['errors'])} unreadable: " + "; ".join(
                f"{e['source']}: {e['error']}" for e in res["errors"][:5]))
        if capped:
            notes.append(f"at most {lim:,} rows on this public app (budget rows_scanned)")
        if res["totals"].get("cancelled"):
            notes.append("cancelled: partial results")
        df, fig = self.table_of(entry, cause, view)  # this answer's table even if the cache could not keep it
        return [sid, render.drift_scan_html(res, " · ".join(notes)), df, fig, plots.drift_rollout_figure(res)]

    def costs(self, sid) -> list:
        """[gradient-cost HTML, sweep figure] of scan ``sid`` (summed over its rollouts)."""
        entry = self.entry(sid)
        g = entry["result"].get("gradient") if entry is not None else None
        if g is None:
            return [gr.skip(), gr.skip()]
        n = entry["result"]["totals"].get("rollouts", 0)
        return [render.gradient_cost_html(g, f"scan of {n} rollout(s)"), plots.gradient_sweep_figure(g)]

    @staticmethod
    def cancel_scan(sid) -> str:
        run = run_of(sid)
        if run is None or not run.stop():
            return render.notice_html("No scan running.")
        return render.notice_html("Cancelling: the scan stops after the current chunk.")

    @rescores.as_visitor
    def on_pick(self, sid: str | None, view, evt: gr.SelectData):
        """A click on a scan table row: open its rollout at its turn on the Tokens tab."""
        row = evt.row_value if evt is not None else None
        skip = [gr.skip()] * (len(self.browse.outputs) + 1)
        entry = self.entry(sid)
        if not row or entry is None:
            return skip
        # a per-rollout row names no turn (its second column is the trainer): the rollout opens at its first
        name, turn = str(row[0]), (int(row[1]) if str(row[1]).lstrip("-").isdigit() else None)
        try:
            op = open_scanned(entry, name, self.store, self.settings)
        except (ValueError, SourceError) as e:
            gr.Warning(f"Cannot open {name}: {e}")
            return skip
        if op is None:
            gr.Warning(f"{name} is no longer open: scan again.")
            return skip
        return self.browse.show_fn(op, turn, note="Opened from the drift scan" + (f": turn {turn}." if turn is not None
                                                                                    else ".")) + [
            gr.Tabs(selected="tokens")]
