"""The Search screen (issue 38, point 3): one box over a whole dataset, facets with counts that narrow it when
clicked, a reward histogram, and hits as rollout · turn · token, each a link that opens the token view there.

Thin: :mod:`viewer.search` builds the index and runs the query (DuckDB, bounded in public mode),
:mod:`viewer.render.search` builds the hits' HTML, :mod:`viewer.plots.search` the histogram. A hit's link is the
app's deep link (``?source=…&row=…&turn=…&tok=…``, read by the page load: viewer/visitor.py), its source named
relative to the data root (:func:`.opening.link_spec`; ``Hit.link`` would name the server's own path). The query
is in the address (``?q=…&in=…``), so a search is a link: the page load runs it and shows this tab.
"""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urlencode

import gradio as gr

from .. import render
from ..config import Settings
from ..plots.search import reward_hist_figure
from ..render.search import search_hits_html, search_status_html
from ..sources.shown import shown_path, shown_text
from ..visitor import bounded_text, local_path
from .opening import link_spec

__all__ = ["build", "SearchHandlers", "FACET_NAMES", "HITS"]

FACET_NAMES = ("model", "agent", "tool", "cause", "lint", "reward", "group", "step")  # viewer.search.FACETS
HITS = 50  # hits shown a search
MAX_QUERY = 2000
# the address follows the search (replaceState: no new history entry per facet click)
_URL_JS = """(q, src) => { const u = new URL(location.href);
  for (const k of ['source', 'row', 'turn', 'tok', 'mode', 'note']) u.searchParams.delete(k);
  u.searchParams.set('q', q || '');
  if (src && src !== '.') u.searchParams.set('in', src); else u.searchParams.delete('in');
  history.replaceState(history.state, '', u.href); }"""


def build(settings: Settings, store, browse, demo) -> SimpleNamespace:
    """Create this screen's components inside the current gr.Tab and wire them (``demo``: its page load runs a
    ``?q=`` link)."""
    with gr.Row(equal_height=True):
        where = gr.Textbox(value=".", label=f"Dataset: a folder or data file inside "
                                            f"{'the data folder' if settings.public_mode() else settings.data_root}, "
                                            "or hf://datasets/OWNER/NAME", elem_id="search-in", scale=2)
        query = gr.Textbox(label="Search (e.g. tool:bash logprob<-5, cause:special_token, reward<0.5, "
                                 '"a phrase", /regex/, ids:151657; AND OR NOT)', elem_id="search-q", scale=4,
                           placeholder="empty: every rollout, lowest reward first")
        go = gr.Button("Search", variant="primary", elem_id="search-go", scale=0, min_width=100)
    status = gr.HTML(render.notice_html("Type a query and Search: the first search of a dataset builds its index."),
                     elem_id="search-status")
    with gr.Row():
        with gr.Column(scale=1, min_width=220, elem_id="search-facets"):
            facets = [gr.Radio([], label=name, elem_id=f"search-facet-{name}", visible=False) for name in FACET_NAMES]
            hist = gr.Plot(elem_id="search-hist", show_label=False)
        with gr.Column(scale=3):
            hits = gr.HTML("", elem_id="search-hits")
    h = SearchHandlers(settings)
    outputs = [status, hits, hist, *facets]
    address = dict(js=_URL_JS, api_name="search_address", api_visibility="private", queue=False)
    go.click(h.on_search, [where, query], outputs, api_name="search", concurrency_id="long-work",
             concurrency_limit=1).then(None, [query, where], None, **address)
    query.submit(h.on_search, [where, query], outputs, api_name="search_submit", api_visibility="private",
                 concurrency_id="long-work", concurrency_limit=1).then(None, [query, where], None, **address)
    for radio in facets:
        radio.input(h.on_facet, [where, query, radio], [query, *outputs], api_name="search_facet",
                    api_visibility="private", concurrency_id="long-work", concurrency_limit=1).then(
            None, [query, where], None, **address)
    demo.load(h.on_link, None, [where, query, *outputs, browse.tabs], api_name="search_link",
              api_visibility="private", show_progress="hidden", concurrency_id="long-work", concurrency_limit=1)
    return SimpleNamespace(where=where, query=query, outputs=outputs)


class SearchHandlers:
    """What the screen's events answer: [status, hits HTML, histogram, one update per facet]."""

    def __init__(self, settings: Settings):
        self.settings = settings

    def _spec(self, text) -> str:
        text = (text or "").strip() or "."
        return text if text.startswith("hf://") else str(local_path(text, self.settings))

    def on_search(self, where, query, progress=gr.Progress()) -> list:
        from ..search import QueryError, SearchError, build_index, search

        try:
            spec = self._spec(where)
            q = bounded_text("query", query or "", MAX_QUERY)
        except ValueError as e:
            return self._fail(str(e))

        def prog(done: int, total: int | None) -> None:
            progress((done, total) if total else 0.0, desc="indexing rollouts", unit="rollouts")

        try:  # incremental: only rollouts that changed since the last build are scanned again
            info = build_index(spec, self.settings, progress=prog)
            res = search(spec, q, self.settings, limit=HITS, build=False)
        except QueryError as e:
            return self._fail(f"Query: {e}")
        except SearchError as e:
            return self._fail(str(e))
        except Exception as e:  # a reader's SourceError, a scan input error: said, never a dead screen
            return self._fail(f"Could not search {where}: {getattr(e, 'message', None) or e}")
        built = (f"index: {info.rollouts:,} rollouts, {info.rebuilt} scanned now, {info.reused} reused"
                 + (f"; {len(info.errors)} unreadable" if info.errors else ""))
        return self.values(res, shown_path(spec, self.settings), q, built)

    def values(self, res, shown: str, q: str, note: str = "") -> list:
        """The screen's outputs for a search result ``res``."""
        links = [self.link(h) for h in res.hits]
        status = search_status_html(shown, q, res.total, res.rollouts, res.level, res.seconds,
                                    shown_text(note, self.settings))
        return [status, search_hits_html(res.hits, links, res.total, q), reward_hist_figure(res.reward_hist),
                *self.facet_updates(res.facets)]

    def link(self, hit) -> str:
        """The hit's deep link, its source relative to the data root ("" when it is not inside it)."""
        src = hit.source if str(hit.source).startswith("hf://") else link_spec(Path(hit.source), self.settings)
        if not src:
            return ""
        place = {k: v for k, v in (("row", hit.row), ("turn", hit.turn), ("tok", hit.tok)) if v is not None}
        return urlencode({"source": src, **place})

    @staticmethod
    def facet_updates(facets: dict) -> list:
        from ..search import facet_clause

        out = []
        for name in FACET_NAMES:
            vals = facets.get(name) or []
            out.append(gr.Radio(choices=[(f"{v} ({n})", facet_clause(name, str(v))) for v, n in vals], value=None,
                                visible=bool(vals)))
        return out

    def on_facet(self, where, query, clause, progress=gr.Progress()) -> list:
        """A facet value clicked: its clause added to the query, the search run again."""
        if not clause:
            return [gr.skip()] * (4 + len(FACET_NAMES))
        q = f"{(query or '').strip()} {clause}".strip()
        return [q, *self.on_search(where, q, progress)]

    def on_link(self, request: gr.Request = None) -> list:
        """``?q=…[&in=…]``: the search the address names, run, on this tab; no ``q``: nothing changes."""
        params = dict(request.query_params) if request is not None else {}
        if "q" not in params:
            return [gr.skip()] * (3 + 3 + len(FACET_NAMES))
        where, q = params.get("in") or ".", params.get("q") or ""
        return [where, q, *self.on_search(where, q, lambda *a, **k: None), gr.Tabs(selected="search")]

    def _fail(self, message: str) -> list:
        return [render.notice_html(shown_text(message, self.settings), "error")] + [gr.skip()] * (2 + len(FACET_NAMES))
