"""The pieces of a fair share per visitor (issue 36, findings 5 and 7), without a server; the attacks
through a real public app are tests/test_attacks_fairness.py (slow)."""
from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from viewer.budgets import BudgetExceeded, limits


def test_a_session_and_an_account_each_hold_a_bounded_share():
    """Two tabs of one signed-in account share its slots; another visitor's are their own; a slot given
    back is free again, and a key with nothing running is forgotten."""
    from viewer.ui.fair import FAIR, Busy, slot

    a1 = SimpleNamespace(session_hash="tab-1", username="alice")
    a2 = SimpleNamespace(session_hash="tab-2", username="alice")
    bob = SimpleNamespace(session_hash="tab-3", username=None)
    with slot(a1, 2), slot(a2, 2):
        with pytest.raises(Busy, match="session_events"):
            with slot(SimpleNamespace(session_hash="tab-4", username="alice"), 2):
                pass
        with slot(bob, 2), slot(bob, 2):
            with pytest.raises(Busy):
                with slot(bob, 2):
                    pass
    assert FAIR.running("u:alice") == FAIR.running("s:tab-3") == 0 and "u:alice" not in FAIR._running
    with slot(a1, 0), slot(a1, 0), slot(a1, 0):  # 0: no limit (a local app)
        pass


def _bomb_template() -> str:
    return "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"


def test_certifys_renders_use_their_own_worker_within_their_deadline():
    """Inside ``own_lane`` a never-ending template holds Certify's one worker, never one of the shared
    pool (another render meanwhile takes a shared worker at once), and stops at the lane's deadline
    (the certify_s budget), well before its own template_s; a cut result is not kept."""
    from viewer.tokenizer import render_worker

    lim = limits(True, environ={"VIEWER_BUDGET_TEMPLATE_S": "30"})
    got: list = []

    def certify():
        with render_worker.own_lane(1.5):
            t0 = time.monotonic()
            try:
                render_worker.render(_bomb_template(), [{"role": "user", "content": "x"}], None, True, {}, lim)
            except BudgetExceeded as e:
                got.append((e.name, time.monotonic() - t0))

    th = threading.Thread(target=certify)
    th.start()
    deadline = time.monotonic() + 30
    while render_worker.stats()["certify_busy"] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert render_worker.stats()["certify_busy"] == 1 and render_worker.stats()["busy"] == 0
    text = render_worker.render("{{ messages[0]['content'] }}!", [{"role": "user", "content": "fair"}], None,
                                False, {}, lim)
    assert text == "fair!"  # a shared worker, while Certify's renders the bomb
    th.join(30)
    assert got and got[0][0] == "certify_s" and got[0][1] < 10, got
    with render_worker.own_lane(0.0):  # a later click renders it again (the cut was not cached)
        with pytest.raises(BudgetExceeded) as e:
            with render_worker.own_lane(0.5):
                render_worker.render(_bomb_template(), [{"role": "user", "content": "x"}], None, True, {}, lim)
    assert e.value.name == "certify_s"
