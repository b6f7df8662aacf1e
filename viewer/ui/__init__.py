"""The Gradio app: the only package that imports gradio.

``create_app()`` assembles the screens; ``LAUNCH_KWARGS`` holds what Gradio 6 wants at
launch time (theme, css, js, limits) so app.py and the tests launch identically.
"""
from __future__ import annotations

import datetime
import importlib.util
import os
import sys
from pathlib import Path

import gradio as gr

from .. import render
from ..budgets import limits
from ..config import Settings
from ..memo import release_memory
from ..sources.keep import DOWNLOAD_PREFIX, KEEP
from ..visitor import deep_link
from . import (browse, capture_tab, compare_tab, datasets_tab, drift_tab, export_button, health_tab, presenter,
               rescore_panel, signin, talk_panel, template_tab, upload_gate)
from .store import RolloutStore

__all__ = ["create_app", "launch_kwargs", "lazy_session_config", "cheap_skips", "quiet_queue_analytics"]

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


QUEUE_STATUS_S = 1.0  # how often visitors waiting in the queue are told their place


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
        app_kwargs={"middleware": upload_gate.middleware(settings)},
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

        async def on_load(request: gr.Request):
            link = deep_link(request.query_params if request is not None else {})  # viewer/visitor.py
            spec, index, focus, mode, row, note = link.source, link.turn, link.tok, link.mode, link.row, link.notice
            if not spec:
                spec = "sample:" + Path(settings.sample).name if Path(settings.sample).parent.name == "sample_data" \
                    else settings.sample
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
            held = bool(session and session in demo.state_holder)
            if held:
                demo.state_holder.delete_state(session)
            if gone:  # what a session's uploads used goes back to the system, not only to the allocator (a full
                release_memory()  # collection is not free: not on every tab's close, only where uploads went)

        demo.unload(on_unload)
        loaded = demo.load(on_load, None, b.outputs, api_visibility="private", show_progress="hidden", **b.shows)
        loaded.then(on_compare_link, [b.key], cmp.outputs + [b.tabs], api_visibility="private", show_progress="hidden")
        loaded.then(present_load, [b.key, b.turn], present_outputs, api_visibility="private", show_progress="hidden")
        # notes (panel under the token view, ?note=K) and decks (?deck=PATH, an uploaded deck.json)
        talk_panel.build(settings, store, b, cmp, drift, loaded)
        browse.wire_turn_followers(b)  # the panels that follow the turn: one event, only while one is shown
    # Queue positions go to waiting visitors once a second (and once when they join), not to every
    # waiting event each time another starts (Gradio's "auto"): 16 visitors on one link got ~1.1 such
    # messages per event on top of their answer's three, each an SSE write and a client wake-up
    # (docs/SPEED.md, room; tests/test_room_events.py).
    # A bounded queue (the queue_size budget, public mode: 64): past it Gradio refuses a new event as "queue
    # is full" instead of growing it (issue 36, finding 5; the per-visitor share is viewer/ui/fair.py)
    waiting = int(limits(settings.public_mode()).queue_size)
    demo.queue(default_concurrency_limit=4, status_update_rate=QUEUE_STATUS_S, max_size=waiting or None)
    quiet_queue_analytics(demo._queue)
    lazy_session_config()
    cheap_skips()
    no_matplotlib_search()
    inline_small_preprocess()
    return demo


_SMALL_INPUTS = (gr.Number, gr.Checkbox, gr.Textbox, gr.Dropdown)


def inline_small_preprocess() -> None:
    """Run the ``preprocess`` of small inputs where the event runs, not in a worker thread.

    Gradio hands each input's ``preprocess`` to a worker thread (``anyio.to_thread.run_sync`` in
    ``Blocks.preprocess_data``). For a number box, a checkbox, a text box or a dropdown (exactly those
    classes) it is a type check of a few bytes; the hand-off and the hand-back of the GIL cost more, and
    with 16 visitors on one link they queued behind each other: a turn switch has one such input, an
    open two, ◀ / ▶ four (docs/SPEED.md, room round six). Gradio's own ``preprocess`` still runs on the
    same value, errors and all; only the thread changes. Every other use of ``anyio`` in
    ``gradio.blocks`` (handlers, postprocess, other inputs) reaches the real module."""
    import types

    import gradio.blocks as gb

    if getattr(gb, "_ri_inline_preprocess", False):
        return
    real = gb.anyio

    async def run_sync(fn, *args, **kwargs):
        if getattr(fn, "__name__", None) == "preprocess" and type(getattr(fn, "__self__", None)) in _SMALL_INPUTS:
            return fn(*args)
        return await real.to_thread.run_sync(fn, *args, **kwargs)

    class _Anyio(types.ModuleType):  # gradio.blocks' anyio: the real one but for to_thread.run_sync
        def __getattr__(self, name):
            return getattr(real, name)

    proxy = _Anyio("anyio")
    proxy.to_thread = types.SimpleNamespace(run_sync=run_sync)
    gb.anyio = proxy
    gb._ri_inline_preprocess = True


def no_matplotlib_search() -> None:
    """Gradio runs every event inside ``MatplotlibBackendMananger``, which imports matplotlib on the way in
    and out to set its backend. This app draws with plotly and does not install matplotlib, so each of
    those imports was a failed search of every ``sys.path`` entry (~13 stat calls, two per event, in the
    bench's profile). Marked absent once, the import fails at once, as it would anyway; an installed
    matplotlib is left alone."""
    if "matplotlib" not in sys.modules and importlib.util.find_spec("matplotlib") is None:
        sys.modules["matplotlib"] = None


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


_NO_VALUE = object()
_SKIPPED = object()  # an output a handler skipped, on its way through Gradio's postprocess (cheap_skips)
_SKIP = {"__type__": "update"}  # gr.skip()


class _LazyConfigs(dict):
    """A session's per-block config copies (SessionState.config_values), each made when read.

    Gradio writes these on every event: a block's config (``config_for_block``: props, three API
    descriptions, ~0.3 ms) when a State is set (each turn switch), when an update replaces a block,
    and the first time an event sets a block's value, whose value it then writes into the copy. It
    reads them only for its deep-link button (``SessionState.components``, through items()), which this
    app does not show. So each write is kept as its recipe (the block object Gradio would configure
    then, and the value written since) and the copies are made, as Gradio would have made them, when
    something asks for them all (tests/test_room_events.py compares the result with Gradio's own)."""

    def __init__(self, session, ids):
        super().__init__()
        self._session, self._ids = session, ids
        self._todo: dict = {}  # block id -> [block object to configure, value to write or _NO_VALUE]

    def build(self, key, block) -> None:
        """Gradio's ``config_values[key] = config_for_block(key, [], block)``, when read."""
        dict.pop(self, key, None)
        self._todo[key] = [block, _NO_VALUE]

    def set_value(self, key, value) -> None:
        """Gradio's ``_update_value_in_config``: configure the block now in the session if it has no
        copy yet, then write ``value`` as its props' value (both when read)."""
        if dict.__contains__(self, key):
            conf = dict.__getitem__(self, key)
            if "props" in conf:
                conf["props"]["value"] = value
            return
        todo = self._todo.setdefault(key, [self._session.blocks_config.blocks[key], _NO_VALUE])
        todo[1] = value

    def _fill(self) -> None:
        bc = self._session.blocks_config
        for k, (block, value) in list(self._todo.items()):
            conf = bc.config_for_block(k, [], block)
            if value is not _NO_VALUE and "props" in conf:
                conf["props"]["value"] = value
            dict.__setitem__(self, k, conf)
        self._todo.clear()
        for k, v in bc.blocks.items():  # never written: as the session's start made them
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
    """Stop Gradio configuring blocks for each session on every event.

    A session's first event made ``SessionState``, which computed each of the page's ~230 blocks'
    config (props, three API descriptions) for Gradio's deep-link button, which this app does not use:
    ~60 ms of server CPU per new visitor at load 7 (≈ 11 ms on an idle core), holding the GIL while 16
    visitors' first events waited (bench/bench_room.py's open p95), and ≈ 450 KiB kept per session; and
    every event then configured again each State it set, each block an update replaced and each block
    whose value it set for the first time (≈ 20 blocks per visitor's first open, 1-2 per turn switch).
    Now a session's copies are made only if something asks for them all (:class:`_LazyConfigs`;
    tests/test_room_events.py). Patches Gradio's class once per process; every app in it gets the same
    behaviour (a session made without the patch keeps Gradio's own methods)."""
    from gradio import state_holder
    from gradio.components import State

    cls = state_holder.SessionState
    if getattr(cls, "_ri_lazy_config", False):
        return
    eager, setitem, update_config, update_value = (cls.__init__, cls.__setitem__, cls._update_config,
                                                   cls._update_value_in_config)

    def __init__(self, blocks):
        eager(self, _NoBlocks(blocks))
        self.config_values = _LazyConfigs(self, set(blocks.blocks))

    def __setitem__(self, key, value):  # Gradio's, with the config copy left to _LazyConfigs
        if not isinstance(self.config_values, _LazyConfigs):
            return setitem(self, key, value)
        block = self.blocks_config.blocks.get(key)
        if isinstance(block, State):
            self._state_ttl[key] = (block.time_to_live, datetime.datetime.now())
            self.state_data[key] = value
        else:
            self.blocks_config.blocks[key] = value
        if block:
            self.config_values.build(key, block)

    def _update_config(self, key):
        if not isinstance(self.config_values, _LazyConfigs):
            return update_config(self, key)
        if self[key] is not None:
            self.config_values.build(key, self[key])

    def _update_value_in_config(self, key, value):
        if value is _SKIPPED:  # an output left as it is (cheap_skips): its copy keeps its value
            return None
        if not isinstance(self.config_values, _LazyConfigs):
            return update_value(self, key, value)
        self.config_values.set_value(key, value)

    cls._ri_eager = (eager, setitem, update_config, update_value)
    cls._ri_eager_init = eager
    cls.__init__, cls.__setitem__, cls._update_config = __init__, __setitem__, _update_config
    cls._update_value_in_config = _update_value_in_config
    cls._ri_lazy_config = True


def cheap_skips() -> None:
    """Make an output a handler skips (``gr.skip()``) cost nothing in the events that send serialised values.

    Gradio reads ``gr.skip()`` as an update of no props, and builds a new component for the session from
    the old one's arguments (plus its config copy): ~1.5-2 ms of server CPU per skipped output. The
    browse events skip outputs on every answer (a two-step answer's first step skips the plots: 3 on an
    open, 1 on a turn switch; an open skips the hidden row list), so a room of visitors paid it on most
    events. In an event with ``postprocess=False`` (``Browse.shows``) a skipped output now passes Gradio's
    postprocess as a marker that nothing reads and is sent as Gradio sends a skip (``{"__type__":
    "update"}``); the session keeps its component (the one Gradio would have built has the same props;
    tests/test_room_events.py compares the messages and the session copies with Gradio's own)."""
    from gradio.blocks import Blocks

    if getattr(Blocks, "_ri_cheap_skips", False):
        return
    real = Blocks.postprocess_data

    async def postprocess_data(self, block_fn, predictions, state):
        if block_fn.postprocess or block_fn.batch or not isinstance(predictions, (list, tuple)) \
                or len(block_fn.outputs) < 2 or len(predictions) != len(block_fn.outputs):
            return await real(self, block_fn, predictions, state)
        at = [i for i, (v, b) in enumerate(zip(predictions, block_fn.outputs))
              if isinstance(v, dict) and v == _SKIP and not b.stateful]
        if not at:
            return await real(self, block_fn, predictions, state)
        predictions = list(predictions)
        for i in at:
            predictions[i] = _SKIPPED
        out = await real(self, block_fn, predictions, state)
        for i in at:
            out[i] = dict(_SKIP)
        return out

    Blocks._ri_real_postprocess_data = real
    Blocks.postprocess_data = postprocess_data
    Blocks._ri_cheap_skips = True
