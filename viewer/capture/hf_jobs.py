"""``--backend hf-jobs``: the whole capture as a Hugging Face Job on a GPU flavor.

The launcher writes, into a fresh temporary folder of its own, the job script, a zip of the
``viewer`` package and ``job_spec.json`` (every field of the capture as data), and launches
``HfApi.run_uv_job`` with exactly those three files as the script and its arguments. It then
streams the job's logs (the token redacted), waits for its final stage, and downloads the
known capture files the job pushed to ``results_repo`` into ``spec.out``, sizes checked first.

Why a spec file: ``run_uv_job`` uploads *every script argument that names an existing local
file* to the caller's ``jobs-artifacts`` bucket before the job exists. A visitor's text on the
argument list (Model = ``/proc/self/environ``) would copy a server file to the visitor. So no
visitor value is ever an argument: the arguments are the app's own file paths (issue 19).

The token comes from the spec (the user) or ``HF_TOKEN`` and is passed as a job *secret*; it
never appears in logs or artefacts. ``api`` is injectable so tests can drive the launcher with
an ``HfApi`` whose network calls are faked.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import threading
import time
import zipfile
from pathlib import Path
from typing import Any, Callable

from viewer.capture.spec import unique_name
from viewer.layout import CAPTURE_FILES, AGENT_LOG, JOB_BUNDLE, JOB_SPEC, PROXY_TRACE, TOKENIZER_DIR
from viewer.tokenizer.bundled import QWEN3_REQUIREMENT
from viewer.layout import SUMMARY, TRACE

__all__ = ["build_bundle", "job_files", "run_remote", "JOB_SCRIPT", "RESULT_FILES"]

JOB_SCRIPT = Path(__file__).with_name("hf_job_script.py")
PKG_ROOT = Path(__file__).resolve().parents[1]  # the viewer package
GPU_DEPENDENCIES = ["vllm", "httpx", "uvicorn", "starlette", "huggingface_hub", "transformers", QWEN3_REQUIREMENT]
# What is downloaded back from the results repo: the capture's known files and its tokenizer/
# (plain names; nothing else the repo holds, and never more than the hub_mb budget).
RESULT_FILES = tuple(dict.fromkeys(CAPTURE_FILES + (PROXY_TRACE, AGENT_LOG)))
_TOKENIZER_FILE = re.compile(re.escape(TOKENIZER_DIR) + r"/[A-Za-z0-9_.-]{1,100}")
# Capture fields the job needs (all of them data; never the token, the output folder or host paths)
SPEC_FIELDS = ("model", "task_source", "task_index", "n_prompts", "seed", "instruction", "scripted",
               "agent_timeout_s", "test_timeout_s", "max_output_tokens", "steps", "top_logprobs", "logprobs_mode",
               "temperature", "top_p", "top_k", "spell_tool_call_as_pieces", "tokenizer", "title",
               "rescore")


def build_bundle(dest: Path) -> Path:
    """Zip the viewer package (source + bundled task data) for upload with the job."""
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as z:
        for p in sorted(PKG_ROOT.rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts and p.suffix in (".py", ".json", ".js", ".css", ".jinja"):
                z.write(p, Path("viewer") / p.relative_to(PKG_ROOT))
    return dest


def job_files(spec, folder: Path, run_name: str) -> tuple[str, list[str]]:
    """Write the job's files into ``folder`` (a fresh one the app made); (script, script_args).

    The only paths on the argument list are these files; every visitor value is inside
    ``job_spec.json``, which the job script reads as data."""
    folder = Path(folder)
    script = folder / JOB_SCRIPT.name
    shutil.copyfile(JOB_SCRIPT, script)
    bundle = build_bundle(folder / JOB_BUNDLE)
    doc = {"run_name": run_name, "results_repo": spec.results_repo,
           "capture": {"backend": "local", **{k: getattr(spec, k) for k in SPEC_FIELDS}}}
    (folder / JOB_SPEC).write_text(json.dumps(doc, indent=2, ensure_ascii=False), encoding="utf-8")
    return str(script), ["--bundle", str(bundle), "--spec", str(folder / JOB_SPEC), "--setup"]


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


def download_results(api: Any, repo: str, run_name: str, dest: Path, log: Callable[[str], None]) -> Path:
    """Download the known capture files of ``run_name`` from ``repo`` into ``dest/run_name``.

    Sizes come from the repo's file listing at one commit (the download uses the same commit, so
    they cannot change in between); over the ``hub_mb`` budget nothing is downloaded. Only the
    file names of a capture folder are fetched, whatever else the repo holds."""
    from viewer.config import Settings

    lim = Settings.from_env().limits()
    info = api.repo_info(repo_id=repo, repo_type="dataset")
    rev = getattr(info, "sha", None)
    wanted: list[tuple[str, int]] = []
    for entry in api.list_repo_tree(repo_id=repo, path_in_repo=run_name, recursive=True, repo_type="dataset",
                                    revision=rev):
        rel = str(getattr(entry, "path", ""))[len(run_name) + 1:]
        size = getattr(entry, "size", None)
        if size is None or not (rel in RESULT_FILES or _TOKENIZER_FILE.fullmatch(rel)):
            continue  # a folder, or a file a capture does not have
        wanted.append((rel, int(size)))
    lim.check("upload_files", len(wanted), f"{repo}/{run_name}")
    lim.check_bytes("hub_mb", sum(n for _, n in wanted), f"{repo}/{run_name}")
    for rel, _ in wanted:
        api.hf_hub_download(repo_id=repo, filename=f"{run_name}/{rel}", repo_type="dataset", revision=rev,
                            local_dir=str(dest))
    log(f"downloaded {len(wanted)} files ({sum(n for _, n in wanted) / 1e6:.1f} MB) from {repo}/{run_name}")
    return Path(dest) / run_name


def run_remote(spec, on_event: Callable[[dict[str, Any]], None] | None = None, api: Any = None,
               cancel=None, poll_s: float = 5.0, timeout: str = "2h") -> dict[str, Any]:
    """Launch, follow and collect one hf-jobs capture; returns the summary (also in spec.out).

    ``cancel`` (a threading.Event) set at any time cancels the remote job through
    ``HfApi.cancel_job`` within ``poll_s`` and ends the capture as ``cancelled``."""
    t_start = time.time()
    out = Path(spec.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in RESULT_FILES:  # finish() reads only what this run downloaded, never an older summary.json
        (out / name).unlink(missing_ok=True)
    # a public app's capture uses the visitor's sign-in token only, never the Space's HF_TOKEN
    token = spec.token or ("" if spec.public_app else os.environ.get("HF_TOKEN", ""))

    def log(msg: str, phase: str = "remote") -> None:
        if on_event:
            on_event({"t": round(time.time() - t_start, 2), "phase": phase, "message": _redact(msg, token)})

    def finish(status: str, error: str | None, extra: dict | None = None) -> dict[str, Any]:
        summ: dict[str, Any] = {}
        if (out / SUMMARY).exists():
            try:
                summ = json.loads((out / SUMMARY).read_text())
            except ValueError:
                summ = {}
        if status != "ok" or not summ:
            summ.update({"status": status, "error": error})
        summ.setdefault("status", status)
        summ.update({"backend": "hf-jobs", "flavor": spec.flavor, "results_repo": spec.results_repo, **(extra or {})})
        (out / SUMMARY).write_text(json.dumps(summ, indent=2, ensure_ascii=False))
        return summ

    from viewer.visitor import FLAVOR, VisitorError, repo_id

    try:  # the repo is used as a repo id by this server (download), so it is checked here too
        repo_id("results_repo", spec.results_repo)
    except VisitorError as e:
        return finish("failed", f"hf-jobs needs a results dataset repo (--results-repo OWNER/NAME): {e}")
    if not FLAVOR.fullmatch(spec.flavor or ""):
        return finish("failed", f"{spec.flavor!r} is not a hardware flavor name (e.g. a100-large)")
    if not token:
        return finish("failed", "hf-jobs needs a Hugging Face token (the token field or HF_TOKEN)")
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi(token=token)
    tmp = Path(tempfile.mkdtemp(prefix="capture-hfjob-"))
    job_id = None
    try:
        run_name = unique_name()
        (tmp / "job").mkdir()  # the job's own files, and nothing else, are named to run_uv_job
        script, script_args = job_files(spec, tmp / "job", run_name)
        log(f"launching a {spec.flavor} job")
        job = api.run_uv_job(script, script_args=script_args,
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
        src = download_results(api, spec.results_repo, run_name, tmp / "dl", log)
        if not (src / TRACE).exists():
            return finish("failed", f"job {job_id} completed but pushed no trace.json to {spec.results_repo}",
                          {"job_id": job_id})
        for f in src.rglob("*"):
            if f.is_file():
                dest = out / f.relative_to(src)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(f, dest)
        summ = json.loads((out / SUMMARY).read_text()) if (out / SUMMARY).exists() else {}
        return finish(summ.get("status", "ok"), summ.get("error"), {"job_id": job_id, "run_name": run_name})
    except Exception as e:
        return finish("failed", _redact(f"{type(e).__name__}: {e}", token), {"job_id": job_id})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
