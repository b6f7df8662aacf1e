"""What the server keeps on disk for visitors, and when it goes: the one disk keeper.

Every file or folder the app writes for a visitor is made or registered here (:data:`KEEP`):
upload folders (:meth:`Keep.folder`), downloads (:meth:`Keep.write`: notes.json, deck.json, repro
JSON, the HTML export), Hub downloads, and what visitors post to Gradio's own upload route
(:meth:`Keep.admit` / :meth:`Keep.settle`, called by ``viewer/ui/upload_gate.py``). Nothing else in
``viewer/ui`` or ``viewer/sources`` calls ``tempfile.mkdtemp`` (``tests/test_keep.py`` keeps it so).
Each entry names the browser session it belongs to (none: shared, e.g. a Hub download) and the
client (an address, :func:`client_key`) that brought it. An entry is deleted

* when its session ends (the UI calls :meth:`Keep.end_session` from Gradio's unload event),
* when it was not used for the ``disk_ttl_s`` budget (0 = kept until the app stops), and
* oldest first, whenever all of them together are over the ``disk_mb`` budget.

A client holds at most ``disk_client_mb`` of it; an upload to Gradio's route past that, or past
what ``disk_mb`` can still hold, is refused before a byte is read (the gate answers 413).
:meth:`Keep.sweep` applies the TTL and the total; :meth:`Keep.start` runs it in a daemon thread.
Folders left by an earlier run of the app (``ri-upload-*`` in the temp folder) are adopted on
start so a restart does not leak them. Pure Python: no gradio.
"""
from __future__ import annotations

import ipaddress
import itertools
import logging
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from viewer.budgets import BudgetExceeded, Limits
from viewer.config import Settings

_LOG = logging.getLogger(__name__)

__all__ = ["Keep", "KEEP", "folder_bytes", "client_key", "DOWNLOAD_PREFIX"]

DOWNLOAD_PREFIX = "ri-dl-"  # every download folder's name starts so (then its kind: ri-dl-notes-...)


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


def client_key(host: str | None, forwarded_for: str | None = None, behind_proxy: bool = False) -> str:
    """Who a request comes from, for the per-client disk share: its address. Behind a proxy (a
    Hugging Face Space: ``SPACE_ID``) every request comes from the proxy, so the visitor's address is
    the right-most public one in ``X-Forwarded-For`` (the proxy appends what it saw; what a client
    wrote there itself stands to its left). Elsewhere the header is the client's own text: ignored."""
    if behind_proxy and forwarded_for:
        for part in reversed(forwarded_for.split(",")):
            try:
                ip = ipaddress.ip_address(part.strip())
            except ValueError:
                continue
            if ip.is_global:
                return str(ip)
    return host or "?"


@dataclass
class _Entry:
    session: str | None
    used: float               # last used (time.time())
    client: str | None = None
    size: int | None = None   # known when written once and never changed (downloads, route uploads)
    route: bool = False       # a file posted to Gradio's upload route that no event has used yet


class Keep:
    def __init__(self):
        self._lock = threading.Lock()
        self._items: dict[Path, _Entry] = {}
        self._held: dict[int, tuple[str, int]] = {}   # admitted uploads still arriving: id -> (client, bytes)
        self._ids = itertools.count(1)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.downloads: Path | None = None  # where downloads go (the UI: Gradio's cache, so it serves ours)

    # --- registering ---------------------------------------------------------------------------
    def add(self, path: str | Path, session: str | None = None, client: str | None = None) -> Path:
        p = Path(path)
        with self._lock:
            old = self._items.get(p)
            self._items[p] = _Entry(session if session is not None or old is None else old.session, time.time(),
                                    client or (old.client if old else None))
        return p

    def folder(self, prefix: str, session: str | None = None, client: str | None = None,
               under: str | Path | None = None) -> Path:
        """A new empty folder of this session's, registered before anything is written into it."""
        base = Path(under) if under is not None else Path(tempfile.gettempdir())
        base.mkdir(parents=True, exist_ok=True)
        return self.add(tempfile.mkdtemp(prefix=prefix, dir=base), session, client)

    def write(self, name: str, data: str | bytes, kind: str, session: str | None = None,
              client: str | None = None) -> Path:
        """The one way the app writes a download (``kind``: notes, deck, repro, export): a new folder
        of the session's holding ``name``. The session's earlier download of the same kind goes (it
        is what the same button made before), then the sweep makes room; returns the file."""
        return self.write_all([(name, data)], kind, session, client)[0]

    def write_all(self, files: list[tuple[str, str | bytes]], kind: str, session: str | None = None,
                  client: str | None = None) -> list[Path]:
        """Several files of one download (a repro per drift case) in one folder: as :meth:`write`."""
        raws = [(n, d.encode("utf-8") if isinstance(d, str) else bytes(d)) for n, d in files]
        prefix = f"{DOWNLOAD_PREFIX}{kind}-"
        if session:
            with self._lock:
                mine = [p for p, e in self._items.items() if e.session == session and p.name.startswith(prefix)]
            self._remove(mine)
        size = sum(len(r) for _, r in raws)
        self.sweep(extra_bytes=size)
        dest = self.folder(prefix, session, client, self.downloads)
        out = []
        for name, raw in raws:
            (dest / name).write_bytes(raw)
            out.append(dest / name)
        with self._lock:
            if dest in self._items:
                self._items[dest].size = size
        return out

    def touch(self, path: str | Path) -> None:
        """``path`` (or a folder holding it) was used now: its TTL starts again."""
        p = Path(path)
        with self._lock:
            for k, e in self._items.items():
                if p == k or p.is_relative_to(k):
                    e.used = time.time()

    def claim(self, paths: list[str], session: str | None) -> None:
        """Files posted to Gradio's upload route were used by ``session``: they are that session's now
        (deleted when it ends) and no longer waiting uploads."""
        ps = [Path(p) for p in paths]
        with self._lock:
            for k, e in self._items.items():
                if any(p == k or p.is_relative_to(k) for p in ps):
                    e.session, e.route, e.used = session or e.session, False, time.time()

    def kept(self, session: str | None = None) -> list[Path]:
        """Every folder kept (or only browser session ``session``'s)."""
        with self._lock:
            return [p for p, e in self._items.items() if session is None or e.session == session]

    # --- Gradio's upload route -----------------------------------------------------------------
    def admit(self, client: str, nbytes: int, lim: Limits | None = None) -> int:
        """Room for ``nbytes`` posted by ``client`` to Gradio's upload route, or BudgetExceeded. Past
        the total, route uploads no event used go first (oldest first), never a session's files; what
        is still arriving counts until :meth:`settle`. Returns the admission's id."""
        lim = lim or Settings.from_env().limits()
        self.sweep(lim, uploads_only=True, extra_bytes=nbytes)
        with self._lock:
            held = list(self._held.values())
            items = list(self._items.items())
        share = lim.bytes("disk_client_mb")
        if share:
            mine = sum(self._size(p, e) for p, e in items if e.client == client) + \
                sum(n for c, n in held if c == client)
            if mine + nbytes > share:
                raise BudgetExceeded("disk_client_mb", lim.disk_client_mb, (mine + nbytes) / 1048576,
                                     "upload", lim.public)
        cap = lim.bytes("disk_mb")
        if cap:
            total = sum(self._size(p, e) for p, e in items) + sum(n for _, n in held)
            if total + nbytes > cap:
                raise BudgetExceeded("disk_mb", lim.disk_mb, (total + nbytes) / 1048576, "upload", lim.public)
        with self._lock:
            ticket = next(self._ids)
            self._held[ticket] = (client, nbytes)
        return ticket

    def settle(self, ticket: int, paths: list[str | Path]) -> None:
        """Admission ``ticket`` is over: register the folders Gradio wrote its files in."""
        with self._lock:
            client, _ = self._held.pop(ticket, (None, 0))
            for f in paths:
                d = Path(f).parent
                if d not in self._items:
                    self._items[d] = _Entry(None, time.time(), client, folder_bytes(d), route=True)

    # --- deleting ------------------------------------------------------------------------------
    @staticmethod
    def _size(p: Path, e: _Entry) -> int:
        return e.size if e.size is not None else folder_bytes(p)

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
            mine = [p for p, e in self._items.items() if e.session == session]
        return self._remove(mine)

    def sweep(self, lim: Limits | None = None, now: float | None = None, *, extra_bytes: int = 0,
              uploads_only: bool = False) -> list[Path]:
        """Delete folders unused for ``disk_ttl_s``, then the oldest until all of them (plus
        ``extra_bytes`` about to be written, and what is still arriving) fit in ``disk_mb``
        (``uploads_only``: only route uploads no event used go for room). Returns what was deleted."""
        lim = lim or Settings.from_env().limits()
        now = time.time() if now is None else now
        with self._lock:
            items = sorted(self._items.items(), key=lambda kv: kv[1].used)  # oldest use first
            arriving = sum(n for _, n in self._held.values())
        self._remove([p for p, _ in items if not p.exists()])  # deleted by someone else: forget them
        removed: list[Path] = []
        ttl = lim.disk_ttl_s
        if ttl:
            removed += self._remove([p for p, e in items if p.exists() and now - e.used > ttl])
        cap = lim.bytes("disk_mb")
        if cap:
            live = [(p, e, self._size(p, e)) for p, e in items if p not in removed and p.exists()]
            total = sum(n for _, _, n in live) + extra_bytes + arriving
            old = []
            for p, e, n in live:
                if total <= cap:
                    break
                if uploads_only and not e.route:
                    continue
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
                        self._items[p] = _Entry(None, p.stat().st_mtime)
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
