"""What one visitor's turn switch costs Gradio's machinery (the room bench, docs/SPEED.md).

Real app on loopback, real HTTP: the queue's join + SSE stream, as a browser or gradio_client uses it.
"""
from __future__ import annotations

import dataclasses
import json

import httpx
import pytest

from conftest import free_port


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
    opened = _call(api, fn["open_sample"], ["qwen3-tiny", ""], "room-a")
    assert [m for m, _ in opened if m.startswith("process_")] == ["process_starts", "process_completed"]
    msgs = _call(api, fn["select_turn"], [None, 2], "room-a")
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
        _call(api, fn["select_turn"], [None, 1 + n], "room-b")
    assert q.events_recorded >= 3 and calls == []
    assert len(q.event_analytics) <= 1_000  # the records it keeps are bounded too
