"""The app under attack, as its own process: ``python tests/attack_server.py PORT LOG READY``.

Started by ``tests/attack_kit.py`` (never by hand). Before anything a visitor sends is handled it
installs a Python audit hook (``sys.addaudithook``) that writes one JSON line per distinct event to
the file descriptor of ``LOG``: every ``open`` (path, mode, flags), directory listing, process
start (``subprocess.Popen``, ``os.exec*``, ``os.posix_spawn``, ``os.spawn*``, ``os.system``: the
argument vector), name lookup and socket connect. The hook also keeps the sweep off the network
(its brief: nothing but loopback): a connect to a non-loopback address, or a name lookup of anything
but ``localhost`` or an IP literal, is recorded and then refused with ``PermissionError``; a process
whose arguments hold a sweep marker is recorded and refused, so ``;rm -rf`` never runs.

The app is the real one: ``viewer.ui.create_app`` launched with ``launch_kwargs`` exactly as
``app.py`` does; the environment (public mode, planted secrets, OAuth variables) comes from the
parent. One test-only route is added, ``/__sweep__/login?user=NAME``: it stores an ``oauth_info``
in the session through Gradio's own ``SessionMiddleware`` (the signed cookie a real sign-in would
set), so the sweep can act as a signed-in visitor without contacting huggingface.co; and the Jobs
API's submit calls are recorded instead of sent (``_record_jobs``). When the app is
up, ``READY`` gets a JSON description of every registered event (``demo.fns``).
"""

import ipaddress
import json
import os
import re
import sys
import threading

_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", ""}


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%")[0])
        return True
    except ValueError:
        return False


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return host in _LOOPBACK_NAMES


def install_hook(log_fd: int, markers: list[str]) -> None:
    """Record (and, for the network and marked commands, refuse) what the server process does."""
    seen: set = set()
    lock = threading.Lock()
    write, dumps = os.write, json.dumps  # bound now: the hook must not import or open anything

    modules = sys.modules

    def emit(*rec) -> None:
        # the Gradio event this happens in (its contextvar follows the handler into worker threads):
        # lets the sweep pin each record on the call that caused it
        local = getattr(modules.get("gradio.context"), "LocalContext", None)  # None while gradio imports
        eid = local.event_id.get(None) if local is not None else None
        rec = rec + (eid,)
        try:
            line = dumps(rec, default=repr)
        except (TypeError, ValueError):
            line = dumps([repr(r) for r in rec])
        with lock:
            if line in seen:
                return
            seen.add(line)
        write(log_fd, (line + "\n").encode("utf-8", "replace"))

    def text(x) -> str:
        if isinstance(x, bytes):
            return x.decode("utf-8", "replace")
        return x if isinstance(x, str) else repr(x)

    def argv(x) -> list[str]:
        if isinstance(x, (list, tuple)):
            return [text(a) for a in x]
        return [text(x)]

    def refuse_marked(args: list[str]) -> None:
        if any(m in a for a in args for m in markers):
            raise PermissionError("attack sweep: a process with a visitor's value in its arguments")

    def hook(event: str, args: tuple) -> None:
        if event == "open":
            path = args[0]
            if isinstance(path, int):
                return
            emit("open", text(path), text(args[1]) if len(args) > 1 and args[1] is not None else "",
                 int(args[2] or 0) if len(args) > 2 and isinstance(args[2], int) else 0)
        elif event in ("os.listdir", "os.scandir"):
            if args and args[0] is not None and not isinstance(args[0], int):
                emit("list", text(args[0]))
        elif event == "subprocess.Popen":
            a = argv(args[1]) if args[1] is not None else argv(args[0])
            emit("spawn", event, a)
            refuse_marked(a)
        elif event in ("os.exec", "os.posix_spawn"):
            a = [text(args[0])] + argv(args[1])
            emit("spawn", event, a)
            refuse_marked(a)
        elif event == "os.spawn":
            a = [text(args[1])] + argv(args[2])
            emit("spawn", event, a)
            refuse_marked(a)
        elif event == "os.system":
            a = argv(args[0])
            emit("spawn", event, a)
            refuse_marked(a)
        elif event == "socket.getaddrinfo":
            host = text(args[0]) if args[0] is not None else ""
            emit("resolve", host)
            if not (_is_ip(host) or host in _LOOPBACK_NAMES):
                raise PermissionError(f"attack sweep: no name lookups ({host})")
        elif event == "socket.connect":
            addr = args[1]
            if isinstance(addr, tuple) and addr and isinstance(addr[0], str):
                emit("connect", addr[0], addr[1] if len(addr) > 1 else None)
                if not _loopback(addr[0]):
                    raise PermissionError(f"attack sweep: no traffic beyond loopback ({addr[0]})")
            else:
                emit("connect", text(addr), None)

    sys.addaudithook(hook)


def _login_route(app) -> None:
    """``/__sweep__/login?user=NAME``: what Gradio's OAuth callback stores, through its own middleware."""
    import time

    import fastapi

    def login(request: fastapi.Request, user: str):
        request.session["oauth_info"] = {
            "access_token": f"hf_oauth_sweep_visitor_{user}", "token_type": "bearer",
            "scope": "openid profile inference-api jobs", "expires_at": time.time() + 3600,
            "userinfo": {"name": user, "preferred_username": user, "profile": f"https://huggingface.co/{user}",
                         "picture": ""}}
        return {"ok": user}

    app.add_api_route("/__sweep__/login", login, methods=["GET"])

    def memory(trim: int = 1):
        """Diagnosis only (``/__sweep__/memory?trim=0|1``; tests/test_room_attack.py prints it): the RSS
        before and after ``gc.collect()`` + glibc's ``malloc_trim(0)`` (memory freed but not returned to
        the system, versus memory still held), and what the app's caches count."""
        import ctypes
        import gc

        def rss():
            return next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmRSS:")) / 1024

        before = rss()
        out = {"rss_mb": round(before), "threads": threading.active_count()}
        if trim:
            gc.collect()
            ctypes.CDLL("libc.so.6").malloc_trim(0)
            out["rss_after_trim_mb"] = round(rss())
        from viewer.ui.store import RolloutStore
        stores = [o for o in gc.get_objects() if type(o) is RolloutStore]
        out["store_mb"] = [round(o.memo.bytes / 2**20, 1) for o in stores]
        kinds: dict[str, list] = {}  # what the cache holds, by the kind and first word of its key: [items, MB]
        for store in stores:
            for key, (_, n, _) in list(store.memo._items.items()):
                kind = " ".join(str(x)[:40] for x in key[:2]) if isinstance(key, tuple) else str(key)[:40]
                entry = kinds.setdefault(kind.split("/")[0] if key[0] != "derived" else str(key[2])[:30], [0, 0.0])
                entry[0] += 1
                entry[1] = round(entry[1] + n / 2**20, 2)
        out["store_kinds"] = kinds
        out["rollout_paths"] = sorted({str(getattr(v, "path", ""))[-60:] for store in stores
                                       for key, (v, _, _) in list(store.memo._items.items()) if key[0] == "rollout"})
        return out

    app.add_api_route("/__sweep__/memory", memory, methods=["GET"])


def _record_jobs(log_fd: int) -> None:
    """The Hugging Face Jobs API is the one service this machine cannot reach: ``HfApi.run_uv_job`` /
    ``run_job`` (real signatures) record what the app would submit (the script, its arguments, the
    names and values of env and secrets) and refuse. ``run_uv_job`` uploads every argument that names
    an existing local file, so a visitor's value there is a server file on its way to the visitor."""
    import huggingface_hub

    def recorder(name):
        def submit(self, script, *a, script_args=None, env=None, secrets=None, **kw):
            rec = ["job", name, [str(script)] + [str(x) for x in (script_args or a or [])],
                   {"env": dict(env or {}), "secrets": dict(secrets or {})}, None]
            os.write(log_fd, (json.dumps(rec, default=repr) + "\n").encode())
            raise RuntimeError("attack sweep: the Jobs API is not reachable here")
        return submit

    huggingface_hub.HfApi.run_uv_job = recorder("run_uv_job")
    huggingface_hub.HfApi.run_job = recorder("run_job")


def _describe(demo) -> list[dict]:
    import inspect

    out = []
    for i, fn in demo.fns.items():
        try:
            params = inspect.signature(fn.fn).parameters.values() if fn.fn else []
            hints = " ".join(str(p.annotation) for p in params)
            source = inspect.getsource(fn.fn) if fn.fn else ""
        except (TypeError, ValueError, OSError):
            hints, source = "", ""
        # deep-link parameters this handler reads from the request's query string
        reads = sorted(set(re.findall(r"""\bq(?:\.get\(|\[)["'](\w+)["']""", source)))
        if "query_params" in source and not reads:
            reads = ["*"]
        out.append({"fn_index": i, "name": fn.name, "api_name": fn.api_name,
                    "api_visibility": str(fn.api_visibility), "queue": bool(fn.queue),
                    "inputs": [type(b).__name__ for b in fn.inputs],
                    "signed_in": "OAuthProfile" in hints or "OAuthToken" in hints, "reads": reads})
    return out


def main() -> None:
    port, log_path, ready_path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    markers = [m for m in os.environ.get("SWEEP_MARKERS", "").split(",") if m]
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.write(log_fd, (json.dumps(["cwd", os.getcwd()]) + "\n").encode())
    install_hook(log_fd, markers)  # before the app is built: whatever it does from here on is seen
    sys.path.insert(0, os.getcwd())
    from viewer.config import Settings
    from viewer.ui import create_app, launch_kwargs

    _record_jobs(log_fd)
    settings = Settings.from_env()
    demo = create_app(settings)
    app, _, _ = demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=port, quiet=True,
                            **launch_kwargs(settings))
    _login_route(app)
    tmp = ready_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"events": _describe(demo), "pid": os.getpid()}, f)
    os.replace(tmp, ready_path)
    try:
        sys.stdin.read()  # the parent closes our stdin (or kills us) to stop
    finally:
        demo.close()


if __name__ == "__main__":
    main()
