"""Reward: the fraction of held-out tests that the agent's ``solution.py`` passes.

Each test runs ``python3 solution.py`` in the workdir with the test input on stdin, in its
own process group, with a wall-clock timeout (the group is killed on timeout). Outputs
are compared after normalising trailing whitespace on each line and trailing blank lines.

The agent wrote ``solution.py``: it never gets the app's environment (tokens, the OAuth
secret), sandboxed or not. In the sandbox it runs as uid 65534 with no capability and
exactly :func:`viewer.capture.sandbox.minimal_env`; without one (a developer's machine with
no bubblewrap, or ``--no-sandbox``) it still gets only that minimal environment (HOME = the
work folder) — its files and network are then the developer's own, as the capture log warns.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from viewer.capture.procs import popen, stop_group
from viewer.capture.sandbox import PATH, PYTHON, Sandbox, minimal_env

__all__ = ["score", "normalise"]


def normalise(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.replace("\r\n", "\n").strip().split("\n"))


def _run(workdir: Path, stdin: str, timeout_s: float, python: str, sandboxed: bool = False) -> dict[str, Any]:
    t0 = time.perf_counter()
    io = dict(cwd=workdir, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if sandboxed:  # the agent wrote this code: it runs with no network and sees nothing of the host
        proc = Sandbox(Path(workdir)).popen([PYTHON, "solution.py"], **io)
    else:  # no sandbox: the host's files, but still none of the app's environment
        env = minimal_env(workdir, tmpdir=tempfile.gettempdir(), path=f"{Path(python).parent}:{PATH}")
        proc = popen([python, "solution.py"], env=env, **io)
    try:
        out, err = proc.communicate(stdin, timeout=timeout_s)
        return {"exit_code": proc.returncode, "stdout": out[-2000:], "stderr": err[-2000:], "timed_out": False,
                "seconds": round(time.perf_counter() - t0, 3)}
    except subprocess.TimeoutExpired:
        stop_group(proc, grace=1)
        try:
            proc.communicate(timeout=2)
        except (subprocess.TimeoutExpired, ValueError, OSError):
            pass
        return {"exit_code": None, "stdout": "", "stderr": "", "timed_out": True, "seconds": round(time.perf_counter() - t0, 3)}


def score(workdir: Path, tests: list[dict[str, str]], timeout_s: float = 10.0, python: str | None = None,
          sandboxed: bool = False) -> dict[str, Any]:
    """``{"reward", "passed", "total", "timed_out", "status", "results": [...]}``; reward None when unscorable.
    ``sandboxed``: each test runs inside :class:`viewer.capture.sandbox.Sandbox` (Debian's python3)."""
    workdir = Path(workdir)
    python = python or sys.executable
    if not tests:
        return {"reward": None, "passed": 0, "total": 0, "timed_out": 0, "status": "no held-out tests", "results": []}
    if not (workdir / "solution.py").is_file():
        return {"reward": 0.0, "passed": 0, "total": len(tests), "timed_out": 0, "status": "no solution.py written",
                "results": []}
    results = []
    for i, t in enumerate(tests):
        r = _run(workdir, t["input"], timeout_s, python, sandboxed)
        r["passed"] = (not r["timed_out"] and r["exit_code"] == 0 and normalise(r["stdout"]) == normalise(t["output"]))
        r["test"] = i
        results.append(r)
    passed = sum(r["passed"] for r in results)
    timed = sum(r["timed_out"] for r in results)
    status = "ok" if not timed else f"{timed} of {len(tests)} tests timed out after {timeout_s:g} s"
    return {"reward": passed / len(tests), "passed": passed, "total": len(tests), "timed_out": timed,
            "status": status, "results": results}
