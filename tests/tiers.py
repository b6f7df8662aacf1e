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
# Parallel runs (pytest-xdist, ``--dist loadgroup``; scripts/test.sh with RI_TEST_WORKERS): a test
# using one of these fixtures runs on the one worker that owns the group, so the fixture is made
# once per run, as in a serial run (each worker is its own pytest session).
SHARED_FIXTURE_GROUPS = {
    "vllm": "capture", "scripted_capture": "capture",  # one vLLM server, one scripted capture
    "oracle": "oracle",  # one TRL process per version
    "sweep": "sweep", "ray_mod": "ray", "tiny_result": "torch",
}
# The longest groups start first (by the serial clean run's figures, docs/TESTING.md), so none of them
# ends the run alone on one worker while the other idles: the whole suite's, then the fast tier's
# (a group missing from a run is passed over).
FIRST_GROUPS = ("capture", "tests/test_capture_live.py", "ray", "sweep", "tests/test_first5_browser.py",
                "tests/test_browser.py", "tests/test_talk_browser.py", "oracle", "tests/test_present_drift_browser.py",
                "tests/test_drift_ui.py", "torch", "tests/test_importance.py", "tests/test_presenter_browser.py",
                "tests/test_certify.py",
                "tests/test_drift_pool.py", "tests/test_budgets_template.py", "tests/test_attacks_capture.py",
                "tests/test_budgets.py", "tests/test_capture_units.py", "tests/test_app.py",
                "tests/test_attacks_intake.py", "tests/test_talk_app.py")
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


def xdist_group(item) -> str:
    """The group a test runs in: its shared fixture's, else its file's (module fixtures made once)."""
    path = item.nodeid.split("::")[0]
    for name in getattr(item, "fixturenames", ()):
        if name in SHARED_FIXTURE_GROUPS:
            return SHARED_FIXTURE_GROUPS[name]
    return path


def assign_groups(items) -> dict[str, str]:
    """Put the longest groups first (in place; the order inside a group, and so each file's, is
    kept) and return each test's group by node id."""
    rank = {g: i for i, g in enumerate(FIRST_GROUPS)}
    items.sort(key=lambda it: rank.get(xdist_group(it), len(rank)))  # stable: the rest keep their order
    return {it.nodeid: xdist_group(it) for it in items}


# xdist 3.8's own --dist loadgroup appends "@group" to each node id through an attribute pytest 9.2
# no longer reads (the ids stay plain, so every test was scheduled alone). Instead each worker
# writes its tests' groups to RI_TEST_GROUPS_DIR (made by the controller before the workers start)
# and the controller schedules by them.
GROUPS_ENV = "RI_TEST_GROUPS_DIR"


def share_groups(config) -> None:
    """Controller, before the workers start: the folder the groups are handed over in."""
    import tempfile

    if not hasattr(config, "workerinput") and getattr(config.option, "dist", "no") == "loadgroup":
        os.environ[GROUPS_ENV] = tempfile.mkdtemp(prefix="ri-test-groups-")


def drop_groups(config) -> None:
    import shutil

    if not hasattr(config, "workerinput") and os.environ.get(GROUPS_ENV):
        shutil.rmtree(os.environ.pop(GROUPS_ENV), ignore_errors=True)


def write_groups(config, groups: dict[str, str]) -> None:
    folder = os.environ.get(GROUPS_ENV)
    if folder and hasattr(config, "workerinput"):
        path = os.path.join(folder, config.workerinput["workerid"] + ".json")
        with open(path + ".tmp", "w") as f:
            json.dump(groups, f)
        os.replace(path + ".tmp", path)


def read_groups() -> dict[str, str]:
    folder = os.environ.get(GROUPS_ENV)
    for name in sorted(os.listdir(folder)) if folder and os.path.isdir(folder) else ():
        if name.endswith(".json"):
            with open(os.path.join(folder, name)) as f:
                return json.load(f)  # every worker collected the same tests (xdist checks)
    return {}


def make_scheduler(config, log):
    """``--dist loadgroup`` by the groups above: a group's tests run on one worker, in order."""
    if getattr(config.option, "dist", "no") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:
                self.groups = read_groups()  # called once all workers have collected
            return self.groups.get(nodeid) or nodeid.split("::")[0]

    return GroupScheduling(config, log)


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
                          "marks": sorted(marks), "end": round(time.time(), 1),  # a run's timeline: which worker
                          "worker": os.environ.get("PYTEST_XDIST_WORKER", "")}  # ran what when
    if isinstance(getattr(rep, "user_properties", None), list):  # how an xdist worker's figure reaches the controller
        rep.user_properties.append(("ri_times", TIMES[item.nodeid]))
    if fast_tier() and not marks and cpu > cpu_budget_s() and rep.passed:
        rep.outcome = "failed"
        rep.longrepr = (f"fast tier: this unmarked test cost {cpu:.1f} CPU s (budget {cpu_budget_s():g} s, "
                        "RI_FAST_TEST_CPU_S): make it cheaper or mark it `slow` (docs/TESTING.md)")


def collect(rep) -> None:
    """The controller's copy of each test's figure (under xdist the workers measure, the controller writes)."""
    for key, value in getattr(rep, "user_properties", ()):
        if key == "ri_times":
            TIMES[rep.nodeid] = value


def summary(tr) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # the controller reports for everybody
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
