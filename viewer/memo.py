"""A byte-bounded LRU shared by every visitor: parsed rollouts and what is derived from them.

A room of people opening the same deep link asks for the same rollout, turn, token-view
payload, plots and drift report at once. :class:`Memo` computes each of these once (a
second caller asking for a key that is being computed waits for that result instead of
computing it again) and keeps them, least recently used first out, within a budget in
bytes (``Settings.cache_mb``). Sessions keep only their small keys.

Sizes come from one function, :func:`approx_nbytes`: an estimate, not an exact count, good
enough to keep the cache near its budget. What several values hold in common (a tokenizer and its
token table, used by every rollout shown with it) is a *share*: counted once while any value that
names it is kept, and no longer once the last one goes (issue 36, finding 2). Anything with an ``nbytes`` attribute (numpy
arrays, pyarrow arrays and tables) is counted exactly by it; columnar rollouts should
expose ``nbytes`` (or be special-cased here) rather than grow another size function.
No gradio import: the UI and the CLI can share it.
"""
from __future__ import annotations

import sys
import threading
import types
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Mapping
from concurrent.futures import Future
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

__all__ = ["Memo", "Miss", "approx_nbytes", "hits_only", "need_work", "release_memory"]

T = TypeVar("T")
_SAMPLE = 32  # elements measured in a long container; the rest are assumed alike
_ATOMS = (int, float, bool, complex, type(None), str, bytes, bytearray)
_SHARED = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType)


def approx_nbytes(obj: Any) -> int:
    """Approximate memory held by ``obj`` and everything it references (each object once).

    Containers longer than a few dozen elements are measured on an even sample of their
    elements and scaled up: rollouts hold lists of millions of ids and logprobs, and
    walking every element would cost more than the cache saves. Objects with an ``nbytes``
    attribute are taken at their word. Modules, classes and functions count as nothing
    (they are shared, not held).
    """
    seen: set[int] = set()

    def size(o: Any) -> int:
        if id(o) in seen:
            return 0
        seen.add(id(o))
        if isinstance(o, _ATOMS):
            return sys.getsizeof(o)
        if isinstance(o, _SHARED):
            return 0
        nb = getattr(o, "nbytes", None)
        if isinstance(nb, int):  # numpy's getsizeof already includes a buffer it owns; pyarrow's does not
            return max(nb, sys.getsizeof(o))
        n = sys.getsizeof(o, 64)
        if isinstance(o, dict):
            keys = _pick(list(o))
            return n + many(keys + [o[k] for k in keys], len(o) * 2)
        if isinstance(o, (list, tuple, set, frozenset)):
            seq = o if isinstance(o, (list, tuple)) else list(o)
            return n + many(_pick(seq), len(seq))
        if hasattr(o, "__dict__"):
            n += size(vars(o))
        for name in getattr(type(o), "__slots__", ()):
            if hasattr(o, name):
                n += size(getattr(o, name))
        return n

    def many(items: list, total: int) -> int:
        if not items:
            return 0
        got = sum(size(x) for x in items)
        return got if len(items) >= total else got * total // len(items)

    return size(obj)


def _pick(seq) -> list:
    """All of a short sequence, or an even sample of a long one."""
    n = len(seq)
    if n <= _SAMPLE:
        return list(seq)
    step = n / _SAMPLE
    return [seq[int(i * step)] for i in range(_SAMPLE)]


# Within hits_only(), get_or_make neither makes a value nor waits for one being made: it raises
# Miss. The UI answers a crowd's turn switches on the server's event loop this way when every value
# is already made, and runs the handler in a worker thread (where it may make and wait) only on a
# Miss: handing each cached answer to a thread cost more than the answer (docs/SPEED.md, room).
# None outside the block; inside, the Memos that counted a hit in it (taken back on a Miss).
_HITS_ONLY: ContextVar[list[Memo] | None] = ContextVar("memo_hits_only", default=None)


class Miss(BaseException):
    """A value that hits_only() code would have to make or wait for, or a change it would make
    (see :func:`hits_only` for the rule). A BaseException on purpose: handlers turn any
    ``Exception`` into a message for the visitor, and this is not a failure but a request to run
    again where waiting is allowed."""


@contextmanager
def hits_only() -> Iterator[None]:
    """Code in this block may only read made values: the rule for what runs in it.

    A block may be cut short at any cache read (a :class:`Miss`), and its caller then runs the
    same code again from its start, in a worker thread (:func:`viewer.ui.staged.staged`,
    ``inline``). So until its last cache read the code must change nothing: a change made before
    a Miss would be made twice. The cache keeps the rule itself: within the block a write
    (``put``, ``pop``, ``drop_where``) raises Miss before changing anything, and the hits that a
    cut-short block counted are taken back. Anything else that changes state (a session's
    tables, a message to the visitor, a file) comes after the last cache read, or after
    :func:`need_work`."""
    counted: list[Memo] = []
    token = _HITS_ONLY.set(counted)
    try:
        yield
    except Miss:
        for memo in counted:
            memo._uncount_hit()
        raise
    finally:
        _HITS_ONLY.reset(token)


def need_work() -> None:
    """Say that what follows is more than a lookup (raises :class:`Miss` within hits_only())."""
    if _HITS_ONLY.get() is not None:
        raise Miss


class Memo:
    """Least-recently-used values within ``max_bytes``; one computation per key at a time.

    A value larger than the whole budget is returned but not kept. Thread-safe: Gradio
    runs handlers in a thread pool. ``shares`` (``put``, ``get_or_make``): ``{share key: bytes}`` that a
    value holds in common with others (a tokenizer): each share counted once in :attr:`bytes` while a
    kept value names it.
    """

    def __init__(self, max_bytes: int, weigh: Callable[[Any], int] = approx_nbytes):
        self.max_bytes = max(0, int(max_bytes))
        self.weigh = weigh
        self._items: OrderedDict[Hashable, tuple[Any, int, tuple]] = OrderedDict()
        self._shares: dict[Hashable, list[int]] = {}  # share key -> [values naming it, its bytes]
        self._running: dict[Hashable, Future] = {}
        self._lock = threading.Lock()
        self.bytes = 0
        self.hits = self.misses = self.evictions = 0

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._items

    def get(self, key: Hashable, default: Any = None) -> Any:
        with self._lock:
            hit = self._items.get(key)
            if hit is None:
                return default
            self._items.move_to_end(key)
            return hit[0]

    def put(self, key: Hashable, value: T, nbytes: int | None = None,
            shares: Mapping[Hashable, int] | None = None) -> T:
        """Keep ``value`` under ``key`` (weighed now unless ``nbytes`` is given); returns it."""
        need_work()
        n = self.weigh(value) if nbytes is None else int(nbytes)
        held = tuple((k, int(b)) for k, b in (shares or {}).items())
        with self._lock:
            self._drop(self._items.pop(key, None))
            new = sum(b for k, b in held if k not in self._shares)
            if n + new <= self.max_bytes:
                self._items[key] = (value, n, held)
                self.bytes += n
                for k, b in held:
                    c = self._shares.setdefault(k, [0, b])
                    self.bytes += b if c[0] == 0 else 0
                    c[0] += 1
            while self.bytes > self.max_bytes and self._items:
                self._drop(self._items.popitem(last=False)[1])
                self.evictions += 1
        return value

    def _drop(self, item: tuple | None) -> None:
        """Uncount a value taken out (its shares when it was their last holder); under the lock."""
        if item is None:
            return
        self.bytes -= item[1]
        for k, _ in item[2]:
            c = self._shares[k]
            c[0] -= 1
            if c[0] == 0:
                self.bytes -= c[1]
                del self._shares[k]

    def pop(self, key: Hashable) -> None:
        need_work()
        with self._lock:
            self._drop(self._items.pop(key, None))

    def items(self) -> list[tuple[Hashable, Any]]:
        """A snapshot of the kept (key, value) pairs, oldest use first."""
        with self._lock:
            return [(k, item[0]) for k, item in self._items.items()]

    def drop_where(self, gone: Callable[[Hashable, Any], bool]) -> int:
        """Take out every value whose (key, value) ``gone`` accepts (what a closed session owned); how many."""
        need_work()
        with self._lock:
            keys = [k for k, item in self._items.items() if gone(k, item[0])]
            for k in keys:
                self._drop(self._items.pop(k))
        return len(keys)

    def get_or_make(self, key: Hashable, make: Callable[[], T], nbytes: Callable[[T], int] | None = None,
                    shares: Callable[[T], Mapping[Hashable, int]] | None = None) -> T:
        """The value under ``key``, made by ``make()`` if absent. Callers asking while it is
        being made wait for that one result (or its exception) instead of making it again.
        Within :func:`hits_only`, an absent value raises :class:`Miss` (nothing made, nothing waited for)."""
        counted = _HITS_ONLY.get()
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
                self.hits += 1
                if counted is not None:
                    counted.append(self)
                return hit[0]
            if counted is not None:
                raise Miss
            running = self._running.get(key)
            if running is None:
                self.misses += 1
                self._running[key] = mine = Future()
        if running is not None:
            self.hits += 1
            return running.result()
        try:
            value = make()
            self.put(key, value, None if nbytes is None else nbytes(value), None if shares is None else shares(value))
        except BaseException as e:
            mine.set_exception(e)
            raise
        else:
            mine.set_result(value)
            return value
        finally:
            with self._lock:
                self._running.pop(key, None)

    def _uncount_hit(self) -> None:
        with self._lock:
            self.hits -= 1

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"items": len(self._items), "bytes": self.bytes, "max_bytes": self.max_bytes, "shares": len(self._shares),
                    "hits": self.hits, "misses": self.misses, "evictions": self.evictions}


def release_memory() -> None:
    """Collect cycles and hand freed heap pages back to the system (glibc's ``malloc_trim``): after a
    session ends, what it held is freed but glibc keeps the pages, so the process's RSS did not come back
    (issue 36: +128 MB of the +263 MB left after three hostile sessions). A no-op where there is no glibc."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc (musl, macOS): the pages stay with the allocator
        pass

