"""The tiers' guards (tests/tiers.py): a test using a slow fixture carries its marker, the fast tier
fails an unmarked test over its CPU budget, and `make test-fast` is the fast tier."""
from __future__ import annotations

import json
import os
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


def test_a_shared_fixture_keeps_its_tests_on_one_worker():
    """Under xdist each worker is its own session: the tests of one shared fixture must share a
    group, or each worker would start its own vLLM server / TRL process."""
    assert tiers.xdist_group(_item("tests/test_x.py::a", ["tmp_path", "vllm"], ["slow"])) == "capture"
    assert tiers.xdist_group(_item("tests/test_y.py::b", ["scripted_capture", "vllm"], ["slow"])) == "capture"
    assert tiers.xdist_group(_item("tests/test_z.py::c", ["oracle", "cases"], ["slow"])) == "oracle"
    # anything else: its file's group (module fixtures made once)
    assert tiers.xdist_group(_item("tests/test_app.py::e", ["client"], [])) == "tests/test_app.py"
    for name in tiers.SHARED_FIXTURE_GROUPS:
        assert name in tiers.SLOW_FIXTURES  # a shared expensive fixture is a slow one too


def test_the_longest_groups_come_first_and_each_test_has_its_group():
    items = [_item("tests/test_a.py::x", [], []), _item("tests/test_a.py::y", [], []),
             _item("tests/test_o.py::z", ["oracle"], ["slow"]), _item("tests/test_capture_live.py::v", ["vllm"], ["slow"]),
             _item("tests/test_b.py::w", [], [])]
    groups = tiers.assign_groups(items)
    assert [i.nodeid for i in items] == ["tests/test_capture_live.py::v", "tests/test_o.py::z", "tests/test_a.py::x",
                                         "tests/test_a.py::y", "tests/test_b.py::w"]
    assert groups == {"tests/test_capture_live.py::v": "capture", "tests/test_o.py::z": "oracle",
                      "tests/test_a.py::x": "tests/test_a.py", "tests/test_a.py::y": "tests/test_a.py",
                      "tests/test_b.py::w": "tests/test_b.py"}


def test_a_workers_figure_reaches_the_controller(monkeypatch):
    """RI_TEST_TIMES and the fast tier's summary are written by the controller: each teardown
    report carries the worker's figure."""
    monkeypatch.setenv("RI_TEST_TIER", "")
    item = _item("t.py::remote", [], [])
    tiers.start(item.nodeid)
    reports = [SimpleNamespace(when=w, duration=0.1, passed=True, outcome="passed", longrepr=None, user_properties=[])
               for w in ("setup", "call", "teardown")]
    for rep in reports:
        tiers.account(item, rep)
    figure = tiers.TIMES.pop(item.nodeid)
    controller = SimpleNamespace(nodeid=item.nodeid, when="teardown", user_properties=reports[-1].user_properties)
    try:
        tiers.collect(controller)
        assert tiers.TIMES[item.nodeid] == figure and figure["wall_s"] == pytest.approx(0.3)
    finally:
        tiers.TIMES.pop(item.nodeid, None)


def test_make_test_runs_two_workers_grouped():
    """make test (what CI runs) and make test-fast run two pytest-xdist workers, grouped (so shared
    fixtures start once); RI_TEST_WORKERS=0 is one process (docs/TESTING.md#parallel-runs)."""
    make = (REPO / "Makefile").read_text()
    for target, default in (("test", 2), ("test-fast", 2)):
        recipe = re.search(rf"^{target}:.*\n((?:\t.*\n)+)", make, re.M).group(1)
        assert f"RI_TEST_WORKERS=$${{RI_TEST_WORKERS:-{default}}}" in recipe and "scripts/test.sh" in recipe, target
    script = (REPO / "scripts" / "test.sh").read_text()
    assert '-n "$workers" --dist loadgroup --no-loadscope-reorder' in script
    assert "export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}" in script  # no torch thread spinning beside the other worker
    assert "pytest-xdist==" in (REPO / "requirements-dev.txt").read_text()


def test_a_workers_scan_leaves_out_only_its_siblings_live_work(tmp_path):
    """The "nothing left" scans (tests/capture_helpers.py:own_marked) in a parallel run: a worker
    (here a child process with PYTEST_XDIST_WORKER set; this test process is its controller) sees
    its own marked process and an orphan re-parented away from anyone, not the live process of a
    sibling worker (here another child of the controller). A plain machine-wide scan sees all three."""
    import subprocess
    import sys

    from viewer.capture.procs import kill_marked, marked, popen

    tag = "capture-ri-scope-" + os.urandom(4).hex()
    sibling = popen(["sleep", "120"], mark=f"{tag}/sibling", stdin=subprocess.DEVNULL)
    code = f"""
import json, os, subprocess, sys, time
sys.path[:0] = [{str(REPO / "tests")!r}, {str(REPO)!r}]
from capture_helpers import own_marked
from viewer.capture.procs import marked, popen
quiet = dict(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
popen(["sleep", "120"], mark="{tag}/mine", **quiet)
popen(["bash", "-c", "sleep 120 & exit 0"], mark="{tag}/orphan", **quiet).wait()
deadline = time.monotonic() + 30
while len(marked("{tag}")) < 3 and time.monotonic() < deadline:
    time.sleep(0.05)
print(json.dumps([sorted(marked("{tag}").values()), sorted(own_marked("{tag}").values())]))
"""
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "PYTEST_XDIST_WORKER": "gw1"})
        assert r.returncode == 0, r.stderr[-2000:]
        everything, own = json.loads(r.stdout)
    finally:
        kill_marked(tag)
        sibling.wait(10)
    assert everything == [f"{tag}/mine", f"{tag}/orphan", f"{tag}/sibling"]
    assert own == [f"{tag}/mine", f"{tag}/orphan"]
    assert marked(tag) == {}


def test_a_parallel_run_keeps_each_group_on_one_worker():
    """Through pytest-xdist itself: two workers, --dist loadgroup, as scripts/test.sh runs them: a
    group's tests (here: a file's) all run on one worker. xdist 3.8's own grouping does not work
    with pytest 9.2 (each test was scheduled alone); tests/tiers.py:make_scheduler does it."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "RI_TEST"))}
    r = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "--no-loadscope-reorder",
                        "-v", "-p", "no:cacheprovider", "tests/test_makefile.py", "tests/test_readme.py", "-k",
                        "not parallel_run"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:]
    ran = re.findall(r"^\[(gw\d)\] .*?PASSED (\S+)", r.stdout, re.M)
    assert len(ran) > 10, r.stdout[-3000:]
    workers: dict[str, set[str]] = {}
    for worker, nodeid in ran:
        workers.setdefault(nodeid.split("::")[0], set()).add(worker)
    assert set(workers) == {"tests/test_makefile.py", "tests/test_readme.py"}
    assert all(len(w) == 1 for w in workers.values()), workers  # each file's tests on one worker


def test_every_first_group_names_a_shared_fixture_group_or_a_test_file():
    """A renamed file would silently drop out of the start order (and could end a run alone)."""
    for group in tiers.FIRST_GROUPS:
        assert group in set(tiers.SHARED_FIXTURE_GROUPS.values()) or (REPO / group).is_file(), group


def test_tests_run_coroutines_through_aio():
    """asyncio.run fails on an xdist worker after any browser test (tests/aio.py says why)."""
    offenders = [p.name for p in (REPO / "tests").glob("*.py")
                 if p.name not in ("aio.py", "test_tiers.py") and "asyncio.run(" in p.read_text()]
    assert not offenders, offenders
