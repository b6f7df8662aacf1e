"""opencode driver: one non-interactive ``opencode run`` on one task (docs/CAPTURE.md §4).

A fresh HOME per run, our ``opencode.json`` (provider -> the recording proxy), the offline
switches, ripgrep on PATH, a non-empty workdir, the prompt on stdin (a single argv word
with spaces reaches the model wrapped in quotes), a wall-clock timeout, and the whole
process group killed at the end. opencode's NDJSON event log (``--format json``) is kept.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from viewer.capture.models import repo_root
from viewer.capture.procs import popen, stop_group

__all__ = ["OPENCODE_VERSION", "find_opencode", "opencode_config", "opencode_env", "opencode_vars", "AgentResult",
           "run_opencode", "DISABLED_TOOLS"]

OPENCODE_VERSION = "1.18.33"
PROVIDER = "capture"
# The seed (OpenEnv opencode env) disables these tools.
DISABLED_TOOLS = ("webfetch", "question", "task")
OFFLINE_ENV = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_CLAUDE_CODE": "1",
    "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
}


def find_opencode(explicit: str = "") -> Path:
    """The native opencode binary installed by scripts/setup_capture.sh (or ``explicit``)."""
    cands = [Path(explicit)] if explicit else []
    nm = repo_root() / ".cache" / "opencode" / "node_modules"
    cands += [nm / "opencode-linux-x64" / "bin" / "opencode", nm / "opencode-linux-x64-baseline" / "bin" / "opencode",
              nm / "opencode-ai" / "bin" / "opencode.exe"]
    for c in cands:
        if c.is_file() and os.access(c, os.X_OK) and c.stat().st_size > 10_000:
            return c
    which = shutil.which("opencode")
    if which:
        return Path(which)
    raise FileNotFoundError("opencode not installed: run `bash scripts/setup_capture.sh` "
                            f"(npm install opencode-ai@{OPENCODE_VERSION} into .cache/opencode)")


def opencode_config(proxy_url: str, model: str, context: int = 16384, output: int = 1024, steps: int = 8,
                    auto_compaction: bool = False, title: bool = True, sandboxed: bool = False) -> dict[str, Any]:
    """opencode's config. ``sandboxed``: the sandbox is the boundary, so opencode's own
    "external_directory" prompt (which nobody can answer in a headless run, and which ends it)
    is allowed; without a sandbox opencode keeps refusing paths outside the work folder."""
    cfg: dict[str, Any] = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {PROVIDER: {"npm": "@ai-sdk/openai-compatible", "name": "Recording proxy",
                                "options": {"baseURL": proxy_url, "apiKey": "dummy"},
                                "models": {model: {"name": model, "limit": {"context": context, "output": output}}}}},
        "model": f"{PROVIDER}/{model}", "small_model": f"{PROVIDER}/{model}",
        "autoupdate": False, "share": "disabled",
        "agent": {"build": {"steps": steps}},
        "compaction": {"auto": auto_compaction},
        "permission": {"bash": "allow", "edit": "allow", "webfetch": "deny",
                       **({"external_directory": "allow"} if sandboxed else {})},
        "tools": {t: False for t in DISABLED_TOOLS},
    }
    if not title:
        cfg["agent"]["title"] = {"disable": True}
    return cfg


def opencode_vars(home: Path, config_path: Path) -> dict[str, str]:
    """What opencode needs besides PATH/HOME/LANG/TMPDIR/TERM: its offline switches, its config
    and the XDG folders in its fresh HOME (nothing from the app's environment)."""
    return {**OFFLINE_ENV, "OPENCODE_CONFIG": str(config_path), "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_DATA_HOME": str(home / ".local" / "share"), "XDG_CACHE_HOME": str(home / ".cache"),
            "XDG_STATE_HOME": str(home / ".local" / "state"), "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost"}


def opencode_env(home: Path, config_path: Path) -> dict[str, str]:
    """opencode's whole environment on the host (no sandbox): a few of the host's locale/path
    variables, never its tokens. In a sandbox it gets :func:`viewer.capture.sandbox.minimal_env`."""
    keep = ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR", "TERM")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update(opencode_vars(home, config_path), HOME=str(home))
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    return env


@dataclass
class AgentResult:
    status: str  # ok | error | timeout | cancelled
    exit_code: int | None
    seconds: float
    events: int = 0
    tool_uses: dict[str, int] = field(default_factory=dict)
    stderr_tail: str = ""
    message: str = ""


def _count_events(log_path: Path) -> tuple[int, dict[str, int]]:
    n, tools = 0, {}
    try:
        lines = log_path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return 0, {}
    for line in lines:
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        n += 1
        if isinstance(ev, dict) and ev.get("type") == "tool_use":
            part = ev.get("part") or {}
            name = part.get("tool") or (ev.get("tool") if isinstance(ev.get("tool"), str) else None) or "?"
            tools[name] = tools.get(name, 0) + 1
    return n, tools


def run_opencode(instruction: str, workdir: Path, home: Path, proxy_url: str, model: str, log_path: Path,
                 stderr_path: Path, timeout_s: float = 600.0, cancel: threading.Event | None = None,
                 binary: str = "", context: int = 16384, output: int = 1024, steps: int = 8,
                 auto_compaction: bool = False, title: bool = True,
                 on_poll: Callable[[], None] | None = None, sandbox=None) -> AgentResult:
    """Run opencode once; always returns (never leaves the process group running).

    ``sandbox`` (a :class:`viewer.capture.sandbox.Sandbox` with the proxy forwarded into it)
    runs opencode and every tool it starts inside bubblewrap; None runs it on the host."""
    exe = find_opencode(binary)
    workdir.mkdir(parents=True, exist_ok=True)
    if not any(workdir.iterdir()):  # never launch from an empty directory (docs/CAPTURE.md §4.4)
        (workdir / "TASK.md").write_text(instruction, encoding="utf-8")
    home.mkdir(parents=True, exist_ok=True)
    cfg_path = home / "opencode.json"
    cfg_path.write_text(json.dumps(opencode_config(proxy_url, model, context, output, steps, auto_compaction, title,
                                                   sandboxed=sandbox is not None), indent=2))
    cmd = [str(exe), "run", "--format", "json", "--model", f"{PROVIDER}/{model}"]
    if sandbox is not None:  # uid 65534, no capabilities, PATH/HOME/LANG/TMPDIR/TERM + opencode's own variables
        exe = exe.resolve()  # inside, only the binary's real folder is bound (no symlink on the way to it)
        cmd[0] = str(exe)
        sandbox = dataclasses.replace(sandbox, read_only=(*sandbox.read_only, exe.parent),
                                      home=home, env={**sandbox.env, **opencode_vars(home, cfg_path)})
    t0 = time.perf_counter()
    status, message = "ok", ""
    with open(log_path, "wb") as out, open(stderr_path, "wb") as err:
        io = dict(cwd=workdir, stdin=subprocess.PIPE, stdout=out, stderr=err)
        proc = (sandbox.popen(cmd, **io) if sandbox is not None
                else popen(cmd, env=opencode_env(home, cfg_path), **io))
        try:
            try:
                proc.stdin.write(instruction.encode())  # type: ignore[union-attr]
                proc.stdin.close()  # type: ignore[union-attr]
            except OSError:
                pass
            while proc.poll() is None:
                if cancel is not None and cancel.is_set():
                    status, message = "cancelled", "cancelled by the user"
                    break
                if time.perf_counter() - t0 > timeout_s:
                    status, message = "timeout", f"opencode did not finish within {timeout_s:g} s (killed)"
                    break
                if on_poll is not None:
                    on_poll()
                time.sleep(0.2)
        finally:
            stop_group(proc, grace=3)
    code = proc.returncode if status == "ok" else None
    if status == "ok" and code != 0:
        status, message = "error", f"opencode exited with code {code}"
    n, tools = _count_events(log_path)
    try:
        tail = stderr_path.read_bytes()[-3000:].decode("utf-8", "replace")
    except OSError:
        tail = ""
    return AgentResult(status, code, round(time.perf_counter() - t0, 3), n, tools, tail, message)
