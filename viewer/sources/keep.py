"""What the server keeps on disk for visitors: upload folders and Hub downloads, and when they go.

Every folder the app writes for a visitor is registered here (:data:`KEEP`) with the browser
session it belongs to (uploads) or none (Hub downloads, shared by whoever may read them). A
folder is deleted

* when its session ends (the UI calls :meth:`Keep.end_session` from Gradio's unload event),
* when it was not used for the ``disk_ttl_s`` budget (0 = kept until the app stops), and
* oldest first, whenever all of them together are over the ``disk_mb`` budget.

:meth:`Keep.sweep` applies the last two; :meth:`Keep.start` runs it in a daemon thread.
Folders left by an earlier run of the app (``ri-upload-*`` in the temp folder) are adopted on
start so a restart does not leak them. Pure Python: no gradio.
"""
from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

from viewer.budgets import Limits
from viewer.config import Settings

_LOG = logging.getLogger(__name__)

__all__ = ["Keep", "KEEP", "folder_bytes"]


def folder_bytes(path: Path) -> int:
    """Bytes of the files under ``path`` (a file: its size); links are not followed."""
    try:
        if not path.is_dir():
            return path.lstat().st_size if path.exists() else 0
        total = 0
        for root, _dirs, names in os.walk(path):
            for n in names:
                try:
                    total += os.lstat(os.path.join(root, n)).st_size
                except OSError:
                    pass
        return total
    except OSError:
        return 0


class Keep:
    def __init__(self):
        self._lock = threading.Lock()
        self._items: dict[Path, tuple[str | None, float]] = {}  # folder -> (session, last used)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def add(self, path: str | Path, session: str | None = None) -> Path:
        p = Path(path)
        with self._lock:
            self._items[p] = (session, time.time())
        return p

    def touch(self, path: str | Path) -> None:
        """``path`` (or a folder holding it) was used now: its TTL starts again."""
        p = Path(path)
        with self._lock:
            for k, (s, _) in list(self._items.items()):
                if p == k or p.is_relative_to(k):
                    self._items[k] = (s, time.time())

    def kept(self, session: str | None = None) -> list[Path]:
        """Every folder kept (or only browser session ``session``'s)."""
        with self._lock:
            return [p for p, (s, _) in self._items.items() if session is None or s == session]

    def _remove(self, paths: list[Path]) -> list[Path]:
        with self._lock:
            for p in paths:
                self._items.pop(p, None)
        for p in paths:
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                try:
                    p.unlink()
                except OSError:
                    pass
        return paths

    def discard(self, path: str | Path) -> None:
        """Forget and delete ``path`` now."""
        self._remove([Path(path)])

    def end_session(self, session: str | None) -> list[Path]:
        """Delete every folder of browser session ``session`` (its tab closed)."""
        if not session:
            return []
        with self._lock:
            mine = [p for p, (s, _) in self._items.items() if s == session]
        return self._remove(mine)

    def sweep(self, lim: Limits | None = None, now: float | None = None, *, extra_bytes: int = 0) -> list[Path]:
        """Delete folders unused for ``disk_ttl_s``, then the oldest until all of them (plus
        ``extra_bytes`` about to be written) fit in ``disk_mb``. Returns what was deleted."""
        lim = lim or Settings.from_env().limits()
        now = time.time() if now is None else now
        with self._lock:
            items = sorted(self._items.items(), key=lambda kv: kv[1][1])  # oldest use first
        self._remove([p for p, _ in items if not p.exists()])  # deleted by someone else: forget them
        removed: list[Path] = []
        ttl = lim.disk_ttl_s
        if ttl:
            removed += self._remove([p for p, (_, used) in items if p.exists() and now - used > ttl])
        cap = lim.bytes("disk_mb")
        if cap:
            live = [(p, folder_bytes(p)) for p, _ in items if p not in removed and p.exists()]
            total = sum(n for _, n in live) + extra_bytes
            old = []
            for p, n in live:
                if total <= cap:
                    break
                old.append(p)
                total -= n
            removed += self._remove(old)
        return removed

    def adopt(self, folder: str | Path = tempfile.gettempdir(), prefix: str = "ri-upload-") -> None:
        """Register what an earlier run left (``prefix*`` in ``folder``), last used at its mtime."""
        try:
            found = [p for p in Path(folder).iterdir() if p.name.startswith(prefix)]
        except OSError:
            return
        with self._lock:
            for p in found:
                if p not in self._items:
                    try:
                        self._items[p] = (None, p.stat().st_mtime)
                    except OSError:
                        pass

    def start(self, interval_s: float) -> None:
        """Sweep every ``interval_s`` seconds in a daemon thread (once per process)."""
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, args=(max(0.05, interval_s),), daemon=True,
                                            name="ri-disk-sweeper")
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            try:
                self.sweep()
            except Exception as e:  # a sweep must never end the thread: the next one tries again
                _LOG.warning("disk sweep failed (next one in %.0f s): %s: %s", interval_s, type(e).__name__, e)


KEEP = Keep()
