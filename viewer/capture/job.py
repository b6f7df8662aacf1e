"""One capture: phases with progress events, cancellable, nothing left running.

Phases: ``setup`` (task, workdir, the capture env on first use, model build) -> ``server`` (vLLM start or endpoint check)
-> ``agent`` (recording proxy + opencode) -> ``reward`` (held-out tests) -> ``artefacts``.
Whatever happens, the ``finally`` path stops opencode, the proxy and any server we
started, then writes every artefact it can from what was recorded (a failed or cancelled
capture is still viewable) with a clear ``status``/``error`` in ``summary.json``.

Artefacts in ``out``: :data:`viewer.layout.ARTEFACTS` and ``tokenizer/``.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable

from viewer.capture import agent as agent_mod
from viewer.capture.artefacts import derive_turns, outcome_notes, write_trace_artefacts
from viewer.capture.attempt import Attempt, backend_for, summary_of
from viewer.capture.backends import BackendError, CaptureCancelled, Endpoint, LocalVLLM
from viewer.capture import sampling as sampling_mod, sandbox as sandbox_mod
from viewer.capture import environment as envmod
from viewer.capture import tokfiles
from viewer.capture.procs import capture_tag, kill_marked, popen, stop_group
from viewer.capture.proxy import ProxyConfig, ProxyServer
from viewer.capture.records import read_records
from viewer.capture.script import Script
from viewer.capture.reward import score
from viewer.capture.spec import CaptureSpec
from viewer.capture.tasks import Task, bundled_task, custom_task, deepcoder_task, scripted_steps
from viewer.layout import AGENT_LOG, ARTEFACTS, HELD_OUT_TESTS, PROXY_TRACE, SUMMARY, TASK, TOKENIZER_DIR, VISIBLE_TESTS

_LOG = logging.getLogger(__name__)
__all__ = ["CaptureSpec", "CaptureJob", "ARTEFACTS", "derive_turns", "outcome_notes", "write_trace_artefacts",
           "run_capture"]


class CaptureJob:
    """Runs one capture (``run()`` blocks); ``snapshot()`` and ``cancel()`` are thread-safe."""

    def __init__(self, spec: CaptureSpec, on_event: Callable[[dict[str, Any]], None] | None = None):
        self.spec = spec
        self.out = Path(spec.out)
        self.on_event = on_event
        self.cancel_event = threading.Event()
        self.events: list[dict[str, Any]] = []
        self.phase = "queued"
        self.status = "queued"  # queued | running | ok | failed | timeout | cancelled
        self.error: str | None = None
        self.started = time.time()
        self.finished: float | None = None
        self.timings: dict[str, float] = {}
        self.summary: dict[str, Any] | None = None
        self._proxy: ProxyServer | None = None
        self._lock = threading.Lock()
        # every process this capture starts carries this tag (procs.popen): the last step of run()
        # stops whatever is still marked with it, whoever its parent is by then
        self.tag = f"capture-{uuid.uuid4().hex[:12]}"
        self._forwarder = None
        self._cancel_as = ("cancelled", "cancelled by the user")  # (status, error) a cancel ends with

    # ------------------------------------------------------------------ progress
    def redact(self, text: str) -> str:
        """``text`` with every secret this capture knows (the spec's token, ``HF_TOKEN``) as ***."""
        for secret in (self.spec.token, os.environ.get("HF_TOKEN", "")):
            if secret and len(secret) >= 6:
                text = text.replace(secret, "***")
        return text

    def _write_summary(self, summary: dict[str, Any]) -> dict[str, Any]:
        """Write summary.json with every secret redacted; the redacted dict (what the UI shows too)."""
        text = self.redact(json.dumps(summary, indent=2, ensure_ascii=False))
        (self.out / SUMMARY).write_text(text)
        clean = json.loads(text)
        summary.clear()
        summary.update(clean)
        return summary

    def log(self, message: str, phase: str | None = None) -> None:
        message = self.redact(message)
        ev = {"t": round(time.time() - self.started, 2), "phase": phase or self.phase, "message": message}
        with self._lock:
            self.events.append(ev)
        if self.on_event is not None:
            try:
                self.on_event(ev)
            except Exception as e:  # a watcher's bug must not stop the capture; it is logged, not lost
                _LOG.warning("capture %s: event callback failed: %s: %s", self.out.name, type(e).__name__, e)

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            events = list(self.events[-40:])
        rec = self._proxy.recorder if self._proxy else None
        return {"status": self.status, "phase": self.phase, "error": self.redact(self.error or "") or None,
                "out": str(self.out),
                "elapsed_s": round((self.finished or time.time()) - self.started, 1),
                "calls": rec.calls if rec else (self.summary or {}).get("calls", 0),
                "tokens": rec.tokens if rec else (self.summary or {}).get("output_tokens", 0),
                "events": events, "summary": self.summary}

    def cancel(self, reason: str = "cancelled by the user", status: str = "cancelled") -> None:
        """Stop at the next check; ``status``/``reason`` are what the summary will say."""
        self._cancel_as = (status, reason)
        self.cancel_event.set()
        self.log(f"cancel requested: {reason}")

    def mark_cancelled_before_start(self) -> None:
        self.status, self.phase, self.error = "cancelled", "done", "cancelled before it started"

    # ------------------------------------------------------------------ run
    def resolve_task(self) -> Task:
        s = self.spec
        if s.instruction.strip():
            return custom_task(s.instruction)
        if s.task_source == "deepcoder":
            return deepcoder_task(s.task_index, s.n_prompts, s.seed)
        return bundled_task(s.task_index)

    def run(self) -> dict[str, Any]:
        with capture_tag(self.tag):
            return self._run()

    def _run(self) -> dict[str, Any]:
        """The phases in order; a failure or a cancel ends them with a clear status, and
        :meth:`_finish` runs whatever happened."""
        self.status = "running"
        self.out.mkdir(parents=True, exist_ok=True)
        for name in ARTEFACTS:  # a fresh capture never mixes with an old one
            (self.out / name).unlink(missing_ok=True)
        run = Attempt(tmp=Path(tempfile.mkdtemp(prefix="capture-")), served=self.spec.model)
        try:
            self._setup(run)
            self._start_server(run)
            self._run_agent(run)
            self._rescore(run)
            self._score(run)
            self._settle(run)
        except (CaptureCancelled, KeyboardInterrupt):
            self.status, self.error = self._cancel_as
        except Exception as e:  # every failure ends with a clear status and the artefacts kept
            self.status = "failed"
            self.error = self.redact(f"{self.phase}: {type(e).__name__}: {e}")
        finally:
            self._finish(run)
        return self.summary or {}

    @contextmanager
    def _phase(self, phase: str, timing: str) -> Iterator[None]:
        """Enter ``phase`` (a cancel asked for stops here); its seconds go to ``timings[timing]`` if it ends."""
        if self.cancel_event.is_set():
            raise CaptureCancelled()
        self.phase = phase
        self.log(f"phase {phase}")
        t0 = time.perf_counter()
        yield
        self.timings[timing] = round(time.perf_counter() - t0, 3)

    def _setup(self, run: Attempt) -> None:
        """The task and its work folder, the capture env (installed on first use), the backend (a local
        model built), and whether the agent can be sandboxed."""
        s = self.spec
        with self._phase("setup", "setup_s"):
            run.task = self.resolve_task()
            run.workdir.mkdir(parents=True)
            (run.workdir / "TASK.md").write_text(run.task.instruction, encoding="utf-8")
            self._write_task_files(run.task)
            if s.scripted:
                run.script = Script(scripted_steps(run.task, run.workdir, s.script_commands))
            envmod.ensure(s, self.log, self.cancel_event)
            run.backend = backend_for(s, run.server_log, self.log, self.cancel_event)
            if isinstance(run.backend, LocalVLLM):
                run.backend.model_dir()  # builds a CPU model once (cached)
            run.no_sandbox = self._no_sandbox(run)

    def _no_sandbox(self, run: Attempt) -> str | None:
        """Why the agent runs without a sandbox (None: it is sandboxed); refused where one is required."""
        s = self.spec
        why = sandbox_mod.unavailable() if s.sandbox else "turned off for this capture (--no-sandbox)"
        if why and s.require_sandbox:
            raise BackendError(f"the agent cannot be sandboxed here ({why}); this app only runs sandboxed captures")
        if why:
            self.log(f"WARNING: the agent and its tools run on this machine without a sandbox: {why}")
        run.sandbox = {**sandbox_mod.describe(), "used": not why, **({"reason": why} if why else {})}
        return why

    def _start_server(self, run: Attempt) -> None:
        """Start the model server (or check the endpoint), then ship its tokenizer with the capture."""
        with self._phase("server", "server_start_s"):
            run.url = run.backend.start()
            run.served = run.backend.served_name
            self.log(f"model server ready at {run.url} (model {run.served})")
        run.bias = self._logit_bias(self._ship_tokenizer(run))

    def _run_agent(self, run: Attempt) -> None:
        """The recording proxy, then opencode through it (sandboxed unless it cannot be); both stopped after."""
        s = self.spec
        with self._phase("agent", "agent_s"):
            self._start_proxy(run)
            sandbox = None
            if not run.no_sandbox:
                sandbox = self._sandbox_for(run.workdir, run.home, run.tmp)
                self.log("agent sandboxed (bubblewrap): it sees its work folder and the proxy, nothing else")
            run.agent = agent_mod.run_opencode(
                run.task.instruction, run.workdir, run.home, self._proxy.url, run.served, self.out / AGENT_LOG,
                run.tmp / "agent_stderr.txt", timeout_s=s.agent_timeout_s, cancel=self.cancel_event,
                binary=s.opencode_bin, context=s.context_tokens, output=s.max_output_tokens, steps=s.steps,
                auto_compaction=s.auto_compaction, title=s.title, sandbox=sandbox)
            self._stop_forwarder()
            self.log(f"opencode finished: {run.agent.status} {run.agent.message}".rstrip())
        self._stop_proxy()
        if run.agent.status == "cancelled":
            raise CaptureCancelled()

    def _start_proxy(self, run: Attempt) -> None:
        s = self.spec
        endpoint = run.backend if isinstance(run.backend, Endpoint) else None
        cfg = ProxyConfig(upstream=run.url, trace_path=self.out / PROXY_TRACE, top_logprobs=s.top_logprobs,
                          script=run.script, upstream_headers=endpoint.headers() if endpoint is not None else {},
                          logit_bias=run.bias, pin=endpoint.pin if endpoint is not None else None,
                          sampling=sampling_mod.overrides(s))
        self._proxy = ProxyServer(cfg, on_record=self._log_call)
        self._proxy.start()
        self.log(f"recording proxy on {self._proxy.url}")

    def _log_call(self, r: dict[str, Any]) -> None:
        self.log(f"call {r.get('turn')} ({r.get('kind')}): {len(r.get('completion_token_ids') or [])} tokens, "
                 f"finish {r.get('finish_reason')}" + (f", error: {r.get('error')}" if r.get("error") else ""))

    def _rescore(self, run: Attempt) -> None:
        """Scripted calls (rescore on): the model's unconstrained logprobs replace the grammar-masked ones."""
        s = self.spec
        if not s.scripted:
            return
        if not s.rescore:
            self.log("scripted calls keep the sampler's grammar-masked logprobs (rescoring off)")
            return
        with self._phase("rescore", "rescore_s"):
            from viewer.capture.rescore import rescore_trace

            run.records, n = rescore_trace(self.out / PROXY_TRACE, run.url, s.top_logprobs,
                                             run.backend if isinstance(run.backend, Endpoint) else None)
            self.log(f"rescored {n} scripted calls with the model's unconstrained logprobs")

    def _score(self, run: Attempt) -> None:
        """The held-out tests on the work folder the agent left (sandboxed as the agent was)."""
        with self._phase("reward", "reward_s"):
            run.reward = score(run.workdir, run.task.held_out_tests, timeout_s=self.spec.test_timeout_s,
                               sandboxed=not run.no_sandbox)
            r = run.reward
            self.log(f"reward {r['reward']} ({r['passed']}/{r['total']}; {r['status']})")

    def _settle(self, run: Attempt) -> None:
        """The capture's status once every phase ran: how the agent ended."""
        agent = run.agent
        if agent.status == "ok":
            self.status = "ok"
            return
        run.failed_phase = "agent"
        if agent.status == "timeout":
            self.status, self.error = "timeout", agent.message
        else:
            self.status, self.error = "failed", agent.message + (
                f": {agent.stderr_tail[-300:]}" if agent.stderr_tail else "")

    def _finish(self, run: Attempt) -> None:
        """Always, whatever happened: stop what runs (each stop on its own, so one failing leaves no
        other running), write every artefact the record allows, stop any process still marked as this
        capture's, and say how it ended."""
        self._release("the sandbox's proxy forwarder", self._stop_forwarder)
        self._release("the recording proxy", self._stop_proxy)
        if run.backend is not None:
            self._release("the server", run.backend.stop)
        failed_phase = (run.failed_phase or self.phase) if self.status != "ok" else None
        self.phase = "artefacts"
        t0 = time.perf_counter()
        self.summary = self._collect(run, failed_phase)
        self.timings["artefacts_s"] = round(time.perf_counter() - t0, 3)
        self.timings["total_s"] = round(time.perf_counter() - run.t_all, 3)
        self._amend_summary(timings=dict(self.timings))
        left = kill_marked(self.tag + "/")  # anything the agent's tools detached from their group
        if left:
            self.log(f"stopped {len(left)} process(es) the capture had left running")
        # partial artefacts say so
        self._amend_summary(complete=self.status == "ok", stray_processes_stopped=len(left))
        shutil.rmtree(run.tmp, ignore_errors=True)
        self.finished = time.time()
        self.phase = "done"
        self.log(f"capture {self.status}" + (f": {self.error}" if self.error else ""))

    def _release(self, what: str, stop: Callable[[], None]) -> None:
        try:
            stop()
        except Exception as e:  # logged; the next resource is still released
            self.log(f"stopping {what}: {e}")

    def _collect(self, run: Attempt, failed_phase: str | None) -> dict[str, Any]:
        """Every artefact the record allows (trace.json and the rest from the proxy's records, then
        summary.json); if they cannot be written, a summary that says why."""
        try:
            records = run.records if run.records is not None else read_records(self.out / PROXY_TRACE)
            derived = write_trace_artefacts(self.out, records)
            summary = summary_of(self.spec, run, status=self.status, error=self.error, failed_phase=failed_phase,
                                 records=records, derived=derived, recorder=self._proxy.recorder if self._proxy else None)
            self._write_summary(summary)
            return summary
        except Exception as e:
            self.status = "failed"
            self.error = (self.error + "; " if self.error else "") + f"writing artefacts: {type(e).__name__}: {e}"
            return {"status": self.status, "error": self.error}  # written with the timings next

    def _amend_summary(self, **fields: Any) -> None:
        """Add ``fields`` to the summary and write summary.json again, if the disk lets us (the capture
        is over either way)."""
        self.summary.update(fields)
        try:
            self._write_summary(self.summary)
        except OSError:
            pass

    def _ship_tokenizer(self, run: Attempt) -> Path | None:
        """Copy the served model's tokenizer into ``out/tokenizer`` (self-contained artefacts)."""
        model_dir = run.backend.model_dir() if isinstance(run.backend, LocalVLLM) else None
        src, where = tokfiles.locate(*self.spec.tokenizer_names(run.served, model_dir))
        if src is None:
            run.tokenizer = {"source": None, "problem": where}
            self.log(f"WARNING: {where}: the capture folder will show ids only (pass --tokenizer)")
            return None
        run.tokenizer = tokfiles.write(self.out, src, where)
        self.log(f"tokenizer from {where} written to tokenizer/ ({len(run.tokenizer['files'])} files)")
        return self.out / TOKENIZER_DIR

    def _logit_bias(self, tok_dir: Path | None) -> dict[str, float]:
        """The proxy's logit_bias on the tokenizer's tool-call tags: -100 when the spec spells them as plain
        pieces; +100 in scripted mode, whose forced text uses the tokenizer's own tool-call tokens, as a
        trained model emits them (a random tiny model under a regex might spell pieces); else none."""
        s = self.spec
        if not (s.spell_tool_call_as_pieces or s.scripted):
            return {}
        value = -100.0 if s.spell_tool_call_as_pieces else 100.0
        try:
            ids = tokfiles.tool_tag_bias(tok_dir, value, required=s.spell_tool_call_as_pieces)
        except ValueError as e:
            raise BackendError(str(e)) from None
        if ids:
            what = "spelling tool-call tags as plain pieces" if value < 0 else "scripted tool calls use the special tokens"
            self.log(f"{what}: logit_bias {ids}")
        return ids

    def _sandbox_for(self, workdir: Path, home: Path, tmp: Path) -> "sandbox_mod.Sandbox":
        """The agent's sandbox, with the proxy's port forwarded into it over a Unix socket."""
        sock = tmp / "proxy.sock"
        self._forwarder = popen(sandbox_mod.host_forwarder(sock, self._proxy.port), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not sock.exists():
            if self._forwarder.poll() is not None or time.monotonic() > deadline:
                raise BackendError("the sandbox's proxy forwarder (socat) did not start")
            time.sleep(0.02)
        return sandbox_mod.Sandbox(workdir, home, proxy_socket=sock, proxy_port=self._proxy.port)

    def _stop_forwarder(self) -> None:
        if self._forwarder is not None:
            stop_group(self._forwarder, grace=2)
            self._forwarder = None

    def _stop_proxy(self) -> None:
        if self._proxy is not None:
            self._proxy.stop()  # again after the agent phase: a no-op then

    def _write_task_files(self, task: Task) -> None:
        (self.out / TASK).write_text(json.dumps(task.task_json(), indent=2, ensure_ascii=False))
        (self.out / VISIBLE_TESTS).write_text(task.visible_text(), encoding="utf-8")
        (self.out / HELD_OUT_TESTS).write_text(json.dumps(task.held_out_tests, indent=2, ensure_ascii=False))


def run_capture(spec: CaptureSpec, on_event: Callable[[dict[str, Any]], None] | None = None,
                cancel: threading.Event | None = None) -> dict[str, Any]:
    """One hf-jobs capture in this thread (viewer.capture.hf_jobs; ``cancel`` reaches it), or a local/endpoint one."""
    if spec.backend == "hf-jobs":
        from viewer.capture.hf_jobs import run_remote

        return run_remote(spec, on_event=on_event, cancel=cancel)
    return CaptureJob(spec, on_event).run()
