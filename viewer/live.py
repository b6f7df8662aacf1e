"""Followed sources, one shared follower per source: a room on one live link reads each record once.

Nothing here runs on its own: no thread per source or per visitor. A visitor's page asks every
:func:`interval` seconds (:meth:`Live.poll`); the first ask past the source's poll period reads what
the files gained (:class:`viewer.sources.follow.Follower`), every other visitor's ask in that period
gets the version already read, and an ask while another visitor's read is in progress does not wait
for it (it gets the last version; its next tick sees the new one). Each version's rollout is built once
and shared, so the store (viewer/ui/store.py) keys it by version and derives its views once for everyone.

``FOLLOW_START``: ``python -m viewer view SOURCE --follow`` sets it; the page then follows what opens
on start, as ``?source=…&follow=1`` does for a link.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from viewer.config import Settings
from viewer.rollout import Rollout
from viewer.sources.follow import Follower

__all__ = ["LIVE", "Live", "Polled", "interval", "next_interval", "FOLLOW_START", "follow_start"]

LOCAL_S = 1.0  # a page's polling period on this machine ...
PUBLIC_S = 3.0  # ... and on a public Space (Settings.public_mode): kinder to a shared CPU
MAX_FACTOR = 8  # backing off when busy: at most this many periods between polls
FOLLOWERS = 32  # sources followed at once (least recently asked for go first; asked again, read from the start)
FOLLOW_START = {"on": False}  # `view --follow`: the start source is followed (set before the app is built)


def follow_start(on: bool = True) -> None:
    FOLLOW_START["on"] = bool(on)


def interval(settings: Settings) -> float:
    """The polling period a page starts with."""
    return PUBLIC_S if settings.public_mode() else LOCAL_S


def next_interval(settings: Settings, current: float, took_s: float, read_s: float) -> float:
    """The period for the page's next poll, from a tick that found nothing new (``took_s``: its answer's time,
    ~0 on an idle server). Busy (over a quarter of the base period: the server's workers are shared with every
    other visitor's events; or the read itself took that long): twice as long, up to MAX_FACTOR base periods.
    Otherwise back to the base period."""
    base = interval(settings)
    current = current or base
    busy = took_s > 0.25 * base or read_s > 0.25 * base
    return min(base * MAX_FACTOR, current * 2) if busy else base


@dataclass
class Polled:
    """What a poll saw: the follower's ``version``, the rollout of that version, how long the read took,
    whether the read was this call's (False: shared with another visitor's) and the error, if any."""

    version: int
    rollout: Rollout | None
    read_s: float = 0.0
    read_here: bool = False
    error: str = ""
    waiting: bool = False
    read_at: float = 0.0  # monotonic time of the read that found this version


@dataclass
class _Entry:
    follower: Follower
    lock: threading.Lock = field(default_factory=threading.Lock)
    last: float = 0.0  # monotonic time of the last read
    built: tuple[int, Rollout] | None = None  # (version, rollout): built once per version
    error: str = ""
    reads: int = 0
    changed_at: float = 0.0  # monotonic time of the read that found the current version


class Live:
    """The followers of this process, keyed by resolved path."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, _Entry] = OrderedDict()

    def _entry(self, path: Path, settings: Settings) -> _Entry:
        key = str(Path(path).resolve())
        with self._lock:
            e = self._entries.get(key)
            if e is None:
                e = self._entries[key] = _Entry(Follower(Path(key), settings))
            self._entries.move_to_end(key)
            while len(self._entries) > FOLLOWERS:
                self._entries.popitem(last=False)
            return e

    def follower(self, path: Path, settings: Settings) -> Follower:
        return self._entry(path, settings).follower

    def poll(self, path: Path, settings: Settings, period: float | None = None) -> Polled:
        """The newest version of ``path``: read now if the last read is a ``period`` old (default: half the
        base polling period, so each visitor's tick may find news) and no other read is under way."""
        e = self._entry(path, settings)
        period = interval(settings) / 2 if period is None else period
        took, here = 0.0, False
        if time.monotonic() - e.last >= period and e.lock.acquire(blocking=e.built is None):
            try:
                if time.monotonic() - e.last >= period:  # not read by the visitor who held the lock
                    t0 = time.monotonic()
                    try:
                        if e.follower.poll():
                            e.changed_at = time.monotonic()
                        e.error = ""
                    except (OSError, ValueError) as err:  # a budget (BudgetExceeded) or the disk: said, kept
                        e.error = f"{type(err).__name__}: {err}" if isinstance(err, OSError) else str(err)
                    e.reads += 1
                    e.last = time.monotonic()
                    took, here = e.last - t0, True
                if e.built is None or e.built[0] != e.follower.version:
                    e.built = (e.follower.version, e.follower.rollout())
            finally:
                e.lock.release()
        built = e.built
        return Polled(built[0] if built else -1, built[1] if built else None, took, here, e.error,
                      e.follower.waiting, e.changed_at)

    def forget(self, path: Path) -> None:
        with self._lock:
            self._entries.pop(str(Path(path).resolve()), None)


LIVE = Live()
