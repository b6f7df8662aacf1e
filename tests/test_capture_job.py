"""A capture's always-run end (viewer/capture/job.py, ``CaptureJob._finish``) on runs that stop
before the agent: a cancel, a setup failure, a dead endpoint. No vLLM and no opencode run, so these
stay in the fast tier; the live captures are tests/test_capture_live.py (slow)."""
from __future__ import annotations

import json

from capture_helpers import free_port
from requires import capture_env_missing, need
from viewer.capture.job import CaptureJob, CaptureSpec
from viewer.capture.procs import marked


def _ended(job: CaptureJob, summary: dict) -> dict:
    """The summary.json the run left (plain json), after the checks every ending shares."""
    on_disk = json.loads((job.out / "summary.json").read_text())
    assert on_disk == summary  # what run() returned is what the file says
    assert job.phase == "done" and job.finished is not None
    assert marked(job.tag) == {}  # nothing the capture started is still running
    assert on_disk["complete"] is False and on_disk["stray_processes_stopped"] == 0
    assert set(on_disk["timings"]) >= {"artefacts_s", "total_s"}
    assert job.events[-1]["message"] == f"capture {job.status}: {job.error}"
    return on_disk


def test_a_cancel_before_the_first_phase_ends_as_the_cancel_said(tmp_path):
    job = CaptureJob(CaptureSpec(out=str(tmp_path / "c"), backend="endpoint", endpoint="http://127.0.0.1:9"))
    job.cancel("the visitor's wall-clock limit", status="timeout")
    s = _ended(job, job.run())
    assert (s["status"], s["error"]) == ("timeout", "the visitor's wall-clock limit")
    assert s["task_id"] is None and s["server"] is None and s["calls"] == 0  # no phase ran
    assert [e["message"] for e in job.events][0] == "cancel requested: the visitor's wall-clock limit"
    assert not any(e["message"].startswith("phase ") for e in job.events)


def test_a_setup_failure_still_writes_the_task_and_the_summary(tmp_path):
    # auto_setup off: a machine without the capture env fails here too (saying so), never installs
    job = CaptureJob(CaptureSpec(out=str(tmp_path / "c"), backend="endpoint", endpoint="", auto_setup=False))
    s = _ended(job, job.run())
    assert s["status"] == "failed" and s["failed_phase"] == "setup" and s["error"].startswith("setup: BackendError: ")
    assert s["server"] is None and "setup_s" not in s["timings"]
    task = json.loads((job.out / "task.json").read_text())  # written before the failure
    assert s["task_id"] == task["task_id"]
    assert [e["message"] for e in job.events][0] == "phase setup"


def test_a_dead_endpoint_fails_in_the_server_phase(tmp_path):
    why = capture_env_missing()
    if why:
        need("the capture environment (scripts/setup_capture.sh)", why)
    url = f"http://127.0.0.1:{free_port()}"
    job = CaptureJob(CaptureSpec(out=str(tmp_path / "c"), backend="endpoint", endpoint=url, model="m",
                                 auto_setup=False))
    s = _ended(job, job.run())
    assert s["status"] == "failed" and s["failed_phase"] == "server" and "unreachable" in s["error"]
    assert "setup_s" in s["timings"] and "server_start_s" not in s["timings"]
    assert s["server"] == {"backend": "endpoint", "model": "m", "served_name": "m"}
    assert [e["message"] for e in job.events if e["message"].startswith("phase ")] == ["phase setup", "phase server"]
