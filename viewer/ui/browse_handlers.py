"""The browse screen's event handlers, one named method each (the layout is in viewer/ui/browse.py).

Handlers are thin: they turn UI inputs into calls on viewer.views / render / plots and return the values
of the screen's outputs. Errors become a visible notice; the app keeps working. A handler returns one value
per output of ``Slots.outputs`` (opening a rollout) or ``Slots.turn_outputs`` (selecting a turn); slow values
(plots) are :class:`Later`. One that shows a turn takes ``view`` (the visitor's view State): as_visitor.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd

from .. import plots, render
from ..budgets import BudgetExceeded
from ..config import SAMPLE_DIR, Settings
from ..row_browser import ROW_COLUMNS, browse_page
from ..sources import SourceError, open_dataset
from ..sources.keep import KEEP
from ..sources.shown import shown_rollout, shown_text
from ..sources.upload import UPLOAD_PREFIX, UploadRefused, intake_files
from ..tokenizer import tokenizer_for
from ..rollout import Problem
from ..visitor import local_path
from ..views import turn_table, turn_view
from . import rescores
from .downloads import who
from .seam import session_copy
from .opening import dataset_link, open_spec, sample_label
from .staged import Later, resolve
from .store import Opened, RolloutStore

__all__ = ["Handlers", "Slots", "wire", "default_turn", "shown_name", "ROWS_SHOWN", "STATUS", "TOOLS", "PROBLEMS",
           "ROWS", "FILTERS"]

STATUS, TOOLS, PROBLEMS, ROWS = 2, 4, 8, 9  # places in the outputs (viewer/ui/browse.py checks them)
FILTERS = 11  # the turn list's two filter boxes and its note: an open resets them (a new rollout starts unfiltered)
ROWS_SHOWN = 200  # rows of a data file listed on the Tokens tab (the Datasets tab pages through any number)


def wire(component, value):
    """``value`` as ``component`` sends it (its postprocess, serialised). Values that show a
    rollout are made so once, in the shared cache, and the events that output them run with
    postprocess=False (``Browse.shows``); such an event's other outputs go through this too."""
    out = component.postprocess(value)
    return out.model_dump() if hasattr(out, "model_dump") else out


def default_turn(op: Opened) -> int | None:
    """The turn a rollout opens on: the first trained agent turn, else the first agent turn, else the first."""
    turns = op.rollout.turns
    for pick in (lambda t: t.kind == "agent" and t.trained, lambda t: t.kind == "agent", lambda t: True):
        for t in turns:
            if pick(t):
                return t.index
    return None


def shown_name(op: Opened) -> str:
    """How the status line names an open rollout: its sample, file or folder (and row)."""
    name = Path(str(op.rollout.source or op.path)).name or str(op.rollout.source)
    row = dict(x.split("=", 1) for x in op.link.split("&") if "=" in x).get("row") if op.link else None
    return f"{name} row {row}" if row is not None else name


@dataclass
class Slots:
    """The components whose values the handlers serialise themselves (:func:`wire`), and the output lists."""

    table: Any
    rows: Any  # the source's row table (a data file of several rollouts)
    lp_plot: Any
    turns_plot: Any
    hist_plot: Any
    outputs: list
    turn_outputs: list


class Handlers:
    """Everything the browse screen's events do. ``turn_parts`` (one turn's token-view payload and
    conversation) is supplied by the subclass in viewer/ui/browse.py."""

    def __init__(self, settings: Settings, store: RolloutStore, slots: Slots):
        self.settings, self.store, self.slots = settings, store, slots

    def turn_parts(self, op: Opened, index: int, focus, mode: str, choice=None) -> tuple:  # pragma: no cover
        raise NotImplementedError

    # --- values for the outputs -------------------------------------------------------------
    def logprob_plot(self, op: Opened, index: int):
        tv = turn_view(op.rollout, index, op.choice.tokenizer, op.table)
        return wire(self.slots.lp_plot, plots.logprob_figure(
            tv.turn, token_texts=tv.tokens.texts[tv.tokens.prompt_len:], low=self.settings.low_logprob,
            offset=tv.tokens.prompt_len))

    def turn_values(self, op: Opened, index: int | None, focus=None, mode: str = "mask") -> list:
        if index is None:
            return [None, None, "", None, render.notice_html("This rollout has no turns.")]
        # Shared by every session (a room builds each turn once); keyed on the rescore and the visitor's IS choice
        # (their view State, an input of every event that shows a turn: rescores.as_visitor)
        vs = rescores.view_stamp(op.key)
        try:
            payload, convo = self.store.derived(op.key, ("turn", index, focus, mode, vs),
                                                lambda: self.turn_parts(op, index, focus, mode, vs[1]))
        except BudgetExceeded as e:  # e.g. a turn whose token view is over response_mb: say so, keep the rest
            return [index, index, None, None, render.notice_html(str(e), "error")]
        # the plot comes after the token view (viewer/ui/staged.py): tokens are hoverable without waiting for it
        fig = self.plot_later(op, ("logprob-plot", index), lambda: self.logprob_plot(op, index))
        return [index, index, payload, fig, convo]

    def plot_later(self, op: Opened, what: tuple, make) -> Later:
        def made():
            try:
                return self.store.derived(op.key, what, make)
            except BudgetExceeded:  # a plot over response_mb is left out (an empty plot), the rest still shows
                return None
        return Later(made)

    def rollout_parts(self, op: Opened) -> tuple:
        r = shown_rollout(op.rollout, self.settings)  # public: no server path in the header or problems
        return (render.rollout_header(r, shown_text(op.choice.message, self.settings)),
                wire(self.slots.table, turn_table(r, low=self.settings.low_logprob)),
                sorted({n for t in r.turns for n in t.tool_names}), render.task_html(r),
                render.problems_html(r.problems))

    def open_values(self, op: Opened, index: int | None = None, focus=None, mode: str = "mask",
                    note: str = "") -> list:
        r, s = op.rollout, self.slots
        idx = index if index is not None and any(t.index == index for t in r.turns) else default_turn(op)
        notes = [note] if note else []
        if op.path is not None and Path(op.path).parent == SAMPLE_DIR and sample_label(Path(op.path).name):
            notes.insert(0, f"Bundled sample {Path(op.path).name}: {sample_label(Path(op.path).name)}.")
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
        header, table_df, tools, task_html, problems_html = self.store.derived(
            op.key, ("rollout",), lambda: self.rollout_parts(op))
        status_html = render.notice_html(shown_text(note, self.settings)) if note else ""
        low = self.settings.low_logprob
        r_plots = (self.plot_later(op, ("turns-plot",), lambda: wire(s.turns_plot, plots.turns_figure(r))),
                   self.plot_later(op, ("histogram",), lambda: wire(s.hist_plot, plots.histogram_figure(r, low=low))))
        # The filters start clear with every open, as the list does (it lists every turn): a filter kept from
        # the last rollout left a ticked box over an unfiltered list, or an empty list (issue 41, point 6).
        return [op.key, header, status_html, table_df, self.tool_filter(["(any)"] + tools),
                *r_plots, task_html, problems_html, self.rows_update(op), self.picked_sample(op),
                False, False, ""] + self.turn_values(op, idx, focus, mode)

    # An update of a component's props makes Gradio build a new component for the session (~1.5 ms of
    # server CPU each, most of an open's own work: docs/SPEED.md, room). A room of visitors reopening
    # one link asks for the props their copies already have: then only the value is sent (or nothing).
    # The visitor's copy comes through the seam (viewer/ui/seam.py); with it off, the update is always sent.
    def tool_filter(self, choices: list[str]):
        """The tool filter reset to "(any)", listing ``choices``: an update only if the visitor's lists others."""
        mine = session_copy(self.slots.outputs[TOOLS])
        if mine is not None and list(getattr(mine, "choices", None) or []) == [(str(c), c) for c in choices]:
            return "(any)"
        return gr.Dropdown(choices=choices, value="(any)")

    def picked_sample(self, op: Opened):
        """The sample picker follows what is open: the sample's name, or empty for anything else."""
        p = Path(op.path) if op.path is not None else None
        return p.name if p is not None and p.parent == SAMPLE_DIR else None

    def source_rows(self, op: Opened) -> tuple[int, Any] | None:
        """(rows in all, the first ROWS_SHOWN as the row table's value) when the rollout came from a local
        data file (or folder of them) holding more than one rollout; None otherwise (a capture, one row)."""
        p = op.path
        if p is None or str(p).startswith("hf:") or not Path(p).exists():
            return None
        try:
            src = open_dataset(str(p), self.settings)
            if src.is_capture:
                return None
            pg = browse_page(src, 0, ROWS_SHOWN)
        except (SourceError, BudgetExceeded, OSError, ValueError):
            return None  # the rollout itself opened; a row list that cannot be read is left out
        if not pg.total or pg.total < 2:
            return None
        df = pd.DataFrame([{k: r.get(k) for k in ROW_COLUMNS} for r in pg.rows], columns=ROW_COLUMNS)
        return pg.total, wire(self.slots.rows, df)

    def rows_update(self, op: Opened):
        got = self.store.derived(op.key, ("rows",), lambda: self.source_rows(op))
        if got is None:  # hidden: nothing to send if the visitor's row list is (a capture after a capture)
            mine = session_copy(self.slots.outputs[ROWS])
            return gr.skip() if mine is not None and mine.visible is False else gr.update(visible=False)
        total, value = got
        more = f" (the first {ROWS_SHOWN}; the Datasets tab pages through all)" if total > ROWS_SHOWN else ""
        return gr.update(value=value, visible=True,
                         label=f"This file holds {total:,} rollouts{more}: click a row to open it")

    def open_row(self, path: Path, n: int) -> Opened:
        """Row ``n`` of the data file ``path`` (a server path: an upload or a file already opened), shared
        with everyone who opens the same row of the same file (the deep link's cache entry)."""
        st = path.stat()

        def read():
            return open_dataset(str(path), self.settings).rollout(n), None

        return self.store.open_shared(f"{path}|{n}|{st.st_mtime_ns}:{st.st_size}", read,
                                      link=dataset_link(str(path), n, self.settings), path=path)

    @rescores.as_visitor
    def on_source_row(self, k: str | None, view, evt: gr.SelectData) -> list:
        op = self.store.get(k)
        value = evt.row_value if evt is not None else None
        if op is None or not value or op.path is None:
            return [gr.skip()] * len(self.slots.outputs)
        try:
            n = int(value[0])
            if n < 0:
                raise ValueError(n)
            row_op = self.open_row(Path(op.path), n)
        except (TypeError, ValueError):
            return self.failure(f"Not a row number: {value[0]!r}.")
        except (SourceError, OSError) as e:
            return self.failure(str(e))
        except Exception as e:  # never let a reader bug take the app down
            return self.failure(f"Could not open row {value[0]}: {type(e).__name__}: {e}")
        return self.safe_open_values(row_op, None, None, "mask", f"Row {n} of {Path(op.path).name}.")

    def failure(self, message: str, shown: Opened | None = None, file: str = "") -> list:
        """Keep whatever was open: the status line says what failed (and, with ``shown``, which rollout is
        still on screen); with ``file``, the Problems tab lists that file's problem above the shown one's."""
        out = [gr.skip()] * len(self.slots.outputs)
        said = message = shown_text(message, self.settings)  # public: paths as the visitor names them
        if file:
            said += (f" Still showing the rollout opened before: {shown_name(shown)}." if shown is not None
                     else " Nothing else is open.")
            mine = list(shown_rollout(shown.rollout, self.settings).problems) if shown is not None else []
            out[PROBLEMS] = render.problems_html([Problem(file, "upload: not opened", message)] + mine)
        out[STATUS] = render.notice_html(said, "error")
        return out

    def skip_turn(self) -> list:  # every turn output left as it is
        return [gr.skip()] * len(self.slots.turn_outputs)

    # --- opening ------------------------------------------------------------------------------
    def open_path(self, p: Path, override: str = "", index=None, focus=None, mode="mask", note="",
                  shown: Opened | None = None, file: str = "") -> list:
        """Open ``p``; on failure keep ``shown`` (named, with ``file``'s problem listed: an upload)."""
        try:
            op = self.store.open(p, override or "")
        except SourceError as e:
            return self.failure(str(e), shown, file)
        except Exception as e:  # never let a reader bug take the app down
            return self.failure(f"Could not open {p.name}: {type(e).__name__}: {e}", shown, file)
        return self.safe_open_values(op, index, focus, mode, note)

    def safe_open_values(self, op: Opened, *args) -> list:
        try:
            return self.open_values(op, *args)
        except BudgetExceeded as e:  # what the rollout's screens would send is over a budget
            return self.failure(str(e))

    @rescores.as_visitor
    def on_sample(self, name: str, override: str, view=None):
        if not name:
            return self.failure("Pick a sample.")
        return self.open_path(SAMPLE_DIR / name, override)

    @rescores.as_visitor
    def on_path(self, text: str, override: str, view=None):
        try:
            p = local_path(text, self.settings)
        except ValueError as e:
            return self.failure(str(e))
        return self.open_path(p, override)

    @rescores.as_visitor
    def on_upload(self, files: list[str] | None, override: str, k=None, view=None, request: gr.Request = None):
        if not files:
            return self.failure("No files uploaded.")
        shown, names = self.store.get(k), ", ".join(Path(f).name for f in files)
        session, client = who(request)
        KEEP.claim(files, session)  # Gradio's copies of what was posted: this session's (gone when it ends)
        # Room first: folders past their TTL, then the oldest until this upload fits the disk budget.
        KEEP.sweep(extra_bytes=sum(Path(f).stat().st_size for f in files if Path(f).is_file()))
        dest = KEEP.folder(UPLOAD_PREFIX, session, client)  # deleted when the session ends
        try:
            root, notes = intake_files(files, dest, self.settings)
        except UploadRefused as e:  # more files than the upload_files budget
            root, notes = None, [str(e)]
        if root is None:
            KEEP.discard(dest)
            return self.failure("; ".join(notes) or "Nothing usable in the upload.", shown, names)
        return self.open_path(root, override, note="; ".join(notes), shown=shown, file=names)

    @rescores.as_visitor
    def on_tokenizer(self, k: str | None, override: str, index, view=None):
        op = self.store.get(k)
        if op is None:
            return self.failure("Open a rollout first.")
        override = (override or "").strip()
        if override and (override.startswith(("/", ".", "~")) or Path(override).expanduser().exists()):
            try:  # a folder the user typed: confined to the data root like any typed path
                override = str(local_path(override, self.settings, "tokenizer"))
            except ValueError as e:
                return self.failure(f"Tokenizer folder refused: {e}")
        if override:
            # keyed by what the text resolves to, decided before anything is parsed (issue 36, finding 5):
            # texts naming one tokenizer share one entry (and the rollout's parse), a text naming none is refused
            try:
                choice = tokenizer_for(None, self.settings, override, load=False)
            except (OSError, ValueError) as e:  # a text no file system takes (too long a name)
                return self.failure(f"Tokenizer override refused: {type(e).__name__}: {str(e)[:200]}")
            if choice.source == "none" or not choice.name:
                return self.failure(f"Tokenizer override {override[:80]!r} not applied: "
                                    f"{choice.message.split(' No tokenizer for')[0]}")
            override = str(choice.name)
        return self.open_path(op.path, override, index=index)

    def deep_link(self, spec: str, index=None, focus=None, mode="mask", row: int | None = None, note: str = "",
                  hub_token: str | None = None):
        """Open what ?source=...&row=... names (see :func:`viewer.ui.opening.open_spec`); Hub reads
        with ``hub_token`` (the visitor's sign-in; none: anonymous in public mode)."""
        try:
            op = open_spec(self.store, self.settings, spec, row, hub_token=hub_token)
        except (SourceError, ValueError) as e:
            return self.failure(str(e))
        except Exception as e:  # never let a reader bug take the app down
            return self.failure(f"Could not open {spec}{'' if row is None else f' row {row}'}: {type(e).__name__}: {e}")
        return self.safe_open_values(op, index, focus, mode, note)

    def show(self, op: Opened, index=None, note: str = "") -> list:
        return resolve(self.open_values(op, index, note=note))

    # --- turns --------------------------------------------------------------------------------
    def on_select_turn(self, k: str | None, index, mode: str = "mask", focus=None) -> list:
        """Turn ``index`` (``focus``: a token range to select, a note's; checked against the turn)."""
        op = self.store.get(k)
        if op is None or index is None:
            return self.skip_turn()
        try:
            if focus is not None:  # a range past the turn's end selects nothing (open_values says the same)
                t = op.rollout.turn(int(index))
                focus = focus if focus[0] < len(t.prompt_ids) + len(t.output_ids) else None
            return self.turn_values(op, int(index), focus=focus, mode=mode)
        except KeyError:
            return self.skip_turn()

    @rescores.as_visitor
    def on_turn_number(self, k: str | None, index, view=None) -> list:  # the turn number box
        return self.on_select_turn(k, index)

    @rescores.as_visitor
    def on_table_select(self, k: str | None, view, evt: gr.SelectData) -> list:
        row = evt.row_value if evt is not None else None
        if not row:
            return self.skip_turn()
        return self.on_select_turn(k, row[0])
