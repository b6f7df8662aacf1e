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
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import gradio as gr
import pandas as pd

from .. import render
from . import dataset_rescore, rescores, signin
from ..budgets import BudgetExceeded
from ..capture_set import CAPTURE_SET_COLUMNS, CAPTURE_SET_SORTS, CaptureSet, capture_set_page, is_capture_set, \
    open_capture_set
from ..config import Settings
from ..row_browser import ROW_COLUMNS, SORT_KEYS, Filters, browse_page
from ..sources import DatasetSource, SourceError, open_dataset
from .browse import dataset_link
from ..sources.hub import read_token, reader_tag
from ..sources.registry import all_formats
from ..sources.shown import shown_path, shown_text
from ..visitor import local_path

__all__ = ["build", "DatasetHandlers", "Widgets", "PAGE_SIZE", "SessionDataset"]

PAGE_SIZE = 20


class SessionDataset:
    """The dataset a session has open (its ``gr.State`` value): ``k`` names what was opened, ``src`` is it."""

    __slots__ = ("k", "src")

    def __init__(self, k: str, src: DatasetSource | CaptureSet):
        self.k, self.src = k, src

    def __deepcopy__(self, memo: dict) -> "SessionDataset":
        return self  # held, not copied: an opened dataset is not duplicated per event


def _get(held) -> DatasetSource | CaptureSet | None:
    return held.src if isinstance(held, SessionDataset) else None


def _table(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([{k: r.get(k) for k in ROW_COLUMNS} for r in rows], columns=ROW_COLUMNS)


def _num(v) -> float | None:
    try:
        return None if v is None or v == "" else float(v)
    except (TypeError, ValueError):
        return None


def build(settings: Settings, store, browse) -> SimpleNamespace:
    """Create this screen's components inside the current gr.Tab and wire its events; the widgets and handlers,
    for the screens that work on the opened dataset (Groups)."""
    w = _layout(settings)
    h = DatasetHandlers(settings, store, browse)
    opening = [w.source, w.fmt, w.split, w.config] + w.filters
    paging = [w.key, w.page] + w.filters
    w.open_btn.click(h.on_open, opening, w.page_outputs, api_name="ds_open")
    w.source.submit(h.on_open, opening, w.page_outputs, api_visibility="private")
    w.page.submit(h.on_page, paging, w.page_outputs, api_name="ds_page")
    w.prev_btn.click(h.on_prev, paging, w.page_outputs, api_visibility="private")
    w.next_btn.click(h.on_next, paging, w.page_outputs, api_visibility="private")
    for f in (w.sort, w.desc):
        f.input(h.on_filter, [w.key] + w.filters, w.page_outputs, api_visibility="private")
    for f in (w.f_agent, w.f_model, w.f_task, w.f_rmin, w.f_rmax):
        f.submit(h.on_filter, [w.key] + w.filters, w.page_outputs, api_visibility="private")
    view_outputs = list(browse.outputs) + [browse.tabs, w.status]
    w.row_btn.click(h.open_row, [w.key, w.row_no, browse.view], view_outputs, api_name="ds_open_row", **browse.shows)
    w.table.select(h.on_table_select, [w.key, browse.view], view_outputs, api_visibility="private", **browse.shows)
    dataset_rescore.build(settings, w, h, browse)  # Rescore dataset: fills |Δ| / max ratio, saved for search
    return SimpleNamespace(widgets=w, handlers=h)


@dataclass
class Widgets:
    """The screen's components, as :func:`_layout` placed them."""

    key: gr.State  # the session's open dataset (SessionDataset)
    source: gr.Textbox
    fmt: gr.Dropdown
    split: gr.Textbox
    config: gr.Textbox
    open_btn: gr.Button
    f_agent: gr.Textbox
    f_model: gr.Textbox
    f_task: gr.Textbox
    f_rmin: gr.Textbox
    f_rmax: gr.Textbox
    sort: gr.Dropdown
    desc: gr.Checkbox
    prev_btn: gr.Button
    page: gr.Number
    next_btn: gr.Button
    row_no: gr.Number
    row_btn: gr.Button
    status: gr.HTML
    table: gr.Dataframe

    @property
    def filters(self) -> list:
        """The filter and sort inputs, in the order the page handlers take them."""
        return [self.f_agent, self.f_model, self.f_task, self.f_rmin, self.f_rmax, self.sort, self.desc]

    @property
    def page_outputs(self) -> list:
        """What a page handler answers: the dataset held, the status line, the rows, the page number."""
        return [self.key, self.status, self.table, self.page]


def _layout(settings: Settings) -> Widgets:
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
        # the last keys sort a folder of captures (its drift columns); a row dataset sorts those by row
        sort = gr.Dropdown(list(SORT_KEYS) + list(CAPTURE_SET_SORTS), value="row", label="sort by", elem_id="ds-sort",
                           min_width=90)
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
    return Widgets(key, source, fmt, split, config, open_btn, f_agent, f_model, f_task, f_rmin, f_rmax, sort, desc,
                   prev_btn, page, next_btn, row_no, row_btn, status, table)


class DatasetHandlers:
    """What the screen's events do. A page handler answers the values of ``Widgets.page_outputs``; a row
    handler those of ``browse.outputs``, the tabs (to Tokens) and the status line."""

    def __init__(self, settings: Settings, store, browse):
        self.settings, self.store, self.browse = settings, store, browse

    # --- a dataset and its pages ------------------------------------------------------------
    def on_open(self, text, fmt_name, split_name, config_name, agent, model, task, rmin, rmax, sort_by, descending,
                request: gr.Request = None, progress=gr.Progress()) -> list:
        text = (text or "").strip()
        if not text:
            return self.fail("Type a dataset: hf://datasets/OWNER/NAME, or a file or folder inside the data folder.")
        try:
            spec = text if text.startswith("hf://") else str(local_path(text, self.settings))
        except ValueError as e:
            return self.fail(str(e))
        progress(0, desc=f"opening {text}")
        try:
            held = self._opened(spec, fmt_name, split_name, config_name, signin.hub_token(request), progress)
            return self.page_values(held, 1, agent, model, task, rmin, rmax, sort_by, descending, progress)
        except Exception as e:  # never let a reader bug take the app down
            return self.fail(_message(e, f"Could not open {text}"))

    def _opened(self, spec: str, fmt_name, split_name, config_name, token, progress) -> SessionDataset:
        """``spec`` opened as the visitor (``token``: their sign-in for hf://, else anonymous)."""
        fmt_arg = None if fmt_name in (None, "", "auto") else fmt_name
        if fmt_arg in (None, "capture") and not spec.startswith("hf://") and is_capture_set(Path(spec)):
            return self._opened_set(spec, progress)
        src = open_dataset(spec, self.settings, split=(split_name or "").strip() or None,
                           config=(config_name or "").strip() or None, format=fmt_arg,
                           progress=lambda m: progress(None, desc=m), hub_token=token)
        # the key names who read it: another visitor cannot page a private dataset by its name
        who = reader_tag(read_token(self.settings, token)) if spec.startswith("hf://") else ""
        return SessionDataset(hashlib.sha1(f"{spec}|{fmt_arg}|{split_name}|{config_name}|{who}".encode()).hexdigest()[:16],
                              src)

    def _opened_set(self, spec: str, progress) -> SessionDataset:
        """A folder of capture folders: each read and drift-scanned once (issue 38), one row per rollout."""
        def prog(done: int, total: int | None) -> None:
            progress((done, total) if total else 0.0, desc="reading and scanning captures", unit="rollouts")

        # a public app scans at most its rows budget of captures, as its drift scan does
        cs = open_capture_set(Path(spec), self.settings, progress=prog,
                              limit=self.settings.limits().rows_scanned or None)
        return SessionDataset(hashlib.sha1(f"set|{spec}".encode()).hexdigest()[:16], cs)

    def on_page(self, k, page_no, agent, model, task, rmin, rmax, sort_by, descending, step: int = 0,
                progress=gr.Progress()) -> list:
        """Page ``page_no`` + ``step`` of the session's dataset, filtered and sorted."""
        if _get(k) is None:
            return self.fail("Open a dataset first.")
        try:
            return self.page_values(k, max(1, int(page_no or 1) + step), agent, model, task, rmin, rmax, sort_by,
                                    descending, progress)
        except Exception as e:  # a SourceError, a sort or filter over more rows than rows_scanned, a reader bug
            return self.fail(_message(e, "Could not read the page"))

    def on_prev(self, k, page_no, agent, model, task, rmin, rmax, sort_by, descending, progress=gr.Progress()):
        return self.on_page(k, page_no, agent, model, task, rmin, rmax, sort_by, descending, -1, progress)

    def on_next(self, k, page_no, agent, model, task, rmin, rmax, sort_by, descending, progress=gr.Progress()):
        return self.on_page(k, page_no, agent, model, task, rmin, rmax, sort_by, descending, +1, progress)

    def on_filter(self, k, agent, model, task, rmin, rmax, sort_by, descending, progress=gr.Progress()):
        return self.on_page(k, 1, agent, model, task, rmin, rmax, sort_by, descending, 0, progress)

    def page_values(self, k: SessionDataset, page_no, agent, model, task, rmin, rmax, sort_by, descending,
                    progress=None) -> list:
        """The values of ``Widgets.page_outputs`` for page ``page_no`` (1-based) of ``k``'s dataset."""
        src = k.src
        if isinstance(src, CaptureSet):
            filters = Filters(agent or "", model or "", task or "", _num(rmin), _num(rmax))
            return self._set_page(k, src, page_no, filters, sort_by, descending)
        if src.is_capture:  # a capture folder: one rollout, one row
            return [k, render.dataset_status_html(shown_path(src.label, self.settings), "capture", total=1, page=0,
                                                  pages=1, note=shown_text(src.note, self.settings)),
                    _table([_capture_row(src.rollout())]), 1]
        filters = Filters(agent or "", model or "", task or "", _num(rmin), _num(rmax))
        say = (lambda m: progress(None, desc=m)) if progress is not None else None

        def read(p: int):
            return browse_page(src, p, PAGE_SIZE, sort=sort_by or "row", descending=bool(descending), filters=filters,
                               progress=say)

        p = max(0, int(page_no or 1) - 1)
        pg = read(p)
        if pg.pages and p >= pg.pages:  # past the last page (fewer rows after a filter): the last one
            pg = read(pg.pages - 1)
        note = "; ".join(x for x in (src.note, pg.note) if x)
        return [k, render.dataset_status_html(shown_path(src.label, self.settings), src.format.name,
                                              alternatives=src.alternatives, total=pg.total, page=pg.page,
                                              pages=pg.pages, note=shown_text(note, self.settings),
                                              bytes_read=src.dataset.bytes_read),
                _table(pg.rows), pg.page + 1]

    def _set_page(self, k: SessionDataset, cs: CaptureSet, page_no, filters: Filters, sort_by, descending) -> list:
        for folder, key in cs.keys.items():  # opened here and rescored since: its latest mean |Δ|
            res = rescores.get(key)
            if res is not None:
                cs.deltas[folder] = res.totals()["mean_abs_delta"]
        rows, total, pages = capture_set_page(cs, max(0, int(page_no or 1) - 1), PAGE_SIZE, sort=sort_by or "row",
                                              descending=bool(descending), filters=filters)
        notes = [f"{len(cs.rows)} rollouts, drift checked with {cs.tokenizer or 'no tokenizer'}"]
        if cs.errors:
            notes.append(f"{len(cs.errors)} unreadable: " + "; ".join(f"{shown_path(e['source'], self.settings)}: "
                                                                      f"{e['error']}" for e in cs.errors[:3]))
        if filters.fields:
            notes.append(f"{total} rollout(s) match the filters")
        page = min(max(0, int(page_no or 1) - 1), pages - 1)
        return [k, render.dataset_status_html(shown_path(cs.label, self.settings), "folder of captures", total=total,
                                              page=page, pages=pages, note=shown_text("; ".join(notes), self.settings)),
                pd.DataFrame(rows, columns=CAPTURE_SET_COLUMNS), page + 1]

    def fail(self, message: str) -> list:
        """The message on the status line; the dataset, rows and page number as they are."""
        return [gr.skip(), render.notice_html(shown_text(message, self.settings), "error"), gr.skip(), gr.skip()]

    # --- a row in the viewer ----------------------------------------------------------------
    @rescores.as_visitor  # the visitor's view settings (their IS choice for the Δ marks): browse.view
    def open_row(self, k, row, view=None, progress=gr.Progress()) -> list:
        """Row ``row`` of the session's dataset, read, kept in the store and shown on the Tokens tab."""
        src = _get(k)
        if src is None:
            return self._row_failed("Open a dataset first.")
        if row is None or str(row).strip() == "":
            return self._row_failed("Pick a row.")
        n = int(row)
        progress(0, desc=f"reading row {n} of {src.label}")
        if isinstance(src, CaptureSet):
            return self._open_capture(src, n)
        try:
            ro = src.rollout(n)
        except SourceError as e:
            return self._row_failed(e.message)
        except Exception as e:
            return self._row_failed(f"Could not open row {row}: {type(e).__name__}: {e}")
        op = self.store.put(ro, capture_dir=src.capture if src.capture is not None and src.capture.is_dir() else None,
                            link=dataset_link(src.label, n, self.settings) if not src.is_capture else "",
                            reload=lambda: src.rollout(n))
        done = render.notice_html(f"Opened row {n} in the viewer.")
        return list(self.browse.show_fn(op, None, _row_note(ro, src))) + [gr.Tabs(selected="tokens"), done]

    def _open_capture(self, cs: CaptureSet, n: int) -> list:
        """Row ``n`` of a folder of captures: its capture folder opened by path (its link, notes and rescores)."""
        if not 0 <= n < len(cs.folders):
            return self._row_failed(f"No row {n}: {len(cs.folders)} rollouts.")
        try:
            op = self.store.open(Path(cs.folders[n]))
        except SourceError as e:
            return self._row_failed(e.message)
        cs.keys[cs.folders[n]] = op.key
        done = render.notice_html(f"Opened row {n} ({cs.rows[n]['rollout']}) in the viewer.")
        return list(self.browse.show_fn(op, None, "")) + [gr.Tabs(selected="tokens"), done]

    def on_table_select(self, k, view, evt: gr.SelectData) -> list:
        value = evt.row_value if evt is not None else None
        if not value:
            return [gr.skip()] * (len(self.browse.outputs) + 2)
        return self.open_row(k, value[0], view)

    def _row_failed(self, message: str) -> list:
        return [gr.skip()] * (len(self.browse.outputs) + 1) + [render.notice_html(message, "error")]


def _message(e: Exception, what: str) -> str:
    """What the visitor is told of ``e``: a reader's or a budget's own message, else ``what`` and the error."""
    if isinstance(e, SourceError):
        return e.message
    if isinstance(e, BudgetExceeded):  # e.g. the bytes one Hub source may cost on a public app
        return str(e)
    return f"{what}: {type(e).__name__}: {e}"


def _capture_row(ro) -> dict:
    """A capture's one rollout as a row of the table."""
    s = ro.stats()
    return {"row": 0, "agent": ro.origin.agent, "model": ro.model, "task": (ro.instruction or "")[:80],
            "reward": ro.reward, "result": None, "turns": s["turns"],
            "length": s["prompt_tokens"] + s["output_tokens"], "error": ""}


_VIEW_LABELS = {
    "derived": "derived token view (re-rendered through a chat template; mask: assistant tokens trainable)",
    "exact": "exact ids from the source",
    "mixed": "exact ids where the row has them, derived elsewhere",
}


def _row_note(ro, src: DatasetSource) -> str:
    """The notice over a row's token view: its source, how its token ids were made, its tokenizer's note."""
    label = _VIEW_LABELS.get(ro.origin.token_view or ("exact" if src.is_capture else ""), "")
    note = f"{ro.source}: {label}" if label else ro.source
    if ro.origin.tokenizer_note:
        note += f" · {ro.origin.tokenizer_note}"
    return note
