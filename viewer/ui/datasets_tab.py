"""The Datasets screen: open a Hub dataset or a local data file, page through its rows, open one.

Handlers are thin calls into :mod:`viewer.sources` (``open_dataset``) and
:mod:`viewer.row_browser` (``browse_page``). The opened dataset lives in the visitor's own
``gr.State`` (:class:`SessionDataset`): one per session, replaced by the next open, gone with the
session; another visitor's opens cannot evict it (issue 36: a server-wide LRU of 8 let one visitor's
eight opens take everyone's away). Selecting a row reads just that row, puts the rollout in the store
and shows it on the Tokens tab.
"""
from __future__ import annotations

import hashlib

import gradio as gr
import pandas as pd

from .. import render
from . import rescores, signin
from ..budgets import BudgetExceeded
from ..config import Settings
from ..row_browser import ROW_COLUMNS, SORT_KEYS, Filters, browse_page
from ..sources import DatasetSource, SourceError, open_dataset
from .browse import dataset_link
from ..sources.hub import read_token, reader_tag
from ..sources.registry import all_formats
from ..sources.shown import shown_path, shown_text
from ..visitor import local_path

__all__ = ["build", "PAGE_SIZE", "SessionDataset"]

PAGE_SIZE = 20


class SessionDataset:
    """The dataset a session has open (its ``gr.State`` value): ``k`` names what was opened, ``src`` is it."""

    __slots__ = ("k", "src")

    def __init__(self, k: str, src: DatasetSource):
        self.k, self.src = k, src

    def __deepcopy__(self, memo: dict) -> "SessionDataset":
        return self  # held, not copied: an opened dataset is not duplicated per event


def _get(held) -> DatasetSource | None:
    return held.src if isinstance(held, SessionDataset) else None


def _table(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([{k: r.get(k) for k in ROW_COLUMNS} for r in rows], columns=ROW_COLUMNS)


def _num(v) -> float | None:
    try:
        return None if v is None or v == "" else float(v)
    except (TypeError, ValueError):
        return None


def build(settings: Settings, store, browse) -> None:
    """Create this screen's components inside the current gr.Tab and wire its events."""
    formats = ["auto"] + [f.name for f in all_formats()] + ["capture"]
    key = gr.State(None)
    with gr.Row(equal_height=True):
        source = gr.Textbox(label=f"Dataset: hf://datasets/OWNER/NAME[/path] or a file/folder inside "
                                  f"{'the data folder' if settings.public_mode() else settings.data_root}",
                            placeholder="hf://datasets/13point5/opencode-rollouts-test", elem_id="source-picker", scale=5)
        fmt = gr.Dropdown(formats, value="auto", label="format", elem_id="ds-format", scale=1, min_width=120)
        split = gr.Textbox(label="split", placeholder="train", elem_id="ds-split", scale=1, min_width=80)
        config = gr.Textbox(label="config", elem_id="ds-config", scale=1, min_width=80)
        open_btn = gr.Button("Open", variant="primary", elem_id="ds-open", scale=1, min_width=70)
    with gr.Row(equal_height=True):
        f_agent = gr.Textbox(label="agent", elem_id="ds-f-agent", min_width=90)
        f_model = gr.Textbox(label="model", elem_id="ds-f-model", min_width=90)
        f_task = gr.Textbox(label="task text", elem_id="ds-f-task", min_width=90)
        # Textboxes, not gr.Number: a Number field always holds a value (0 when blank), which
        # would silently filter out every row whose reward is not 0.
        f_rmin = gr.Textbox(label="reward ≥", placeholder="any", elem_id="ds-f-rmin", min_width=70)
        f_rmax = gr.Textbox(label="reward ≤", placeholder="any", elem_id="ds-f-rmax", min_width=70)
        sort = gr.Dropdown(list(SORT_KEYS), value="row", label="sort by", elem_id="ds-sort", min_width=90)
        desc = gr.Checkbox(label="descending", value=False, elem_id="ds-desc", min_width=90)
    with gr.Row(equal_height=True):
        prev_btn = gr.Button("◀ prev page", size="sm", elem_id="ds-prev", min_width=80)
        page = gr.Number(value=1, label="page", precision=0, elem_id="ds-page", min_width=70)
        next_btn = gr.Button("next page ▶", size="sm", elem_id="ds-next", min_width=80)
        row_no = gr.Number(label="row", precision=0, elem_id="ds-row", min_width=70)
        row_btn = gr.Button("Open row in viewer", elem_id="ds-open-row", min_width=100)
    status = gr.HTML(render.notice_html("Type a Hub dataset (hf://datasets/OWNER/NAME) or a local data file, then Open."),
                     elem_id="ds-status")
    table = gr.Dataframe(headers=ROW_COLUMNS, interactive=False, elem_id="row-table", max_height=420, wrap=False)

    filter_inputs = [f_agent, f_model, f_task, f_rmin, f_rmax, sort, desc]

    def page_values(src: DatasetSource, k: SessionDataset, page_no, agent, model, task, rmin, rmax, sort_by, descending,
                    progress=None) -> list:
        if src.is_capture:
            ro = src.rollout()
            s = ro.stats()
            row = {"row": 0, "agent": ro.origin.agent, "model": ro.model, "task": (ro.instruction or "")[:80],
                   "reward": ro.reward, "result": None, "turns": s["turns"],
                   "length": s["prompt_tokens"] + s["output_tokens"], "error": ""}
            return [k, render.dataset_status_html(shown_path(src.label, settings), "capture", total=1, page=0, pages=1,
                                                  note=shown_text(src.note, settings)),
                    _table([row]), 1]
        filters = Filters(agent or "", model or "", task or "", _num(rmin), _num(rmax))
        p = max(0, int(page_no or 1) - 1)
        say = (lambda m: progress(None, desc=m)) if progress is not None else None
        pg = browse_page(src, p, PAGE_SIZE, sort=sort_by or "row", descending=bool(descending), filters=filters,
                         progress=say)
        if pg.pages is not None and pg.pages and p >= pg.pages:
            pg = browse_page(src, pg.pages - 1, PAGE_SIZE, sort=sort_by or "row", descending=bool(descending),
                             filters=filters, progress=say)
        note = "; ".join(x for x in (src.note, pg.note) if x)
        return [k, render.dataset_status_html(shown_path(src.label, settings), src.format.name,
                                              alternatives=src.alternatives, total=pg.total, page=pg.page,
                                              pages=pg.pages, note=shown_text(note, settings),
                                              bytes_read=src.dataset.bytes_read),
                _table(pg.rows), pg.page + 1]

    def fail(message: str) -> list:
        return [gr.skip(), render.notice_html(shown_text(message, settings), "error"), gr.skip(), gr.skip()]

    def on_open(text, fmt_name, split_name, config_name, agent, model, task, rmin, rmax, sort_by, descending,
                request: gr.Request = None, progress=gr.Progress()):
        text = (text or "").strip()
        if not text:
            return fail("Type a dataset: hf://datasets/OWNER/NAME, or a file or folder inside the data folder.")
        spec = text
        if not text.startswith("hf://"):
            try:
                spec = str(local_path(text, settings))
            except ValueError as e:
                return fail(str(e))
        fmt_arg = None if fmt_name in (None, "", "auto") else fmt_name
        progress(0, desc=f"opening {text}")
        try:
            token = signin.hub_token(request)  # hf:// as the visitor: their sign-in, else anonymous
            src = open_dataset(spec, settings, split=(split_name or "").strip() or None,
                               config=(config_name or "").strip() or None, format=fmt_arg,
                               progress=lambda m: progress(None, desc=m), hub_token=token)
            # the key names who read it: another visitor cannot page a private dataset by its name
            who = reader_tag(read_token(settings, token)) if spec.startswith("hf://") else ""
            k = hashlib.sha1(f"{spec}|{fmt_arg}|{split_name}|{config_name}|{who}".encode()).hexdigest()[:16]
            return page_values(src, SessionDataset(k, src), 1, agent, model, task, rmin, rmax, sort_by, descending,
                               progress)
        except SourceError as e:
            return fail(e.message)
        except BudgetExceeded as e:  # e.g. the bytes one Hub source may cost on a public app
            return fail(str(e))
        except Exception as e:  # never let a reader bug take the app down
            return fail(f"Could not open {text}: {type(e).__name__}: {e}")

    def on_page(k, page_no, agent, model, task, rmin, rmax, sort_by, descending, step: int = 0,
                progress=gr.Progress()):
        src = _get(k)
        if src is None:
            return fail("Open a dataset first.")
        try:
            return page_values(src, k, max(1, int(page_no or 1) + step), agent, model, task, rmin, rmax, sort_by,
                               descending, progress)
        except SourceError as e:
            return fail(e.message)
        except BudgetExceeded as e:  # a sort or filter over more rows than rows_scanned
            return fail(str(e))
        except Exception as e:
            return fail(f"Could not read the page: {type(e).__name__}: {e}")

    view_outputs = list(browse.outputs) + [browse.tabs, status]

    @rescores.as_visitor  # the visitor's view settings (their IS choice for the Δ marks): browse.view
    def open_row(k, row, view=None, progress=gr.Progress()):
        src = _get(k)
        skip = [gr.skip()] * (len(browse.outputs) + 1)
        if src is None:
            return skip + [render.notice_html("Open a dataset first.", "error")]
        if row is None or str(row).strip() == "":
            return skip + [render.notice_html("Pick a row.", "error")]
        progress(0, desc=f"reading row {int(row)} of {src.label}")
        try:
            ro = src.rollout(int(row))
        except SourceError as e:
            return skip + [render.notice_html(e.message, "error")]
        except Exception as e:
            return skip + [render.notice_html(f"Could not open row {row}: {type(e).__name__}: {e}", "error")]
        capture_dir = src.capture if src.capture is not None and src.capture.is_dir() else None
        n = int(row)
        op = store.put(ro, capture_dir=capture_dir,
                       link=dataset_link(src.label, n, settings) if not src.is_capture else "",
                       reload=lambda: src.rollout(n))
        view = ro.origin.token_view or ("exact" if src.is_capture else "")
        label = {"derived": "derived token view (re-rendered through a chat template; mask: assistant tokens "
                            "trainable)", "exact": "exact ids from the source", "mixed": "exact ids where the row "
                            "has them, derived elsewhere"}.get(view, "")
        note = f"{ro.source}: {label}" if label else ro.source
        if ro.origin.tokenizer_note:
            note += f" · {ro.origin.tokenizer_note}"
        done = render.notice_html(f"Opened row {int(row)} in the viewer.")
        return list(browse.show_fn(op, None, note)) + [gr.Tabs(selected="tokens"), done]

    def on_table_select(k, view, evt: gr.SelectData):
        value = evt.row_value if evt is not None else None
        if not value:
            return [gr.skip()] * (len(browse.outputs) + 2)
        return open_row(k, value[0], view)

    page_outputs = [key, status, table, page]
    open_btn.click(on_open, [source, fmt, split, config] + filter_inputs, page_outputs, api_name="ds_open")
    source.submit(on_open, [source, fmt, split, config] + filter_inputs, page_outputs, api_visibility="private")
    page.submit(on_page, [key, page] + filter_inputs, page_outputs, api_name="ds_page")
    def on_prev(k, page_no, agent, model, task, rmin, rmax, sort_by, descending, progress=gr.Progress()):
        return on_page(k, page_no, agent, model, task, rmin, rmax, sort_by, descending, -1, progress)

    def on_next(k, page_no, agent, model, task, rmin, rmax, sort_by, descending, progress=gr.Progress()):
        return on_page(k, page_no, agent, model, task, rmin, rmax, sort_by, descending, +1, progress)

    def on_filter(k, agent, model, task, rmin, rmax, sort_by, descending, progress=gr.Progress()):
        return on_page(k, 1, agent, model, task, rmin, rmax, sort_by, descending, 0, progress)

    prev_btn.click(on_prev, [key, page] + filter_inputs, page_outputs, api_visibility="private")
    next_btn.click(on_next, [key, page] + filter_inputs, page_outputs, api_visibility="private")
    for f in (sort, desc):
        f.input(on_filter, [key] + filter_inputs, page_outputs, api_visibility="private")
    for f in (f_agent, f_model, f_task, f_rmin, f_rmax):
        f.submit(on_filter, [key] + filter_inputs, page_outputs, api_visibility="private")
    row_btn.click(open_row, [key, row_no, browse.view], view_outputs, api_name="ds_open_row", **browse.shows)
    table.select(on_table_select, [key, browse.view], view_outputs, api_visibility="private", **browse.shows)
