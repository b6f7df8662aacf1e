"""The Gradio app: the only package that imports gradio.

``create_app()`` assembles the screens; ``LAUNCH_KWARGS`` holds what Gradio 6 wants at
launch time (theme, css, js, limits) so app.py and the tests launch identically.
"""
from __future__ import annotations

import os
from pathlib import Path

import gradio as gr

from .. import render
from ..budgets import limits
from ..config import Settings
from ..sources.keep import KEEP
from ..visitor import deep_link
from . import (browse, capture_tab, compare_tab, datasets_tab, drift_tab, export_button, health_tab, presenter,
               rescore_panel, signin, talk_panel, template_tab)
from .store import RolloutStore

__all__ = ["create_app", "launch_kwargs", "lazy_session_config", "quiet_queue_analytics"]

ASSETS = Path(__file__).parent / "assets"

# Clicking a point of the logprob (or Δ) plot selects that token in the token view. Plotly
# divs are re-created on every update, so attach the listener whenever one appears.
GLOBAL_JS = r"""
() => {
  const hook = () => {
    document.querySelectorAll('#logprob-plot .js-plotly-plot, #delta-plot .js-plotly-plot').forEach(p => {
      if (p.__riHooked || typeof p.on !== 'function') return;
      p.__riHooked = true;
      p.on('plotly_click', d => {
        const pt = d && d.points && d.points[0];
        if (!pt || pt.customdata === undefined) return;
        const pos = Array.isArray(pt.customdata) ? pt.customdata[0] : pt.customdata;
        window.dispatchEvent(new CustomEvent('ri-select-token', {detail: {output: Number(pos)}}));
      });
    });
  };
  new MutationObserver(hook).observe(document.body, {childList: true, subtree: true});
  hook();
}
"""


def launch_kwargs(settings: Settings | None = None) -> dict:
    settings = settings or Settings.from_env()
    return dict(
        theme=gr.themes.Soft(primary_hue="indigo", neutral_hue="slate"),
        css=(ASSETS / "app.css").read_text(),
        js=GLOBAL_JS,
        max_file_size=f"{settings.max_upload_mb}mb",
        footer_links=[],
        run_history=False,
    )


def create_app(settings: Settings | None = None) -> gr.Blocks:
    settings = settings or Settings.from_env()
    store = RolloutStore(settings)
    # Visitors' files are not kept for ever: uploads and Hub downloads go when their session
    # ends, after disk_ttl_s unused, and oldest first past disk_mb (viewer/sources/keep.py);
    # Gradio's own copies of uploaded files after the same TTL (delete_cache).
    ttl = int(limits(settings.public_mode()).disk_ttl_s)
    KEEP.adopt()
    KEEP.start(max(0.5, min(60.0, ttl / 4)) if ttl else 60.0)
    with gr.Blocks(title="Rollout Inspector", analytics_enabled=False,
                   delete_cache=(max(1, min(3600, ttl // 4)), ttl) if ttl else None) as demo:
        gr.HTML(render.title_html())
        b = browse.build(settings, store)
        with b.under_tokens:  # right under the token view: trainer-side logprobs (Δ colour mode)
            rescore_panel.build(settings, store, b)
            export_button.build(settings, store, b)  # Download as HTML: this view, offline
        # Each further screen is a tab builder in its own module (see viewer/ui/*_tab.py).
        with b.tabs:
            with gr.Tab("Drift", id="drift"):
                drift = drift_tab.build(settings, store, b)
            with gr.Tab("Health", id="health"):
                health_tab.build(settings, store, b)
            with gr.Tab("Compare", id="compare"):
                cmp = compare_tab.build(settings, store, b)
            with gr.Tab("Datasets", id="datasets"):
                datasets_tab.build(settings, store, b)
            with gr.Tab("Capture", id="capture"):
                capture_tab.build(settings, store, b)
            with gr.Tab("Template", id="template"):
                template_tab.build(settings, store, b)
        _present, present_load, present_outputs = presenter.build(settings, store, b)

        def on_load(request: gr.Request):
            link = deep_link(request.query_params if request is not None else {})  # viewer/visitor.py
            spec, index, focus, mode, row, note = link.source, link.turn, link.tok, link.mode, link.row, link.notice
            if not spec:
                spec = "sample:" + Path(settings.sample).name if Path(settings.sample).parent.name == "sample_data" \
                    else settings.sample
            # hf:// links read as the visitor: their own sign-in token, else anonymously (public mode)
            # tokens first, the plots after; the request (last, past deep_link's own parameters) makes
            # this answer one of the session's staged events, so opening something else before the
            # plots come drops them instead of drawing the link's rollout back over the new one
            yield from b.open_staged(spec, index, focus, mode, row, note, signin.hub_token(request), request)

        def on_compare_link(key, request: gr.Request):
            """?compare=B (+ compare_row=N): compare the rollout the link opened with B, on the Compare tab."""
            link = deep_link(request.query_params if request is not None else {})
            if not link.compare:
                return [gr.skip()] * (len(cmp.outputs) + 1)
            return cmp.run(key, link.compare, link.compare_row) + [gr.Tabs(selected="compare")]

        def on_unload(request: gr.Request):
            KEEP.end_session(getattr(request, "session_hash", None))  # the tab closed: its uploads go

        demo.unload(on_unload)
        loaded = demo.load(on_load, None, b.outputs, api_visibility="private", show_progress="hidden", **b.shows)
        loaded.then(on_compare_link, [b.key], cmp.outputs + [b.tabs], api_visibility="private", show_progress="hidden")
        loaded.then(present_load, [b.key, b.turn], present_outputs, api_visibility="private", show_progress="hidden")
        # notes (panel under the token view, ?note=K) and decks (?deck=PATH, an uploaded deck.json)
        talk_panel.build(settings, store, b, cmp, drift, loaded)
        browse.wire_turn_followers(b)  # the panels that follow the turn: one event, only while one is shown
    demo.queue(default_concurrency_limit=4)
    quiet_queue_analytics(demo._queue)
    lazy_session_config()
    return demo


def quiet_queue_analytics(queue) -> None:
    """Stop Gradio rebuilding its monitoring summary after every event.

    Gradio's queue keeps a record per event (the last 10,000) and, after each one, builds a pandas
    DataFrame of them all and groups it by function, for a /monitoring dashboard this app does not
    serve: 12-16% of the server's CPU with 16 visitors on one link (bench/bench_room.py profile),
    growing with the events served. The summary is now rebuilt once per 100,000 events, over at most
    the last 1,000 records (Gradio's own settings; GRADIO_ANALYTICS_* in the environment still win)."""
    if "GRADIO_ANALYTICS_CACHE_FREQUENCY" not in os.environ and hasattr(queue, "ANAYLTICS_CACHE_FREQUENCY"):
        queue.ANAYLTICS_CACHE_FREQUENCY = 100_000
    if "GRADIO_ANALYTICS_MAX_EVENTS" not in os.environ and hasattr(queue, "ANALYTICS_MAX_EVENTS"):
        queue.ANALYTICS_MAX_EVENTS = 1_000


class _NoBlocks:
    """The app's Blocks as Gradio's SessionState.__init__ reads it, with no blocks to configure up front."""

    blocks: dict = {}

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        return getattr(self._real, name)


class _LazyConfigs(dict):
    """A session's per-block config copies (SessionState.config_values), each made when first read.

    Gradio reads one entry when an event's input or output sets its value, and all of them only for its
    own deep-link button (`components`, through items()), which fills in every block then, as Gradio
    would have at the session's start (a block replaced by an update is configured when it is)."""

    def __init__(self, session, ids):
        super().__init__()
        self._session, self._ids = session, ids

    def _fill(self) -> None:
        bc = self._session.blocks_config
        for k, v in bc.blocks.items():
            if k in self._ids and not dict.__contains__(self, k):
                dict.__setitem__(self, k, bc.config_for_block(k, [], v))

    def items(self):
        self._fill()
        return super().items()

    def values(self):
        self._fill()
        return super().values()

    def __iter__(self):
        self._fill()
        return super().__iter__()

    def __len__(self):
        self._fill()
        return super().__len__()


def lazy_session_config() -> None:
    """Stop Gradio configuring every block of the page for each new session.

    A session's first event made ``SessionState``, which computed each of the page's ~230 blocks'
    config (props, three API descriptions) for Gradio's deep-link button, which this app does not use:
    ~60 ms of server CPU per new visitor at load 7 (≈ 11 ms on an idle core), holding the GIL while 16
    visitors' first events waited (bench/bench_room.py's open p95), and ≈ 450 KiB kept per session. Now
    each block's copy is made when an event first sets its value (what Gradio reads per event), and
    the rest only if something asks for them all (tests/test_room_events.py). Patches Gradio's class
    once per process; every app in it gets the same behaviour."""
    from gradio import state_holder

    cls = state_holder.SessionState
    if getattr(cls, "_ri_lazy_config", False):
        return
    eager = cls.__init__

    def __init__(self, blocks):
        eager(self, _NoBlocks(blocks))
        self.config_values = _LazyConfigs(self, set(blocks.blocks))

    cls._ri_eager_init = eager
    cls.__init__ = __init__
    cls._ri_lazy_config = True
