"""The browse screen: open a source, pick a turn, see its tokens, plots, conversation, task.

This module lays the screen out and wires its events; what each event does is a named
method of :class:`viewer.ui.browse_handlers.Handlers` (testable without a page), or of
:class:`BrowseHandlers` here: a turn's token view, ◀ / ▶ and the turn list's filters. Errors
become a visible notice; the app keeps working.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import gradio as gr
import pandas as pd

from .. import render
from ..config import Settings
from ..memo import need_work
from ..row_browser import ROW_COLUMNS
from ..render.shell import first_steps_html
from ..views import TURN_COLUMNS, turn_table, turn_view
from . import rescores
from .browse_handlers import FILTERS, PROBLEMS, ROWS, STATUS, TOOLS, Handlers, Slots, wire
from .opening import dataset_link, link_spec
from .opening import list_samples, sample_choices
from .staged import resolve, staged
from .store import Opened, RolloutStore
from .token_view import token_view

__all__ = ["Browse", "BrowseHandlers", "build", "wire", "wire_turn_followers", "dataset_link", "link_spec"]



@dataclass
class Browse:
    """Components other screens (drift, capture) need to drive the browser."""

    key: gr.State  # store key of the open rollout (see RolloutStore)
    turn: gr.State  # index of the selected turn
    tabs: gr.Tabs  # re-enter with `with browse.tabs:` to add a screen
    outputs: list[gr.components.Component]  # what open_fn / show_fn return values for
    open_fn: Any  # (spec, index=None, focus=None, mode="mask") -> values for outputs
    show_fn: Any  # (Opened, index=None, note="") -> values for outputs
    turn_outputs: list[gr.components.Component]  # what select_fn returns values for
    select_fn: Any  # (key, index, mode="mask") -> values for turn_outputs
    under_tokens: gr.Column  # re-enter with `with browse.under_tokens:` to add a panel right under the token view
    fast: dict  # concurrency kwargs of read-only browsing events (other screens' too)
    shows: dict  # the same, for events that output `outputs` / `turn_outputs` (pre-serialised values)
    open_staged: Any = None  # open_fn as a two-step async generator: tokens first, plots after (the page load uses it)
    view: Any = None  # gr.State: the visitor's own view settings (the IS mode and bounds: viewer/ui/rescores.py)
    followers: list = field(default_factory=list)  # panels that follow the selected turn (follow_turn)
    filters: list = field(default_factory=list)  # the turn list's filters: trained box, low box, threshold, tool
    handlers: Any = None  # BrowseHandlers (a followed source lists its new turns through the visitor's filters)

    def follow_turn(self, shown_js: str, fn, inputs: list, outputs: list, with_request: bool = False) -> None:
        """Run ``fn(*inputs) -> values for outputs`` (``request=`` the visitor's, if ``with_request``) when
        the selected turn changes while ``shown_js`` (a JavaScript expression) is true in the page: the
        panel is on screen. Every panel's follow-up goes in one event, sent only when one of them is
        shown (see wire_turn_followers)."""
        self.followers.append((shown_js, fn, list(inputs), list(outputs), with_request))


class BrowseHandlers(Handlers):
    """The handlers, with the token view's payload of one turn (shared by every session on the rollout), the
    steps through the turns the list shows and its filters."""

    def turn_parts(self, op: Opened, index: int, focus, mode: str, choice=rescores.DEFAULT_CHOICE) -> tuple:
        settings = self.settings
        tv = turn_view(op.rollout, index, op.choice.tokenizer, op.table)
        if op.link:
            link = f"{op.link}&{urlencode({'turn': index})}"
        else:
            spec = link_spec(op.path, settings)
            link = urlencode({"source": spec, "turn": index}) if spec else ""
        n = len(tv.tokens.ids)  # a rescore of this rollout adds the Δ colour mode (viewer/ui/rescore_panel.py)
        delta = render.turn_delta(rescores.seen(op.key, choice), index, tv.tokens.prompt_len, n)
        payload = render.token_view_payload(tv.turn, tv.tokens, render.ViewOptions.from_settings(
            settings, focus=focus, mode=mode, note=tv.note, link=link), delta=delta)
        return payload, render.conversation_html(tv.turn)

    # --- ◀ / ▶ and the turn list's filters ------------------------------------------------------------
    def on_step(self, k: str | None, index, step: int, trained: bool = False, low: bool = False,
                tool: str | None = None, at=None) -> list:
        """The next (step +1) or previous (-1) turn among those the turn list shows (its filters);
        at either end the turn stays and a message says so."""
        op = self.store.get(k)
        if op is None:
            return self.skip_turn()
        filtered = bool(trained or low or tool not in (None, "", "(any)"))
        if filtered:
            need_work()  # the filtered turn table is made per press (a pass over every turn): not on the event loop
        order = ([int(t) for t in self.listed(op, trained, low, at, tool)["turn"]] if filtered
                 else [t.index for t in op.rollout.turns])
        here = float(index) if isinstance(index, (int, float)) else None  # the number box sends a float
        if here is None:  # nothing selected yet: the first (or last) listed turn
            target = (order[0] if step > 0 else order[-1]) if order else None
        else:
            ahead = [t for t in order if (t > here if step > 0 else t < here)]
            target = (ahead[0] if step > 0 else ahead[-1]) if ahead else None
        if target is None:
            which = "trained or filtered " if filtered else ""
            gr.Info(f"Already at the {'last' if step > 0 else 'first'} {which}turn." if order
                    else "No turn matches the filters.")
            return self.skip_turn()
        return self.turn_values(op, target)

    @rescores.as_visitor
    def on_prev(self, k: str | None, index, trained=False, low=False, tool: str | None = None, at=None,
                view=None) -> list:
        return self.on_step(k, index, -1, trained, low, tool, at)

    @rescores.as_visitor
    def on_next(self, k: str | None, index, trained=False, low=False, tool: str | None = None, at=None,
                view=None) -> list:
        return self.on_step(k, index, +1, trained, low, tool, at)

    # --- the turn list's filters ------------------------------------------------------------------
    def low_at(self, value) -> float:
        """The low-logprob threshold typed in the box; the setting's (config.LOW_LOGPROB unless set) when the
        box holds no finite number (emptied, or an API client's text)."""
        try:
            v = float(value)
        except (TypeError, ValueError):
            return self.settings.low_logprob
        return v if math.isfinite(v) else self.settings.low_logprob

    def listed(self, op: Opened, trained=False, low=False, at=None, tool: str | None = None) -> pd.DataFrame:
        """The turn list as the filters leave it."""
        return turn_table(op.rollout, trained_only=bool(trained), low_only=bool(low), low=self.low_at(at),
                          tool=None if tool in (None, "", "(any)") else str(tool))

    @rescores.as_visitor
    def on_filter(self, k: str | None, trained=False, low=False, at=None, tool: str | None = None, index=None,
                  view=None) -> list:
        """Values for [turn list, its note] + the turn's outputs. The note says what the filters leave (and how
        to clear them); a turn on screen that they hide is replaced by the first one listed, and the note
        says so: the token view never shows a turn the list hides while it lists one (issue 41, point 6)."""
        op = self.store.get(k)
        if op is None:
            return [gr.skip()] * (2 + len(self.slots.turn_outputs))
        df = self.listed(op, trained, low, at, tool)
        shown, total = [int(t) for t in df["turn"]], len(op.rollout.turns)
        here = int(index) if isinstance(index, (int, float)) and math.isfinite(index) else None
        here = here if any(t.index == here for t in op.rollout.turns) else None  # a turn on screen, or none
        turn, said = self.skip_turn(), ""
        if len(shown) == total:
            pass  # nothing hidden: no note
        elif not shown:
            kept = f" The token view still shows turn {here}." if here is not None else ""
            said = f"No turns match {self.filters_said(trained, low, at, tool)}.{kept} Press clear filters to list " \
                   f"all {total} turns."
        else:
            said = f"{len(shown)} of {total} turns match {self.filters_said(trained, low, at, tool)} " \
                   "(clear filters lists all)."
            if here is not None and here not in shown:
                turn = resolve(self.turn_values(op, shown[0]))
                said = f"Turn {here} is hidden by the filters: showing turn {shown[0]}, the first listed. {said}"
        return [wire(self.slots.table, df), render.notice_html(said) if said else ""] + turn

    def on_threshold(self, k: str | None, trained=False, low=False, at=None, tool: str | None = None, index=None,
                     view=None) -> list:
        """The threshold typed (Enter, or the box left): it changes the list only while its box is ticked."""
        if not low:
            return [gr.skip()] * (2 + len(self.slots.turn_outputs))
        return self.on_filter(k, trained, low, at, tool, index, view)

    def filters_said(self, trained, low, at, tool) -> str:
        parts = (["trained turns only"] if trained else []) + \
            ([f"a token below {self.low_at(at):g}"] if low else []) + \
            ([f"tool called {tool}"] if tool not in (None, "", "(any)") else [])
        return " + ".join(parts) or "the filters"

    def on_clear(self, k: str | None) -> list:
        """Values for [trained box, low box, tool filter, turn list, its note]: every filter off, every turn listed."""
        op = self.store.get(k)
        table = (self.store.derived(op.key, ("rollout",), lambda: self.rollout_parts(op))[1] if op is not None
                 else gr.skip())
        return [False, False, "(any)", table, ""]


def build(settings: Settings, store: RolloutStore) -> Browse:
    samples = list_samples()
    default_sample = Path(settings.sample).name if Path(settings.sample).name in samples else (samples[0] if samples else None)

    key = gr.State(None)
    turn = gr.State(None)
    view_settings = gr.State(None)  # this visitor's view settings (rescores.view_value), never shared with another
    with gr.Row(equal_height=False, elem_id="browse-top"):
        with gr.Column(scale=4):
            header = gr.HTML(render.notice_html("Open a rollout: pick a sample, type a path, or upload files."),
                             elem_id="rollout-header")
            status = gr.HTML("", elem_id="status")
        with gr.Column(scale=2, min_width=320):
            with gr.Accordion("Open a rollout", open=False, elem_id="open-panel"):
                sample = gr.Dropdown(sample_choices(), value=default_sample, label="Bundled sample", elem_id="sample-picker")
                with gr.Row():
                    path = gr.Textbox(label=f"Path inside {settings.data_root}", placeholder="capture folder or trace.json",
                                      elem_id="path-box", scale=4)
                    load_btn = gr.Button("Load", elem_id="load-path", scale=1, min_width=60)
                upload = gr.File(label="Upload capture files or a .zip", file_count="multiple",
                                 file_types=[".json", ".jsonl", ".txt", ".zip"], elem_id="upload")
                with gr.Row():
                    tok_box = gr.Textbox(label="Tokenizer override", placeholder="qwen3, a folder, or a Hub name (online)",
                                         elem_id="tokenizer-box", scale=4)
                    tok_btn = gr.Button("Apply", scale=1, min_width=60)
            # the first-steps line beside the header, under the closed Open panel, in the column's free room:
            # under the header it pushed the tokens below a 900 px tall window (issue 41, point 10)
            gr.HTML(first_steps_html(), elem_id="first-steps")

    # "wrap": every tab's name stays on screen (two rows if need be); Gradio's default hid the ones past the
    # window's width behind "…" (at 1024 px: Capture, Template; issue 41, point 10)
    with gr.Tabs(elem_id="main-tabs", overflow_behavior="wrap") as tabs:
        with gr.Tab("Tokens", id="tokens"):
            with gr.Row(equal_height=True, elem_id="turn-controls"):
                trained_only = gr.Checkbox(label="trained turns only", value=False, elem_id="f-trained", min_width=120)
                low_only = gr.Checkbox(label="has a token below", value=False, elem_id="f-low", min_width=120)
                # the threshold is the user's (issue 41, point 6); it starts at the setting (config.LOW_LOGPROB)
                low_at = gr.Number(settings.low_logprob, label="logprob threshold", elem_id="f-low-at", step=0.1,
                                   min_width=90)
                tool_f = gr.Dropdown(["(any)"], value="(any)", label="tool called", elem_id="f-tool", min_width=120)
                clear_btn = gr.Button("clear filters", size="sm", elem_id="f-clear", min_width=80)
                prev_btn = gr.Button("◀ prev turn", size="sm", elem_id="prev-turn", min_width=80)
                turn_no = gr.Number(label="turn", precision=0, elem_id="turn-number", min_width=80)
                next_btn = gr.Button("next turn ▶", size="sm", elem_id="next-turn", min_width=80)
            rows = gr.Dataframe(headers=ROW_COLUMNS, interactive=False, elem_id="source-rows", max_height=200,
                                wrap=False, visible=False)
            # what the filters leave ("No turns match …", a hidden turn replaced): empty while nothing is hidden
            filter_note = gr.HTML("", elem_id="turn-filter-note", padding=False)
            # no copy / fullscreen buttons: their row above the list cost the tokens their place on a 900 px screen
            table = gr.Dataframe(headers=TURN_COLUMNS, interactive=False, elem_id="turn-list",
                                 max_height=250, wrap=False, buttons=[])
            view = token_view("token-view")
            under_tokens = gr.Column()  # other screens' panels about these tokens (e.g. the rescore)
            lp_plot = gr.Plot(elem_id="logprob-plot", show_label=False)
            with gr.Row():
                turns_plot = gr.Plot(elem_id="turns-plot", show_label=False)
                hist_plot = gr.Plot(elem_id="histogram-plot", show_label=False)
        with gr.Tab("Conversation", id="conversation-tab"):
            convo = gr.HTML("", elem_id="conversation")
        with gr.Tab("Task & reward", id="task-tab"):
            task = gr.HTML("", elem_id="task")
        with gr.Tab("Problems", id="problems-tab"):
            problems = gr.HTML("", elem_id="problems")

    turn_outputs = [turn, turn_no, view, lp_plot, convo]
    outputs = [key, header, status, table, tool_f, turns_plot, hist_plot, task, problems, rows, sample,
               trained_only, low_only, filter_note] + turn_outputs
    assert outputs[STATUS] is status and outputs[PROBLEMS] is problems  # the failure's places (browse_handlers)
    assert outputs[FILTERS:FILTERS + 3] == [trained_only, low_only, filter_note]  # an open clears them
    assert outputs[TOOLS] is tool_f and outputs[ROWS] is rows  # the components whose props an open updates
    h = BrowseHandlers(settings, store, Slots(table, rows, lp_plot, turns_plot, hist_plot, outputs, turn_outputs))

    # Browsing only reads shared, cached values: many at once, in one concurrency group of
    # its own, so a long scan or capture (own groups, see drift_tab / capture_tab) never
    # holds it up and a room of visitors is not served one event at a time.
    fast = dict(concurrency_id="browse", concurrency_limit=settings.browse_concurrency)
    # Events that output what open_values / turn_values return: those values are already
    # serialised (see wire()), shared by every session, so Gradio must not postprocess them
    # again per event (a thread hop per output component, GIL hand-offs under load).
    shows = dict(fast, postprocess=False)
    defer = settings.plot_defer_s  # tokens first, plots this much later (viewer/ui/staged.py)
    # inline: an answer already in the shared cache is made on the event loop, without a thread
    # hand-off (a room on one link); only for handlers that look up before they do anything else
    # Opens hold one of their visitor's few slots (viewer/ui/fair.py, the session_events budget): one visitor's
    # re-parses cannot fill the browse group that everyone's opens share (issue 36, finding 5)
    fair = dict(share=int(settings.limits().session_events), busy=h.failure)
    # Every event that shows a turn takes the visitor's view settings (the last input: their IS choice for the
    # Δ marks, rescores.as_visitor); a State input is held on the server, so API clients send nothing for it.
    v = view_settings
    sample.input(staged(h.on_sample, defer, inline=True, **fair), [sample, tok_box, v], outputs,
                 api_name="open_sample", **shows)
    load_btn.click(staged(h.on_path, defer, inline=True, **fair), [path, tok_box, v], outputs, api_name="open_path",
                   **shows)
    path.submit(staged(h.on_path, defer, inline=True, **fair), [path, tok_box, v], outputs, api_visibility="private",
                **shows)
    upload.upload(staged(h.on_upload, defer, **fair), [upload, tok_box, key, v], outputs, api_name="open_upload",
                  **shows)
    tok_btn.click(staged(h.on_tokenizer, defer, **fair), [key, tok_box, turn, v], outputs, api_name="set_tokenizer",
                  **shows)
    rows.select(staged(h.on_source_row, defer, **fair), [key, v], outputs, api_name="open_source_row",
                api_visibility="private", **shows)
    table.select(staged(h.on_table_select, defer, inline=True), [key, v], turn_outputs, api_visibility="private",
                 **shows)
    turn_no.submit(staged(h.on_turn_number, defer, inline=True), [key, turn_no, v], turn_outputs,
                   api_name="select_turn", **shows)
    # ← / → step from the turn number shown, not the turn State: a State is stored on the server
    # when a two-step answer ends, so a second press within the plots' wait read the old turn and
    # stepped from it (→ then ← landed on turn 0); the number box has the first step's value.
    steps = [key, turn_no, trained_only, low_only, tool_f, low_at, v]  # ← / → walk the turns the list shows
    # A second press while the first answer's plots are pending is queued, not dropped (Gradio's
    # default trigger_mode "once" ignored it: ◀ ◀ moved one turn).
    prev_btn.click(staged(h.on_prev, defer, inline=True), steps, turn_outputs, api_name="prev_turn",
                   api_visibility="private", trigger_mode="always_last", **shows)
    next_btn.click(staged(h.on_next, defer, inline=True), steps, turn_outputs, api_name="next_turn",
                   api_visibility="private", trigger_mode="always_last", **shows)
    # The user's own changes (.input, not .change): an open that clears the filters must not filter again.
    # The threshold applies on Enter or on leaving the box (not per keystroke: "-" is no number yet).
    filter_in, filter_out = [key, trained_only, low_only, low_at, tool_f, turn_no, v], [table, filter_note] + turn_outputs
    for trigger, fn, name in ((trained_only.input, h.on_filter, "filter_trained"), (low_only.input, h.on_filter, "filter_low"),
                              (tool_f.input, h.on_filter, "filter_tool"), (low_at.submit, h.on_threshold, "filter_low_at"),
                              (low_at.blur, h.on_threshold, "filter_low_at_left")):
        trigger(fn, filter_in, filter_out, api_name=name, api_visibility="private", **shows)
    clear_btn.click(h.on_clear, [key], [trained_only, low_only, tool_f, table, filter_note], api_name="clear_filters",
                    api_visibility="private", **shows)

    return Browse(key, turn, tabs, outputs, lambda *a, **k: resolve(h.deep_link(*a, **k)), h.show, turn_outputs,
                  lambda *a, **k: resolve(h.on_select_turn(*a, **k)), under_tokens, fast, shows,
                  open_staged=staged(h.deep_link, defer, generator=True, inline=True), view=view_settings,
                  filters=[trained_only, low_only, low_at, tool_f], handlers=h)


# The page asks for the panels' follow-up only when one is shown; the event is the carrier's click.
FOLLOW_JS = "window.addEventListener('ri-follow-turn', () => trigger('click'));"


def wire_turn_followers(b: Browse) -> None:
    """One event for every panel that follows the selected turn, sent only while one is on screen.

    Each listener of the turn State was a queue round trip of its own on every turn switch (HTTP join,
    SSE message, a worker slot), even when it answered "skip" because its panel was closed: a browser's
    switch sent five events (docs/SPEED.md, tests/test_room_browser.py). Now the turn's change runs a
    JavaScript check in the page; if a follower's panel is shown it triggers one event whose handler
    runs each follower (each still skips when the server says its panel is closed)."""
    if not b.followers:
        return
    carrier = gr.HTML("", js_on_load=FOLLOW_JS, elem_id="turn-follow", apply_default_css=False)
    inputs: list = []
    for _, _, ins, _, _ in b.followers:
        inputs += [c for c in ins if not any(c is x for x in inputs)]
    outputs = [c for f in b.followers for c in f[3]]
    where = [[next(i for i, x in enumerate(inputs) if x is c) for c in f[2]] for f in b.followers]

    def follow(request: gr.Request, *values):
        out: list = []
        for (_, fn, _, outs, with_request), at in zip(b.followers, where):
            got = fn(*(values[i] for i in at), **({"request": request} if with_request else {}))
            out += list(got) if len(outs) > 1 else [got]
        return out

    shown = " || ".join(f"({f[0]})" for f in b.followers)
    b.turn.change(None, None, None, js=f"() => {{ if ({shown}) window.dispatchEvent(new CustomEvent('ri-follow-turn')); }}",
                  api_name="turn_follow_check", api_visibility="private")
    # trigger_mode "always_last": Gradio's default for a click ("once") drops a trigger while the last
    # one is still pending, so after → → pressed quickly the panels followed the turn before the last
    # (the presenter never said "last turn", its drift marks were the turn before's). Deferred, the
    # trigger runs once the pending one ends, reading the turn shown then.
    carrier.click(follow, inputs, outputs, api_name="turn_follow", api_visibility="private", show_progress="hidden",
                  trigger_mode="always_last", **b.fast)
