"""The two test tiers (docs/TESTING.md): ``make test`` runs everything; ``make test-fast`` (the inner
loop, ``RI_TEST_TIER=fast``) leaves out the tests marked ``browser`` or ``slow``.

Two guards keep the markers honest, because an unmarked slow test silently slows every inner loop:
* a test that uses a fixture known to be slow (a vLLM server, the TRL oracle, chromium, the attack
  sweep's server, Ray) must carry the marker of that fixture, in any run; it fails at set-up otherwise;
* in the fast tier, an unmarked test whose set-up + call + teardown costs more than
  ``RI_FAST_TEST_CPU_S`` CPU seconds fails (default 20, about three times the dearest unmarked
  test; this process and the children it waited for). CPU time, not wall time, so a busy machine
  does not turn a fast test into a failure (threads that spin while waiting, as torch's do, cost
  more CPU on a busy machine: hence the wide budget).

``RI_TEST_TIMES=path`` writes every test's CPU and wall seconds as JSON (how docs/TESTING.md's figures
were measured); the fast tier also prints its slowest tests and its wall time against its budget.
"""
from __future__ import annotations

import json
import os
import resource
import time

import pytest

# fixture name -> the marker a test using it must carry
SLOW_FIXTURES = {
    "vllm": "slow",         # a vLLM server on CPU (tests/conftest.py), a minute or more to start
    "oracle": "slow",       # TRL's released code in .venv-trl, one process per TRL version
    "sweep": "slow",        # the attack sweep: every event with hostile values (tests/test_attacks_sweep.py)
    "ray_mod": "slow",      # a local Ray cluster (tests/test_ray_engine.py)
    "tiny_result": "slow",  # torch: a trainer-side forward pass (tests/test_rescore.py)
    "scripted_capture": "slow",  # a live capture (tests/test_capture_live.py)
    "browser": "browser",   # Debian chromium through Playwright
    "page": "browser",
}
FAST_WALL_BUDGET_S = 90.0  # the inner loop's promise (docs/TESTING.md)


def fast_tier() -> bool:
    return os.environ.get("RI_TEST_TIER", "") == "fast"


def cpu_budget_s() -> float:
    return float(os.environ.get("RI_FAST_TEST_CPU_S", "20"))


def _cpu() -> float:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


_T0 = time.monotonic()
_start: dict[str, float] = {}
_wall: dict[str, float] = {}
TIMES: dict[str, dict] = {}
_UNMARKED: dict[str, str] = {}


def check_markers(items) -> None:
    """Remember each test that uses a slow fixture without its marker (it fails at set-up)."""
    for item in items:
        marks = {m.name for m in item.iter_markers()}
        missing = sorted({f"{name} needs @pytest.mark.{mark}" for name, mark in SLOW_FIXTURES.items()
                          if name in getattr(item, "fixturenames", ()) and mark not in marks})
        if missing:
            _UNMARKED[item.nodeid] = "; ".join(missing)


def guard(item) -> None:
    why = _UNMARKED.get(item.nodeid)
    if why:
        pytest.fail(f"uses a slow fixture without its marker ({why}): `make test-fast` would run it. "
                    "Mark it (tests/tiers.py, docs/TESTING.md).", pytrace=False)


def start(nodeid: str) -> None:
    _start[nodeid] = _cpu()
    _wall[nodeid] = 0.0


def account(item, rep) -> None:
    """After each phase: add its wall time; after teardown, judge the test's CPU against the fast budget."""
    if item.nodeid not in _start:
        return
    _wall[item.nodeid] += rep.duration
    if rep.when != "teardown":
        return
    cpu = _cpu() - _start.pop(item.nodeid)
    marks = {m.name for m in item.iter_markers()} & {"slow", "browser"}
    TIMES[item.nodeid] = {"cpu_s": round(cpu, 2), "wall_s": round(_wall.pop(item.nodeid), 2),
                          "marks": sorted(marks)}
    if fast_tier() and not marks and cpu > cpu_budget_s() and rep.passed:
        rep.outcome = "failed"
        rep.longrepr = (f"fast tier: this unmarked test cost {cpu:.1f} CPU s (budget {cpu_budget_s():g} s, "
                        "RI_FAST_TEST_CPU_S): make it cheaper or mark it `slow` (docs/TESTING.md)")


def summary(tr) -> None:
    path = os.environ.get("RI_TEST_TIMES")
    if path:
        with open(path, "w") as f:
            json.dump(TIMES, f, indent=1, sort_keys=True)
    if not fast_tier() or not TIMES:
        return
    wall = time.monotonic() - _T0
    tr.write_sep("-", f"fast tier: {len(TIMES)} tests, {wall:.0f} s wall (budget {FAST_WALL_BUDGET_S:.0f} s on an idle "
                      f"2-core machine), {sum(t['cpu_s'] for t in TIMES.values()):.0f} CPU s")
    for nodeid, t in sorted(TIMES.items(), key=lambda kv: -kv[1]["cpu_s"])[:10]:
        tr.write_line(f"{t['cpu_s']:6.1f} CPU s {t['wall_s']:6.1f} s wall  {nodeid}")
