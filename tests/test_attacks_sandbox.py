"""Attacks on the agent's sandbox (viewer/capture/sandbox.py) from the code the agent writes.

Real bubblewrap, real ``reward.score``: the agent's ``solution.py`` (the held-out tests run it)
tries to read the app's secrets from its environment and ``/proc``, to regain privileges
(capabilities, uid 0, new user namespaces, ``setuid``), to remount a read-only bind writable
and write the host file behind it, and to find any writable place outside its work folder.
The app runs as root on this machine (as in Docker self-hosting or on HF Jobs), the case in
which an unhardened sandbox keeps every capability. A live capture whose agent's own bash
tool runs the same probes is in tests/test_capture_live.py
(test_sandboxed_agent_cannot_reach_secrets_files_or_other_ports).
"""
from __future__ import annotations

import http.server
import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from requires import need

from viewer.capture import procs
from viewer.capture.reward import score

# the environment a sandboxed process may have, as the sandbox's contract states it (docs/SECURITY.md)
ALLOWED_ENV = {"PATH", "HOME", "LANG", "TMPDIR", "TERM", "PWD", procs.MARK}

# What a hostile solution.py does: read every environment it can reach (ENV_PROBE), then,
# only ever inside a sandbox, try each way up (ESCAPE_PROBE: mounts, unshare, setuid). Never
# run ESCAPE_PROBE unsandboxed: on a root host its mounts would be the host's own.
ENV_PROBE = r'''
import json, os, subprocess, sys

def rc(cmd):
    return subprocess.run(cmd, shell=True, capture_output=True, text=True).returncode

def read(path):
    try:
        return open(path, "rb").read().decode("utf-8", "replace")
    except OSError as e:
        return f"refused: {e.strerror}"

def tried(fn):
    try:
        fn()
        return "done"
    except OSError as e:
        return f"refused: {e.strerror}"

out = {"env": dict(os.environ), "environ": {p: read(p) for p in ("/proc/self/environ", "/proc/1/environ")}}
out["status"] = {k: v.strip() for k, v in (line.split(":", 1) for line in read("/proc/self/status").splitlines())
                 if k.startswith(("Uid", "Gid", "Cap", "NoNewPrivs", "Groups"))}
out["uid"], out["gid"] = os.getuid(), os.getgid()
'''
ESCAPE_PROBE = r'''
if "bwrap" not in read("/proc/1/cmdline"):  # PID 1 is bwrap only inside a sandbox
    raise SystemExit("not in a sandbox: the escape probes only ever run inside one")
out["setuid0"], out["setgid0"] = tried(lambda: os.setuid(0)), tried(lambda: os.setgid(0))
out["setgroups0"] = tried(lambda: os.setgroups([0]))
# each of these needs a capability (or a new user namespace) that the sandbox must not give
out["rc"] = {"remount_usr_rw": rc("mount -o remount,bind,rw /usr"), "mount_tmpfs": rc("mount -t tmpfs none /tmp"),
             "umount_proc_sys": rc("umount /proc/sys"), "unshare_user": rc("unshare -r true"),
             "unshare_user_mount": rc("unshare -Urm true"), "unshare_mount": rc("unshare -m true"),
             "unshare_net": rc("unshare -n true")}
rw = []
for line in read("/proc/self/mountinfo").splitlines():
    f = line.split()
    if "rw" in f[5].split(","):
        rw.append(f[4])
out["rw_mounts"] = sorted(set(rw))
writable = []  # in the shared procfs: anything writable outside this sandbox's own processes
for root, dirs, files in os.walk("/proc"):
    if root == "/proc":
        dirs[:] = [d for d in dirs if not d.isdigit() and d not in ("self", "thread-self")]
    for name in files + dirs:
        p = os.path.join(root, name)
        if not os.path.islink(p) and os.access(p, os.W_OK):
            writable.append(p)
out["proc_writable"] = writable[:20]
'''
SAVE = r'''
with open("probe.json", "w") as f:  # all it saw, kept where the test reads it (stdout is cut at 2000 characters)
    json.dump(out, f)
print("probed")
'''


def _sandbox_or_skip() -> None:
    from viewer.capture.sandbox import unavailable

    why = unavailable()
    if why:
        need("the agent sandbox (bubblewrap + socat, scripts/setup.sh)", why)


@pytest.fixture
def planted(monkeypatch):
    """Secrets in the app's own environment: the Space's token, its OAuth secret, and one
    under a name nobody would guess is secret."""
    values = {"HF_TOKEN": "hf_PLANT" + os.urandom(12).hex(), "OAUTH_CLIENT_SECRET": "oauth-" + os.urandom(12).hex(),
              "RI_PLANT_" + os.urandom(4).hex().upper(): "plant-" + os.urandom(12).hex()}
    for k, v in values.items():
        monkeypatch.setenv(k, v)
    return values


def _probe(tmp_path: Path, sandboxed: bool) -> tuple[dict, dict]:
    work = tmp_path / "work"
    work.mkdir()
    (work / "solution.py").write_text(ENV_PROBE + (ESCAPE_PROBE if sandboxed else "") + SAVE)
    res = score(work, [{"input": "", "output": "x"}], timeout_s=60, sandboxed=sandboxed)
    (r,) = res["results"]
    assert not r["timed_out"] and r["exit_code"] == 0 and r["stdout"] == "probed\n", r["stderr"][-1500:]
    return json.loads((work / "probe.json").read_text()), res


@pytest.mark.parametrize("sandboxed", [True, False], ids=["sandboxed", "local-dev-unsandboxed"])
def test_solution_sees_none_of_the_apps_secrets(tmp_path, planted, sandboxed):
    """The held-out tests never run with the app's environment: in the sandbox (whose PID 1,
    bwrap itself, is readable at /proc/1/environ) and without one (a developer's machine)."""
    if sandboxed:
        _sandbox_or_skip()
    seen, res = _probe(tmp_path, sandboxed)
    assert set(seen["env"]) <= ALLOWED_ENV, sorted(set(seen["env"]) - ALLOWED_ENV)
    assert seen["env"]["LANG"] == "C.UTF-8" and seen["env"]["TERM"] == "dumb"
    blob = json.dumps(res) + json.dumps(seen)
    for name, value in planted.items():
        assert value not in blob, f"{name} reached solution.py"
        assert name not in blob
    if sandboxed:
        assert seen["environ"]["/proc/1/environ"].split("\0")[0].startswith("PATH=/usr/local/bin:")


def test_solution_in_the_sandbox_has_no_privilege(tmp_path):
    """The app runs as root here: inside, uid/gid 65534, every capability set empty,
    no_new_privs, and each way to regain a privilege refused."""
    _sandbox_or_skip()
    seen, _ = _probe(tmp_path, True)
    st = seen["status"]
    assert seen["uid"] == seen["gid"] == 65534 and st["Uid"].split() == ["65534"] * 4, st
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(st[cap], 16) == 0, (cap, st[cap])
    assert st["NoNewPrivs"] == "1"
    assert seen["setuid0"].startswith("refused") and seen["setgid0"].startswith("refused")
    assert seen["setgroups0"].startswith("refused")
    assert all(code != 0 for code in seen["rc"].values()), seen["rc"]


def test_nothing_writable_but_the_work_folder_and_scratch(tmp_path):
    """Every mount but the work folder and the sandbox's own scratch (/tmp, /run, /dev) is
    read-only, and in the shared procfs nothing outside the sandbox's processes is writable
    (uid 65534 is host uid 0 when the app runs as root: /proc/sys/kernel/core_pattern is
    writable by file mode unless /proc/sys is read-only)."""
    _sandbox_or_skip()
    seen, _ = _probe(tmp_path, True)
    work = str(tmp_path / "work")
    devices = {f"/dev/{d}" for d in ("null", "zero", "full", "random", "urandom", "tty", "pts", "shm", "mqueue")}
    assert set(seen["rw_mounts"]) <= {work, "/tmp", "/run", "/dev", "/proc", *devices}, seen["rw_mounts"]
    assert seen["proc_writable"] == []


def test_a_read_only_bind_stays_read_only_and_the_host_file_unchanged(tmp_path):
    """``mount -o remount,bind,rw`` on a read-only bind, then a write: refused, and the host's
    file keeps its bytes (an unhardened sandbox run by root rewrites it)."""
    _sandbox_or_skip()
    from viewer.capture.sandbox import Sandbox

    ro = tmp_path / "ro"
    ro.mkdir()
    canary = ro / "canary.txt"
    canary.write_text("host bytes\n")
    work = tmp_path / "w"
    work.mkdir()
    sb = Sandbox(work, read_only=(ro,))
    script = (f"mount -o remount,bind,rw {ro}; echo remount=$?; echo pwned > {canary}; echo write=$?; "
              f"mount -t tmpfs none {ro}; echo tmpfs=$?; cat {canary}")
    proc = sb.popen(["/bin/sh", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=60)
    assert "remount=0" not in out and "write=0" not in out and "tmpfs=0" not in out, (out, err)
    assert "host bytes" in out
    assert canary.read_text() == "host bytes\n"


def test_the_network_is_the_proxy_port_only(tmp_path):
    """Inside, loopback is the only interface and the forwarded proxy port its only listener:
    a host loopback service next to the proxy is unreachable (the live capture test tries it
    from the agent's bash tool too)."""
    _sandbox_or_skip()
    from viewer.capture.sandbox import PYTHON, Sandbox, host_forwarder

    class Reply(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(f"served-by-{self.server.server_address[1]}".encode())

        def log_message(self, *a):
            pass

    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), Reply) for _ in range(2)]
    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    proxy_port, other_port = (s.server_address[1] for s in servers)
    sock = tmp_path / "proxy.sock"
    fwd = procs.popen(host_forwarder(sock, proxy_port), stdin=subprocess.DEVNULL)
    work = tmp_path / "w"
    work.mkdir()
    probe = f"""
import json, urllib.request
def get(port):
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{{port}}/", timeout=5).read().decode()
    except Exception as e:
        return "refused: " + type(e).__name__
listen = set()
for f in ("/proc/net/tcp", "/proc/net/tcp6"):
    for line in open(f).read().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        if state == "0A":
            listen.add(int(local.rsplit(":", 1)[1], 16))
ifaces = [line.split(":")[0].strip() for line in open("/proc/net/dev").read().splitlines()[2:]]
print(json.dumps({{"listen": sorted(listen), "ifaces": ifaces, "proxy": get({proxy_port}), "other": get({other_port})}}))
"""
    try:
        deadline = time.monotonic() + 10
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        sb = Sandbox(work, proxy_socket=sock, proxy_port=proxy_port)
        proc = sb.popen([PYTHON, "-c", probe], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = proc.communicate(timeout=60)
    finally:
        procs.stop_group(fwd, grace=2)
        for s in servers:
            s.shutdown()
    seen = json.loads(out)
    assert seen["listen"] == [proxy_port] and seen["ifaces"] == ["lo"], (seen, err)
    assert seen["proxy"] == f"served-by-{proxy_port}" and seen["other"].startswith("refused"), seen


def test_only_the_minimal_environment_can_enter(monkeypatch, tmp_path):
    """By construction: a credential-like name, or a value holding one of the app's
    credentials, never enters a sandbox, and a caller cannot hand its own environment in."""
    from viewer.capture.sandbox import Sandbox, check_env, minimal_env

    token = "hf_" + os.urandom(10).hex()
    monkeypatch.setenv("HF_TOKEN", token)
    for bad in ({"HF_TOKEN": "x"}, {"OAUTH_CLIENT_SECRET": "x"}, {"MY_API_KEY": "x"}, {"OK_NAME": f"a{token}b"},
                {"A=B": "x"}):
        with pytest.raises(ValueError) as e:
            check_env(bad)
        assert token not in str(e.value)
    assert set(minimal_env("/h")) == {"PATH", "HOME", "LANG", "TMPDIR", "TERM"}
    with pytest.raises(TypeError):
        Sandbox(tmp_path).popen(["true"], env=dict(os.environ))
    with pytest.raises(ValueError):
        Sandbox(tmp_path, env={"GITHUB_TOKEN": "x"}).wrap(["true"])


def test_the_vllm_server_gets_no_credential_but_a_local_apps_hf_token():
    """The server is trusted code but loads what a capture names: it never holds the OAuth client
    secret or a visitor's token, and on a public app not the owner's HF_TOKEN either."""
    from viewer.capture.backends import server_env

    planted = {"PATH": "/usr/bin", "HF_TOKEN": "hf_owner", "OAUTH_CLIENT_SECRET": "oauth-s3cret",
               "MY_API_KEY": "k-123", "SESSION_COOKIE": "c", "HF_HOME": "/h"}
    local = server_env(planted, public=False)
    assert local == {"PATH": "/usr/bin", "HF_TOKEN": "hf_owner", "HF_HOME": "/h"}
    public = server_env({**planted, "SPACE_ID": "o/s"})  # a Space is public
    assert public == {"PATH": "/usr/bin", "HF_HOME": "/h", "SPACE_ID": "o/s"}
