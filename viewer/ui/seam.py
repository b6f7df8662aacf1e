"""The one seam to Gradio's internals: every private name of Gradio (and of what it runs on) the app uses.

Each entry of :data:`ENTRIES` is a named change to, or read of, something Gradio does not document, with
what it buys (measured: docs/GRADIO.md §7 lists each, with what Gradio does, what we change, the figure,
and what an upstream fix would be). ``tests/test_gradio_seam.py`` fails if a private Gradio name appears
anywhere else in ``viewer/`` or if docs/GRADIO.md misses an entry.

The seam is an optimisation, never a dependency: :func:`enable` turns it on for one app
(``create_app``), only on the Gradio version every entry was written for (:data:`WRITTEN_FOR`), and only
when the ``gradio_seam`` setting is on (``VIEWER_GRADIO_SEAM``). Anywhere else each entry is Gradio's own
behaviour: the patches are installed once per process but act only for an app that enabled them (a
Blocks in :data:`_ON`), the reads answer as if Gradio had nothing to tell. Another Gradio version says so
in one log line and runs on Gradio's own behaviour throughout.
"""
from __future__ import annotations

import datetime
import importlib.util
import logging
import sys
import threading
import types
import weakref
from dataclasses import dataclass
from typing import Any

import gradio as gr

__all__ = ["ENTRIES", "NAMES", "WRITTEN_FOR", "enable", "is_on", "session_copy", "forget_session", "oauth_session",
           "mcp_tools_only", "gradio_own"]

WRITTEN_FOR = "6.31.0"  # requirements.txt, pyproject.toml and the Space's sdk_version pin the same
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Entry:
    name: str
    buys: str  # what it buys, the figure measured (docs/GRADIO.md §7 says how)


ENTRIES = (  # figures: bench/bench_seam.py, 2026-12-05, CPU per event without the entry → with it
    Entry("lazy_session_config", "a visitor's first event 25.9 → 0.8 ms; 398 → 29 KiB kept per session"),
    Entry("cheap_skips", "a later open 0.75 → 0.41 ms (no component built per skipped output)"),
    Entry("inline_small_preprocess", "1.4 → 0 worker-thread hand-offs per event; a turn switch 0.25 → 0.13 ms"),
    Entry("no_matplotlib_search", "80 → 3 µs per event (Gradio's HTTP route imports matplotlib twice)"),
    Entry("session_copy", "a later open 1.04 → 0.41 ms (no update the visitor's copy already has)"),
    Entry("forget_session", "a closed tab's State (notes, decks, its dataset) goes at once, not 3,600 s later"),
    Entry("oauth_session", "Hub reads as the signed-in visitor, from the session only (no gr.OAuthToken parameter)"),
    Entry("mcp_tools", "the MCP server lists the app's 5 agent tools, not every screen event (gr.State inputs)"),
)
NAMES = tuple(e.name for e in ENTRIES)

_ON: "weakref.WeakKeyDictionary[Any, frozenset[str]]" = weakref.WeakKeyDictionary()  # app -> its entries on
_OWN: dict[str, Any] = {}  # Gradio's own functions, as they were before a patch replaced them
_INSTALLED: set[str] = set()
_LOCK = threading.Lock()
_said: list[str] = []


def _gradio_fits() -> bool:
    """Gradio is the version the seam was written for; otherwise said once, in one log line."""
    if gr.__version__ == WRITTEN_FOR:
        return True
    if not _said:
        _said.append(gr.__version__)
        log.warning("Gradio %s: viewer/ui/seam.py was written for %s; running on Gradio's own behaviour (%s off)",
                    gr.__version__, WRITTEN_FOR, ", ".join(NAMES))
    return False


def enable(demo, on: bool = True, entries: tuple[str, ...] = NAMES) -> frozenset[str]:
    """Turn ``entries`` on for the app ``demo`` (``on``: the ``gradio_seam`` setting), installing the
    process-wide patches the first time; returns the entries on for it (none off the pinned Gradio)."""
    unknown = set(entries) - set(NAMES)
    if unknown:
        raise ValueError(f"not entries of the Gradio seam: {sorted(unknown)}")
    if not on or not _gradio_fits():
        _ON.pop(demo, None)
        return frozenset()
    with _LOCK:
        if not _INSTALLED:  # once per process, in this order; each acts only for the apps that enabled it
            for patch in (_lazy_session_config, _cheap_skips, _inline_small_preprocess):
                patch()
            _INSTALLED.add("gated")
        if "no_matplotlib_search" in entries and "no_matplotlib_search" not in _INSTALLED:
            _no_matplotlib_search()
            _INSTALLED.add("no_matplotlib_search")
    _ON[demo] = frozenset(entries)
    return _ON[demo]


def is_on(demo, name: str) -> bool:
    """Entry ``name`` is on for the app ``demo`` (None, or an app that did not enable it: off)."""
    try:
        return demo is not None and name in _ON.get(demo, ())
    except TypeError:  # not an app (a stand-in a test built)
        return False


def gradio_own(name: str):
    """Gradio's own function that entry patch ``name`` replaced (``"SessionState.__init__"``, ...), for tests
    that compare with it."""
    return _OWN[name]


def _event_app():
    """The app whose event is running (Gradio sets it for ``process_api``), or None."""
    from gradio.context import LocalContext

    return LocalContext.blocks.get(None)


# ----------------------------------------------------------------------------------------- reads
def session_copy(component):
    """``component`` as the visitor whose event is running holds it now (Gradio's per-session copy, which an
    update replaces), or None: outside an event, or with the seam off (the caller then sends the update)."""
    from gradio.context import LocalContext

    if not is_on(_event_app(), "session_copy"):
        return None
    blocks = LocalContext.blocks_config.get(None)
    return blocks.blocks.get(component._id) if blocks is not None else None


def forget_session(demo, session: str | None) -> bool:
    """Drop what a closed session's States hold now (Gradio keeps them an hour: ``STATE_TTL_WHEN_CLOSED``);
    False when nothing was held or the seam is off (Gradio's hour)."""
    if not session or not is_on(demo, "forget_session"):
        return False
    holder = demo.state_holder
    if session not in holder:
        return False
    holder.delete_state(session)
    return True


OAUTH_KEY = "oauth_info"  # where Gradio's OAuth callback keeps the sign-in in its signed session cookie


def oauth_session(request: Any) -> dict | None:
    """What Gradio's OAuth callback stored for this request's browser session (its access token, expiry,
    user info), or None: no sign-in, no OAuth (no session middleware), or the seam off for the app."""
    app = _event_app()
    if app is not None and not is_on(app, "oauth_session"):
        return None
    if app is None and not _gradio_fits():  # outside an event: the version decides
        return None
    underlying = getattr(request, "request", None) or request
    scope = getattr(underlying, "scope", None)
    # the session exists only where Gradio installed its SessionMiddleware (a Space with hf_oauth)
    session = scope.get("session") if isinstance(scope, dict) else None
    info = session.get(OAUTH_KEY) if isinstance(session, dict) else None
    return info if isinstance(info, dict) else None


def mcp_tools_only(app: Any, names: tuple[str, ...]) -> bool:
    """Keep the MCP server of the FastAPI ``app`` (Gradio's, started) to the endpoints ``names``: its
    ``tool_to_endpoint`` map, which Gradio fills with every public endpoint and does not document. False (every
    public endpoint stays a tool, as Gradio makes them) without an MCP server or with the seam off for the app."""
    blocks = app.get_blocks() if hasattr(app, "get_blocks") else None
    server = getattr(blocks, "mcp_server_obj", None) if is_on(blocks, "mcp_tools") else None
    if server is None:
        return False
    server.tool_to_endpoint = {tool: ep for tool, ep in server.tool_to_endpoint.items() if ep.lstrip("/") in names}
    return True


# --------------------------------------------------------------------------- process-wide patches
def _no_matplotlib_search() -> None:
    """Gradio runs every event inside ``MatplotlibBackendMananger``, which imports matplotlib on the way in and
    out to set its backend. Without matplotlib installed each was a failed search of every ``sys.path`` entry.
    Marked absent once, the import fails at once, as it would anyway; an installed matplotlib is left alone.
    (Process-wide by nature: nothing else changes for an app with the seam off.)"""
    if "matplotlib" not in sys.modules and importlib.util.find_spec("matplotlib") is None:
        sys.modules["matplotlib"] = None


_SMALL_INPUTS = (gr.Number, gr.Checkbox, gr.Textbox, gr.Dropdown)


def _inline_small_preprocess() -> None:
    """Run the ``preprocess`` of small inputs where the event runs, not in a worker thread.

    Gradio hands each input's ``preprocess`` to a worker thread (``anyio.to_thread.run_sync`` in
    ``Blocks.preprocess_data``). For a number box, a checkbox, a text box or a dropdown (exactly those classes)
    it is a type check of a few bytes; the hand-off and the hand-back of the GIL cost more. Gradio's own
    ``preprocess`` still runs on the same value, errors and all; only the thread changes. Every other use of
    ``anyio`` in ``gradio.blocks`` reaches the real module."""
    import gradio.blocks as gb

    real = gb.anyio

    async def run_sync(fn, *args, **kwargs):
        if getattr(fn, "__name__", None) == "preprocess" and type(getattr(fn, "__self__", None)) in _SMALL_INPUTS \
                and is_on(_event_app(), "inline_small_preprocess"):
            return fn(*args)
        return await real.to_thread.run_sync(fn, *args, **kwargs)

    class _Anyio(types.ModuleType):  # gradio.blocks' anyio: the real one but for to_thread.run_sync
        def __getattr__(self, name):
            return getattr(real, name)

    proxy = _Anyio("anyio")
    proxy.to_thread = types.SimpleNamespace(run_sync=run_sync)
    _OWN["gradio.blocks.anyio"] = real
    gb.anyio = proxy


_SKIPPED = object()  # an output a handler skipped, on its way through Gradio's postprocess (cheap_skips)
_SKIP = {"__type__": "update"}  # gr.skip()


def _cheap_skips() -> None:
    """Make an output a handler skips (``gr.skip()``) cost nothing in the events that send serialised values.

    Gradio reads ``gr.skip()`` as an update of no props and builds a new component for the session from the
    old one's arguments (plus its config copy). In an event with ``postprocess=False`` (``Browse.shows``) a
    skipped output now passes Gradio's postprocess as a marker that nothing reads and is sent as Gradio sends
    a skip; the session keeps its component (the one Gradio would have built has the same props;
    tests/test_room_events.py compares the messages and the session copies with Gradio's own)."""
    from gradio.blocks import Blocks
    from gradio.state_holder import SessionState

    real = Blocks.postprocess_data

    async def postprocess_data(self, block_fn, predictions, state):
        if block_fn.postprocess or block_fn.batch or not isinstance(predictions, (list, tuple)) \
                or len(block_fn.outputs) < 2 or len(predictions) != len(block_fn.outputs) \
                or not is_on(self, "cheap_skips"):
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

    update_value = SessionState._update_value_in_config

    def _update_value_in_config(self, key, value):
        if value is _SKIPPED:  # an output left as it is: its copy keeps its value
            return None
        return update_value(self, key, value)

    _OWN["Blocks.postprocess_data"] = real
    Blocks.postprocess_data = postprocess_data
    SessionState._update_value_in_config = _update_value_in_config


_NO_VALUE = object()


class _NoBlocks:
    """The app's Blocks as Gradio's SessionState.__init__ reads it, with no blocks to configure up front."""

    blocks: dict = {}

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        return getattr(self._real, name)


class _LazyConfigs(dict):
    """A session's per-block config copies (``SessionState.config_values``), each made when read.

    Gradio writes these on every event: a block's config (``config_for_block``: props, three API
    descriptions, ~0.3 ms) when a State is set, when an update replaces a block, and the first time an event
    sets a block's value. It reads them only for its deep-link button (``SessionState.components``), which
    this app does not show. So each write is kept as its recipe and the copies are made, as Gradio would
    have made them, when something asks for them all (tests/test_room_events.py compares with Gradio's)."""

    def __init__(self, session, ids):
        super().__init__()
        self._session, self._ids = session, ids
        self._todo: dict = {}  # block id -> [block object to configure, value to write or _NO_VALUE]

    def build(self, key, block) -> None:
        """Gradio's ``config_values[key] = config_for_block(key, [], block)``, when read."""
        dict.pop(self, key, None)
        self._todo[key] = [block, _NO_VALUE]

    def set_value(self, key, value) -> None:
        """Gradio's ``_update_value_in_config``: configure the block now in the session if it has no copy yet,
        then write ``value`` as its props' value (both when read)."""
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


def _lazy_session_config() -> None:
    """Stop Gradio configuring blocks for each session on every event.

    A session's first event made ``SessionState``, which computed each of the page's ~230 blocks' config for
    Gradio's deep-link button, which this app does not use; every event then configured again each State it
    set, each block an update replaced and each block whose value it set for the first time. Now a session's
    copies are made only if something asks for them all (:class:`_LazyConfigs`). A session of an app
    without the entry (or made before the patch) keeps Gradio's own methods throughout."""
    from gradio.components import State
    from gradio.state_holder import SessionState

    cls = SessionState
    eager, setitem, update_config, update_value = (cls.__init__, cls.__setitem__, cls._update_config,
                                                   cls._update_value_in_config)

    def __init__(self, blocks):
        if not is_on(blocks, "lazy_session_config"):
            return eager(self, blocks)
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
        if not isinstance(self.config_values, _LazyConfigs):
            return update_value(self, key, value)
        self.config_values.set_value(key, value)

    _OWN["SessionState.__init__"] = eager
    cls.__init__, cls.__setitem__, cls._update_config = __init__, __setitem__, _update_config
    cls._update_value_in_config = _update_value_in_config
