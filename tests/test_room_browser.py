"""What a browser's turn switch sends to the server (the room bench, docs/SPEED.md): every event is a
queue round trip (HTTP join, SSE message, a worker slot), so a switch should cost one, plus one only
while a panel that follows the turn is open.

Counted in Debian chromium on the real app: the ``/gradio_api/queue/join`` requests the page sends,
named by the page's own config (each join carries its event's ``fn_index``).
"""
from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.browser

TV = "#token-view .ri-tv"
PAINTED = f"document.querySelector('{TV}')?.dataset.painted > 0"


@pytest.fixture(scope="module")
def room_app(app):
    """The session's app (launched in this process as app.py launches it), so a test can see its queue."""
    return app


class Joins:
    """The queue joins a page sends, and whether its events are all answered."""

    def __init__(self, page, demo):
        self.page, self.queue, self.sent, self.sessions = page, demo._queue, [], set()
        page.on("request", self._sent)

    def _sent(self, req):
        if req.method == "POST" and "/gradio_api/queue/join" in req.url:
            body = req.post_data_json
            self.sent.append(body.get("fn_index"))
            self.sessions.add(body.get("session_hash"))

    def _pending(self) -> int:
        return sum(len(self.queue.pending_event_ids_session.get(s, ())) for s in self.sessions)

    def settle(self, timeout_s: float = 120.0):
        """Wait until every event the page sent is answered, the page has handled the answers (its main
        thread went idle: a big token view or plotly's first draw can hold it for seconds) and no new
        event followed: a follow-up event is sent as the page handles its trigger's answer."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            seen = len(self.sent)
            while self._pending() and time.monotonic() < deadline:
                self.page.wait_for_timeout(100)  # lets Playwright deliver the page's requests
            self.page.evaluate("() => new Promise(r => requestIdleCallback(() => r(), {timeout: 20000}))")
            self.page.wait_for_timeout(300)
            if len(self.sent) == seen and not self._pending():
                return
        raise AssertionError(f"the page's events did not settle: {self._pending()} pending")

    def names(self, since: int = 0) -> list[str]:
        deps = {d["id"]: d for d in self.page.evaluate("window.gradio_config.dependencies")}
        out = []
        for i in self.sent[since:]:
            d = deps.get(i, {})
            out.append(d.get("api_name") or f"#{i} {[t[1] for t in d.get('targets', [])]}")
        return out


def _switch(page, joins: Joins, want: str, key: str | None = None) -> list[str]:
    """The events one turn switch sends: #next-turn clicked (or a presenter key pressed)."""
    joins.settle()
    start = len(joins.sent)
    if key:
        page.keyboard.press(key)
    else:
        page.locator("#next-turn").click()
    page.wait_for_function(f"document.querySelector('{TV}')?.dataset.turn === '{want}'", timeout=30000)
    joins.settle()
    return joins.names(start)


def test_a_turn_switch_is_one_event_while_no_panel_follows_the_turn(page, room_app):
    demo, app_url = room_app
    joins = Joins(page, demo)
    page.goto(f"{app_url}/?source=sample:qwen3-tiny&turn=1")
    page.wait_for_function(PAINTED, timeout=60000)
    sent = _switch(page, joins, "2")
    assert sent == ["next_turn"], sent  # was 5: the switch, the rescore panel, Drift, presenter marks, notes
    # the rescore panel open: its follow-up (the selected turn's Δ plot) comes in one more event
    page.locator("#rescore-panel").get_by_text("Trainer-side logprobs").click()
    page.wait_for_function("document.querySelector('#rescore-summary')?.checkVisibility()")
    sent = _switch(page, joins, "3")
    assert len(sent) == 2 and sent[0] == "next_turn", sent


def test_a_turn_switch_adds_one_event_while_the_presenter_follows_it(page, room_app):
    demo, app_url = room_app
    joins = Joins(page, demo)
    page.goto(f"{app_url}/?source=sample:qwen3-tiny&turn=1&present=1")
    page.wait_for_function(PAINTED, timeout=60000)
    page.wait_for_function("document.querySelector('#presenter .ri-pr-title')?.textContent === 'turn 1'")
    sent = _switch(page, joins, "2", key="ArrowRight")
    page.wait_for_function("document.querySelector('#presenter .ri-pr-title')?.textContent === 'turn 2'")
    assert len(sent) == 2 and sent[0] == "next_turn", sent
