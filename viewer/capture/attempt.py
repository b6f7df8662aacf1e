"""One capture run's working state (:class:`Attempt`), the model server its spec names
(:func:`backend_for`) and the summary.json it ends with (:func:`summary_of`).

:class:`viewer.capture.job.CaptureJob` runs the phases; each fills in its part of the attempt, and
the always-run end (stop, collect, clean up) reads what is there, however far the run got.
"""
from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from viewer.capture import sampling as sampling_mod
from viewer.capture.agent import AgentResult
from viewer.capture.artefacts import outcome_notes, versions
from viewer.capture.backends import BackendError, Endpoint, LocalVLLM, tail
from viewer.capture.script import Script
from viewer.capture.spec import CaptureSpec
from viewer.capture.tasks import Task

__all__ = ["Attempt", "backend_for", "summary_of"]


@dataclass
class Attempt:
    """What one run's phases made so far (None: not reached)."""

    tmp: Path  # the run's scratch folder (work folder, agent home, server log), removed at the end
    served: str  # the model name the server answers to (the spec's until the server says)
    t_all: float = field(default_factory=time.perf_counter)
    task: Task | None = None
    script: Script | None = None
    backend: LocalVLLM | Endpoint | None = None
    no_sandbox: str | None = None  # why the agent runs without a sandbox (None: it is sandboxed)
    url: str = ""
    bias: dict[str, float] = field(default_factory=dict)
    agent: AgentResult | None = None
    reward: dict[str, Any] | None = None
    records: list[dict[str, Any]] | None = None  # the rescored records (rescore on); else read from the trace
    failed_phase: str | None = None  # set when the phases all ran but the agent failed
    sandbox: dict[str, Any] | None = None  # summary.json's sandbox record
    tokenizer: dict[str, Any] | None = None  # summary.json's tokenizer record (what was shipped, or why not)

    @property
    def workdir(self) -> Path:
        return self.tmp / "workdir"

    @property
    def home(self) -> Path:
        return self.tmp / "home"

    @property
    def server_log(self) -> Path:
        return self.tmp / "server.log"


def backend_for(spec: CaptureSpec, server_log: Path, log: Callable[[str], None],
                cancel: threading.Event) -> LocalVLLM | Endpoint:
    """The spec's model server, not started yet: a local vLLM or an OpenAI-compatible endpoint."""
    if spec.backend == "local":
        return LocalVLLM(model=spec.model, log_path=server_log, python=spec.vllm_python,
                         logprobs_mode=spec.logprobs_mode or ("raw_logprobs" if spec.scripted else "processed_logprobs"),
                         max_model_len=spec.context_tokens + spec.max_output_tokens,
                         startup_timeout_s=spec.server_timeout_s, log=log, cancel=cancel)
    if spec.backend != "endpoint":
        raise BackendError(f"backend {spec.backend!r} runs through viewer.capture.hf_jobs, not CaptureJob")
    if not spec.endpoint:
        raise BackendError("--endpoint URL is required with --backend endpoint")
    return Endpoint(spec.endpoint, served_name="" if spec.model in ("", CaptureSpec.model) else spec.model,
                    token=spec.token, log=log, public=spec.public_app)


def summary_of(spec: CaptureSpec, run: Attempt, *, status: str, error: str | None, failed_phase: str | None,
               records: list[dict[str, Any]], derived: dict[str, Any], recorder: Any) -> dict[str, Any]:
    """The content of :data:`viewer.layout.SUMMARY`: how the capture ended, what it ran with, what the proxy recorded
    (``derived``: what :func:`viewer.capture.artefacts.write_trace_artefacts` made of the records)."""
    reward = run.reward or {}
    upstream_errors = [r for r in records if r.get("error") or r.get("upstream_status")]
    summary: dict[str, Any] = {
        "status": status, "error": error, "failed_phase": failed_phase,
        "reward": reward.get("reward"), "tests_passed": reward.get("passed"),
        "tests_total": reward.get("total"), "tests_timed_out": reward.get("timed_out"),
        "reward_status": reward.get("status"),
        "scripted": spec.scripted, "model": run.served, "backend": spec.backend,
        "server": run.backend.info() if run.backend is not None else None,
        "task_id": run.task.task_id if run.task else None, "task_source": run.task.source if run.task else None,
        "calls": len(records), **derived,
        "upstream_errors": len(upstream_errors),
        "first_upstream_error": (upstream_errors[0].get("error") if upstream_errors else None),
        "agent": (asdict(run.agent) if run.agent else None),
        "recorder_write_error": recorder.write_error if recorder else None,
        "versions": versions(spec.vllm_python),
        "spec": spec.public(),
        "sandbox": run.sandbox,
        "tokenizer": run.tokenizer,
        "spell_tool_call_as_pieces": spec.spell_tool_call_as_pieces, "rescored": bool(spec.scripted and spec.rescore),
        "sampling": sampling_mod.summary_record(spec, run.backend)}
    if run.reward:
        summary["test_results"] = [{k: r[k] for k in ("test", "passed", "timed_out", "exit_code", "seconds")}
                                   for r in run.reward["results"]]
    if status != "ok" and run.server_log.exists():
        summary["server_log_tail"] = tail(run.server_log, 1500)
    if summary["agent"] and status == "ok":
        summary["agent"].pop("stderr_tail", None)
    summary["outcome_notes"] = outcome_notes(summary, spec.max_output_tokens)
    return summary
