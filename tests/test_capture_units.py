"""Fast capture tests: tasks, reward (with timeouts), the hf-jobs launcher against a fake
HfApi at the boundary, the one-capture-at-a-time runner, CLI usage, progress HTML."""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from viewer.capture.procs import descendants
from viewer.capture.reward import score
from viewer.capture.tasks import build_dataset, bundled_tasks, scripted_steps

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data" / "qwen3-tiny"


def test_bundled_tasks_shape_and_reference_solutions(tmp_path):
    tasks = bundled_tasks()
    assert len(tasks) >= 3
    for t in tasks:
        assert "solution.py" in t.instruction and t.visible_tests and len(t.held_out_tests) >= 4
        (tmp_path / "solution.py").write_text(t.solution)
        r = score(tmp_path, t.held_out_tests, timeout_s=10)
        assert r["reward"] == 1.0, (t.task_id, r)
        steps = scripted_steps(t, tmp_path)
        assert steps[0].startswith("<tool_call>\n") and json.loads(steps[0].split("\n")[1])["name"] == "write"


def test_reward_partial_wrong_and_missing(tmp_path):
    tests = [{"input": "1 2\n", "output": "3\n"}, {"input": "2 2\n", "output": "4"}, {"input": "0 0\n", "output": "1\n"}]
    assert score(tmp_path, tests)["status"] == "no solution.py written"
    (tmp_path / "solution.py").write_text("a, b = map(int, input().split())\nprint(a + b)   \n")
    r = score(tmp_path, tests)
    assert (r["passed"], r["total"]) == (2, 3) and r["reward"] == pytest.approx(2 / 3)
    assert score(tmp_path, [])["reward"] is None


def test_reward_tests_timing_out_are_killed(tmp_path):
    before = set(descendants())
    # a solution that forks a sleeper and hangs: the whole group must go
    (tmp_path / "solution.py").write_text("import subprocess, time\nsubprocess.Popen(['sleep', '300'])\ntime.sleep(300)\n")
    r = score(tmp_path, [{"input": "", "output": "x"}] * 2, timeout_s=1.0)
    assert r["timed_out"] == 2 and r["reward"] == 0.0 and "timed out" in r["status"]
    time.sleep(0.2)
    assert set(descendants()) <= before


def test_build_dataset_semantics():
    rows = [{"problem": f"P{i}", "tests": json.dumps([{"input": f"{j}\n", "output": f"{j}\n", "type": "stdin_stdout"}
                                                     for j in range(i % 5)])} for i in range(40)]
    a = build_dataset(5, seed=7, rows=rows)
    b = build_dataset(5, seed=7, rows=rows)
    assert [t.task_id for t in a] == [t.task_id for t in b] and len(a) == 5  # deterministic
    assert all(len(t.held_out_tests) >= 3 and t.source == "deepcoder" for t in a)
    assert [t.task_id for t in build_dataset(5, seed=8, rows=rows)] != [t.task_id for t in a]


class FakeJobs:
    """A fake HfApi: records the launch, replays logs (with the token in them), 'downloads' artefacts."""

    def __init__(self, token, stage="COMPLETED", push=True):
        self.token, self.stage, self.push = token, stage, push
        self.calls = []

    def run_uv_job(self, script, **kw):
        self.calls.append(("run_uv_job", script, kw))
        self.job_spec = json.loads(Path(kw["script_args"][kw["script_args"].index("--spec") + 1]).read_text())
        self.run_name = self.job_spec["run_name"]
        return SimpleNamespace(id="job-123")

    def fetch_job_logs(self, job_id, follow=False):
        yield "installing opencode"
        yield f"token is {self.token}"
        yield "capture exit code 0"

    def inspect_job(self, job_id):
        return SimpleNamespace(status=SimpleNamespace(stage=self.stage))

    def cancel_job(self, job_id):
        self.calls.append(("cancel_job", job_id))

    # the results repo: the sample capture pushed under <run_name>/ (when ``push``)
    def repo_info(self, repo_id, repo_type=None):
        return SimpleNamespace(sha="c0ffee")

    def list_repo_tree(self, repo_id, path_in_repo=None, recursive=False, repo_type=None, revision=None):
        self.calls.append(("list_repo_tree", repo_id, path_in_repo))
        if self.push:
            for f in sorted(SAMPLE.rglob("*")):
                if f.is_file():
                    yield SimpleNamespace(path=f"{self.run_name}/{f.relative_to(SAMPLE).as_posix()}", size=f.stat().st_size)

    def hf_hub_download(self, repo_id, filename, repo_type=None, revision=None, local_dir=None):
        self.calls.append(("hf_hub_download", repo_id, filename))
        dest = Path(local_dir) / filename
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(SAMPLE / filename.split("/", 1)[1], dest)
        return str(dest)


def _spec(tmp_path, **kw):
    from viewer.capture.job import CaptureSpec

    d = dict(out=str(tmp_path / "out"), backend="hf-jobs", model="Qwen/Qwen3-4B-Instruct-2507", token="hf_SECRET123",
             results_repo="me/captures", scripted=False)
    d.update(kw)
    return CaptureSpec(**d)


def test_hf_jobs_launch_follow_collect(tmp_path):
    from viewer.capture.hf_jobs import JOB_SCRIPT, run_remote

    api = FakeJobs("hf_SECRET123")
    events = []
    s = run_remote(_spec(tmp_path), on_event=events.append, api=api, poll_s=0)
    assert s["status"] == "ok" and s["backend"] == "hf-jobs" and s["job_id"] == "job-123"
    name, script, kw = api.calls[0]
    assert Path(script).name == JOB_SCRIPT.name and kw["flavor"] == "a100-large"
    assert kw["secrets"] == {"HF_TOKEN": "hf_SECRET123"}
    args = kw["script_args"]
    assert "hf_SECRET123" not in json.dumps(args) and "hf_SECRET123" not in json.dumps(api.job_spec)
    assert api.job_spec["capture"]["model"] == "Qwen/Qwen3-4B-Instruct-2507"
    assert api.job_spec["capture"]["backend"] == "local" and api.job_spec["results_repo"] == "me/captures"
    log = "\n".join(e["message"] for e in events)
    assert "hf_SECRET123" not in log and "token is ***" in log
    out = tmp_path / "out"
    # the artefacts the job pushed are the ones collected, byte for byte
    for name in ("trace.json", "turns.json", "task.json"):
        assert (out / name).read_bytes() == (SAMPLE / name).read_bytes(), name
    assert "hf_SECRET123" not in "".join(p.read_text() for p in out.iterdir())


@pytest.mark.parametrize("stage,push,want", [("ERROR", True, "stage ERROR"), ("COMPLETED", False, "no trace.json")])
def test_hf_jobs_failures_are_clear(tmp_path, stage, push, want):
    from viewer.capture.hf_jobs import run_remote

    s = run_remote(_spec(tmp_path), api=FakeJobs("hf_SECRET123", stage, push), poll_s=0)
    assert s["status"] == "failed" and want in s["error"]
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["status"] == "failed"


def test_hf_jobs_needs_repo_and_token(tmp_path, monkeypatch):
    from viewer.capture.hf_jobs import run_remote

    monkeypatch.delenv("HF_TOKEN", raising=False)
    assert "results dataset repo" in run_remote(_spec(tmp_path, results_repo=""), api=FakeJobs(""))["error"]
    assert "token" in run_remote(_spec(tmp_path, token=""), api=FakeJobs(""))["error"]


def test_runner_queue_one_per_visitor_and_wall_limit(tmp_path, monkeypatch):
    """One capture runs at a time; the next visitor waits with a queue position; a visitor has
    at most one capture live; the wall-clock limit cancels a long one as ``timeout``."""
    import threading

    from viewer.capture import runner as rmod

    gates: dict[str, threading.Event] = {}

    class SlowJob:
        def __init__(self, spec, on_event=None):
            self.spec, self.cancel_event, self.status = spec, threading.Event(), "queued"
            gates[spec.out] = self.cancel_event

        def run(self):
            self.status = "running"
            self.cancel_event.wait(10)
            self.status = getattr(self, "why", "ok")
            return {}

        def cancel(self, reason="cancelled by the user", status="cancelled"):
            self.why = status
            self.cancel_event.set()

        def mark_cancelled_before_start(self):
            self.status = "cancelled"

        def snapshot(self):
            return {"status": self.status, "phase": "agent"}

    monkeypatch.setattr(rmod, "CaptureJob", SlowJob)
    r = rmod.CaptureRunner()
    a = r.start(_spec(tmp_path, backend="local", out=str(tmp_path / "a")), owner="alice")
    with pytest.raises(rmod.CaptureBusy, match="already running for you"):
        r.start(_spec(tmp_path, backend="local", out=str(tmp_path / "a2")), owner="alice")
    b = r.start(_spec(tmp_path, backend="local", out=str(tmp_path / "b")), owner="bob")
    c = r.start(_spec(tmp_path, backend="local", out=str(tmp_path / "c")), owner="carol")
    assert len(a) == 32 and r.position(a) == 0 and r.position(b) == 1 and r.position(c) == 2
    snap = r.snapshot(c)
    assert snap["status"] == "queued" and snap["position"] == 2 and "position 2" in snap["phase"]
    assert r.cancel(c, owner="carol") and r.position(c) == 0 and r.snapshot(c)["status"] == "cancelled"
    assert r.cancel(a, owner="bob") is False  # not bob's
    assert r.cancel(a, owner="alice")
    r.wait(a, 5)
    for _ in range(100):  # b starts when a ends
        if r.position(b) == 0 and r.snapshot(b)["status"] == "running":
            break
        threading.Event().wait(0.02)
    assert r.snapshot(b)["status"] == "running"
    r.cancel(b)
    r.wait(b, 5)
    d = r.start(_spec(tmp_path, backend="local", out=str(tmp_path / "d")), owner="dave", max_wall_s=0.2)
    r.wait(d, 5)
    assert r.snapshot(d)["status"] == "timeout"

def test_cli_capture_usage_errors(capsys):
    from viewer.cli import main

    with pytest.raises(SystemExit) as e:
        main(["capture", "--backend", "nope", "--out", "x"])
    assert e.value.code == 2
    assert main(["capture", "--scripted", "--instruction", "do it", "--out", "x"]) == 2


def test_no_rescore_reaches_the_spec_and_an_hf_job():
    """`--no-rescore` turns the scripted rescore phase off in the spec the CLI builds, and an hf-jobs
    capture carries it in job_spec.json (a field left out there would be dropped silently)."""
    import argparse

    from viewer.capture.hf_jobs import SPEC_FIELDS
    from viewer.cli.capture import add_parser, spec_from_args
    from viewer.config import Settings

    p = argparse.ArgumentParser()
    sub = p.add_subparsers()
    add_parser(sub)
    for argv, want in ((["--scripted"], True), (["--scripted", "--no-rescore"], False)):
        a = p.parse_args(["capture", "--backend", "endpoint", "--endpoint", "http://127.0.0.1:9", "--out", "o", *argv])
        assert spec_from_args(a, Settings()).rescore is want
    assert "rescore" in SPEC_FIELDS


def test_the_capture_command_gives_back_the_signal_handlers_it_set(tmp_path, capsys):
    """`capture` catches SIGTERM while it runs (a clean stop); called in a longer-lived process it must
    leave that process's handlers as they were: a leftover handler raising KeyboardInterrupt later ran
    in a drift scan's forked workers when the pool ended them, and hung the test run."""
    import signal

    from capture_helpers import free_port
    from viewer.cli import main

    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    rc = main(["capture", "--backend", "endpoint", "--endpoint", f"http://127.0.0.1:{free_port()}", "--model", "m",
               "--no-auto-setup", "--out", str(tmp_path / "o")])
    assert rc != 0 and "unreachable" in (tmp_path / "o" / "summary.json").read_text()
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_progress_html_escapes():
    from viewer.ui.capture_tab import progress_html

    html = progress_html({"status": "failed", "phase": "agent", "error": "<script>x</script>", "calls": 2,
                          "tokens": 9, "elapsed_s": 1, "events": [{"t": 0, "phase": "a", "message": "<b>"}],
                          "out": "/tmp/x"}, "ab<")
    assert "<script>" not in html and "&lt;script&gt;" in html and "&lt;b&gt;" in html and "ab&lt;" in html


def _autospec_api(stage_seq):
    """A real ``HfApi`` surface (autospec: a misspelt method or keyword fails like the real client)."""
    from unittest.mock import create_autospec

    from huggingface_hub import HfApi

    api = create_autospec(HfApi, instance=True)
    api.run_uv_job.return_value = SimpleNamespace(id="job-42")
    api.inspect_job.side_effect = lambda **kw: SimpleNamespace(status=SimpleNamespace(stage=next(stage_seq)))
    return api


def test_hf_jobs_cancel_reaches_cancel_job_even_when_the_job_prints_nothing(tmp_path):
    """Cancel while the job runs silently: ``HfApi.cancel_job(job_id=...)`` is called and the capture
    ends as cancelled (before: the event was set and nobody read it; the paid job kept running)."""
    import itertools
    import threading

    from viewer.capture.hf_jobs import run_remote

    silent = threading.Event()
    api = _autospec_api(itertools.repeat("RUNNING"))
    api.fetch_job_logs.side_effect = lambda **kw: iter(lambda: silent.wait(30) and "", "")  # blocks, prints nothing
    cancel = threading.Event()
    got = {}
    th = threading.Thread(target=lambda: got.update(s=run_remote(_spec(tmp_path), api=api, cancel=cancel,
                                                                 poll_s=0.05)))
    th.start()
    for _ in range(200):
        if api.inspect_job.call_count >= 2:
            break
        threading.Event().wait(0.02)
    assert th.is_alive() and not api.cancel_job.called  # running, not cancelled on its own
    cancel.set()
    th.join(10)
    silent.set()
    assert not th.is_alive()
    api.cancel_job.assert_called_once_with(job_id="job-42")
    assert got["s"]["status"] == "cancelled" and got["s"]["job_id"] == "job-42"
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["status"] == "cancelled"
    # the launch used the real signature too (autospec rejects unknown keywords)
    _, kw = api.run_uv_job.call_args
    assert kw["flavor"] and kw["secrets"] == {"HF_TOKEN": "hf_SECRET123"}


def _running_remote_capture(tmp_path, monkeypatch, owner=""):
    """An hf-jobs capture started through the app's runner against an autospec'd HfApi, once the
    job is being polled: (runner, job id, api)."""
    import itertools
    import threading

    import viewer.capture.hf_jobs as hf
    from viewer.capture.runner import CaptureRunner

    api = _autospec_api(itertools.repeat("RUNNING"))
    api.fetch_job_logs.side_effect = lambda **kw: iter(["booting"])
    real = hf.run_remote
    monkeypatch.setattr(hf, "run_remote", lambda spec, **kw: real(spec, api=api, poll_s=0.05, **kw))
    runner = CaptureRunner()
    jid = runner.start(_spec(tmp_path), owner=owner)
    for _ in range(200):
        if api.inspect_job.call_count >= 1:
            break
        threading.Event().wait(0.02)
    return runner, jid, api


def test_hf_jobs_runner_cancel_is_wired(tmp_path, monkeypatch):
    """The app's runner: Cancel on an hf-jobs capture reaches the same API call."""
    runner, jid, api = _running_remote_capture(tmp_path, monkeypatch)
    assert runner.cancel(jid)
    runner.wait(jid, timeout=10)
    api.cancel_job.assert_called_once_with(job_id="job-42")
    assert runner.snapshot(jid)["status"] == "cancelled"


def test_only_the_starting_session_can_cancel(tmp_path, monkeypatch):
    """Another browser session (a ?job= link) may watch a capture but not cancel it."""
    import threading

    runner, jid, api = _running_remote_capture(tmp_path, monkeypatch, owner="session-a")
    assert runner.cancel(jid, owner="session-b") is False
    threading.Event().wait(0.3)
    assert runner.running(jid) and not api.cancel_job.called  # still running, the paid job untouched
    assert runner.cancel(jid, owner="session-a") is True
    runner.wait(jid, timeout=10)
    api.cancel_job.assert_called_once_with(job_id="job-42")


@pytest.mark.parametrize("stdin", ["3\n1 -2 3\n", "it's 100% \"quoted\"\n$HOME `x` \\n\n"])
def test_scripted_command_feeds_the_example_input_exactly(tmp_path, stdin):
    """The scripted expert's bash command gives solution.py the example's input byte for byte
    (before: a ' or % in the input broke the printf command)."""
    import subprocess

    from viewer.capture.tasks import Task, scripted_steps

    task = Task("t", "do it", visible_tests=[{"input": stdin, "output": "x"}], solution="print(1)")
    call = json.loads(scripted_steps(task, tmp_path)[1].split("\n", 1)[1].rsplit("\n", 1)[0])
    assert call["name"] == "bash"
    (tmp_path / "solution.py").write_text("import sys; sys.stdout.write(repr(sys.stdin.read()))")
    out = subprocess.run(["bash", "-c", call["arguments"]["command"]], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout == repr(stdin), out.stderr


# ------------------------------------------------------------------ capture defaults: one owner (issue 20)
def _capture_form(settings):
    """The Capture tab built in a Blocks, as the app builds it: elem_id -> component."""
    import gradio as gr

    from viewer.ui import browse, capture_tab
    from viewer.ui.store import RolloutStore

    with gr.Blocks() as demo:
        store = RolloutStore(settings)
        capture_tab.build(settings, store=store, browse=browse.build(settings, store))  # the tab drives the browser
    return {b.elem_id: b for b in demo.blocks.values() if getattr(b, "elem_id", None)}


def test_the_capture_form_builds_its_spec_from_the_settings():
    """A changed setting changes the spec the Capture tab starts: through the box's first value and
    when the visitor empties the box (no default of the tab's own, as `a_to or 300` once was)."""
    from viewer.config import Settings
    from viewer.ui.capture_tab import form_spec

    s = Settings(capture_model="smollm2", capture_agent_timeout_s=77.0, capture_max_output_tokens=99,
                 capture_top_logprobs=3, capture_test_timeout_s=4.5)
    form = _capture_form(s)
    shown = [form[k].value for k in ("capture-backend", "capture-model", "capture-endpoint", "capture-task",
                                      "capture-deepcoder", "capture-scripted", "capture-instruction",
                                      "capture-agent-timeout", "capture-max-tokens")]
    args = [*shown, form["capture-results-repo"].value, form["capture-pieces"].value]
    spec = form_spec(s, False, "", *args, form["capture-rescore"].value)
    assert (spec.model, spec.agent_timeout_s, spec.max_output_tokens) == ("smollm2", 77.0, 99)
    assert spec.rescore is True and form_spec(s, False, "", *args, False).rescore is False  # the tab's rescore box
    emptied = form_spec(s, False, "", "local", "", "", None, False, True, "", None, None, "", False)
    assert (emptied.model, emptied.agent_timeout_s, emptied.max_output_tokens) == ("smollm2", 77.0, 99)
    assert (emptied.top_logprobs, emptied.test_timeout_s) == (3, 4.5)  # settings the form does not show
    other = form_spec(Settings(capture_agent_timeout_s=12.0), False, "", *args[:7], None, None, "", False)
    assert other.agent_timeout_s == 12.0


def test_one_model_list_for_the_form_validation_and_rescore(capsys):
    from viewer.capture.fields import capture_spec
    from viewer.capture.models import MODELS
    from viewer.config import Settings
    from viewer.ui import rescore_panel
    from viewer.visitor import VisitorError

    assert MODELS == ("tiny-qwen3", "smollm2")  # docs/CAPTURE-GUIDE.md's CPU model list
    form = _capture_form(Settings())
    assert [c[1] if isinstance(c, tuple) else c for c in form["capture-model"].choices] == list(MODELS)
    assert rescore_panel.MODELS[1:] == list(MODELS)
    assert Settings().capture_model in MODELS
    # config.py cannot import capture/ (capture reads config): its help names the models, checked here
    help_text = next(h for name, _, _, h in Settings.docs() if name == "capture_model")
    assert " / ".join(MODELS) in help_text
    from viewer.cli import main as cli_main  # the command line's choices and help read the same tuples
    from viewer.capture.fields import BACKENDS

    for cmd, want in (("rescore", " / ".join(MODELS)), ("capture", "{" + ",".join(BACKENDS) + "}")):
        with pytest.raises(SystemExit):
            cli_main([cmd, "--help"])
        assert want in " ".join(capsys.readouterr().out.split()), cmd
    for m in MODELS:  # every listed model passes the check even on a public app (hf-jobs)
        assert capture_spec(Settings(), out="o", public=True, token="t", backend="hf-jobs", results_repo="o/r",
                            model=m).model == m
    with pytest.raises(VisitorError, match="not a listed model"):
        capture_spec(Settings(), out="o", public=True, token="t", backend="hf-jobs", results_repo="o/r", model="tiny")


def test_capture_spec_defaults_are_the_settings_defaults():
    """CaptureSpec's defaults for what a setting covers are the setting's own, not a second copy."""
    from dataclasses import fields

    from viewer.capture.spec import CaptureSpec
    from viewer.config import Settings

    spec, s = CaptureSpec(out=""), Settings()
    pairs = {"model": "capture_model", "agent_timeout_s": "capture_agent_timeout_s",
             "test_timeout_s": "capture_test_timeout_s", "max_output_tokens": "capture_max_output_tokens",
             "top_logprobs": "capture_top_logprobs", "logprobs_mode": "capture_logprobs_mode",
             "flavor": "capture_hf_flavor", "results_repo": "capture_results_repo", "auto_setup": "capture_auto_setup"}
    assert {k: getattr(spec, k) for k in pairs} == {k: getattr(s, v) for k, v in pairs.items()}
    # and the literal is written once: in config.py, not in spec.py
    import ast
    src = (Path(__file__).resolve().parent.parent / "viewer/capture/spec.py").read_text()
    numbers = {n.value for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Constant)}
    assert not {300.0, 1024, "tiny-qwen3", "a100-large"} & numbers
    assert {f.name for f in fields(CaptureSpec)} >= set(pairs)


def test_the_capture_tab_writes_no_default_number():
    """viewer/ui/capture_tab.py takes every default from the settings or the spec: no number in a
    fallback (`float(a_to or 300)`) or as a number box's first value (layout sizes like lines=2 are not defaults)."""
    import ast

    def defaults(src: str) -> list[tuple[int, object]]:
        out = []
        for n in ast.walk(ast.parse(src)):
            if isinstance(n, ast.BoolOp):
                out += [v for v in n.values if isinstance(v, ast.Constant)]
            elif isinstance(n, ast.Call) and getattr(n.func, "attr", "") in ("Number", "Slider"):
                out += [a for a in n.args[:1] + [k.value for k in n.keywords if k.arg == "value"]
                        if isinstance(a, ast.Constant)]
        return sorted((c.lineno, c.value) for c in out if type(c.value) in (int, float))

    assert defaults("x = float(a_to or 300)\nn = gr.Number(1024, precision=0)\nt = gr.Textbox(lines=2)") == [
        (1, 300), (2, 1024)]
    src = (Path(__file__).resolve().parent.parent / "viewer/ui/capture_tab.py").read_text()
    assert defaults(src) == []
    assert "tiny-qwen3" not in src and "smollm2" not in src


def test_two_captures_needing_a_model_at_once_build_it_once(tmp_path):
    """Two captures (two visitors, or two test workers) start with the model not built yet: one
    builds it, the other waits and reuses it. Before: both built into the same temporary folder
    and one failed (its folder renamed away under it). The builder here is a stand-in interpreter
    (the real one needs the vLLM venv and a minute): it is called exactly as the real one is."""
    import threading

    from viewer.capture.models import ensure_model

    log = tmp_path / "builds.log"
    builder = tmp_path / "python"
    builder.write_text(f'#!/bin/bash\necho "$2" >> {log}\nsleep 1\nmkdir -p "$3"\necho weights > "$3/model.bin"\n')
    builder.chmod(0o755)
    cache = tmp_path / "models"
    got: list = []

    def need():
        try:
            got.append(ensure_model("smollm2", builder, cache_dir=cache))
        except Exception as e:  # noqa: BLE001 - the failure is what this test reports
            got.append(e)

    threads = [threading.Thread(target=need) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert got == [cache / "smollm2", cache / "smollm2"], got
    assert log.read_text().split() == ["smollm2"]  # built once
    assert (cache / "smollm2" / "model.bin").read_text() == "weights\n" and (cache / "smollm2" / ".done").exists()
