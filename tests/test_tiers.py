"""The tiers' guards (tests/tiers.py): a test using a slow fixture carries its marker, the fast tier
fails an unmarked test over its CPU budget, and `make test-fast` is the fast tier."""
from __future__ import annotations

import re
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

import tiers

REPO = Path(__file__).resolve().parent.parent


def _item(nodeid: str, fixtures: list[str], marks: list[str]):
    return SimpleNamespace(nodeid=nodeid, fixturenames=fixtures,
                           iter_markers=lambda: [SimpleNamespace(name=m) for m in marks])


def test_a_slow_fixture_without_its_marker_fails_at_setup():
    items = [_item("t.py::unmarked_vllm", ["tmp_path", "vllm"], []),
             _item("t.py::page_marked_slow_only", ["page", "browser"], ["slow"]),
             _item("t.py::marked", ["vllm", "page", "browser"], ["slow", "browser"]),
             _item("t.py::plain", ["tmp_path", "qwen3"], [])]
    tiers.check_markers(items)
    try:
        with pytest.raises(pytest.fail.Exception, match=r"vllm needs @pytest.mark.slow"):
            tiers.guard(items[0])
        with pytest.raises(pytest.fail.Exception, match=r"page needs @pytest.mark.browser"):
            tiers.guard(items[1])
        tiers.guard(items[2])
        tiers.guard(items[3])
    finally:
        for it in items:
            tiers._UNMARKED.pop(it.nodeid, None)


def _burn(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


@pytest.mark.parametrize("marks, tier, failed", [([], "fast", True), (["slow"], "fast", False),
                                                  ([], "", False)])
def test_the_fast_tier_fails_an_unmarked_test_over_its_cpu_budget(monkeypatch, marks, tier, failed):
    monkeypatch.setenv("RI_TEST_TIER", tier)
    monkeypatch.setenv("RI_FAST_TEST_CPU_S", "0.05")
    item = _item("t.py::dear", [], marks)
    tiers.start(item.nodeid)
    _burn(0.2)
    reports = [SimpleNamespace(when=w, duration=0.1, passed=True, outcome="passed", longrepr=None)
               for w in ("setup", "call", "teardown")]
    try:
        for rep in reports:
            tiers.account(item, rep)
    finally:
        cost = tiers.TIMES.pop(item.nodeid)
    assert cost["cpu_s"] >= 0.2 and cost["wall_s"] == pytest.approx(0.3)
    assert (reports[-1].outcome == "failed") is failed
    if failed:
        assert "mark it `slow`" in reports[-1].longrepr


def test_make_test_fast_is_the_fast_tier():
    recipe = re.search(r"^test-fast:.*\n((?:\t.*\n)+)", (REPO / "Makefile").read_text(), re.M).group(1)
    assert "RI_TEST_TIER=fast" in recipe and '-m "not browser and not slow"' in recipe
