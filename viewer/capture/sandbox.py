"""The agent's sandbox: bubblewrap namespaces around opencode and everything its tools start.

What the agent (and the held-out tests of its ``solution.py``) can reach inside:

* files: the system's programs and libraries read-only (``/usr``; a few ``/etc`` files),
  the opencode binary read-only, its work folder and its own HOME writable, an empty
  ``/tmp``. Nothing else of the host: not the app's code, data, uploads or other captures;
* processes: a new PID namespace with its own ``/proc``, so the app and its environment
  (``/proc/<pid>/environ``: tokens and secrets) are invisible;
* network: a new network namespace whose loopback has exactly one open port, the
  recording proxy's, forwarded to the host's proxy over a Unix socket by ``socat``. No other
  loopback port, no LAN, no internet.

The environment is the scrubbed one the caller passes (no token reaches it). Processes
keep the capture marker (viewer/capture/procs.py), so a detached child is still stopped.
"""
from __future__ import annotations

import functools
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Sandbox", "unavailable", "PYTHON", "describe"]

PYTHON = "/usr/bin/python3"  # the interpreter the agent and the tests get inside (Debian's)
_ETC = ("passwd", "group", "nsswitch.conf", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives",
        "localtime", "mime.types", "ssl", "ca-certificates")


@functools.lru_cache(maxsize=1)
def unavailable() -> str | None:
    """Why no sandbox can be made here (None: it can). Probed once: bwrap must create the namespaces."""
    for tool, pkg in (("bwrap", "bubblewrap"), ("socat", "socat")):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian package {pkg}; scripts/setup.sh installs it)"
    try:
        r = subprocess.run(["bwrap", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin",
                            "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--proc", "/proc",
                            "--dev", "/dev", "--unshare-all", "--die-with-parent", "true"],
                           capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bwrap could not run: {e}"
    if r.returncode != 0:
        return f"bwrap cannot create namespaces here: {r.stderr.strip()[:300]}"
    return None


def describe() -> dict:
    """What a capture records about its sandbox (summary.json)."""
    why = unavailable()
    if why:
        return {"enabled": False, "reason": why}
    try:
        ver = subprocess.run(["bwrap", "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        ver = "bwrap"
    return {"enabled": True, "tool": ver, "network": "the recording proxy only",
            "writable": ["work folder", "agent home"], "processes": "own PID namespace"}


@dataclass
class Sandbox:
    """One sandbox layout. ``wrap(cmd)`` returns the bwrap command line that runs ``cmd``
    inside; ``proxy_port`` is served inside on 127.0.0.1 and forwarded to ``proxy_socket``
    (a Unix socket on the host that reaches the recording proxy)."""

    workdir: Path
    home: Path | None = None
    read_only: tuple[Path, ...] = ()
    proxy_socket: Path | None = None
    proxy_port: int | None = None
    workdir_writable: bool = True

    def _base(self) -> list[str]:
        args = ["bwrap", "--die-with-parent", "--new-session", "--unshare-all",
                "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
                "--symlink", "usr/lib", "/lib", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
                "--tmpfs", "/run", "--dir", "/etc"]
        if Path("/usr/lib64").exists():
            args += ["--symlink", "usr/lib64", "/lib64"]
        for name in _ETC:
            p = Path("/etc") / name
            if p.exists():
                args += ["--ro-bind", str(p), str(p)]
        for p in self.read_only:
            args += ["--ro-bind", str(p), str(p)]
        for p, writable in ((self.workdir, self.workdir_writable), (self.home, True)):
            if p is not None:
                args += ["--bind" if writable else "--ro-bind", str(p), str(p)]
        if self.proxy_socket is not None:
            args += ["--ro-bind", str(self.proxy_socket), "/run/proxy.sock"]
        return args + ["--chdir", str(self.workdir)]

    def wrap(self, cmd: list[str]) -> list[str]:
        inner = [str(c) for c in cmd]
        if self.proxy_socket is None or self.proxy_port is None:
            return self._base() + ["--", *inner]
        port = int(self.proxy_port)
        # socat serves the proxy's port on the sandbox's own loopback; wait until it listens
        script = (f"socat TCP-LISTEN:{port},bind=127.0.0.1,fork,reuseaddr UNIX-CONNECT:/run/proxy.sock & "
                  f"i=0; while [ $i -lt 100 ] && ! socat -u OPEN:/dev/null TCP:127.0.0.1:{port} 2>/dev/null; "
                  "do i=$((i+1)); sleep 0.05; done; exec \"$@\"")
        return self._base() + ["--", "/bin/sh", "-c", script, "sandbox", *inner]


def host_forwarder(socket_path: Path, port: int) -> list[str]:
    """The host side: a Unix socket (only bound into the sandbox) that reaches 127.0.0.1:``port``."""
    return ["socat", f"UNIX-LISTEN:{socket_path},fork,mode=600", f"TCP:127.0.0.1:{int(port)}"]


if __name__ == "__main__":  # python -m viewer.capture.sandbox: can this machine sandbox the agent?
    print(describe())
    sys.exit(1 if unavailable() else 0)
