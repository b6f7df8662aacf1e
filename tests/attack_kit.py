"""The generic attack sweep's kit: planted secrets, the app in its own audited process, a visitor
that speaks Gradio's queue protocol as the browser does, hostile values per component type, and the
checks. ``tests/test_attacks_sweep.py`` drives it; docs/SECURITY.md ("Entry points") lists what it
covers.

What a call is: ``POST /gradio_api/queue/join`` with ``fn_index`` (private events included: the
browser calls them the same way) and the page's query string, then the session's SSE stream
(``/gradio_api/queue/data``) read until ``process_completed``; events with ``queue=False`` go to
``/gradio_api/run/predict``. ``gr.State`` inputs are held by the server per session, so each
visitor session first runs the page-load events (the deep link) and then keeps its state.
"""
from __future__ import annotations

import ctypes
import io
import json
import os
import re
import secrets
import socket
import struct
import subprocess
import sys
import threading
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
SERVER = Path(__file__).resolve().parent / "attack_server.py"
CALL_TIMEOUT_S = 30.0


# ---------------------------------------------------------------- planted secrets
@dataclass
class Planted:
    """Secrets the app must never hand to a visitor: environment values and a file outside the data root."""
    root: Path                      # temp folder of this sweep
    marker: str                     # in every hostile value that may end up in a path or a command
    env: dict[str, str]             # secret environment values (HF_TOKEN, OAUTH_CLIENT_SECRET, a custom one)
    folder: Path                    # outside the data root; holds the secret file (and a tokenizer.json bait)
    file: Path
    file_marker: str                # the planted file's content

    @property
    def secrets(self) -> dict[str, str]:
        return {**self.env, "planted file content": self.file_marker}


def plant(root: Path) -> Planted:
    marker = "sweep" + secrets.token_hex(6)
    env = {"HF_TOKEN": "hf_" + secrets.token_hex(17), "OAUTH_CLIENT_SECRET": "oauth" + secrets.token_hex(16),
           "SWEEP_CUSTOM_SECRET": "custom" + secrets.token_hex(16)}
    folder = root / "outside-the-data-root"
    folder.mkdir(parents=True)
    file_marker = "PLANTED" + secrets.token_hex(16)
    file = folder / "secret.txt"
    file.write_text(file_marker + "\n")
    # bait for "a folder with a tokenizer.json is a tokenizer": any read of it is a finding too
    (folder / "tokenizer.json").write_text(json.dumps({"secret": file_marker}))
    (folder / "tokenizer_config.json").write_text(json.dumps({"secret": file_marker}))
    return Planted(root, marker, env, folder, file, file_marker)


class OpenWatch:
    """inotify on the planted folder: sees an open by any code in any process (native readers like
    pyarrow or the Rust tokenizer bypass Python's audit hook)."""
    IN_ACCESS, IN_OPEN = 0x01, 0x20

    def __init__(self, folder: Path):
        self._libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self.names: dict[int, str] = {}
        for p in [folder] + sorted(folder.iterdir()):
            wd = self._libc.inotify_add_watch(self.fd, str(p).encode(), self.IN_OPEN | self.IN_ACCESS)
            if wd < 0:
                raise OSError(ctypes.get_errno(), f"inotify_add_watch {p}")
            self.names[wd] = str(p)

    def drain(self) -> list[str]:
        """Paths opened or read since the last drain."""
        out = []
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                return out
            i = 0
            while i < len(buf):
                wd, _mask, _cookie, n = struct.unpack_from("iIII", buf, i)
                name = buf[i + 16:i + 16 + n].rstrip(b"\0").decode()
                out.append(os.path.join(self.names.get(wd, "?"), name) if name else self.names.get(wd, "?"))
                i += 16 + n

    def close(self) -> None:
        os.close(self.fd)


class Canary:
    """A loopback listener named in hostile URLs: any connection to it is a request the app made for a visitor."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.hits = 0
        self._stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.hits += 1
            conn.close()

    def close(self):
        self._stop.set()
        self.sock.close()


# ---------------------------------------------------------------- hostile values
def hostile_strings(p: Planted, data_root: Path, port: int, canary: int) -> list[str]:
    """What a visitor may type into any text field, deep-link parameter or event payload."""
    rel = os.path.relpath(p.file, data_root)
    m = p.marker
    return [  # the first ALL_AT_ONCE also go into every text argument at once
        str(p.file), str(p.folder), "../" * 12 + str(p.file).lstrip("/"), "/proc/self/environ",
        f"hf://datasets/{m}/x/../../../..{p.file}", f"http://127.0.0.1:{canary}/{m}",
        "http://100.100.100.200/latest/meta-data/", f"$(id>/tmp/{m})",
        rel, "../../../../../../../../proc/self/environ", "../../etc/passwd",
        "~/.cache/huggingface/token", f"file://{p.file}", f"sample:{'../' * 8}{str(p.file).lstrip('/')}",
        f"hf://{p.file}", f"hf://datasets/{m}/{m}/{rel}", f"http://127.0.0.1:{port}/gradio_api/file={p.file}",
        "http://169.254.169.254/latest/meta-data/", "http://[::1]:22/", "http://192.0.0.8/", "http://[2002:7f00:1::]/",
        f"`touch /tmp/{m}`", f"; rm -rf /tmp/{m} #", f"| cat {p.file}", f"--config={p.file}",
        f"tiny-qwen3 --trust-remote-code --{m}", f"{m}\x00/etc/passwd", f"sample:qwen3-tiny\x00{m}",
        f"{m}/{m}", "-1", "1e309", "99999999999999999999999", "", " ",
    ]


HUGE = "A" * 1_000_000
NUMBERS = [-1, 0, 10 ** 18, -(10 ** 18), 1e308, -1e308, 2 ** 63, 3.5, "1e309", "-1"]
BOOLS = [True, False, "$(id)"]


def file_values(p: Planted, uploaded: list[dict], canary: int) -> list:
    """gr.File payloads: paths the visitor did not upload, URLs, and a real upload with hostile contents."""
    def fd(path, **kw):
        return {"path": path, "orig_name": kw.pop("orig_name", os.path.basename(str(path))), "url": kw.pop("url", None),
                "meta": {"_type": "gradio.FileData"}, **kw}
    return [fd(str(p.file)), fd("/proc/self/environ"), fd("../../etc/passwd"), fd(str(p.folder)),
            fd("x", url=f"http://127.0.0.1:{canary}/{p.marker}"), fd("y", url="http://169.254.169.254/latest/"),
            fd(f"file://{p.file}")] + uploaded


def hostile_zip(p: Planted, data_root: Path) -> bytes:
    """A capture zip whose contents point at server files: its summary names the planted file as a
    tokenizer file (absolute and ../), its trace's model is the planted folder."""
    sample = REPO / "sample_data" / "qwen3-tiny"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for f in sorted(sample.iterdir()):
            data = f.read_bytes()
            if f.name == "summary.json":
                s = json.loads(data)
                s["tokenizer"] = {"name": str(p.folder), "files": [str(p.file), "../" * 10 + str(p.file).lstrip("/"),
                                                                   "/proc/self/environ"]}
                s["model"] = str(p.folder)
                data = json.dumps(s).encode()
            elif f.name == "trace.json":
                data = data.replace(b'"model": "', f'"model": "{p.folder}", "x_model": "'.encode(), 1)
            z.writestr(f"{p.marker}/{f.name}", data)
    return buf.getvalue()


# ---------------------------------------------------------------- the server
@dataclass
class Server:
    url: str
    port: int
    proc: subprocess.Popen
    log: Path
    events: list[dict]
    config: dict
    pid: int = 0
    _offset: int = 0
    records: list = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def new_records(self) -> list:
        """Audit records written since the last call (whole lines only); each ends with its Gradio event id."""
        with self._lock:
            with open(self.log, "rb") as f:
                f.seek(self._offset)
                data = f.read()
            end = data.rfind(b"\n") + 1
            self._offset += end
            recs = [json.loads(line) for line in data[:end].splitlines() if line.strip()]
            self.records += recs
            return recs

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait(10)
        else:  # its children (a capture's) go with it
            try:
                os.killpg(self.proc.pid, 9)
            except ProcessLookupError:
                pass


def start_server(p: Planted, env: dict[str, str], port: int, timeout_s: float = 180) -> Server:
    log, ready = p.root / "audit.jsonl", p.root / "ready.json"
    out = open(p.root / "server.out", "wb")
    proc = subprocess.Popen([sys.executable, str(SERVER), str(port), str(log), str(ready)], cwd=REPO,
                            env=env, stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT,
                            start_new_session=True)
    deadline = time.monotonic() + timeout_s
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("attack server did not start:\n" + (p.root / "server.out").read_text()[-4000:])
        time.sleep(0.05)
    url = f"http://127.0.0.1:{port}"
    cfg = httpx.get(url + "/config", timeout=30, trust_env=False).json()
    info = json.loads(ready.read_text())
    return Server(url, port, proc, log, info["events"], cfg, info["pid"])


# ---------------------------------------------------------------- a visitor
@dataclass
class Reply:
    fn_index: int
    text: str              # everything the server sent for this call
    completed: bool        # the handler ran to an answer (success or error)
    success: bool
    output: list | None
    event_id: str | None = None


class Visitor:
    """One browser tab: a session hash, optional sign-in cookie, Gradio's queue protocol."""

    def __init__(self, server: Server, user: str | None = None, query: str = ""):
        self.server, self.query = server, query
        self.session = secrets.token_hex(8)
        self.http = httpx.Client(base_url=server.url, timeout=CALL_TIMEOUT_S, trust_env=False)
        if user:
            r = self.http.get("/__sweep__/login", params={"user": user})
            r.raise_for_status()
            # the middleware sets a Secure cookie; on plain-http loopback send it back by hand
            m = re.search(r"session=([^;]+)", r.headers.get("set-cookie", ""))
            assert m, r.headers
            self.http.headers["cookie"] = f"session={m.group(1)}"

    def close(self):
        self.http.close()

    def upload(self, name: str, data: bytes) -> dict:
        r = self.http.post("/gradio_api/upload", files=[("files", (name, data))])
        r.raise_for_status()
        path = r.json()[0]
        return {"path": path, "orig_name": name, "meta": {"_type": "gradio.FileData"}, "size": len(data)}

    def call(self, fn_index: int, data: list, event_data=None, oauth_token: str | None = None) -> Reply:
        dep = self.server.config["dependencies"][fn_index]
        body = {"data": data, "event_data": event_data, "fn_index": fn_index,
                "trigger_id": (dep.get("targets") or [[None]])[0][0], "session_hash": self.session}
        if oauth_token is not None:
            body["oauth_token"] = oauth_token
        q = ("?" + self.query) if self.query else ""
        if not dep.get("queue", True):
            r = self.http.post("/gradio_api/run/predict" + q, json=body)
            try:
                out = r.json()
            except ValueError:
                out = None
            ok = r.status_code == 200
            return Reply(fn_index, r.text, r.status_code in (200, 500), ok, (out or {}).get("data") if ok else None)
        r = self.http.post("/gradio_api/queue/join" + q, json=body)
        if r.status_code != 200:
            return Reply(fn_index, r.text, False, False, None)
        event_id = r.json()["event_id"]
        texts, output, done, success = [r.text], None, False, False
        deadline = time.monotonic() + CALL_TIMEOUT_S
        try:
            with self.http.stream("GET", "/gradio_api/queue/data", params={"session_hash": self.session}) as s:
                for line in s.iter_lines():
                    texts.append(line)
                    if not line.startswith("data:"):
                        continue
                    msg = json.loads(line[5:])
                    if msg.get("event_id") not in (None, event_id):
                        continue
                    if msg.get("msg") == "process_completed":
                        done, success = True, bool(msg.get("success"))
                        output = (msg.get("output") or {}).get("data")
                        break
                    if msg.get("msg") in ("close_stream", "unexpected_error"):
                        break
                    if time.monotonic() > deadline:
                        break
        except httpx.TimeoutException:
            pass
        if not done:
            self.http.post("/gradio_api/cancel", json={"session_hash": self.session, "fn_index": fn_index,
                                                       "event_id": event_id})
        return Reply(fn_index, "\n".join(texts), done, success, output, event_id)


# ---------------------------------------------------------------- the checks
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_ENVIRON = re.compile(r"^/proc/(self|thread-self|\d+)(/task/\d+)?/environ$")


def judge(records: list, p: Planted, hostile: list[str], cwd: str, canary: int, own: list[Path],
          pid: int = 0) -> list[str]:
    """What the server did that a visitor's value must never make it do. ``own``: the app's own folders
    (uploads, temp, captures, caches, the data root), where a file may be named after a visitor's upload."""
    out = []
    tokens = [p.marker, str(p.file), str(p.folder)] + [h for h in hostile if len(h) >= 6 and h.strip()]
    for rec in records:
        kind = rec[0]
        if kind in ("open", "list"):
            raw = rec[1]
            path = os.path.normpath(os.path.join(cwd, raw))
            real = os.path.realpath(path) if os.path.exists(path) else path
            if real == str(p.folder) or real.startswith(str(p.folder) + os.sep):
                out.append(f"{kind} of a planted file: {raw!r}")
            elif _ENVIRON.match(path) and _ENVIRON.match(path).group(1) in ("self", "thread-self", str(pid)):
                out.append(f"{kind} of the server's environment: {raw!r}")
            elif raw in hostile or real in ("/etc/passwd", "/etc/shadow") or (
                    # a bare name is relative to a dir_fd the hook does not see (shutil.rmtree of an upload
                    # folder named after the visitor's file): only paths with a folder part are judged here
                    p.marker in raw and os.sep in raw and not any(Path(real).is_relative_to(d) for d in own)):
                out.append(f"{kind} of a path a visitor named: {raw!r}")
        elif kind == "spawn":
            args = rec[2]
            hit = [t for t in tokens if any(t in a for a in args)]
            if hit:
                out.append(f"process started with a visitor's value {hit[0][:60]!r}: {rec[1]} {args[:12]!r}")
        elif kind == "job":
            args = rec[2]
            at = [(k, t) for t in tokens for k, a in enumerate(args) if t in a]
            if at:
                k, t = at[0]
                out.append(f"Jobs API {rec[1]} given a visitor's value {t[:60]!r} in its arguments (run_uv_job uploads "
                           f"local files named there): {' '.join(args[max(0, k - 1):k + 1])[:200]!r}")
            held = [name for name, value in p.secrets.items() if value in json.dumps(rec[3])]
            if held:
                out.append(f"Jobs API {rec[1]} given the server's {held}")
        elif kind == "connect":
            host, port = rec[1], rec[2]
            if port == canary or (port is not None and not _is_loopback(host)):
                out.append(f"connect to {host}:{port}")
        elif kind == "resolve":
            host = rec[1]
            # huggingface.co is where the app's own Hub / Jobs calls go (refused here all the same)
            # an IP literal is not looked up (the endpoint guard "resolves" one to check it); a connect is judged above
            if host and not _is_loopback(host) and not _is_ip(host) and host not in ("huggingface.co", "hf.co"):
                out.append(f"name lookup of {host!r}")
    return out


def _is_ip(host: str) -> bool:
    import ipaddress
    try:
        ipaddress.ip_address(str(host).split("%")[0])
        return True
    except ValueError:
        return False


def _is_loopback(host: str) -> bool:
    import ipaddress
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return host in ("localhost", "")


def leaks(text: str, p: Planted) -> list[str]:
    return [name for name, value in p.secrets.items() if value in text]


def written_files(records: list, cwd: str) -> set[Path]:
    out = set()
    for rec in records:
        if rec[0] == "open" and (any(c in rec[2] for c in "wax+") or rec[3] & WRITE_FLAGS):
            out.add(Path(os.path.normpath(os.path.join(cwd, rec[1]))))
    return out


def scan_files(paths, p: Planted, limit_bytes: int = 64 << 20) -> list[str]:
    """Planted secrets found in files the app wrote (artefacts, uploads, caches)."""
    out = []
    for f in sorted(set(paths)):
        try:
            if not f.is_file() or f.stat().st_size > limit_bytes or f.is_relative_to(p.folder):
                continue
            data = f.read_bytes()
        except OSError:
            continue
        for name, value in p.secrets.items():
            if value.encode() in data:
                out.append(f"{name} written to {f}")
    return out


# ---------------------------------------------------------------- the sweep
STRING_TYPES = {"textbox", "dropdown", "radio", "markdown", "html", "code", "colorpicker", "dataframe"}
SIGNED_IN = 12  # hostile strings tried per argument by signed-in visitors (captures are slower)
DEEP_LINK = 10  # hostile strings tried per deep-link parameter (the paths, URLs and commands)
ALL_AT_ONCE = 8  # hostile strings tried in every text argument at once (each argument alone gets all)


def query_params() -> list[str]:
    """Deep-link parameters the app reads: the fields of ``viewer.visitor.DeepLink`` (the one parser of a
    page's query string) and any ``q.get("x")`` / ``q["x"]`` read directly in viewer/ui. Each is an input."""
    import dataclasses

    from viewer.visitor import DeepLink

    names = {f.name for f in dataclasses.fields(DeepLink)} - {"ignored"}
    for f in (REPO / "viewer" / "ui").rglob("*.py"):
        names |= set(re.findall(r"""\bq(?:\.get\(|\[)["'](\w+)["']""", f.read_text()))
    return sorted(names)


@dataclass
class Sweep:
    calls: int = 0
    called: dict = field(default_factory=dict)       # fn_index -> answers received
    findings: list = field(default_factory=list)     # "event ...: what happened"
    timeouts: list = field(default_factory=list)
    seconds: float = 0.0                             # wall clock, for the reader
    cpu_s: float = 0.0                               # what the budget bounds (see Runner.cpu_s)
    cost: dict = field(default_factory=dict)         # fn_index -> [calls, seconds]


class Runner:
    def __init__(self, server: Server, p: Planted, data_root: Path, canary: Canary, watch: OpenWatch,
                 own: list[Path], budget_cpu_s: float = 420.0):
        self.own = [Path(os.path.realpath(d)) for d in own]
        self.server, self.p, self.canary, self.watch = server, p, canary, watch
        self.hostile = hostile_strings(p, data_root, server.port, canary.port)
        self.comps = {c["id"]: c for c in server.config["components"]}
        self.deps = server.config["dependencies"]
        self.result = Sweep()
        self.raw: list[tuple] = []               # (event id | None | "-", what happened, the call around it)
        self.labels: dict[str, str] = {}         # event id -> the call
        self.last = "start-up"                   # the last call that was not a progress poll
        # The budget is CPU seconds (this process and the server's), not the wall clock: on a busy
        # machine (a parallel test run beside a vLLM server) a bounded sweep still takes longer.
        self.budget_cpu_s, self._cpu0 = budget_cpu_s, self.cpu_s()
        self.cwd = next((r[1] for r in server.new_records() if r[0] == "cwd"), str(REPO))
        self.uploaded: list[dict] = []

    def cpu_s(self) -> float:
        """CPU seconds spent since the runner started: this process's and the server process's
        (with the children it waited for)."""
        own = sum(os.times()[:2])
        try:
            f = open(f"/proc/{self.server.pid or self.server.proc.pid}/stat").read().rsplit(")", 1)[1].split()
            server = sum(int(x) for x in f[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime
        except (OSError, IndexError, ValueError):
            server = 0.0  # the server has gone: the calls fail and say so
        return own + server - getattr(self, "_cpu0", 0.0)

    # -- one call and what it caused
    def _name(self, i: int) -> str:
        d = self.deps[i]
        return f"{d.get('api_name') or '?'} (fn {i})"

    def fire(self, v: Visitor, i: int, data: list, what: str, event_data=None, oauth_token=None) -> Reply:
        if self.cpu_s() > self.budget_cpu_s:
            raise TimeoutError(f"the sweep ran past its budget of {self.budget_cpu_s:g} CPU s")
        t0 = time.monotonic()
        r = v.call(i, data, event_data, oauth_token)
        c = self.result.cost.setdefault(i, [0, 0.0])
        c[0] += 1
        c[1] += time.monotonic() - t0
        self.result.calls += 1
        if r.completed:
            self.result.called[i] = self.result.called.get(i, 0) + 1
        else:
            self.result.timeouts.append(f"{self._name(i)} {what}")
        where = f"{self._name(i)} {what}"
        if what != "progress poll":
            self.last = where
        if r.event_id:
            self.labels[r.event_id] = where
        self.check(where, r.text)
        return r

    def check(self, where: str, text: str = "") -> None:
        """Collect what happened since the last check: audit records carry the id of the event they
        happened in (pinned on its call in :meth:`findings`); inotify and the canary only say "around"."""
        self.raw += [(None, f"response holds {name}", where) for name in leaks(text, self.p)]
        for rec in self.server.new_records():
            self.raw += [(rec[-1] or "-", f, self.last)
                         for f in judge([rec], self.p, self.hostile, self.cwd, self.canary.port, self.own,
                                        self.server.pid)]
        self.raw += [("-", f"planted file opened (inotify): {path}", self.last) for path in self.watch.drain()]
        hits, self.canary.hits = self.canary.hits, 0
        if hits:
            self.raw.append(("-", f"{hits} connection(s) to the canary listener", self.last))

    def findings(self) -> list[str]:
        out = []
        for eid, what, where in self.raw:
            if eid is None:
                out.append(f"{where}: {what}")
            elif eid == "-" or eid not in self.labels:  # a background thread (a capture), inotify, the canary
                out.append(f"outside any event, after [{where}]: {what}")
            else:
                out.append(f"{self.labels[eid]}: {what}")
        return list(dict.fromkeys(out))

    # -- values per component type
    def kind(self, cid: int) -> str:
        return self.comps[cid]["type"] if cid in self.comps else "?"

    def default(self, cid: int):
        c = self.comps.get(cid, {})
        return c.get("props", {}).get("value")

    def values(self, cid: int) -> list:
        t, props = self.kind(cid), self.comps.get(cid, {}).get("props", {})
        strings = self.hostile
        if t == "state":
            return []
        if t in ("number", "slider"):
            return NUMBERS
        if t == "checkbox":
            return BOOLS
        if t == "checkboxgroup" or (t == "dropdown" and props.get("multiselect")):
            return [[s] for s in strings]
        if t in ("file", "uploadbutton"):
            vals = file_values(self.p, self.uploaded, self.canary.port)
            return [[x] for x in vals] if props.get("file_count") in ("multiple", "directory") else vals
        return strings

    def string_like(self, cid: int) -> bool:
        return self.kind(cid) in STRING_TYPES

    def free_text(self, cid: int) -> bool:
        """A text argument the page lets a visitor type freely (a fixed-choice dropdown is refused by Gradio
        itself when the value is not a choice: the per-argument round tries those)."""
        props = self.comps[cid].get("props", {})
        return self.kind(cid) != "dropdown" and self.kind(cid) != "radio" or bool(props.get("allow_custom_value"))

    # -- the matrix
    def warm(self, v: Visitor) -> None:
        """What the browser does on page load: every load event and what follows it, with no query."""
        loads = [i for i, d in enumerate(self.deps) if any(t[1] == "load" for t in d.get("targets") or [])]
        follow = [i for i, d in enumerate(self.deps) if d.get("trigger_after") in loads]
        for i in loads + follow:
            self.fire(v, i, [self.default(c) for c in self.deps[i]["inputs"]], "page load")

    def matrix(self, v: Visitor, i: int, full: bool, event: dict) -> None:
        """Call event ``i``: page values, then each argument alone with every hostile value of its type,
        then all text arguments at once, hostile select data and hostile deep links where read.
        ``full=False`` (a second event with the same handler and inputs): page values and the 1 MB round."""
        ins = self.deps[i]["inputs"]
        base = [self.default(c) for c in ins]
        self.fire(v, i, base, "with default values")
        strings = [k for k, c in enumerate(ins) if self.string_like(c)]
        if full:  # each argument alone, the others left as the page has them
            for k, cid in enumerate(ins):
                for val in self.values(cid):
                    self.fire(v, i, base[:k] + [val] + base[k + 1:], f"argument {k} ({self.kind(cid)}) = {_short(val)}")
        rounds = (self.hostile[:ALL_AT_ONCE] if full and len(strings) > 1 else []) + [HUGE]
        for s in rounds if strings else []:  # every free-text argument hostile at once
            data = list(base)
            for k in strings:
                if self.free_text(ins[k]):
                    data[k] = [s] if self.comps[ins[k]]["props"].get("multiselect") else s
            self.fire(v, i, data, f"all text arguments = {_short(s)}")
        triggers = {t[1] for t in self.deps[i].get("targets") or []}
        if "select" in triggers and full:
            for s in self.hostile[:ALL_AT_ONCE] + [HUGE]:
                for ev in ({"index": [0, 1], "value": s, "row_value": [s, s], "selected": True},
                           {"index": [10 ** 9, -1], "value": 10 ** 18, "row_value": [10 ** 18, -(10 ** 18)]}):
                    self.fire(v, i, base, f"select event data {_short(ev)}", event_data=ev)
        reads = event.get("reads") or []
        names = query_params() if "*" in reads else reads
        for name in names:
            for s in self.hostile[:DEEP_LINK] + ["1" * 40, HUGE[:20000]]:
                v.query = str(httpx.QueryParams({name: s}))
                try:
                    self.fire(v, i, base, f"deep link ?{name}={_short(s)}")
                finally:
                    v.query = ""
        if len(names) > 1:
            for s in self.hostile[:ALL_AT_ONCE]:
                v.query = str(httpx.QueryParams({n: s for n in names}))
                try:
                    self.fire(v, i, base, f"deep link, every parameter = {_short(s)}")
                finally:
                    v.query = ""

    def signed_in(self, v: Visitor, i: int, user: str, users_backends: list | None = None) -> None:
        """An event that takes a sign-in (gr.OAuthProfile), as a signed-in visitor: each free-text
        argument hostile under each choice of the event's fixed-choice dropdown (the capture backend),
        boxes unticked (so a custom instruction is not refused as "scripted"), then numbers; after
        each call the session's timer events are polled until they stop (the capture has ended)."""
        ins = self.deps[i]["inputs"]
        page = [self.default(c) for c in ins]
        fixed = [k for k, c in enumerate(ins) if self.kind(c) == "dropdown" and not self.free_text(c)]
        choices = [x[1] if isinstance(x, (list, tuple)) else x
                   for x in (self.comps[ins[fixed[0]]]["props"].get("choices") or [])] if fixed else [None]
        # boxes unticked; empty text fields get a plain repo-id-like value (a results repo is required)
        base0 = [False if self.kind(c) == "checkbox" else
                 (f"{user}/sweep-results" if self.free_text(c) and self.string_like(c) and not page[k] else page[k])
                 for k, c in enumerate(ins)]
        for choice in (users_backends or choices) if fixed else [None]:
            base = list(base0)
            if choice is not None:
                base[fixed[0]] = choice
            self.start(v, i, base, f"signed in, {choice}, page values")
            for k, cid in enumerate(ins):
                if self.string_like(cid) and self.free_text(cid):
                    for s in self.hostile[:SIGNED_IN]:
                        self.start(v, i, base[:k] + [s] + base[k + 1:], f"signed in, {choice}, argument {k} = {_short(s)}")
            self.start(v, i, [HUGE if self.string_like(c) and self.free_text(c) else base[k] for k, c in enumerate(ins)],
                      f"signed in, {choice}, every text argument 1 MB")
        for k, cid in enumerate(ins):
            if self.kind(cid) == "number":
                for n in NUMBERS:
                    self.start(v, i, base0[:k] + [n] + base0[k + 1:], f"signed in, argument {k} = {n!r}")

    def start(self, v: Visitor, i: int, data: list, what: str) -> None:
        """A call that may start background work: when its answer switches a timer on, wait it out."""
        r = self.fire(v, i, data, what)
        if re.search(r'"active":\s*true', r.text):
            self.settle(v)

    def settle(self, v: Visitor, timeout_s: float = 30.0) -> None:
        """Poll the session's timer-driven events (a capture's progress) until they switch themselves off."""
        ticks = [i for i, d in enumerate(self.deps) if any(t[1] == "tick" for t in d.get("targets") or [])]
        deadline = time.monotonic() + timeout_s
        for i in ticks:
            while time.monotonic() < deadline:
                r = self.fire(v, i, [None] * len(self.deps[i]["inputs"]), "progress poll")
                if not re.search(r'"active":\s*true', r.text):
                    break
                time.sleep(0.2)  # the timer's own period is 1 s; poll faster, bounded by the deadline
            else:
                self.result.timeouts.append(f"{self._name(i)}: still active after {timeout_s:.0f} s")

    def groups(self) -> dict:
        """Events with one handler and the same inputs are one entry point: the full matrix once."""
        seen, out = {}, {}
        for e in self.server.events:
            i = e["fn_index"]
            key = (e["name"], tuple(self.kind(c) for c in self.deps[i]["inputs"]),
                   "select" in {t[1] for t in self.deps[i].get("targets") or []})
            out[i] = key not in seen
            seen.setdefault(key, i)
        return out


def _short(v, n: int = 60) -> str:
    r = repr(v)
    return r if len(r) <= n else r[:n] + f"…({len(r)} chars)"


def launch_in_process(settings) -> tuple[object, "Server"]:
    """The app for ``settings`` launched in this process on a free loopback port, as app.py launches it:
    (the demo, a :class:`Server` for the clients). The caller closes the demo."""
    from conftest import free_port
    from viewer.ui import create_app, launch_kwargs

    demo = create_app(settings)
    port = free_port()
    _, url, _ = demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=port, quiet=True,
                            **launch_kwargs(settings))
    url = url.rstrip("/")
    config = httpx.get(url + "/config", timeout=30, trust_env=False).json()
    return demo, Server(url, port, None, None, [], config)


def linked_capture(dest: Path) -> Path:
    """A copy of the qwen3-tiny capture, its files hard-linked (same bytes, no disk): a scan folder's member."""
    import shutil

    from viewer.config import SAMPLE_DIR

    dest.mkdir(parents=True)
    for name in ("trace.json", "turns.json", "summary.json", "task.json"):
        try:
            os.link(SAMPLE_DIR / "qwen3-tiny" / name, dest / name)
        except OSError:
            shutil.copy(SAMPLE_DIR / "qwen3-tiny" / name, dest / name)
    return dest


def nonce_capture(dest: Path, nonce: str) -> Path:
    """The qwen3-tiny capture with ``nonce`` in its system prompt: new to the store and the render cache."""
    import shutil

    from viewer.config import SAMPLE_DIR

    dest.mkdir(parents=True)
    for name in ("summary.json", "task.json", "turns.json"):
        shutil.copy(SAMPLE_DIR / "qwen3-tiny" / name, dest / name)
    trace = json.loads((SAMPLE_DIR / "qwen3-tiny" / "trace.json").read_text())
    for r in trace:
        for m in r["request"]["messages"]:
            if m.get("role") == "system":
                m["content"] = f"[{nonce}] " + m["content"]
    (dest / "trace.json").write_text(json.dumps(trace))
    return dest


def stream_event(url: str, v: "Visitor", fn_index: int, trigger_id, data: list):
    """Join event ``fn_index`` in ``v``'s session and read its answer in a thread: (started, answer, thread);
    ``started`` is set at the handler's first progress message or its end, ``answer`` holds the closing message."""
    import threading

    import httpx

    body = {"data": data, "event_data": None, "fn_index": fn_index, "trigger_id": trigger_id,
            "session_hash": v.session}
    r = v.http.post("/gradio_api/queue/join", json=body)
    r.raise_for_status()
    event_id = r.json()["event_id"]
    started, answer = threading.Event(), {}

    def read() -> None:
        with httpx.Client(base_url=url, timeout=300, trust_env=False) as http, \
                http.stream("GET", "/gradio_api/queue/data", params={"session_hash": v.session}) as s:
            for line in s.iter_lines():
                if not line.startswith("data:"):
                    continue
                msg = json.loads(line[5:])
                if msg.get("event_id") not in (None, event_id):
                    continue
                if msg.get("msg") == "progress":
                    started.set()
                if msg.get("msg") in ("process_completed", "unexpected_error", "close_stream"):
                    answer.update(msg)
                    started.set()
                    return

    t = threading.Thread(target=read, daemon=True)
    t.start()
    return started, answer, t

