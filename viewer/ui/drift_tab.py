"""The Drift screen: per-turn drift of the open rollout, trainer rows, repro export, dataset scan.

Follows the browse screen's selected turn (``browse.turn`` / ``browse.key``). Handlers
are thin: :func:`viewer.drift.turn_report` and :func:`viewer.drift.corpus.scan_source` do
the work, :mod:`viewer.render` builds every string of HTML, :mod:`viewer.plots` the figures.
"""
from __future__ import annotations

import json
import re
import tempfile
import threading
import uuid
from collections import OrderedDict
from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd

from .. import plots, render
from ..budgets import limits
from ..config import Settings
from ..drift import CAUSES, MODES, TRAIN_TURNS, choose_spec, turn_report
from ..drift.ray_engine import ray_available, scan_with_ray
from ..drift.corpus import ScanInputError, scan_source
from ..drift.results import SCAN_COLUMNS, scan_table
from ..sources import SourceError
from ..visitor import local_path
from .browse import TOKEN_VIEW_JS, TOKEN_VIEW_TEMPLATE

__all__ = ["build", "SCOPES"]

SCOPES = ["open rollout", "folder of captures", "Hub dataset"]
ALL, DRIFTED = "(all turns)", "(drifted turns)"
_KEEP_UNPATHED = 64  # rollouts without a path of their own (Hub, data-file rows) kept per scan to reopen
_SCAN_CACHE = 8          # finished scans kept (per server) for filtering and jumping


class _LRU(OrderedDict):
    def __init__(self, size: int):
        super().__init__()
        self.size = size
        self.lock = threading.Lock()

    def put(self, key, value) -> None:
        with self.lock:
            self[key] = value
            self.move_to_end(key)
            while len(self) > self.size:
                self.popitem(last=False)

    def peek(self, key):
        with self.lock:
            return self.get(key)


_SCANS = _LRU(_SCAN_CACHE)
_CANCEL: dict[str, threading.Event] = {}


AUTO = "auto (what the source supports)"
TRAINERS = [AUTO, *MODES]


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


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._")[-60:] or "rollout"


def build(settings: Settings, store, browse) -> None:
    """Create this screen's components inside the current gr.Tab and wire its events."""
    with gr.Row(equal_height=True, elem_id="drift-controls"):
        turn_box = gr.Number(label="turn", precision=0, elem_id="drift-turn", min_width=80, scale=1)
        refresh = gr.Button("Refresh", size="sm", elem_id="drift-refresh", min_width=80, scale=1)
        repro_btn = gr.Button("Export repro JSON", size="sm", elem_id="drift-repro-btn", min_width=120, scale=1)
        gr.HTML('<div class="ri-note">Follows the turn selected under Tokens. Repro: one small JSON per drift case '
                "(ids around the break, text, tokenizer, chat-template hash, cause) to attach to a bug report.</div>",
                scale=4)
    repro_files = gr.File(label="Repro files: one JSON per drift case", file_count="multiple",
                          interactive=False, elem_id="drift-repro", height=90)
    drift_view = gr.HTML(render.drift_empty_html("Open a rollout and pick a turn: its drift shows here."),
                         elem_id="drift-view")
    with gr.Group():
        with gr.Row(equal_height=True):
            trainer_pick = gr.Dropdown(TRAINERS, value=AUTO, label="Trainer (whose rows)", elem_id="drift-trainer",
                                       interactive=True, scale=2)
            turns_pick = gr.Radio(list(TRAIN_TURNS)[::-1], value="tool-calls", label="Train turns (used only when the trainer is trl-message)",
                                  elem_id="drift-train-turns", scale=2)
            row_pick = gr.Dropdown([], label="Trainer row as a token view (green = mask 1, gets a gradient)",
                                   elem_id="drift-row-pick", interactive=True, scale=3)
        row_view = gr.HTML("", html_template=TOKEN_VIEW_TEMPLATE, js_on_load=TOKEN_VIEW_JS,
                           elem_id="drift-row-view", apply_default_css=False)

    with gr.Accordion("Dataset scan", open=True, elem_id="drift-scan-panel"):
        with gr.Row(equal_height=True):
            scope = gr.Radio(SCOPES, value=SCOPES[0], label="Scan", elem_id="drift-scan-scope", scale=2)
            folder = gr.Textbox(label=f"Folder of captures inside {settings.data_root}", placeholder=".",
                                elem_id="drift-scan-path", scale=3)
            hub = gr.Textbox(label="Hub dataset", placeholder="hf://datasets/OWNER/NAME", elem_id="drift-scan-hub",
                             scale=3)
            limit = gr.Number(label="row limit", value=200, precision=0, minimum=1, elem_id="drift-scan-limit",
                              scale=1, min_width=90)
            # Ray Data (viewer.drift.ray_engine): offered when the optional extra is installed
            engine = gr.Radio(["local", "ray"], value="local", label="Engine", elem_id="drift-scan-engine", scale=1,
                              visible=ray_available() is None, min_width=120)
        with gr.Row():
            scan_btn = gr.Button("Scan", variant="primary", elem_id="drift-scan")
            cancel_btn = gr.Button("Cancel", variant="stop", elem_id="drift-cancel")
        scan_summary = gr.HTML("", elem_id="drift-scan-summary")
        cause_f = gr.Dropdown([ALL, DRIFTED, *CAUSES], value=ALL, label="filter by cause (click a row to open it)",
                              elem_id="drift-cause-filter")
        table = gr.Dataframe(headers=SCAN_COLUMNS, interactive=False, elem_id="drift-scan-table", max_height=320,
                             wrap=False)
        with gr.Row():
            cause_plot = gr.Plot(elem_id="drift-cause-plot", show_label=False)
            rollout_plot = gr.Plot(elem_id="drift-rollout-plot", show_label=False)
    scan_id = gr.State(None)

    # ---- per turn -------------------------------------------------------------------
    def rows_of(rep) -> list[tuple[str, Any]]:
        return render.trainer_rows(rep.trainer.rows)

    def row_payload(op, rep, label: str | None) -> str:
        return store.derived(op.key, ("drift-row", rep.turn.index, rep.trainer.spec, label),
                             lambda: make_row_payload(op, rep, label))

    def make_row_payload(op, rep, label: str | None) -> str:
        rows = rows_of(rep)
        if not rows:
            return ""
        by_label = dict(rows)
        row = by_label.get(label) if label else None
        if row is None:  # default: the row holding this turn's output
            row = next((r for _, r in rows if any(s.turn == rep.turn.index for s in r.spans)), rows[0][1])
            label = next(lab for lab, r in rows if r is row)
        return render.row_view_payload(row, op.table, turn=rep.turn.index, label=label, low=settings.low_logprob,
                                       context_tail=settings.context_tail, page_tokens=settings.page_tokens)

    def show(key: str | None, index, trainer: str | None = AUTO, train_turns: str | None = "tool-calls") -> list:
        got = None
        try:
            got = _report(store, key, index, trainer, train_turns)
        except KeyError:
            pass
        except Exception as e:  # an analysis bug on odd data: say so, keep the app alive
            return [gr.skip(), render.drift_empty_html(f"Drift check failed: {type(e).__name__}: {e}"),
                    gr.Dropdown(choices=[], value=None), ""]
        if got is None:
            return [gr.skip(), render.drift_empty_html("Open a rollout and pick a turn: its drift shows here."),
                    gr.Dropdown(choices=[], value=None), ""]
        op, rep = got
        html = store.derived(op.key, ("drift-html", rep.turn.index, rep.trainer.spec),
                             lambda: render.drift_turn_html(rep, op.table, "" if op.choice.ok else op.choice.message))
        rows = rows_of(rep)
        labels = [lab for lab, _ in rows]
        default = next((lab for lab, r in rows if any(s.turn == rep.turn.index for s in r.spans)),
                       labels[0] if labels else None)
        return [rep.turn.index, html, gr.Dropdown(choices=labels, value=default), row_payload(op, rep, default)]

    def on_row(key: str | None, index, label: str | None, trainer: str | None = AUTO,
               train_turns: str | None = "tool-calls") -> str:
        got = (_report(store, key, index, trainer, train_turns)
               if store.get(key) is not None and index is not None else None)
        if got is None:
            return ""
        return row_payload(*got, label)

    def export(key: str | None, index) -> list[str] | None:
        try:
            got = _report(store, key, index)
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
        out = Path(tempfile.mkdtemp(prefix="ri-repro-"))
        stem = _safe_name(Path(str(op.rollout.source)).name)
        paths = []
        for kind, doc in cases.items():
            p = out / f"{stem}-turn{rep.turn.index}-{kind}-{_safe_name(str(doc.get('cause') or 'unknown'))}.json"
            p.write_text(json.dumps(doc, indent=1, ensure_ascii=False))
            paths.append(str(p))
        return paths

    def jump_turn(key: str | None, index):
        if store.get(key) is None or index is None:
            return [gr.skip()] * len(browse.turn_outputs)
        return browse.select_fn(key, index)

    view_outputs = [turn_box, drift_view, row_pick, row_view]
    # Drift checks cost a full decode/encode and template render of the turn: compute them
    # only while this tab is on screen (and when it is opened), not on every turn change.
    visible = gr.State(False)

    def on_tab(key, index, trainer, train_turns, evt: gr.SelectData):
        on = evt is not None and str(evt.value) == "Drift"
        return [on] + (show(key, index, trainer, train_turns) if on else [gr.skip()] * len(view_outputs))

    def follow(on: bool, key, index, trainer, train_turns):
        return show(key, index, trainer, train_turns) if on else [gr.skip()] * len(view_outputs)

    pick = [trainer_pick, turns_pick]
    fast = browse.fast  # one turn's checks, cached for every visitor: browsing, not long work
    refresh.click(show, [browse.key, browse.turn, *pick], view_outputs, api_name="drift_turn", **fast)
    browse.tabs.select(on_tab, [browse.key, browse.turn, *pick], [visible] + view_outputs, api_visibility="private",
                       show_progress="hidden", **fast)
    for comp in (browse.turn, browse.key, trainer_pick, turns_pick):
        comp.change(follow, [visible, browse.key, browse.turn, *pick], view_outputs, api_visibility="private",
                    show_progress="hidden", **fast)
    row_pick.input(on_row, [browse.key, browse.turn, row_pick, *pick], row_view, api_name="drift_row", **fast)
    repro_btn.click(export, [browse.key, browse.turn], repro_files, api_name="drift_repro", **fast)
    turn_box.submit(jump_turn, [browse.key, turn_box], browse.turn_outputs, api_name="drift_select_turn",
                    **browse.shows)

    # ---- dataset scan ------------------------------------------------------------------
    def new_scan() -> str:
        sid = uuid.uuid4().hex[:12]
        _CANCEL[sid] = threading.Event()
        while len(_CANCEL) > 64:
            _CANCEL.pop(next(iter(_CANCEL)))
        return sid

    def results(sid: str | None, cause: str | None) -> list:
        entry = _SCANS.peek(sid) if sid else None
        if entry is None:
            return [pd.DataFrame(columns=SCAN_COLUMNS), plots.drift_cause_figure({})]
        res = entry["result"]
        c = None if cause in (None, "", ALL, DRIFTED) else cause
        rows = scan_table(res, cause=c, drifted_only=cause == DRIFTED)
        return [pd.DataFrame(rows, columns=SCAN_COLUMNS), plots.drift_cause_figure(res, c)]

    def run_scan(sid: str | None, what: str, folder_text: str, hub_text: str, n, key: str | None, cause: str | None,
                 engine: str = "local", progress=gr.Progress()):
        sid = sid or new_scan()
        cancel = _CANCEL.setdefault(sid, threading.Event())
        entry: dict[str, Any] = {"keys": {}, "kept": {}}
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
                    res = scan_with_ray(p, settings, limit=lim, progress=prog, cancel=cancel)
                else:  # rows of data files in the folder have no path of their own: kept to reopen
                    res = scan_source(p, settings, limit=lim, progress=prog, cancel=cancel,
                                      on_rollout=keep_unpathed(entry))
            elif what == "Hub dataset":
                spec = (hub_text or "").strip()
                if not spec.startswith("hf://"):
                    return fail("Give a Hub dataset as hf://datasets/OWNER/NAME.")
                if engine == "ray":
                    res = scan_with_ray(spec, settings, limit=lim, progress=prog, cancel=cancel)
                else:
                    res = scan_source(spec, settings, limit=lim, progress=prog, cancel=cancel,
                                      on_rollout=keep_unpathed(entry))
            else:
                op = store.get(key)
                if op is None:
                    return fail("Open a rollout first (or scan a folder of captures).")
                entry["keys"][op.rollout.source] = op.key
                res = scan_source(op.rollout, settings, tok=op.choice.tokenizer, tok_name=op.choice.name,
                                  progress=prog, cancel=cancel)
                if op.choice.tokenizer is None:
                    res["tokenizer_note"] = op.choice.message
        except ScanInputError as e:
            return fail(e.message)
        except SourceError as e:
            return fail(e.message)
        finally:
            _CANCEL.pop(sid, None)
        entry["result"] = res
        _SCANS.put(sid, entry)
        notes = [f"tokenizer: {res.get('tokenizer') or 'none (round trip and re-render unchecked)'}"]
        if res["errors"]:
            notes.append(f"{len(res['errors'])} unreadable: " + "; ".join(
                f"{e['source']}: {e['error']}" for e in res["errors"][:5]))
        if capped:
            notes.append(f"at most {lim:,} rows on this public app (budget rows_scanned)")
        if res["totals"].get("cancelled"):
            notes.append("cancelled: partial results")
        df, fig = results(sid, cause)
        return [sid, render.drift_scan_html(res, " · ".join(notes)), df, fig, plots.drift_rollout_figure(res)]

    def cancel_scan(sid: str | None) -> str:
        ev = _CANCEL.get(sid) if sid else None
        if ev is None:
            return render.notice_html("No scan running.")
        ev.set()
        return render.notice_html("Cancelling: the scan stops after the current chunk.")

    def on_pick(sid: str | None, evt: gr.SelectData):
        row = evt.row_value if evt is not None else None
        skip = [gr.skip()] * (len(browse.outputs) + 1)
        entry = _SCANS.peek(sid) if sid else None
        if not row or entry is None:
            return skip
        name, turn = str(row[0]), int(row[1])
        try:
            op = open_scanned(entry, name, store, settings)
        except (ValueError, SourceError) as e:
            gr.Warning(f"Cannot open {name}: {e}")
            return skip
        if op is None:
            gr.Warning(f"{name} is no longer open: scan again.")
            return skip
        return browse.show_fn(op, turn, note=f"Opened from the drift scan: turn {turn}.") + [gr.Tabs(selected="tokens")]

    scan_btn.click(new_scan, None, scan_id, api_visibility="private", queue=False).then(
        run_scan, [scan_id, scope, folder, hub, limit, browse.key, cause_f, engine],
        [scan_id, scan_summary, table, cause_plot, rollout_plot], api_name="drift_scan",
        # Long work: its own queue, one scan at a time on this machine's cores, so scans never
        # hold up browsing; a visitor who waits sees their place in it (show_progress="full").
        concurrency_id="long-work", concurrency_limit=1, show_progress="full")
    cancel_btn.click(cancel_scan, [scan_id], scan_summary, api_name="drift_cancel", queue=False)
    cause_f.change(results, [scan_id, cause_f], [table, cause_plot], api_name="drift_filter")
    table.select(on_pick, [scan_id], browse.outputs + [browse.tabs], api_visibility="private", **browse.shows)
