"""The browse screen: open a source, pick a turn, see its tokens, plots, conversation, task.

Handlers are thin: they turn UI inputs into calls on viewer.views / render / plots and
put the results into components. Errors become a visible notice; the app keeps working.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import gradio as gr

from .. import plots, render
from ..budgets import BudgetExceeded
from ..config import SAMPLE_DIR, Settings
from ..sources import SourceError
from ..sources.keep import KEEP
from ..sources.upload import UPLOAD_PREFIX, UploadRefused, intake_files
from ..visitor import local_path
from ..views import TURN_COLUMNS, turn_table, turn_view
from . import rescores
from .opening import list_samples, open_spec
from .staged import Later, resolve, staged
from .store import Opened, RolloutStore

ASSETS = Path(__file__).parent / "assets"
TOKEN_VIEW_JS = (ASSETS / "token_view.js").read_text()
TOKEN_VIEW_TEMPLATE = ("<div class='ri-tv'><div class='ri-tv-bar'></div><div class='ri-tv-body' tabindex='0'></div>"
                       "<div class='ri-tip' hidden></div><div class='ri-tv-detail'></div></div>")


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
    open_staged: Any = None  # open_fn as a two-step generator: tokens first, plots after (the page load uses it)


def wire(component, value):
    """``value`` as ``component`` sends it (its postprocess, serialised). Values that show a
    rollout are made so once, in the shared cache, and the events that output them run with
    postprocess=False (``Browse.shows``); such an event's other outputs go through this too."""
    out = component.postprocess(value)
    return out.model_dump() if hasattr(out, "model_dump") else out


def dataset_link(label: str, row: int, settings: Settings) -> str:
    """Query string that reopens row ``row`` of a dataset (hf:// or a file in the data root), or ""."""
    if label.startswith("hf://"):
        return urlencode({"source": label, "row": row})
    spec = link_spec(Path(label), settings)
    return urlencode({"source": spec, "row": row}) if spec and not spec.startswith("sample:") else ""


def link_spec(path: Path, settings: Settings) -> str:
    """``sample:NAME`` or a data-root-relative path that ?source= accepts, or "" (not linkable)."""
    p = Path(path).resolve()
    if p.parent == SAMPLE_DIR.resolve():
        return f"sample:{p.name}"
    root = Path(settings.data_root).resolve()
    return str(p.relative_to(root)) if p.is_relative_to(root) else ""


def _default_turn(op: Opened) -> int | None:
    turns = op.rollout.turns
    for pick in (lambda t: t.kind == "agent" and t.trained, lambda t: t.kind == "agent", lambda t: True):
        for t in turns:
            if pick(t):
                return t.index
    return None


def build(settings: Settings, store: RolloutStore) -> Browse:
    samples = list_samples()
    default_sample = Path(settings.sample).name if Path(settings.sample).name in samples else (samples[0] if samples else None)

    key = gr.State(None)
    turn = gr.State(None)
    with gr.Row(equal_height=False, elem_id="browse-top"):
        with gr.Column(scale=4):
            header = gr.HTML(render.notice_html("Open a rollout: pick a sample, type a path, or upload files."),
                             elem_id="rollout-header")
            status = gr.HTML("", elem_id="status")
        with gr.Column(scale=2, min_width=320):
            with gr.Accordion("Open a rollout", open=False, elem_id="open-panel"):
                sample = gr.Dropdown(samples, value=default_sample, label="Bundled sample", elem_id="sample-picker")
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

    with gr.Tabs(elem_id="main-tabs") as tabs:
        with gr.Tab("Tokens", id="tokens"):
            with gr.Row(equal_height=True, elem_id="turn-controls"):
                trained_only = gr.Checkbox(label="trained turns only", value=False, elem_id="f-trained", min_width=120)
                low_only = gr.Checkbox(label=f"has a token below {settings.low_logprob}", value=False,
                                       elem_id="f-low", min_width=120)
                tool_f = gr.Dropdown(["(any)"], value="(any)", label="tool called", elem_id="f-tool", min_width=120)
                prev_btn = gr.Button("◀ prev turn", size="sm", elem_id="prev-turn", min_width=80)
                turn_no = gr.Number(label="turn", precision=0, elem_id="turn-number", min_width=80)
                next_btn = gr.Button("next turn ▶", size="sm", elem_id="next-turn", min_width=80)
            table = gr.Dataframe(headers=TURN_COLUMNS, interactive=False, elem_id="turn-list",
                                 max_height=250, wrap=False)
            view = gr.HTML("", html_template=TOKEN_VIEW_TEMPLATE, js_on_load=TOKEN_VIEW_JS,
                           elem_id="token-view", apply_default_css=False)
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
    outputs = [key, header, status, table, tool_f, turns_plot, hist_plot, task, problems] + turn_outputs

    def turn_parts(op: Opened, index: int, focus, mode: str) -> tuple:
        tv = turn_view(op.rollout, index, op.choice.tokenizer, op.table)
        if op.link:
            link = f"{op.link}&{urlencode({'turn': index})}"
        else:
            spec = link_spec(op.path, settings)
            link = urlencode({"source": spec, "turn": index}) if spec else ""
        n = len(tv.tokens.ids)  # a rescore of this rollout adds the Δ colour mode (viewer/ui/rescore_panel.py)
        delta = render.turn_delta(rescores.get(op.key), index, tv.tokens.prompt_len, n)
        payload = render.token_view_payload(tv.turn, tv.tokens, render.ViewOptions.from_settings(
            settings, focus=focus, mode=mode, note=tv.note, link=link), delta=delta)
        return payload, render.conversation_html(tv.turn)

    def logprob_plot(op: Opened, index: int):
        tv = turn_view(op.rollout, index, op.choice.tokenizer, op.table)
        return wire(lp_plot, plots.logprob_figure(tv.turn, token_texts=tv.tokens.texts[tv.tokens.prompt_len:],
                                                  low=settings.low_logprob, offset=tv.tokens.prompt_len))

    def turn_values(op: Opened, index: int | None, focus=None, mode: str = "mask") -> list:
        if index is None:
            return [None, None, "", None, render.notice_html("This rollout has no turns.")]
        # Shared by every session on this rollout: a room selecting the same turn builds it once.
        # The rescore stamp: a new rescore of this rollout changes the payload (its Δ mode).
        try:
            payload, convo = store.derived(op.key, ("turn", index, focus, mode, rescores.stamp(op.key)),
                                           lambda: turn_parts(op, index, focus, mode))
        except BudgetExceeded as e:  # e.g. a turn whose token view is over response_mb: say so, keep the rest
            return [index, index, None, None, render.notice_html(str(e), "error")]
        # the plot comes after the token view (viewer/ui/staged.py): tokens are hoverable without waiting for it
        fig = plot_later(op, ("logprob-plot", index), lambda: logprob_plot(op, index))
        return [index, index, payload, fig, convo]

    def plot_later(op: Opened, what: tuple, make) -> Later:
        def made():
            try:
                return store.derived(op.key, what, make)
            except BudgetExceeded:  # a plot over response_mb is left out (an empty plot), the rest still shows
                return None
        return Later(made)

    def rollout_parts(op: Opened) -> tuple:
        r = op.rollout
        return (render.rollout_header(r, op.choice.message), wire(table, turn_table(r, low=settings.low_logprob)),
                sorted({n for t in r.turns for n in t.tool_names}), render.task_html(r),
                render.problems_html(r.problems))


    def open_values(op: Opened, index: int | None = None, focus=None, mode: str = "mask", note: str = "") -> list:
        r = op.rollout
        idx = index if index is not None and any(t.index == index for t in r.turns) else _default_turn(op)
        notes = [note] if note else []
        if index is not None and idx != index:  # a deep link asked for a turn this rollout lacks
            have = f"turns {r.turns[0].index}–{r.turns[-1].index}" if r.turns else "no turns"
            notes.append(f"Turn {index} is not in this rollout ({have}); showing turn {idx}.")
        if focus is not None and idx is not None:
            t = r.turn(idx)
            n = len(t.prompt_ids) + len(t.output_ids)
            if focus[0] >= n:
                notes.append(f"Tokens {focus[0]}–{focus[1]} are past the end of turn {idx} ({n:,} tokens); "
                             "nothing selected.")
                focus = None
        note = " ".join(notes)
        header, table_df, tools, task_html, problems_html = store.derived(
            op.key, ("rollout",), lambda: rollout_parts(op))
        status_html = render.notice_html(note) if note else ""
        r_plots = (plot_later(op, ("turns-plot",), lambda: wire(turns_plot, plots.turns_figure(r))),
                   plot_later(op, ("histogram",), lambda: wire(hist_plot, plots.histogram_figure(
                       r, low=settings.low_logprob))))
        return [op.key, header, status_html, table_df, gr.Dropdown(choices=["(any)"] + tools, value="(any)"),
                *r_plots, task_html, problems_html] + turn_values(op, idx, focus, mode)

    def failure(message: str) -> list:
        # Keep whatever was open: only the status line changes.
        return [gr.skip()] * 2 + [render.notice_html(message, "error")] + [gr.skip()] * (len(outputs) - 3)

    def open_path(p: Path, override: str = "", index=None, focus=None, mode="mask", note="") -> list:
        try:
            op = store.open(p, override or "")
        except SourceError as e:
            return failure(str(e))
        except Exception as e:  # never let a reader bug take the app down
            return failure(f"Could not open {p.name}: {type(e).__name__}: {e}")
        return safe_open_values(op, index, focus, mode, note)

    def safe_open_values(op: Opened, *args) -> list:
        try:
            return open_values(op, *args)
        except BudgetExceeded as e:  # what the rollout's screens would send is over a budget
            return failure(str(e))

    def on_sample(name: str, override: str):
        if not name:
            return failure("Pick a sample.")
        return open_path(SAMPLE_DIR / name, override)

    def on_path(text: str, override: str):
        try:
            p = local_path(text, settings)
        except ValueError as e:
            return failure(str(e))
        return open_path(p, override)

    def on_upload(files: list[str] | None, override: str, request: gr.Request = None):
        if not files:
            return failure("No files uploaded.")
        session = getattr(request, "session_hash", None)
        # Room first: folders past their TTL, then the oldest until this upload fits the disk budget.
        KEEP.sweep(extra_bytes=sum(Path(f).stat().st_size for f in files if Path(f).is_file()))
        dest = KEEP.add(tempfile.mkdtemp(prefix=UPLOAD_PREFIX), session)  # deleted when the session ends
        try:
            root, notes = intake_files(files, dest, settings)
        except UploadRefused as e:  # more files than the upload_files budget
            root, notes = None, [str(e)]
        if root is None:
            KEEP.discard(dest)
            return failure("; ".join(notes) or "Nothing usable in the upload.")
        return open_path(root, override, note="; ".join(notes))

    def on_tokenizer(k: str | None, override: str, index):
        op = store.get(k)
        if op is None:
            return failure("Open a rollout first.")
        override = (override or "").strip()
        if override and (override.startswith(("/", ".", "~")) or Path(override).expanduser().exists()):
            try:  # a folder the user typed: confined to the data root like any typed path
                override = str(local_path(override, settings, "tokenizer"))
            except ValueError as e:
                return failure(f"Tokenizer folder refused: {e}")
        return open_path(op.path, override, index=index)

    def on_select_turn(k: str | None, index, mode: str = "mask") -> list:
        op = store.get(k)
        if op is None or index is None:
            return [gr.skip()] * len(turn_outputs)
        try:
            return turn_values(op, int(index), mode=mode)
        except KeyError:
            return [gr.skip()] * len(turn_outputs)

    def on_table_select(k: str | None, evt: gr.SelectData) -> list:
        row = evt.row_value if evt is not None else None
        if not row:
            return [gr.skip()] * len(turn_outputs)
        return on_select_turn(k, row[0])

    def on_step(k: str | None, index, step: int) -> list:
        op = store.get(k)
        if op is None:
            return [gr.skip()] * len(turn_outputs)
        order = [t.index for t in op.rollout.turns]
        if not order:
            return [gr.skip()] * len(turn_outputs)
        index = int(index) if isinstance(index, (int, float)) else index  # the number box sends a float
        pos = order.index(index) if index in order else 0
        return turn_values(op, order[max(0, min(len(order) - 1, pos + step))])

    def on_filter(k: str | None, trained: bool, low: bool, tool: str):
        op = store.get(k)
        if op is None:
            return gr.skip()
        return turn_table(op.rollout, trained_only=trained, low_only=low, low=settings.low_logprob,
                          tool=None if tool in (None, "", "(any)") else tool)

    # Browsing only reads shared, cached values: many at once, in one concurrency group of
    # its own, so a long scan or capture (own groups, see drift_tab / capture_tab) never
    # holds it up and a room of visitors is not served one event at a time.
    fast = dict(concurrency_id="browse", concurrency_limit=settings.browse_concurrency)
    # Events that output what open_values / turn_values return: those values are already
    # serialised (see wire()), shared by every session, so Gradio must not postprocess them
    # again per event (a thread hop per output component, GIL hand-offs under load).
    shows = dict(fast, postprocess=False)
    defer = settings.plot_defer_s  # tokens first, plots this much later (viewer/ui/staged.py)
    sample.input(staged(on_sample, defer), [sample, tok_box], outputs, api_name="open_sample", **shows)
    load_btn.click(staged(on_path, defer), [path, tok_box], outputs, api_name="open_path", **shows)
    path.submit(staged(on_path, defer), [path, tok_box], outputs, api_visibility="private", **shows)
    upload.upload(staged(on_upload, defer), [upload, tok_box], outputs, api_name="open_upload", **shows)
    tok_btn.click(staged(on_tokenizer, defer), [key, tok_box, turn], outputs, api_name="set_tokenizer", **shows)
    table.select(staged(on_table_select, defer), [key], turn_outputs, api_visibility="private", **shows)
    turn_no.submit(staged(on_select_turn, defer), [key, turn_no], turn_outputs, api_name="select_turn", **shows)
    # ← / → step from the turn number shown, not the turn State: a State is stored on the server
    # when a two-step answer ends, so a second press within the plots' wait read the old turn and
    # stepped from it (→ then ← landed on turn 0); the number box has the first step's value.
    prev_btn.click(staged(lambda k, i: on_step(k, i, -1), defer), [key, turn_no], turn_outputs,
                   api_visibility="private", **shows)
    next_btn.click(staged(lambda k, i: on_step(k, i, +1), defer), [key, turn_no], turn_outputs,
                   api_visibility="private", **shows)
    for f in (trained_only, low_only, tool_f):
        f.change(on_filter, [key, trained_only, low_only, tool_f], table, api_visibility="private", **fast)

    def deep_link(spec: str, index=None, focus=None, mode="mask", row: int | None = None, note: str = "",
                  hub_token: str | None = None):
        """Open what ?source=...&row=... names (see :func:`viewer.ui.opening.open_spec`); Hub reads
        with ``hub_token`` (the visitor's sign-in; none: anonymous in public mode)."""
        try:
            op = open_spec(store, settings, spec, row, hub_token=hub_token)
        except (SourceError, ValueError) as e:
            return failure(str(e))
        except Exception as e:  # never let a reader bug take the app down
            return failure(f"Could not open {spec}{'' if row is None else f' row {row}'}: {type(e).__name__}: {e}")
        return safe_open_values(op, index, focus, mode, note)

    def show(op: Opened, index=None, note: str = "") -> list:
        return resolve(open_values(op, index, note=note))

    return Browse(key, turn, tabs, outputs, lambda *a, **k: resolve(deep_link(*a, **k)), show, turn_outputs,
                  lambda *a, **k: resolve(on_select_turn(*a, **k)), under_tokens, fast, shows,
                  open_staged=staged(deep_link, defer))
