"""Browse the rows of a dataset: one page at a time, sorted and filtered. No gradio.

:func:`browse_page` lists rows of a :class:`~viewer.sources.DatasetSource` with the
columns each format has (agent, model, task, reward/result, turns, length):

* no sort and no filter: only the visible page's rows are read;
* filters / sorts on fields the format keeps in cheap columns (``RowFormat.light``,
  e.g. Harbor's agent/model/task/result) scan just those columns (parquet column
  projection), then read the page's rows;
* anything else (e.g. sorting by turns or length) summarises every row once; the result
  is cached on the source, so the next pages are cheap again. At most the ``rows_scanned``
  budget of rows is read for it (:class:`viewer.budgets.BudgetExceeded` past that).

Formats with versions (opencode: same ``session_id`` in several batches) list only the
newest row of each key and say how many older ones are hidden.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from viewer.config import Settings
from viewer.sources.formats import SUMMARY_FIELDS

__all__ = ["ROW_COLUMNS", "Filters", "Page", "browse_page", "summarize_rows"]

ROW_COLUMNS = ["row", *SUMMARY_FIELDS, "error"]
SORT_KEYS = ("row",) + SUMMARY_FIELDS


@dataclass(frozen=True)
class Filters:
    agent: str = ""  # substring, case-insensitive
    model: str = ""
    task: str = ""
    reward_min: float | None = None
    reward_max: float | None = None

    @property
    def fields(self) -> set[str]:
        out = {k for k in ("agent", "model", "task") if getattr(self, k)}
        if self.reward_min is not None or self.reward_max is not None:
            out.add("reward")
        return out

    def match(self, s: dict[str, Any]) -> bool:
        for k in ("agent", "model", "task"):
            want = getattr(self, k).strip().lower()
            if want and want not in str(s.get(k) or "").lower():
                return False
        r = s.get("reward")
        if self.reward_min is not None and (r is None or r < self.reward_min):
            return False
        if self.reward_max is not None and (r is None or r > self.reward_max):
            return False
        return True


@dataclass
class Page:
    rows: list[dict[str, Any]]  # ROW_COLUMNS keys
    page: int
    pages: int | None
    total: int | None  # rows matching (None: unknown without a full count)
    note: str = ""
    bytes_read: int = 0
    indices: list[int] = field(default_factory=list)


def _summary(fmt, row: int, value: Any) -> dict[str, Any]:
    base = {"row": row, **{k: None for k in SUMMARY_FIELDS}, "error": ""}
    if not isinstance(value, dict):
        base["error"] = str(value)
        return base
    try:
        s = fmt.summarize(value)
    except Exception as e:  # a summary must not hide the row
        base["error"] = f"{type(e).__name__}: {e}"
        return base
    for k in SUMMARY_FIELDS:
        v = s.get(k)
        base[k] = v if v is None or isinstance(v, (int, float)) else str(v)[:200]
    return base


def summarize_rows(src, rows: list[int]) -> list[dict[str, Any]]:
    """Summaries of the given rows (reads just those rows)."""
    return [_summary(src.format, r, v) for r, v in src.dataset.read_rows(rows)]


def _all_summaries(src, need: set[str], progress: Callable[[str], None] | None) -> dict[int, dict[str, Any]]:
    fmt = src.format
    light = need <= set(fmt.light_fields) and bool(fmt.light)
    cache = src.__dict__.setdefault("_summaries", {})
    key = "light" if light else "full"
    if key in cache:
        return cache[key]
    if "full" in cache:
        return cache["full"]
    if progress:
        progress(f"summarising every row ({'columns ' + ', '.join(fmt.light) if light else 'whole rows'})")
    # A sort or filter reads every row: at most the rows_scanned budget of them (a public app's
    # visitor cannot make the server read a whole Hub dataset), with a message saying so.
    lim = (getattr(src, "settings", None) or Settings.from_env()).limits()
    out = {}
    for r, v in src.dataset.scan(list(fmt.light) if light else None):
        lim.check("rows_scanned", len(out) + 1, f"{src.label}: sorting or filtering reads every row")
        out[r] = _summary(fmt, r, v)
    cache[key] = out
    return out


def browse_page(src, page: int = 0, page_size: int = 20, *, sort: str = "row", descending: bool = False,
                filters: Filters | None = None, progress: Callable[[str], None] | None = None) -> Page:
    """One page of the row table (see module doc)."""
    filters = filters or Filters()
    page_size = max(1, int(page_size))
    page = max(0, int(page))
    sort = sort if sort in SORT_KEYS else "row"
    before = src.dataset.bytes_read
    notes: list[str] = []
    visible = src.visible_rows()
    if visible is not None:
        hidden = src.versions()["hidden"]
        if hidden:
            key, ver = src.format.dedupe
            notes.append(f"{hidden} older row(s) hidden: the same {key} appears in several rows; "
                         f"showing the newest ({ver}) of each")
    need = filters.fields | ({sort} if sort != "row" else set())
    if not need:
        order = visible if visible is not None else None
        total = len(order) if order is not None else len(src.dataset)
        seq = order if order is not None else range(total)
        if descending:
            seq = seq[::-1]
        idx = list(seq[page * page_size:(page + 1) * page_size])
        rows = summarize_rows(src, idx)
    else:
        summ = _all_summaries(src, need, progress)
        cand = visible if visible is not None else sorted(summ)
        matched = [summ[r] for r in cand if r in summ and filters.match(summ[r])]
        if sort != "row":
            present = [s for s in matched if s.get(sort) is not None]
            missing = [s for s in matched if s.get(sort) is None]
            present.sort(key=lambda s: (s[sort] if isinstance(s[sort], (int, float)) else str(s[sort]).lower()),
                         reverse=descending)
            matched = present + missing
        elif descending:
            matched = matched[::-1]
        total = len(matched)
        idx = [s["row"] for s in matched[page * page_size:(page + 1) * page_size]]
        light = need <= set(src.format.light_fields)
        rows = summarize_rows(src, idx) if light else [matched[page * page_size + i] for i in range(len(idx))]
        if filters.fields:
            notes.append(f"{total} row(s) match the filters")
    pages = (total + page_size - 1) // page_size if total is not None else None
    return Page(rows, page, pages, total, "; ".join(notes), src.dataset.bytes_read - before, idx)
