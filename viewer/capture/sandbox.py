"""The agent's sandbox: bubblewrap namespaces around opencode and everything its tools start.

What the agent (and the held-out tests of its ``solution.py``) can reach inside:

* identity: uid/gid 65534 ("nobody") in a new user namespace, whoever runs the app (root
  included: Docker self-hosting, HF Jobs); no capability at all (effective, permitted,
  inheritable, ambient and bounding sets empty, ``--cap-drop ALL``); ``no_new_privs`` set (bwrap
  always sets ``PR_SET_NO_NEW_PRIVS``, so no setuid or file-capability program regains any);
  no further user namespace (``--disable-userns``, bwrap >= 0.8); its own session
  (``--new-session``: no TIOCSTI into the app's terminal);
* environment: exactly :func:`minimal_env` (PATH, HOME, LANG, TMPDIR, TERM and what the caller
  adds, e.g. opencode's switches). bwrap itself is started with that same environment (``env -i``)
  and the command with ``--clearenv``: bwrap's own process is PID 1 inside, so whatever it was
  given would be readable at ``/proc/1/environ``. No variable whose name looks like a credential
  may be added (:func:`check_env`);
* files: the system's programs and libraries read-only (``/usr``; a few ``/etc`` files),
  the opencode binary read-only, its work folder and its own HOME writable, an empty
  ``/tmp`` and ``/run``, everything else read-only, ``/proc/sys`` and the rest of /proc's
  writable files included (the app as root maps uid 65534 to host uid 0, which the kernel
  lets write sysctls such as ``core_pattern`` by file mode: :func:`_proc_covers`). Nothing else of the
  host: not the app's code, data, uploads or other captures. Mounts are locked: ``mount``,
  ``remount,rw`` and ``umount`` are refused;
* processes: a new PID namespace with its own ``/proc``, so the app and its environment
  (``/proc/<pid>/environ``: tokens and secrets) are invisible;
* network: a new network namespace whose loopback has exactly one open port, the
  recording proxy's, forwarded to the host's proxy over a Unix socket by ``socat``. No other
  loopback port, no LAN, no internet.

Start sandboxed processes with :meth:`Sandbox.popen` (the only way the capture does): it
keeps the capture marker (viewer/capture/procs.py) inside, so a detached child is still stopped.
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from viewer.capture import procs

__all__ = ["Sandbox", "unavailable", "PYTHON", "PATH", "UID", "CREDENTIAL_NAME", "describe", "minimal_env", "check_env"]

PYTHON = "/usr/bin/python3"  # the interpreter the agent and the tests get inside (Debian's)
PATH = "/usr/local/bin:/usr/bin:/bin"  # inside: only the sandbox's /usr exists
UID = GID = 65534  # "nobody" (in /etc/passwd): an unprivileged id inside, never 0
_ETC = ("passwd", "group", "nsswitch.conf", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives",
        "localtime", "mime.types", "ssl", "ca-certificates")
# a variable with such a name never enters a sandbox (or the held-out tests' environment)
CREDENTIAL_NAME = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|API_?KEY|PRIVATE|AUTH|COOKIE", re.I)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def check_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` unchanged, or ValueError naming the variable (never its value) that may not enter
    a sandbox: a credential-like name, or a value holding a credential of this process."""
    secrets = [v for k, v in os.environ.items() if CREDENTIAL_NAME.search(k) and len(v) >= 6]
    for k, v in env.items():
        if not _NAME.match(k) or "\0" in v:
            raise ValueError(f"environment variable {k!r}: not a plain NAME=value")
        if CREDENTIAL_NAME.search(k):
            raise ValueError(f"environment variable {k} looks like a credential; it never enters the sandbox")
        if any(s in v for s in secrets):
            raise ValueError(f"environment variable {k} holds a credential of the app; it never enters the sandbox")
    return env


def minimal_env(home: str | Path, tmpdir: str = "/tmp", path: str = PATH, **extra: str) -> dict[str, str]:
    """The whole environment of a sandboxed process (and of the held-out tests without a
    sandbox): nothing is inherited from the app, whose environment holds its tokens."""
    env = {"PATH": path, "HOME": str(home), "LANG": "C.UTF-8", "TMPDIR": tmpdir, "TERM": "dumb", **extra}
    return check_env(env)


@functools.lru_cache(maxsize=1)
def _bwrap_flags() -> tuple[str, ...]:
    """``--disable-userns`` where this bwrap has it (0.8+); older ones still lock the mounts."""
    try:
        helptext = subprocess.run(["bwrap", "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        helptext = ""
    return ("--disable-userns",) if "--disable-userns" in helptext else ()


@functools.lru_cache(maxsize=1)
def _proc_covers() -> tuple[str, ...]:
    """The top-level /proc entries holding anything writable by its owner (``sys``, ``irq``,
    ``pressure``, ``mtrr``, ``sysrq-trigger``, … as this kernel has them). When the app runs as
    root, the sandbox's uid maps to host uid 0, which the kernel lets write such files by mode
    with no capability (``/proc/sys/kernel/core_pattern``!): they are bound read-only inside."""
    out = []
    for e in sorted(os.listdir("/proc")):
        p = os.path.join("/proc", e)
        if e.isdigit() or e in ("self", "thread-self") or os.path.islink(p):
            continue
        try:
            if os.path.isfile(p):
                found = os.stat(p).st_mode & 0o222
            else:
                found = any(os.lstat(os.path.join(r, n)).st_mode & 0o222 for r, ds, fs in os.walk(p) for n in fs)
        except OSError:
            continue
        if found:
            out.append(p)
    return tuple(out)


@functools.lru_cache(maxsize=1)
def unavailable() -> str | None:
    """Why no sandbox can be made here (None: it can). Probed once with the capture's own
    flags: bwrap must create the namespaces, the user namespace included."""
    for tool, pkg in (("bwrap", "bubblewrap"), ("socat", "socat"), ("env", "coreutils")):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian package {pkg}; scripts/setup.sh installs it)"
    try:
        r = subprocess.run(Sandbox(Path("/usr"), workdir_writable=False).wrap(["true"]), capture_output=True,
                           text=True, timeout=20, env={})
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
            "writable": ["work folder", "agent home"], "processes": "own PID namespace",
            "user": f"uid {UID} gid {GID}, no capabilities, no_new_privs",
            "environment": "minimal (PATH HOME LANG TMPDIR TERM + the agent's switches)",
            "nested_user_namespaces": "refused" if _bwrap_flags() else "allowed (bwrap < 0.8), mounts stay locked"}


@dataclass
class Sandbox:
    """One sandbox layout. :meth:`popen` starts a command inside; ``wrap(cmd)`` is its command
    line. ``proxy_port`` is served inside on 127.0.0.1 and forwarded to ``proxy_socket`` (a Unix
    socket on the host that reaches the recording proxy). ``env``: variables added to
    :func:`minimal_env` (HOME is ``home``, else the sandbox's empty /tmp)."""

    workdir: Path
    home: Path | None = None
    read_only: tuple[Path, ...] = ()
    proxy_socket: Path | None = None
    proxy_port: int | None = None
    workdir_writable: bool = True
    env: dict[str, str] = field(default_factory=dict)

    def environment(self) -> dict[str, str]:
        return minimal_env(self.home or "/tmp", **self.env)

    def _base(self) -> list[str]:
        args = [shutil.which("bwrap") or "bwrap", "--die-with-parent", "--new-session", "--unshare-all",
                "--unshare-user", "--uid", str(UID), "--gid", str(GID), "--cap-drop", "ALL", *_bwrap_flags(),
                "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
                "--symlink", "usr/lib", "/lib", "--proc", "/proc",
                *(a for p in _proc_covers() for a in ("--ro-bind", p, p)), "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/run", "--dir", "/etc"]
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
        # the sandbox's own root (a tmpfs holding the mount points) read-only too: the work folder,
        # HOME, /tmp and /run are the only places it writes
        return args + ["--remount-ro", "/", "--chdir", str(self.workdir)]

    def wrap(self, cmd: list[str], env: dict[str, str] | None = None) -> list[str]:
        """The command line that runs ``cmd`` inside with exactly ``env`` (default
        :meth:`environment`), whatever environment the line itself is started with."""
        env = check_env(dict(self.environment() if env is None else env))
        inner = [str(c) for c in cmd]
        setenv = [a for k, v in env.items() for a in ("--setenv", k, v)]
        # env -i: bwrap's own environment (readable inside as /proc/1/environ) is ``env`` too
        outer = [shutil.which("env") or "/usr/bin/env", "-i", *(f"{k}={v}" for k, v in env.items())]
        base = [*outer, *self._base(), "--clearenv", *setenv]
        if self.proxy_socket is None or self.proxy_port is None:
            return base + ["--", *inner]
        port = int(self.proxy_port)
        # socat serves the proxy's port on the sandbox's own loopback; wait until it listens
        script = (f"socat TCP-LISTEN:{port},bind=127.0.0.1,fork,reuseaddr UNIX-CONNECT:/run/proxy.sock & "
                  f"i=0; while [ $i -lt 100 ] && ! socat -u OPEN:/dev/null TCP:127.0.0.1:{port} 2>/dev/null; "
                  "do i=$((i+1)); sleep 0.05; done; exec \"$@\"")
        return base + ["--", "/bin/sh", "-c", script, "sandbox", *inner]

    def popen(self, cmd: list[str], **kw) -> subprocess.Popen:
        """Start ``cmd`` inside (:func:`viewer.capture.procs.popen`: own session, marked, so
        :func:`~viewer.capture.procs.stop_group` stops it and whatever it detaches)."""
        if "env" in kw:
            raise TypeError("a sandboxed process gets Sandbox.env, never a caller's environment")
        mark = procs.new_mark()
        env = {**self.environment(), procs.MARK: mark}
        return procs.popen(self.wrap(cmd, env), env=env, mark=mark, **kw)


def host_forwarder(socket_path: Path, port: int) -> list[str]:
    """The host side: a Unix socket (only bound into the sandbox) that reaches 127.0.0.1:``port``."""
    return ["socat", f"UNIX-LISTEN:{socket_path},fork,mode=600", f"TCP:127.0.0.1:{int(port)}"]


if __name__ == "__main__":  # python -m viewer.capture.sandbox: can this machine sandbox the agent?
    print(describe())
    sys.exit(1 if unavailable() else 0)
