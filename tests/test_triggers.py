"""Events whose answer depends on the latest pick are deferred while the last one is pending, never dropped.

Gradio's default trigger mode for a click or a select is "once": a trigger that arrives while the event's
last call is still pending is ignored. For a tab pick (Conversation, then Drift, quickly: the Drift tab
stayed empty; tests/test_hostile_browser.py failed this way on a busy machine), the panels' turn follow-up
and ◀/▶ that is a lost user action. "always_last" runs the latest trigger once the pending call ends, but
with the event data of the pending one: right for events that read the page's state when they run, wrong
for a tab pick, whose data names the tab ("multiple": every pick runs with its own).
"""
from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def demo():
    from viewer.config import Settings
    from viewer.ui import create_app

    return create_app(Settings())


def test_tab_picks_turn_follow_ups_and_steps_are_never_dropped(demo):
    tabs = {b._id for b in demo.blocks.values() if type(b).__name__ == "Tabs"}
    assert tabs, "the app has its main tabs"
    picks = [f for f in demo.fns.values() if any(t[0] in tabs and t[1] == "select" for t in f.targets)]
    assert len(picks) >= 2, [f.name for f in picks]  # the Drift and Health tabs fill themselves when picked
    # a pick names its tab in its event data: each one runs ("always_last" would re-send the pending pick's data)
    assert [f"{f.api_name or f.name}: {f.trigger_mode}" for f in picks if f.trigger_mode != "multiple"] == []
    named = {f.api_name: f for f in demo.fns.values()}
    # these read the turn shown when they run: the latest trigger, deferred, is the right one
    must = [named[n] for n in ("turn_follow", "prev_turn", "next_turn")]
    assert [f"{f.api_name}: {f.trigger_mode}" for f in must if f.trigger_mode != "always_last"] == []
