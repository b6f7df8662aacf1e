"""Following a growing source in the browse screen: ``?source=…&follow=1`` or ``view SOURCE --follow``.

A ``gr.Timer`` asks every :func:`viewer.live.interval` seconds (1 s here, 3 s on a Space; longer while the
server is busy: :func:`viewer.live.next_interval`); the page stops it while its tab is hidden (a
``visibilitychange`` listener in :data:`VISIBILITY_JS`) and starts it again when the tab is shown. Each
tick asks the shared follower (:data:`viewer.live.LIVE`: one read per new record whoever asks) for its
version; a new version is opened in the store under a key of its own (shared by the room) and shown on the
newest turn while the visitor is on the newest one shown (a turn picked before it stays, until they come back
to the newest: presenter mode's ← / → are the same buttons, so a room sees each call as it arrives); the
visitor's turn-list filters stay (only the new turns they list are added). A folder's side files written late
(summary.json, the tests) are a new version too (viewer/sources/follow.py). No thread waits for a visitor: a tick
that finds nothing new answers at once with nothing to update. The Capture tab shows a running capture
with the same :func:`live_values` (viewer/ui/capture_tab.py).
"""
from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import anyio
import gradio as gr

from .. import render
from ..config import Settings
from ..live import FOLLOW_START, LIVE, interval, next_interval
from ..visitor import VisitorError, deep_link, source, start_source
from .browse_handlers import STATUS
from .opening import list_samples
from .store import RolloutStore

__all__ = ["build", "live_values", "followed_path", "VISIBILITY_JS"]

# The timer runs only while the page is seen: the carrier's click tells the server the tab's state.
VISIBILITY_JS = "document.addEventListener('visibilitychange', () => trigger('click'));"


def followed_path(settings: Settings, spec: str) -> tuple[Path | None, str]:
    """(the local path ``spec`` names, "") or (None, why it cannot be followed)."""
    if spec.startswith("hf://"):
        return None, "A Hub dataset cannot be followed (it is fetched once); open a local file or folder."
    try:
        src = source(spec, settings, list_samples())  # the one check of a visitor's source (viewer/visitor.py)
    except (VisitorError, ValueError) as e:
        return None, str(e)
    if src.path is None:
        return None, f"{spec}: not a local file or folder"
    from ..sources.follow import followable

    why = followable(src.path, settings)
    return (None, why) if why else (src.path, "")


def live_values(settings: Settings, store: RolloutStore, browse, path: Path, st: dict | None, turn: Any,
                note, link: str = "", min_turns: int = 0, filters: tuple | list = ()) -> tuple[dict | None, list]:
    """(the new follow state, values for ``browse.outputs``) after asking the shared follower of ``path``;
    the values are all skips when its version is the one shown (or it has under ``min_turns`` turns).
    ``note(rollout, polled)`` says what is shown; ``filters``: the visitor's turn-list filters (trained, low,
    threshold, tool), kept from the second version on (only the new turns they list are added)."""
    st = dict(st or {}) if (st or {}).get("path") in (None, str(path)) else {}  # another source: start afresh
    st["path"] = str(path)
    polled = LIVE.poll(path, settings)
    skip = [gr.skip()] * len(browse.outputs)
    st["read_s"] = polled.read_s
    if polled.rollout is None or polled.version == st.get("version") or len(polled.rollout.turns) < min_turns:
        return st, skip
    ro = polled.rollout
    capture_dir = path if path.is_dir() else path.parent
    held = [ro]  # the store keeps its recipe (for an evicted key) for long: it must not keep this version's rollout

    def read():
        return (held.pop() if held else LIVE.poll(path, settings).rollout), capture_dir

    op = store.open_shared(f"follow|{path.resolve()}|{polled.version}", read, link=link)
    # the filters a visitor set on this source stay (an open clears them: a new rollout starts unfiltered)
    keep = st.get("version") is not None and browse.handlers is not None and _filtered(*_listed_args(filters))
    order = ([int(t) for t in browse.handlers.listed(op, *_listed_args(filters))["turn"]] if keep
             else [t.index for t in ro.turns])
    newest = order[-1] if order else (ro.turns[-1].index if ro.turns else None)
    # the view follows the newest turn while the visitor is on the newest one shown (or on none): a turn
    # picked before it (the turn list, ◀, a presenter's ←) stays, until they come back to the newest
    on_newest = turn is None or st.get("newest") is None or turn == st.get("newest")
    index = turn if not on_newest and any(t.index == turn for t in ro.turns) else newest
    st.update(version=polled.version, shown=index, newest=newest, key=op.key)
    values = list(browse.show_fn(op, index, note(ro, polled)))
    if keep:
        values = _kept_filters(browse, op, values, filters)
    return st, values


def _filtered(trained=False, low=False, at=None, tool=None) -> bool:
    return bool(trained or low or tool not in (None, "", "(any)"))


def _listed_args(filters) -> tuple:
    trained, low, at, tool = (list(filters) + [False, False, None, None])[:4]
    return trained, low, at, tool


def _kept_filters(browse, op, values: list, filters) -> list:
    """``values`` (an open's) with the visitor's filters left as they are: the turn list as they filter it
    and its note, the tool filter's choices grown with its pick kept."""
    from .browse_handlers import FILTERS, TOOLS

    trained, low, at, tool = _listed_args(filters)
    table, said = browse.handlers.on_filter(op.key, trained, low, at, tool)[:2]
    values[next(i for i, c in enumerate(browse.outputs) if c is browse.handlers.slots.table)] = table
    values[FILTERS:FILTERS + 3] = [gr.skip(), gr.skip(), said]
    if tool not in (None, "", "(any)"):
        tools = sorted({n for t in op.rollout.turns for n in t.tool_names})
        values[TOOLS] = gr.Dropdown(choices=["(any)"] + tools, value=tool)
    return values


def _follow_note(ro, polled) -> str:
    n = len(ro.turns)
    said = f"Following {Path(ro.source).name}: {n} turn{'s' if n != 1 else ''} read"
    if polled.waiting:
        said += "; a record is being written…"
    if polled.error:
        said += f"; stopped reading: {polled.error}"
    return said + "."


def build(settings: Settings, store: RolloutStore, browse, loaded) -> None:
    """The follow timer, its state and the page-visibility hook; started after ``loaded`` (the page load's
    open of the link: a first tick before its answer ended was drawn over by it)."""
    state = gr.State(None)  # {"path", "spec", "version", "shown", "key", "period"}: this visitor's follow
    base = interval(settings)
    timer = gr.Timer(base, active=False)
    following = gr.Checkbox(False, visible=False)  # this page follows (the visibility hook reads it in the page)
    hidden = gr.Checkbox(False, visible=False)  # document.hidden, put in by the hook's js
    carrier = gr.HTML("", js_on_load=VISIBILITY_JS, elem_id="follow-visibility", apply_default_css=False)

    def on_load(request: gr.Request):
        q = request.query_params if request is not None else {}
        link = deep_link(q)
        wanted = q.get("follow") == "1" or (FOLLOW_START["on"] and not link.source)
        if not wanted:
            return None, gr.Timer(active=False), gr.skip(), False
        spec = link.source or start_source(settings.sample)
        path, why = followed_path(settings, spec)
        if path is None:
            return None, gr.Timer(active=False), render.notice_html(f"Not followed: {why}", "error"), False
        st = {"path": str(path), "spec": spec, "period": base}
        return st, gr.Timer(base, active=True), gr.skip(), True

    plots = [isinstance(c, gr.Plot) for c in browse.outputs]
    defer = settings.plot_defer_s

    async def on_tick(st, turn, *filters):
        """Tokens first, the plots ``plot_defer_s`` later (viewer/ui/staged.py's reason: drawing plotly
        blocks the page; a new call's tokens must not wait for it)."""
        if not st or not st.get("path"):
            yield [st, gr.Timer(active=False)] + [gr.skip()] * len(browse.outputs)
            return
        now = time.monotonic()
        spec = st.get("spec", "")
        st2, values = await anyio.to_thread.run_sync(lambda: live_values(
            settings, store, browse, Path(st["path"]), st, turn, _follow_note,
            link=urlencode({"source": spec, "follow": 1}) if spec else "", filters=filters))
        # a slow answer to "anything new?" means a busy server (its workers are every visitor's): the page asks
        # less often; a tick that showed a new version did real work, so it leaves the period as it is
        idle = all(v == {"__type__": "update"} for v in values)
        period = st.get("period") or base
        if idle:
            period = next_interval(settings, period, time.monotonic() - now, st2.get("read_s", 0.0))
        st2["period"] = period
        t = gr.Timer(period) if period != st.get("period") else gr.skip()  # (its active state is the page's)
        if not any(plots) or idle:
            yield [st2, t] + values
            return
        yield [st2, t] + [gr.skip() if p else v for p, v in zip(plots, values)]
        await asyncio.sleep(defer)
        yield [gr.skip(), gr.skip()] + [v if p else gr.skip() for p, v in zip(plots, values)]

    def on_visibility(is_following, is_hidden):
        return gr.Timer(active=bool(is_following) and not is_hidden)

    outs = [state, timer] + list(browse.outputs)
    loaded.then(on_load, None, [state, timer, browse.outputs[STATUS], following], api_name="follow_load",
                api_visibility="private", show_progress="hidden")
    timer.tick(on_tick, [state, browse.turn, *browse.filters], outs, api_name="follow_tick", api_visibility="private",
               show_progress="hidden",
               postprocess=False, concurrency_id="browse", concurrency_limit=settings.browse_concurrency)
    carrier.click(on_visibility, [following, hidden], [timer], js="(f, h) => [f, document.hidden]",
                  api_name="follow_visibility", api_visibility="private", show_progress="hidden")
