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
from ..memo import release_memory
from ..sources.keep import DOWNLOAD_PREFIX, KEEP
from ..visitor import deep_link, start_source
from . import (browse, capture_tab, compare_tab, datasets_tab, drift_tab, export_button, health_tab, presenter,
               rescore_panel, seam, signin, talk_panel, template_tab, upload_gate)
from . import live_view
from . import groups_tab  # issue 38: GRPO groups (+ the sibling walker under the token view)
from . import search_tab  # issue 38: search a dataset down to the token (?q= links)
from . import agent_api  # issue 38: token evidence for agents (API endpoints, MCP tools)
from .store import RolloutStore

__all__ = ["create_app", "launch_kwargs", "QUIET_ANALYTICS"]

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
  // In-page links (a[data-jump], e.g. the Drift tab's "Dataset scan ↓") scroll to their panel: followed as
  // links they left the page (its <base> makes "#id" an address without the query, so the rollout went).
  document.addEventListener('click', e => {
    const a = e.target.closest ? e.target.closest('a[data-jump]') : null;
    const to = a && document.getElementById(a.dataset.jump);
    if (to) { e.preventDefault(); to.scrollIntoView({block: 'start'}); }
  });
}
"""


QUEUE_STATUS_S = 1.0  # how often visitors waiting in the queue are told their place

# Gradio's queue keeps a record per event and, after each one, builds a pandas DataFrame of the last 10,000 and
# groups it by function, for a /monitoring page this app does not serve: 12-16% of the server's CPU with 16
# visitors on one link (bench/bench_room.py profile). Its own settings, read when the queue is made: the summary
# once per 100,000 events, over at most the last 1,000 records (set in the environment, they win).
QUIET_ANALYTICS = {"GRADIO_ANALYTICS_CACHE_FREQUENCY": "100000", "GRADIO_ANALYTICS_MAX_EVENTS": "1000"}


def launch_kwargs(settings: Settings | None = None) -> dict:
    settings = settings or Settings.from_env()
    return dict(
        theme=gr.themes.Soft(primary_hue="indigo", neutral_hue="slate"),
        css=(ASSETS / "app.css").read_text(),
        js=GLOBAL_JS,
        max_file_size=f"{settings.max_upload_mb}mb",
        footer_links=[],
        run_history=False,
        # Gradio's upload route within the disk budgets (viewer/ui/upload_gate.py): FastAPI's own argument
        app_kwargs={"middleware": upload_gate.middleware(settings), "lifespan": agent_api.lifespan},
        mcp_server=agent_api.mcp_on(settings),  # the agent endpoints as MCP tools (VIEWER_MCP, view --mcp)
    )


def create_app(settings: Settings | None = None) -> gr.Blocks:
    settings = settings or Settings.from_env()
    store = RolloutStore(settings)
    # Visitors' files are not kept for ever: uploads and Hub downloads go when their session
    # ends, after disk_ttl_s unused, and oldest first past disk_mb (viewer/sources/keep.py);
    # Gradio's own copies of uploaded files after the same TTL (delete_cache).
    ttl = int(limits(settings.public_mode()).disk_ttl_s)
    KEEP.adopt()
    KEEP.downloads = upload_gate.gradio_cache()  # downloads lie where Gradio serves them: no copy of its own
    KEEP.adopt(KEEP.downloads, DOWNLOAD_PREFIX)
    KEEP.start(max(0.5, min(60.0, ttl / 4)) if ttl else 60.0)
    with gr.Blocks(title="Rollout Inspector", analytics_enabled=False,
                   delete_cache=(max(1, min(3600, ttl // 4)), ttl) if ttl else None) as demo:
        gr.HTML(render.title_html())
        b = browse.build(settings, store)
        with b.under_tokens:  # right under the token view: trainer-side logprobs (Δ colour mode)
            rescore_panel.build(settings, store, b)
            export_button.build(settings, store, b)  # Download as HTML: this view, offline
            walk = groups_tab.walker()  # ◀ ▶ through a GRPO group's siblings (shown once one is opened)
        # Each further screen is a tab builder in its own module (see viewer/ui/*_tab.py).
        with b.tabs:
            with gr.Tab("Drift", id="drift"):
                drift = drift_tab.build(settings, store, b)
            with gr.Tab("Health", id="health"):
                health_tab.build(settings, store, b)
            with gr.Tab("Compare", id="compare"):
                cmp = compare_tab.build(settings, store, b)
            with gr.Tab("Datasets", id="datasets"):
                ds = datasets_tab.build(settings, store, b)
            with gr.Tab("Groups", id="groups"):
                groups_tab.build(settings, store, b, ds, walk)
            with gr.Tab("Search", id="search"):
                search_tab.build(settings, store, b, demo)
            with gr.Tab("Capture", id="capture"):
                capture_tab.build(settings, store, b, demo)
            with gr.Tab("Template", id="template"):
                template_tab.build(settings, store, b)
        _present, present_load, present_outputs = presenter.build(settings, store, b)

        async def on_load(request: gr.Request):
            link = deep_link(request.query_params if request is not None else {})  # viewer/visitor.py
            spec, index, focus, mode, row, note = link.source, link.turn, link.tok, link.mode, link.row, link.notice
            if not spec:
                spec = start_source(settings.sample)
            # hf:// links read as the visitor: their own sign-in token, else anonymously (public mode)
            # tokens first, the plots after; the request (last, past deep_link's own parameters) makes
            # this answer one of the session's staged events, so opening something else before the
            # plots come drops them instead of drawing the link's rollout back over the new one
            async for answer in b.open_staged(spec, index, focus, mode, row, note, signin.hub_token(request), request):
                yield answer

        def on_compare_link(key, request: gr.Request):
            """?compare=B (+ compare_row=N): compare the rollout the link opened with B, on the Compare tab."""
            link = deep_link(request.query_params if request is not None else {})
            if not link.compare:
                return [gr.skip()] * (len(cmp.outputs) + 1)
            return cmp.run(key, link.compare, link.compare_row) + [gr.Tabs(selected="compare")]

        def on_unload(request: gr.Request):
            session = getattr(request, "session_hash", None)
            gone = KEEP.end_session(session)  # the tab closed: its uploads go, with what the shared cache
            store.forget_under(gone)  # holds of them (nobody can open them again) ...
            # ... and what its State held (notes, decks, its opened dataset, view settings), now, not an hour
            # later (Gradio keeps a closed session's State that long): issue 36, nothing kept past its owner
            seam.forget_session(demo, session)
            if gone:  # what a session's uploads used goes back to the system, not only to the allocator (a full
                release_memory()  # collection is not free: not on every tab's close, only where uploads went)

        demo.unload(on_unload)
        loaded = demo.load(on_load, None, b.outputs, api_visibility="private", show_progress="hidden", **b.shows)
        loaded.then(on_compare_link, [b.key], cmp.outputs + [b.tabs], api_visibility="private", show_progress="hidden")
        loaded.then(present_load, [b.key, b.turn], present_outputs, api_visibility="private", show_progress="hidden")
        live_view.build(settings, store, b, loaded)  # ?follow=1 / view --follow: a growing source, re-read as it grows
        # notes (panel under the token view, ?note=K) and decks (?deck=PATH, an uploaded deck.json)
        talk_panel.build(settings, store, b, cmp, drift, loaded)
        browse.wire_turn_followers(b)  # the panels that follow the turn: one event, only while one is shown
        agent_api.build(settings)  # stateless API endpoints (and MCP tools): search, summary, tokens, drift, lint
    # Queue positions go to waiting visitors once a second (and once when they join), not to every
    # waiting event each time another starts (Gradio's "auto"): 16 visitors on one link got ~1.1 such
    # messages per event on top of their answer's three, each an SSE write and a client wake-up
    # (docs/SPEED.md, room; tests/test_room_events.py).
    # A bounded queue (the queue_size budget, public mode: 64): past it Gradio refuses a new event as "queue
    # is full" instead of growing it (issue 36, finding 5; the per-visitor share is viewer/ui/fair.py)
    waiting = int(limits(settings.public_mode()).queue_size)
    for name, value in QUIET_ANALYTICS.items():
        os.environ.setdefault(name, value)
    demo.queue(default_concurrency_limit=4, status_update_rate=QUEUE_STATUS_S, max_size=waiting or None)
    seam.enable(demo, settings.gradio_seam)  # Gradio's internals (viewer/ui/seam.py); off: Gradio's own way
    return demo

