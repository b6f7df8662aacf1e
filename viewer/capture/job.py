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
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

from viewer.capture import agent as agent_mod
from viewer.capture.artefacts import derive_turns, outcome_notes, versions, write_trace_artefacts
from viewer.capture.backends import BackendError, CaptureCancelled, Endpoint, LocalVLLM, tail
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
        self._records: list[dict[str, Any]] | None = None
        self._failed_phase: str | None = None
        self._lock = threading.Lock()
        # every process this capture starts carries this tag (procs.popen): the last step of run()
        # stops whatever is still marked with it, whoever its parent is by then
        self.tag = f"capture-{uuid.uuid4().hex[:12]}"
        self._forwarder = None
        self._sandbox: dict[str, Any] | None = None
        self._tokenizer: dict[str, Any] | None = None

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

    def _check(self) -> None:
        if self.cancel_event.is_set():
            raise CaptureCancelled()

    def _enter(self, phase: str) -> float:
        self._check()
        self.phase = phase
        self.log(f"phase {phase}")
        return time.perf_counter()

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
        s = self.spec
        self.status = "running"
        self.out.mkdir(parents=True, exist_ok=True)
        for name in ARTEFACTS:  # a fresh capture never mixes with an old one
            (self.out / name).unlink(missing_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix="capture-"))
        workdir, home = tmp / "workdir", tmp / "home"
        server_log = tmp / "server.log"
        backend: LocalVLLM | Endpoint | None = None
        task: Task | None = None
        agent_res: agent_mod.AgentResult | None = None
        reward: dict[str, Any] | None = None
        served = s.model
        t_all = time.perf_counter()
        try:
            t0 = self._enter("setup")
            task = self.resolve_task()
            workdir.mkdir(parents=True)
            (workdir / "TASK.md").write_text(task.instruction, encoding="utf-8")
            self._write_task_files(task)
            script = None
            if s.scripted:
                script = Script(scripted_steps(task, workdir, s.script_commands))
            envmod.ensure(s, self.log, self.cancel_event)  # the first capture installs the capture env
            if s.backend == "local":
                backend = LocalVLLM(model=s.model, log_path=server_log, python=s.vllm_python,
                                    logprobs_mode=s.logprobs_mode or ("raw_logprobs" if s.scripted else "processed_logprobs"), max_model_len=s.context_tokens + s.max_output_tokens,
                                    startup_timeout_s=s.server_timeout_s, log=self.log, cancel=self.cancel_event)
                backend.model_dir()  # builds a CPU model once (cached): part of setup
            elif s.backend == "endpoint":
                if not s.endpoint:
                    raise BackendError("--endpoint URL is required with --backend endpoint")
                backend = Endpoint(s.endpoint, served_name="" if s.model in ("", CaptureSpec.model) else s.model,
                                   token=s.token, log=self.log, public=s.public_app)
            else:
                raise BackendError(f"backend {s.backend!r} runs through viewer.capture.hf_jobs, not CaptureJob")
            no_sandbox = sandbox_mod.unavailable() if s.sandbox else "turned off for this capture (--no-sandbox)"
            if no_sandbox and s.require_sandbox:
                raise BackendError(f"the agent cannot be sandboxed here ({no_sandbox}); this app only runs "
                                   "sandboxed captures")
            if no_sandbox:
                self.log(f"WARNING: the agent and its tools run on this machine without a sandbox: {no_sandbox}")
            self._sandbox = {**sandbox_mod.describe(), "used": not no_sandbox,
                             **({"reason": no_sandbox} if no_sandbox else {})}
            self.timings["setup_s"] = round(time.perf_counter() - t0, 3)

            t0 = self._enter("server")
            url = backend.start()
            served = backend.served_name
            self.log(f"model server ready at {url} (model {served})")
            self.timings["server_start_s"] = round(time.perf_counter() - t0, 3)

            tok_dir = self._ship_tokenizer(backend, served)
            if s.spell_tool_call_as_pieces:
                bias = self._tool_tag_bias(tok_dir, -100.0, required=True)
            elif s.scripted:
                # the scripted expert's forced text uses the tokenizer's own tool-call tokens, as a
                # trained model emits them (a random tiny model under a regex might spell pieces)
                bias = self._tool_tag_bias(tok_dir, 100.0, required=False)
            else:
                bias = {}

            t0 = self._enter("agent")
            cfg = ProxyConfig(upstream=url, trace_path=self.out / PROXY_TRACE, top_logprobs=s.top_logprobs,
                              script=script, upstream_headers=backend.headers() if isinstance(backend, Endpoint) else {},
                              logit_bias=bias, pin=backend.pin if isinstance(backend, Endpoint) else None,
                              sampling=sampling_mod.overrides(s))
            self._proxy = ProxyServer(cfg, on_record=lambda r: self.log(
                f"call {r.get('turn')} ({r.get('kind')}): {len(r.get('completion_token_ids') or [])} tokens, "
                f"finish {r.get('finish_reason')}" + (f", error: {r.get('error')}" if r.get("error") else "")))
            self._proxy.start()
            self.log(f"recording proxy on {self._proxy.url}")
            sandbox = None
            if not no_sandbox:
                sandbox = self._sandbox_for(workdir, home, tmp)
                self.log("agent sandboxed (bubblewrap): it sees its work folder and the proxy, nothing else")
            agent_res = agent_mod.run_opencode(
                task.instruction, workdir, home, self._proxy.url, served, self.out / AGENT_LOG,
                tmp / "agent_stderr.txt", timeout_s=s.agent_timeout_s, cancel=self.cancel_event, binary=s.opencode_bin,
                context=s.context_tokens, output=s.max_output_tokens, steps=s.steps,
                auto_compaction=s.auto_compaction, title=s.title, sandbox=sandbox)
            self._stop_forwarder()
            self.log(f"opencode finished: {agent_res.status} {agent_res.message}".rstrip())
            self.timings["agent_s"] = round(time.perf_counter() - t0, 3)
            self._stop_proxy()
            if agent_res.status == "cancelled":
                raise CaptureCancelled()

            if s.scripted and s.rescore:
                t0 = self._enter("rescore")
                from viewer.capture.rescore import rescore_trace

                self._records, n = rescore_trace(self.out / PROXY_TRACE, url, s.top_logprobs,
                                                 backend if isinstance(backend, Endpoint) else None)
                self.log(f"rescored {n} scripted calls with the model's unconstrained logprobs")
                self.timings["rescore_s"] = round(time.perf_counter() - t0, 3)
            elif s.scripted:
                self.log("scripted calls keep the sampler's grammar-masked logprobs (rescoring off)")
            t0 = self._enter("reward")
            reward = score(workdir, task.held_out_tests, timeout_s=s.test_timeout_s, sandboxed=not no_sandbox)
            self.log(f"reward {reward['reward']} ({reward['passed']}/{reward['total']}; {reward['status']})")
            self.timings["reward_s"] = round(time.perf_counter() - t0, 3)
            if agent_res.status != "ok":
                self._failed_phase = "agent"
            if agent_res.status == "timeout":
                self.status, self.error = "timeout", agent_res.message
            elif agent_res.status != "ok":
                self.status, self.error = "failed", agent_res.message + (
                    f": {agent_res.stderr_tail[-300:]}" if agent_res.stderr_tail else "")
            else:
                self.status = "ok"
        except (CaptureCancelled, KeyboardInterrupt):
            self.status, self.error = getattr(self, "_cancel_as", ("cancelled", "cancelled by the user"))
        except Exception as e:  # every failure ends with a clear status and the artefacts kept
            self.status = "failed"
            self.error = self.redact(f"{self.phase}: {type(e).__name__}: {e}")
        finally:
            self._stop_forwarder()
            self._stop_proxy()
            if backend is not None:
                try:
                    backend.stop()
                except Exception as e:
                    self.log(f"stopping the server: {e}")
            failed_phase = (self._failed_phase or self.phase) if self.status != "ok" else None
            self.phase = "artefacts"
            t0 = time.perf_counter()
            try:
                self.summary = self._write_artefacts(task, agent_res, reward, backend, served, failed_phase,
                                                     server_log)
            except Exception as e:
                self.status = "failed"
                self.error = (self.error + "; " if self.error else "") + f"writing artefacts: {type(e).__name__}: {e}"
                self.summary = {"status": self.status, "error": self.error}
                try:
                    self._write_summary(self.summary)
                except OSError:
                    pass
            self.timings["artefacts_s"] = round(time.perf_counter() - t0, 3)
            self.timings["total_s"] = round(time.perf_counter() - t_all, 3)
            if self.summary is not None:
                self.summary["timings"] = dict(self.timings)
                try:
                    self._write_summary(self.summary)
                except OSError:
                    pass
            left = kill_marked(self.tag + "/")  # anything the agent's tools detached from their group
            if left:
                self.log(f"stopped {len(left)} process(es) the capture had left running")
            if self.summary is not None:
                self.summary["complete"] = self.status == "ok"  # partial artefacts say so
                self.summary["stray_processes_stopped"] = len(left)
                try:
                    self._write_summary(self.summary)
                except OSError:
                    pass
            shutil.rmtree(tmp, ignore_errors=True)
            self.finished = time.time()
            self.phase = "done"
            self.log(f"capture {self.status}" + (f": {self.error}" if self.error else ""))
        return self.summary or {}

    def _ship_tokenizer(self, backend, served: str) -> Path | None:
        """Copy the served model's tokenizer into ``out/tokenizer`` (self-contained artefacts)."""
        s = self.spec
        model_dir = backend.model_dir() if isinstance(backend, LocalVLLM) else None
        src, where = tokfiles.locate(*s.tokenizer_names(served, model_dir))
        if src is None:
            self._tokenizer = {"source": None, "problem": where}
            self.log(f"WARNING: {where}: the capture folder will show ids only (pass --tokenizer)")
            return None
        self._tokenizer = tokfiles.write(self.out, src, where)
        self.log(f"tokenizer from {where} written to tokenizer/ ({len(self._tokenizer['files'])} files)")
        return self.out / TOKENIZER_DIR

    def _tool_tag_bias(self, tok_dir: Path | None, value: float, required: bool) -> dict[str, float]:
        try:
            ids = tokfiles.tool_tag_bias(tok_dir, value, required)
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
        if getattr(self, "_forwarder", None) is not None:
            stop_group(self._forwarder, grace=2)
            self._forwarder = None

    def _stop_proxy(self) -> None:
        if self._proxy is not None and self._proxy._server is not None and not self._proxy.recorder._fh.closed:
            self._proxy.stop()

    def _write_task_files(self, task: Task) -> None:
        (self.out / TASK).write_text(json.dumps(task.task_json(), indent=2, ensure_ascii=False))
        (self.out / VISIBLE_TESTS).write_text(task.visible_text(), encoding="utf-8")
        (self.out / HELD_OUT_TESTS).write_text(json.dumps(task.held_out_tests, indent=2, ensure_ascii=False))

    def _write_artefacts(self, task, agent_res, reward, backend, served, failed_phase, server_log) -> dict[str, Any]:
        s = self.spec
        records = self._records if self._records is not None else read_records(self.out / PROXY_TRACE)
        derived = write_trace_artefacts(self.out, records)
        rec = self._proxy.recorder if self._proxy else None
        upstream_errors = [r for r in records if r.get("error") or r.get("upstream_status")]
        summary: dict[str, Any] = {
            "status": self.status, "error": self.error, "failed_phase": failed_phase,
            "reward": (reward or {}).get("reward"), "tests_passed": (reward or {}).get("passed"),
            "tests_total": (reward or {}).get("total"), "tests_timed_out": (reward or {}).get("timed_out"),
            "reward_status": (reward or {}).get("status"),
            "scripted": s.scripted, "model": served, "backend": s.backend,
            "server": backend.info() if backend is not None else None,
            "task_id": task.task_id if task else None, "task_source": task.source if task else None,
            "calls": len(records), **derived,
            "upstream_errors": len(upstream_errors),
            "first_upstream_error": (upstream_errors[0].get("error") if upstream_errors else None),
            "agent": (asdict(agent_res) if agent_res else None),
            "recorder_write_error": rec.write_error if rec else None,
            "versions": versions(s.vllm_python),
            "spec": s.public(),
            "sandbox": self._sandbox,
            "tokenizer": self._tokenizer,
            "spell_tool_call_as_pieces": s.spell_tool_call_as_pieces, "rescored": bool(s.scripted and s.rescore),
            "sampling": sampling_mod.summary_record(s, backend)}
        if reward:
            summary["test_results"] = [{k: r[k] for k in ("test", "passed", "timed_out", "exit_code", "seconds")}
                                       for r in reward["results"]]
        if self.status != "ok" and server_log.exists():
            summary["server_log_tail"] = tail(server_log, 1500)
        if summary["agent"] and self.status == "ok":
            summary["agent"].pop("stderr_tail", None)
        summary["outcome_notes"] = outcome_notes(summary, s.max_output_tokens)
        self._write_summary(summary)
        return summary


def run_capture(spec: CaptureSpec, on_event: Callable[[dict[str, Any]], None] | None = None,
                cancel: threading.Event | None = None) -> dict[str, Any]:
    """One hf-jobs capture in this thread (viewer.capture.hf_jobs; ``cancel`` reaches it), or a local/endpoint one."""
    if spec.backend == "hf-jobs":
        from viewer.capture.hf_jobs import run_remote

        return run_remote(spec, on_event=on_event, cancel=cancel)
    return CaptureJob(spec, on_event).run()
