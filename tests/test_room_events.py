"""What one visitor's turn switch costs Gradio's machinery (the room bench, docs/SPEED.md).

Real app on loopback, real HTTP: the queue's join + SSE stream, as a browser or gradio_client uses it.
"""
from __future__ import annotations

import dataclasses
import json

import httpx
import pytest

from conftest import free_port
from tv_payload import expand
from viewer.ui import seam


@pytest.fixture(scope="module")
def no_wait_app():
    """The app with the plots in the same answer as the tokens (VIEWER_PLOT_DEFER_S=0)."""
    from viewer.config import Settings
    from viewer.ui import create_app, launch_kwargs

    settings = dataclasses.replace(Settings.from_env(), plot_defer_s=0.0)
    demo = create_app(settings)
    _, url, _ = demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=free_port(),
                            quiet=True, **launch_kwargs(settings))
    yield demo, url.rstrip("/") + "/gradio_api"
    demo.close()


def _needs(demo, *entries: str) -> None:
    """A test of what a seam entry (viewer/ui/seam.py) buys: skipped where it is off (VIEWER_GRADIO_SEAM=0, or
    another Gradio version), where the app runs on Gradio's own behaviour (tests/test_gradio_seam.py)."""
    off = [e for e in entries if not seam.is_on(demo, e)]
    if off:
        pytest.skip(f"seam entries off for this app: {', '.join(off)}")


def _call(api: str, fns: dict, data: list, session: str) -> list[tuple[str, dict]]:
    """(msg, message) of every SSE message one event sends, until its stream closes."""
    httpx.post(f"{api}/queue/join", json={"data": data, "fn_index": fns, "session_hash": session,
                                          "event_data": None, "trigger_id": None}, timeout=60).raise_for_status()
    out = []
    with httpx.stream("GET", f"{api}/queue/data", params={"session_hash": session}, timeout=60) as st:
        for line in st.iter_lines():
            if line.startswith("data:"):
                m = json.loads(line[5:])
                out.append((m.get("msg"), m))
                if m.get("msg") in ("close_stream", "unexpected_error"):
                    break
    return out


def test_turn_switch_without_the_plot_wait_sends_its_answer_once(no_wait_app):
    # A one-step answer used to go out as a generator's: the ~190 KB turn (token view, plot,
    # conversation) in a process_generating message and again in process_completed.
    demo, api = no_wait_app
    fn = {f.api_name: i for i, f in demo.fns.items()}
    opened = _call(api, fn["open_sample"], ["qwen3-tiny", "", None], "room-a")
    assert [m for m, _ in opened if m.startswith("process_")] == ["process_starts", "process_completed"]
    msgs = _call(api, fn["select_turn"], [None, 2, None], "room-a")
    kinds = [m for m, _ in msgs]
    assert kinds.count("process_generating") == 0 and kinds.count("process_completed") == 1, kinds
    done = dict(msgs)["process_completed"]["output"]["data"]
    assert done[1] == 2 and json.loads(done[2])["turn"] == 2  # the turn asked for (its number box), its token view
    assert done[3] is not None  # and the logprob plot, in the same answer


def test_queue_does_not_rebuild_the_monitoring_summary_per_event(no_wait_app, monkeypatch):
    # Gradio's default: after every event, a pandas DataFrame of the last 10,000 events' records,
    # grouped by function (12-16% of the server's CPU with 16 visitors, bench_room.py profile).
    demo, api = no_wait_app
    q = demo._queue
    fn = {f.api_name: i for i, f in demo.fns.items()}
    calls = []
    real = q._get_df
    monkeypatch.setattr(q, "_get_df", lambda records: calls.append(len(records)) or real(records))
    for n in range(3):
        _call(api, fn["select_turn"], [None, 1 + n, None], "room-b")
    assert q.events_recorded >= 3 and calls == []
    assert len(q.event_analytics) <= 1_000  # the records it keeps are bounded too


def test_a_new_session_does_not_configure_every_block_up_front(no_wait_app, monkeypatch):
    # Gradio made a config copy of each of the page's ~230 blocks for every new session (≈ 60 ms of
    # server CPU at load 7 per visitor's first event), for a deep-link button this app does not use.
    from gradio.blocks import BlocksConfig
    from gradio.state_holder import SessionState

    demo, api = no_wait_app
    _needs(demo, "lazy_session_config")
    fn = {f.api_name: i for i, f in demo.fns.items()}
    made = []
    real = BlocksConfig.config_for_block
    monkeypatch.setattr(BlocksConfig, "config_for_block",
                        staticmethod(lambda _id, *a, **k: made.append(_id) or real(_id, *a, **k)))
    msgs = _call(api, fn["select_turn"], [None, 1, None], "room-new-session")  # a new session's first event
    assert "process_completed" in dict(msgs)
    ins_outs = {b._id for b in demo.fns[fn["select_turn"]].inputs + demo.fns[fn["select_turn"]].outputs}
    assert len(demo.blocks) > 100 and set(made) <= ins_outs, (len(made), len(demo.blocks))
    # what Gradio's own deep-link route reads (every block's config) is still all there, as its own
    # unpatched code makes it
    session = demo.state_holder["room-new-session"]
    eager = SessionState.__new__(SessionState)
    seam.gradio_own("SessionState.__init__")(eager, demo)
    want = {c["id"]: c for c in eager.components}
    got = {c["id"]: c for c in session.components}
    assert got.keys() == want.keys()
    assert all(got[i] == want[i] for i in want if i not in ins_outs)  # the event's own blocks hold its values


def test_events_configure_no_block_and_the_copies_gradio_reads_are_its_own(monkeypatch):
    # Every event configured blocks again for the session (~0.3 ms each): each State it set (the turn, on
    # every switch), each block an update replaced (the tool filter's choices, the row list), each block
    # whose value it set for the first time (≈ 20 on a visitor's first open). Now none; the copies are
    # made when Gradio's deep-link route asks for them all, equal to what Gradio's own methods make.
    import aio

    from gradio.blocks import BlocksConfig
    from gradio.state_holder import SessionState

    from viewer.config import Settings
    from viewer.ui import create_app

    demo = create_app(dataclasses.replace(Settings.from_env(), plot_defer_s=0.0))  # called in-process, as Gradio does
    _needs(demo, "lazy_session_config")
    fns = {f.api_name: f for f in demo.fns.values()}
    events = [("open_sample", ["qwen3-tiny", "", None]), ("select_turn", [None, 2, None]),
              ("select_turn", [None, 3, None]), ("open_sample", ["smollm2", "", None]), ("select_turn", [None, 1, None])]

    async def run(state):
        for name, data in events:
            await demo.process_api(fns[name], data, state=state, root_path="http://127.0.0.1")

    made = []
    real = BlocksConfig.config_for_block
    monkeypatch.setattr(BlocksConfig, "config_for_block",
                        staticmethod(lambda _id, *a, **k: made.append(_id) or real(_id, *a, **k)))
    lazy = SessionState(demo)
    aio.run(run(lazy))
    assert made == []
    eager = SessionState.__new__(SessionState)  # Gradio's own SessionState, unpatched methods throughout
    seam.gradio_own("SessionState.__init__")(eager, demo)
    assert type(eager.config_values) is dict
    aio.run(run(eager))
    assert len(made) > 200  # Gradio's: every block at the start, then the events' own
    want = {c["id"]: c for c in eager.components}
    got = {c["id"]: c for c in lazy.components}
    assert got.keys() == want.keys() and got == want
    tool_filter = next(b for b in fns["open_sample"].outputs if getattr(b, "elem_id", None) == "f-tool")
    assert got[tool_filter._id]["props"]["choices"] != [("(any)", "(any)")]  # the update replaced it, in both


def _demo(defer: float):
    from viewer.config import Settings
    from viewer.ui import create_app

    return create_app(dataclasses.replace(Settings.from_env(), plot_defer_s=defer))


def _count_components(monkeypatch) -> list:
    """Every component built from now on (Gradio builds one per updated or skipped output)."""
    from gradio.blocks import Block

    made, real = [], Block.__init__

    def init(self, *a, **k):
        made.append(type(self).__name__)
        real(self, *a, **k)

    monkeypatch.setattr(Block, "__init__", init)
    return made


def test_reopening_a_link_builds_no_component_and_sends_what_gradio_sends(monkeypatch):
    # Each open rebuilt two components for the session (~1.5-2 ms each): the tool filter (its choices,
    # an update) and the hidden row list (an update to stay hidden); a gr.skip() built one too.
    import aio

    from gradio.blocks import Blocks
    from gradio.state_holder import SessionState

    demo = _demo(0.0)
    _needs(demo, "cheap_skips", "session_copy")
    fns = {f.api_name: f for f in demo.fns.values()}
    outs = fns["open_sample"].outputs
    tools_at, rows_at = (next(i for i, b in enumerate(outs) if getattr(b, "elem_id", None) == e)
                         for e in ("f-tool", "source-rows"))
    state = SessionState(demo)

    async def open_():
        return (await demo.process_api(fns["open_sample"], ["qwen3-tiny", "", None], state=state,
                                       root_path="http://127.0.0.1"))["data"]

    first = aio.run(open_())
    choices = first[tools_at]["choices"]
    assert first[tools_at]["__type__"] == "update" and [c[0] for c in choices][:1] == ["(any)"] and len(choices) > 1
    rows_block = state.blocks_config.blocks[outs[rows_at]._id]
    made = _count_components(monkeypatch)
    again = aio.run(open_())
    assert made == []
    assert again[tools_at] == "(any)"  # the filter reset, its choices already the visitor's
    assert again[rows_at] == {"__type__": "update"}  # as Gradio sends a skip: the row list stays hidden
    assert state.blocks_config.blocks[outs[rows_at]._id] is rows_block
    # Gradio's own postprocess of the same answer: the same message, at the price of building the row list
    monkeypatch.setattr(Blocks, "postprocess_data", seam.gradio_own("Blocks.postprocess_data"))
    assert aio.run(open_()) == again and made == ["Dataframe"]


def test_a_two_step_answers_first_step_builds_no_plot(monkeypatch):
    # With the plots held back (the default), the first step skips them: each skip built a gr.Plot.
    import aio

    from gradio.state_holder import SessionState

    demo = _demo(0.4)
    _needs(demo, "cheap_skips")
    fns = {f.api_name: f for f in demo.fns.values()}
    state = SessionState(demo)
    aio.run(demo.process_api(fns["open_sample"], ["qwen3-tiny", "", None], state=state, root_path="http://127.0.0.1"))
    made = _count_components(monkeypatch)
    got = aio.run(demo.process_api(fns["select_turn"], [None, 2, None], state=state, root_path="http://127.0.0.1"))
    plot_at = next(i for i, b in enumerate(fns["select_turn"].outputs) if getattr(b, "elem_id", None) == "logprob-plot")
    assert got["is_generating"] and got["data"][plot_at] == {"__type__": "update"}
    assert expand(got["data"][plot_at - 1])["turn"] == 2 and made == []


def _join(api: str, fn: int, data: list, session: str) -> None:
    httpx.post(f"{api}/queue/join", json={"data": data, "fn_index": fn, "session_hash": session,
                                          "event_data": None, "trigger_id": None}, timeout=60).raise_for_status()


def _read(api: str, session: str) -> list[str]:
    out = []
    with httpx.stream("GET", f"{api}/queue/data", params={"session_hash": session}, timeout=60) as st:
        for line in st.iter_lines():
            if line.startswith("data:"):
                out.append(json.loads(line[5:]).get("msg"))
                if out[-1] in ("close_stream", "unexpected_error"):
                    break
    return out


def test_waiting_events_are_not_sent_their_place_each_time_another_starts(no_wait_app, monkeypatch):
    # Gradio's default queue ("auto" status updates) sent every waiting event an estimation message
    # each time another event started: n visitors at once got ~n²/2 of them (16 on one link: ~1.1 per
    # event on top of the answer's three). Now one when it joins, then one a second while it waits.
    import time

    from viewer.ui import QUEUE_STATUS_S

    demo, api = no_wait_app
    q = demo._queue
    fn = {f.api_name: i for i, f in demo.fns.items()}["select_turn"]
    held = {"on": True}
    real = q.get_events
    monkeypatch.setattr(q, "get_events", lambda: None if held["on"] else real())
    n = 12
    t0 = time.monotonic()
    for i in range(n):  # all waiting at once: the queue starts none while held
        _join(api, fn, [None, 1 + i % 3, None], f"room-w{i}")
    held["on"] = False
    got = [_read(api, f"room-w{i}") for i in range(n)]
    elapsed = time.monotonic() - t0
    assert all(g.count("process_completed") == 1 for g in got), got
    estimations = sum(g.count("estimation") for g in got)
    # one on joining each, plus at most one per QUEUE_STATUS_S of waiting; Gradio's "auto" sent
    # n + n(n-1)/2 = 78 here as the held events started one after another
    assert estimations <= n * (1 + int(elapsed / QUEUE_STATUS_S) + 1), (estimations, elapsed)
    assert estimations < n + n * (n - 1) // 2


def test_an_event_searches_no_path_for_matplotlib(no_wait_app, monkeypatch):
    # Gradio wraps each event in MatplotlibBackendMananger (import matplotlib on the way in and out);
    # without matplotlib installed, each was a failed search of every sys.path entry.
    import importlib.machinery

    demo, api = no_wait_app
    _needs(demo, "no_matplotlib_search")
    fn = {f.api_name: i for i, f in demo.fns.items()}
    searched = []
    real = importlib.machinery.PathFinder.find_spec
    monkeypatch.setattr(importlib.machinery.PathFinder, "find_spec",
                        classmethod(lambda cls, name, *a, **k: searched.append(name) or real(name, *a, **k)))
    msgs = _call(api, fn["select_turn"], [None, 2, None], "room-mpl")
    assert "process_completed" in dict(msgs)
    assert "matplotlib" not in searched, searched
    with pytest.raises(ImportError):  # still absent to anyone who asks, as before
        import matplotlib  # noqa: F401


def test_a_made_turn_is_answered_on_the_event_loop_and_a_new_one_in_a_worker_thread(monkeypatch):
    # Every turn switch was handed to a worker thread and back, like any handler: ≈ 0.4 ms of work
    # behind a hand-off that cost more, and with 16 visitors at once the hand-offs queued behind each
    # other (docs/SPEED.md, room round six). What is already made is now answered where the event
    # arrived; what is not still runs in a thread, where it may take its time.

    import aio
    from gradio.state_holder import SessionState

    from viewer.ui.browse_handlers import Handlers

    demo = _demo(0.0)
    fns = {f.api_name: f for f in demo.fns.values()}
    where: list[tuple[int, str]] = []
    real = Handlers.turn_values

    def turn_values(self, op, index, *a, **k):
        where.append((index, aio.where()))
        return real(self, op, index, *a, **k)

    monkeypatch.setattr(Handlers, "turn_values", turn_values)

    async def visit(state, *events):
        out = []
        for name, data in events:
            out.append((await demo.process_api(fns[name], data, state=state, root_path="http://127.0.0.1"))["data"])
        return out

    first = SessionState(demo)
    opened, = aio.run(visit(first, ("open_sample", ["qwen3-tiny", "", None])))
    assert where and all(w == "thread" for _, w in where)  # the first open parses the sample: a thread's work
    del where[:]
    made_here, = aio.run(visit(first, ("select_turn", [None, 2, None])))
    assert where == [(2, "event loop"), (2, "thread")]  # looked up, not made yet: made in a thread
    del where[:]
    second = SessionState(demo)  # another visitor, the same link: everything is made now
    reopened, made_before = aio.run(visit(second, ("open_sample", ["qwen3-tiny", "", None]),
                                          ("select_turn", [None, 2, None])))
    assert where and all(w == "event loop" for _, w in where), where
    assert made_before[1] == 2 and json.loads(made_before[2])["turn"] == 2 and made_before[3] is not None
    assert made_before == made_here  # the same answer, whichever way it was made
    assert reopened[1:] == opened[1:]  # (its key, the first output, is the same rollout's too)


def test_with_the_plot_wait_a_made_turn_is_made_on_the_event_loop_and_its_plots_still_come_second(monkeypatch):
    # The default answer comes in two steps (tokens, then the plots defer_s later). Each step ran in a
    # worker thread and the wait was a thread asleep: a room switching turns held a thread each. (Gradio
    # still creates a generator in a thread; what the steps do, and the wait, now happen on the loop.)

    import aio
    from gradio.state_holder import SessionState

    from viewer.ui import staged
    from viewer.ui.browse_handlers import Handlers

    demo = _demo(0.3)
    fns = {f.api_name: f for f in demo.fns.values()}

    async def visit(state, *events):
        out = []
        for name, data in events:
            steps, iterator = [], None
            while True:  # each step of a generator's answer, as Gradio's queue asks for them
                r = await demo.process_api(fns[name], data, state=state, iterator=iterator,
                                           root_path="http://127.0.0.1", event_id=f"{name}-{len(steps)}")
                if not r["is_generating"]:
                    break
                steps.append(r["data"])
                iterator = r["iterator"]
            out.append(steps)
        return out

    aio.run(visit(SessionState(demo), ("open_sample", ["qwen3-tiny", "", None]),
                  ("select_turn", [None, 2, None])))  # made
    where = []

    def noting(fn):
        def call(*a, **k):
            where.append((fn.__name__, aio.where()))
            return fn(*a, **k)
        return call

    monkeypatch.setattr(Handlers, "turn_values", noting(Handlers.turn_values))
    monkeypatch.setattr(staged, "resolve", noting(staged.resolve))
    opened, switched = aio.run(visit(SessionState(demo), ("open_sample", ["qwen3-tiny", "", None]),
                                     ("select_turn", [None, 2, None])))
    assert where and set(where) == {("turn_values", "event loop"), ("resolve", "event loop")}, where
    first, then = switched[0], switched[-1]
    assert len(switched) == 2 and first[1] == then[1] == 2 and json.loads(first[2])["turn"] == 2
    assert first[3] == {"__type__": "update"} and then[3] is not None  # the plot skipped, then sent
    assert len(opened) == 2


def test_small_inputs_are_preprocessed_without_a_thread_and_still_checked(monkeypatch):
    # Gradio preprocessed each input in a worker thread: a turn switch's number box, an open's sample
    # picker and tokenizer box, ◀ / ▶'s four (docs/SPEED.md, room round six).
    import aio
    import anyio.to_thread
    from gradio.state_holder import SessionState

    demo = _demo(0.0)
    _needs(demo, "inline_small_preprocess")
    fns = {f.api_name: f for f in demo.fns.values()}
    handed = []
    real = anyio.to_thread.run_sync
    monkeypatch.setattr(anyio.to_thread, "run_sync", lambda fn, *a, **k: handed.append(fn) or real(fn, *a, **k))
    state = SessionState(demo)

    async def call(name, data):
        return (await demo.process_api(fns[name], data, state=state, root_path="http://127.0.0.1"))["data"]

    aio.run(call("open_sample", ["qwen3-tiny", "", None]))
    switched = aio.run(call("select_turn", [None, 2.0, None]))  # the number box sends a float
    assert switched[1] == 2 and json.loads(switched[2])["turn"] == 2
    assert [f for f in handed if getattr(f, "__name__", "") == "preprocess"] == []
    # Gradio's own checks still run: a sample that is not one of the picker's choices is refused
    with pytest.raises(Exception, match="not in the list of choices"):
        aio.run(call("open_sample", ["../../etc", "", None]))
