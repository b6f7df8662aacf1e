"""Chat templates rendered in a worker process, within a time and a memory budget.

A chat template is a program, and both the template (a capture's own
``tokenizer/chat_template.jinja``) and what it renders come from the visitor. Jinja's sandbox
stops attribute tricks but not work: ``'x' * 10**9`` or three nested loops over ``range``
are allowed (issue 26: one JSONL line took the server from 558 MB to 1.7 GB). A thread
cannot be stopped and Python cannot cap one thread's memory, so every render runs in a
small worker process (``python -m viewer.tokenizer.render_child``) that

* imports only transformers' template renderer (≈0.5 s, once per worker) and then caps its
  own address space at what it uses plus the ``template_mb`` budget (``RLIMIT_AS``): a
  render that needs more gets MemoryError, not the server's memory;
* stops a render at the ``template_s`` budget with a timer signal (the parent kills it
  after the same time plus a grace, should the signal not land);
* reads requests from stdin and exits when the parent goes (stdin closes), so no worker
  outlives the app.

The parent (:func:`render`) talks length-prefixed JSON over the pipes, never pickle: a
worker running hostile input must not be able to hand the server code. At most
``_POOL`` workers exist; one that hit a budget is replaced.
"""
from __future__ import annotations

import hashlib
import json
import os
import select
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from viewer.tokenizer.render_child import HDR as _HDR

__all__ = ["render", "RenderFailed", "shutdown", "stats", "own_lane"]

_POOL = 2
_GRACE_S = 5.0  # past template_s, the parent kills a worker whose own timer did not fire
_ENV_KEPT = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "HF_HOME", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE",
             "PYTHONPATH", "VIRTUAL_ENV")


class RenderFailed(Exception):
    """The template raised (a template error on this conversation): the message says what."""


# ------------------------------------------------------------------ the parent side
class _Worker:
    def __init__(self, mb: float):
        # built from scratch: a worker running the visitor's template sees no token or secret of the app
        env = {k: os.environ[k] for k in _ENV_KEPT if k in os.environ}
        env["PYTHONPATH"] = os.pathsep.join(p for p in [_ROOT, env.get("PYTHONPATH", "")] if p)
        self.mb = mb
        self.fresh = True  # its first answer also waits for its imports
        self.proc = subprocess.Popen([sys.executable, "-m", "viewer.tokenizer.render_child", str(mb)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env=env, cwd=_ROOT, close_fds=True)

    def ask(self, data: bytes, deadline_s: float, strict: bool = False) -> dict:
        """The worker's reply; ``{"died": ...}`` when it exited or missed the deadline (then it is killed).
        A fresh worker's first answer may take 15 s longer (its imports), unless ``strict`` (a Certify's deadline)."""
        if self.fresh:
            deadline_s += 0.0 if strict else 15.0
            self.fresh = False
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self.kill()
            return {"died": "exited"}
        out = self.proc.stdout
        fd = out.fileno()
        end = time.monotonic() + deadline_s
        buf = b""
        need = _HDR.size
        have_header = False
        while len(buf) < need:
            left = end - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                self.kill()
                return {"died": "timeout"}
            chunk = os.read(fd, max(need - len(buf), 1 << 16))
            if not chunk:
                self.kill()
                return {"died": "exited"}
            buf += chunk
            if not have_header and len(buf) >= _HDR.size:
                have_header = True
                need = _HDR.size + _HDR.unpack(buf[:_HDR.size])[0]
        reply = json.loads(buf[_HDR.size:need].decode("utf-8", "surrogatepass"))
        if "budget" in reply:
            self.kill()  # it exits by itself after a budget stop: never hand it out again
        return reply

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - a killed process is reaped at once
            pass
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass


_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_idle: list[_Worker] = []
_busy = 0
_cond = threading.Condition()
_stats = {"renders": 0, "workers_started": 0, "budget_stops": 0, "cache_hits": 0}


class _Lane:
    """A render pool of its own (Certify's, issue 36 finding 7): ``size`` workers nobody else's renders
    wait for, and a deadline (monotonic seconds) for everything rendered within :func:`own_lane`."""

    def __init__(self, size: int):
        self.size, self.idle, self.busy, self.cond = size, [], 0, threading.Condition()

    def take(self, mb: float, deadline: float | None = None) -> _Worker | None:
        """A worker of this lane; None when ``deadline`` passes while every one is busy."""
        with self.cond:
            while True:
                while self.idle:
                    w = self.idle.pop()
                    if w.alive() and w.mb == mb:
                        self.busy += 1
                        return w
                    w.kill()
                if self.busy < self.size:
                    self.busy += 1
                    break
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self.cond.wait(left)
        try:
            w = _Worker(mb)
        except BaseException:
            with self.cond:
                self.busy -= 1
                self.cond.notify()
            raise
        _stats["workers_started"] += 1
        return w

    def give(self, w: _Worker) -> None:
        with self.cond:
            self.busy -= 1
            if w.alive():
                self.idle.append(w)
            self.cond.notify()


_CERTIFY = _Lane(1)
# (lane, deadline or None) of the renders the running code asks for; None: the shared pool
_LANE: ContextVar[tuple[_Lane, float | None] | None] = ContextVar("render_lane", default=None)


@contextmanager
def own_lane(seconds: float = 0.0):
    """Renders in this block use Certify's own worker (one; callers queue for it), never the shared pool that
    every other visitor's renders use, and all of them together stop ``seconds`` from now (0: no such
    deadline; each render still within ``template_s``): a render cut there is the ``certify_s`` budget."""
    token = _LANE.set((_CERTIFY, time.monotonic() + seconds if seconds and seconds > 0 else None))
    try:
        yield
    finally:
        _LANE.reset(token)


def _take(mb: float) -> _Worker:
    global _busy
    with _cond:
        while True:
            while _idle:
                w = _idle.pop()
                if w.alive() and w.mb == mb:
                    _busy += 1
                    return w
                w.kill()
            if _busy < _POOL:
                _busy += 1
                break
            _cond.wait()
    try:
        w = _Worker(mb)
    except BaseException:
        with _cond:
            _busy -= 1
            _cond.notify()
        raise
    _stats["workers_started"] += 1
    return w


def _give(w: _Worker) -> None:
    global _busy
    with _cond:
        _busy -= 1
        if w.alive():
            _idle.append(w)
        _cond.notify()


def render(template: str, messages: list, tools: list | None, add_generation_prompt: bool,
           kwargs: dict[str, Any], limits) -> str:
    """The template's text for ``messages`` (transformers' renderer, in a worker within ``limits``'
    ``template_s`` / ``template_mb``). Raises BudgetExceeded past either, RenderFailed for the
    template's own errors. Results are cached (see ``_cache``)."""
    from viewer.budgets import BudgetExceeded

    seconds, mb = float(limits.template_s), float(limits.template_mb)
    req = {"template": template, "messages": messages, "tools": tools, "kwargs": kwargs,
           "add_generation_prompt": bool(add_generation_prompt), "seconds": seconds,
           "mb": mb}  # the budgets are part of the request, so of the cache key
    size = [0]
    try:
        key: Any = _frozen(req, size)
    except RecursionError:  # too deep to key: json.dumps below says so (or raises what it raises)
        key = None
    hit = _cache_get(key) if key is not None else None
    if hit is not None:
        return _result(hit)
    try:
        body = json.dumps(req, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass")
    except RecursionError:
        raise BudgetExceeded("nesting", limits.nesting, None, "chat template input (messages or tools)",
                             limits.public) from None
    if key is None:
        key = hashlib.sha256(body).digest()
        size[0] = 32
    reply = _ask(body, seconds, mb, limits)
    if reply.get("budget") != "certify_s":  # cut by a Certify's deadline, not by the render's own budget
        _cache_put(key, reply, size[0])
    return _result(reply)


def _frozen(v: Any, size: list[int]) -> Any:
    """A hashable stand-in for a JSON-able request: two requests with equal stand-ins are sent as
    the same JSON (every scalar tagged where Python's equality is looser than JSON's text: ``True``
    and ``1``, ``1`` and ``1.0``, ``0.0`` and ``-0.0``; anything else keyed by its own JSON text).
    Cheaper than the JSON + sha256 it replaces as the cache key: a message's strings hash once (str
    caches its hash) however many turns repeat them. ``size[0]`` adds up what the key holds (chars
    and items), charged to the cache's bound."""
    t = type(v)
    if t is str:
        size[0] += len(v)
        return v
    if t is int or v is None:
        return v
    if t is float:
        return ("f", float.__repr__(v))
    if t is bool:
        return ("b", v)
    if t is dict:
        size[0] += 2 * len(v)
        out: list[Any] = ["d"]
        for k, x in v.items():
            out.append(_frozen(k, size))
            out.append(_frozen(x, size))
        return tuple(out)
    if t is list or t is tuple:
        size[0] += len(v)
        return ("l", *[_frozen(x, size) for x in v])
    text = json.dumps(v, ensure_ascii=False, default=str)
    size[0] += len(text)
    return ("j", text)


def _ask(body: bytes, seconds: float, mb: float, limits) -> dict:
    """One render in a worker: the reply (text, template error, or the budget that stopped it)."""
    if mb and len(body) > mb * 1048576:  # the worker could not even hold the request
        return {"budget": "template_mb", "limits": limits}
    lane = _LANE.get()
    wait = (seconds or 3600.0) + _GRACE_S
    cut = False
    if lane is not None and lane[1] is not None:
        left = lane[1] - time.monotonic()
        if left <= 0:
            return {"budget": "certify_s", "limits": limits}
        cut, wait = left < wait, min(wait, left)
    w = _take(mb) if lane is None else lane[0].take(mb, lane[1])
    if w is None:  # the deadline passed while Certify's worker rendered another click's template
        return {"budget": "certify_s", "limits": limits}
    if lane is not None and lane[1] is not None:
        left = lane[1] - time.monotonic()
        cut, wait = cut or left < wait, max(0.0, min(wait, left))
    try:
        reply = w.ask(_HDR.pack(len(body)) + body, wait, strict=cut)
    finally:
        _give(w) if lane is None else lane[0].give(w)
    _stats["renders"] += 1
    if "died" in reply:
        reply = {"budget": "certify_s" if cut and reply["died"] == "timeout" else
                 "template_s" if reply["died"] == "timeout" else "template_mb", "how": reply["died"]}
    if "budget" in reply:
        _stats["budget_stops"] += 1
    reply["limits"] = limits
    return reply


def _result(reply: dict) -> str:
    from viewer.budgets import BudgetExceeded

    if "budget" in reply:
        lim, name = reply["limits"], reply["budget"]
        how = f" (worker {reply['how']})" if reply.get("how") else ""
        raise BudgetExceeded(name, getattr(lim, name), None, f"chat template render{how}", lim.public)
    if "error" in reply:
        raise RenderFailed(reply["error"])
    return reply["text"]


# Results by request (template, messages, tools, kwargs, budgets; see ``_frozen``): the Drift tab,
# the presenter and every visitor of one link reuse one render, a budget stop included (a
# template that ran out once is not run again). Bounded in characters (the texts and what the keys
# hold), oldest out first.
_CACHE_CHARS = 64 << 20
_cache: OrderedDict[Any, tuple[dict, int]] = OrderedDict()
_cache_size = 0
_cache_lock = threading.Lock()


def _cache_get(key: Any) -> dict | None:
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            _stats["cache_hits"] += 1
            return hit[0]
        return None


def _cache_put(key: Any, reply: dict, key_size: int = 32) -> None:
    global _cache_size
    n = len(reply.get("text") or reply.get("error") or "") + key_size + 64
    if n > _CACHE_CHARS // 4:
        return
    with _cache_lock:
        if key in _cache:
            return
        _cache[key] = (reply, n)
        _cache_size += n
        while _cache_size > _CACHE_CHARS and _cache:
            _, (_, old) = _cache.popitem(last=False)
            _cache_size -= old


def _after_fork_in_child() -> None:
    """A forked child (the drift scan's workers, viewer/drift/pool.py) starts its own render workers:
    the parent's pipes are the parent's (two processes writing one pipe would mix requests), and a
    lock another thread held at the fork would stay held here for ever."""
    global _idle, _busy, _cond, _cache_lock, _CERTIFY
    _idle = []
    _busy = 0
    _cond = threading.Condition()
    _cache_lock = threading.Lock()
    _CERTIFY = _Lane(1)


os.register_at_fork(after_in_child=_after_fork_in_child)


def stats() -> dict[str, int]:
    with _cond:
        return dict(_stats, idle=len(_idle), busy=_busy, certify_busy=_CERTIFY.busy)


def shutdown(clear_cache: bool = False) -> None:
    """End every idle worker (tests; the app's workers end with it); optionally forget results."""
    global _cache_size
    if clear_cache:
        with _cache_lock:
            _cache.clear()
            _cache_size = 0
    with _cond:
        ws, _idle[:] = list(_idle), []
    with _CERTIFY.cond:
        ws, _CERTIFY.idle[:] = ws + _CERTIFY.idle, []
    for w in ws:
        w.kill()
