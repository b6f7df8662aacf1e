"""The Drift screen: per-turn drift of the open rollout, trainer rows, repro export, dataset scan.

Follows the browse screen's selected turn (``browse.turn`` / ``browse.key``). This module lays
the components out and wires their events; the handlers are named methods in
:mod:`.drift_handlers` (:class:`TurnPanel`, :class:`ScanPanel`), thin too:
:func:`viewer.drift.turn_report` and :func:`viewer.drift.corpus.scan_source` do the work,
:mod:`viewer.render` builds every string of HTML, :mod:`viewer.plots` the figures.
"""
from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

from .. import render
from ..config import Settings
from ..drift import CAUSES, TRAIN_TURNS
from ..drift.ray_engine import ray_available
from ..drift.results import SCAN_COLUMNS
from ..render.glossary import TRAINERS_LINE
from .token_view import token_view
from .drift_handlers import (ALL, AUTO, DRIFTED, EMPTY, PER_ROLLOUT, PER_TURN, SCOPES, TRAINERS, ScanPanel, TurnPanel,
                             keep_unpathed, open_scanned)

__all__ = ["build", "SCOPES", "keep_unpathed", "open_scanned"]


SCAN_WIDTHS = (16, 4, 6, 6, 9, 5, 6, 9, 6, 9, 6, 5, 6, 7)  # % of the scan table per SCAN_COLUMNS entry


def build(settings: Settings, store, browse) -> SimpleNamespace:
    """Create this screen's components inside the current gr.Tab and wire its events."""
    with gr.Row(equal_height=True, elem_id="drift-controls"):
        turn_box = gr.Number(label="turn", precision=0, elem_id="drift-turn", min_width=80, scale=1)
        refresh = gr.Button("Refresh", size="sm", elem_id="drift-refresh", min_width=80, scale=1)
        repro_btn = gr.Button("Export repro JSON", size="sm", elem_id="drift-repro-btn", min_width=120, scale=1)
        gr.HTML(render.drift_note_html(), scale=4)
    repro_files = gr.File(label="Repro files: one JSON per drift case", file_count="multiple",
                          interactive=False, elem_id="drift-repro", height=90)
    drift_view = gr.HTML(render.drift_empty_html(EMPTY), elem_id="drift-view")
    with gr.Group():
        with gr.Row(equal_height=True):
            trainer_pick = gr.Dropdown(TRAINERS, value=AUTO, label="Trainer (whose rows)", elem_id="drift-trainer",
                                       interactive=True, scale=2, info=TRAINERS_LINE)  # the names explained
            turns_pick = gr.Radio(list(TRAIN_TURNS)[::-1], value="tool-calls", label="Train turns (used only when the trainer is trl-message)",
                                  elem_id="drift-train-turns", scale=2)
            row_pick = gr.Dropdown([], label="Trainer row as a token view (green = mask 1, gets a gradient)",
                                   elem_id="drift-row-pick", interactive=True, scale=3)
        row_view = token_view("drift-row-view")

    # what each cause costs (viewer.drift.costs): the open rollout's, replaced by a scan's once one runs
    with gr.Accordion("Gradient cost: tokens losing gradient by cause, fork-threshold sweep, what-ifs", open=True,
                      elem_id="drift-cost-panel"):
        sweep_plot = gr.Plot(elem_id="drift-sweep-plot", show_label=False)
        cost_html = gr.HTML(render.gradient_cost_html(None), elem_id="drift-cost")

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
            scan_btn = gr.Button("Scan", variant="primary", size="sm", elem_id="drift-scan", scale=0, min_width=120)
            cancel_btn = gr.Button("Cancel", variant="stop", size="sm", elem_id="drift-cancel", scale=0, min_width=120)
        scan_summary = gr.HTML("", elem_id="drift-scan-summary")
        with gr.Row(equal_height=True):
            cause_f = gr.Dropdown([ALL, DRIFTED, *CAUSES], value=ALL, label="filter by cause (click a row to open it)",
                                  elem_id="drift-cause-filter", scale=3)
            # issue 38: one row per rollout (worst first, the trainer named) beside one per turn
            view_pick = gr.Radio([PER_TURN, PER_ROLLOUT], value=PER_TURN, label="rows", elem_id="drift-scan-view",
                                 scale=1, min_width=200)
        assert len(SCAN_WIDTHS) == len(SCAN_COLUMNS), "one width per scan column"
        # 14 columns in the page's width: fixed shares (the rollout's name widest), long cells wrap
        table = gr.Dataframe(headers=SCAN_COLUMNS, interactive=False, elem_id="drift-scan-table", max_height=320,
                             wrap=True, column_widths=[f"{w}%" for w in SCAN_WIDTHS])
        with gr.Row():
            cause_plot = gr.Plot(elem_id="drift-cause-plot", show_label=False)
            rollout_plot = gr.Plot(elem_id="drift-rollout-plot", show_label=False)
    scan_id = gr.State(None)

    # ---- per turn -------------------------------------------------------------------
    tp = TurnPanel(settings, store, browse)
    view_outputs = [turn_box, drift_view, row_pick, row_view]
    # Drift checks run only while this tab is on screen (TurnPanel.on_tab / follow)
    visible = gr.State(False)
    pick = [trainer_pick, turns_pick]
    fast = browse.fast  # one turn's checks, cached for every visitor: browsing, not long work
    cost_outputs = [cost_html, sweep_plot]
    refresh.click(tp.show, [browse.key, browse.turn, *pick], view_outputs, api_name="drift_turn", **fast).then(
        tp.costs, [browse.key, *pick], cost_outputs, api_name="drift_costs", **fast)
    # trigger_mode "multiple": a tab picked while the last pick's answer is pending (Conversation, then Drift,
    # quickly) runs with its own tab name. Gradio's default for a select ("once") dropped it, and
    # "always_last" re-sends the pending pick's event data (the tab before): either way the Drift tab stayed empty
    browse.tabs.select(tp.on_tab, [browse.key, browse.turn, *pick], [visible] + view_outputs,
                       api_visibility="private", show_progress="hidden", trigger_mode="multiple", **fast).then(
        tp.costs_follow, [visible, browse.key, *pick], cost_outputs, api_visibility="private",
        show_progress="hidden", **fast)
    for comp in (browse.key, trainer_pick, turns_pick):  # the cost is per rollout and trainer, not per turn
        comp.change(tp.costs_follow, [visible, browse.key, *pick], cost_outputs, api_visibility="private",
                    show_progress="hidden", **fast)
    for comp in (browse.key, trainer_pick, turns_pick):
        comp.change(tp.follow, [visible, browse.key, browse.turn, *pick], view_outputs, api_visibility="private",
                    show_progress="hidden", **fast)
    # a turn switch asks for this turn's checks only while the tab is on screen (one event: browse.py)
    browse.follow_turn("!!document.querySelector('#drift-view')?.checkVisibility()", tp.follow,
                       [visible, browse.key, browse.turn, *pick], view_outputs)
    row_pick.input(tp.on_row, [browse.key, browse.turn, row_pick, *pick], row_view, api_name="drift_row", **fast)
    repro_btn.click(tp.export, [browse.key, browse.turn], repro_files, api_name="drift_repro", **fast)
    turn_box.submit(tp.jump_turn, [browse.key, turn_box, browse.view], browse.turn_outputs, api_name="drift_select_turn",
                    **browse.shows)
    # what a deck's drift step fills (viewer/ui/talk_panel.py): this turn's report and the gradient cost
    handle = SimpleNamespace(show=tp.show, outputs=view_outputs, costs=tp.costs, cost_outputs=cost_outputs)

    # ---- dataset scan ------------------------------------------------------------------
    sp = ScanPanel(settings, store, browse)
    scan_btn.click(sp.new_scan, None, scan_id, api_visibility="private", queue=False).then(
        sp.run_scan, [scan_id, scope, folder, hub, limit, browse.key, cause_f, engine, view_pick],
        [scan_id, scan_summary, table, cause_plot, rollout_plot], api_name="drift_scan",
        # Long work: its own queue, one scan at a time on this machine's cores, so scans never
        # hold up browsing; a visitor who waits sees their place in it (show_progress="full").
        concurrency_id="long-work", concurrency_limit=1, show_progress="full").then(
        sp.costs, [scan_id], cost_outputs, api_visibility="private", queue=False)
    cancel_btn.click(sp.cancel_scan, [scan_id], scan_summary, api_name="drift_cancel", queue=False)
    cause_f.change(sp.results, [scan_id, cause_f, view_pick], [table, cause_plot], api_name="drift_filter")
    view_pick.input(sp.results, [scan_id, cause_f, view_pick], [table, cause_plot], api_name="drift_view",
                    api_visibility="private")
    table.select(sp.on_pick, [scan_id, browse.view], browse.outputs + [browse.tabs], api_visibility="private",
                 **browse.shows)
    return handle
