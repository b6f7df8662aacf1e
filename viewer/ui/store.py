"""Server-side cache of opened rollouts, keyed by a short string kept in gr.State.

Gradio hashes State values around every event, so the (possibly huge) Rollout lives
here and the browser session only holds its key. No gradio import: plain Python.

The cache (a :class:`viewer.memo.Memo`, bounded in bytes by ``Settings.cache_mb``) is
shared by every visitor, and also holds what is derived from a rollout (token-view
payloads, plots, drift reports: :meth:`RolloutStore.derived`), so a room of people on the
same link parses and renders each thing once. One session's rollout can therefore be
evicted by another's. Each key also keeps a tiny *recipe* (how it was opened); :meth:`get`
of an evicted key re-opens it from the recipe under the same key, so a session never
silently loses its rollout.
"""
from __future__ import annotations

import hashlib
import logging
import os
import stat
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any
from dataclasses import dataclass, replace
from pathlib import Path

from ..config import Settings
from ..memo import Memo, approx_nbytes
from ..rollout import Rollout
from ..sources import SourceError, load_source
from ..tokenizer import TokenizerChoice, token_table, tokenizer_for
from ..tokenizer import loaded
from ..tokenizer.loaded import folder_loaded, kept_by, tokenizer_nbytes
from ..tokenizer.table import per_tokenizer

__all__ = ["Opened", "RolloutStore", "HEAVY_BYTES"]

HEAVY_BYTES = 32 << 20  # a source bigger than this (file, or a folder's files) is a "large" open
HEAVY_WAIT_S = 10.0
_LOG = logging.getLogger(__name__)


def _size(path: Path) -> int:
    return _stamp(path)[1]


def _stamp(path: Path) -> tuple[str, int]:
    """What changes when the source does (its mtime and size; a folder's also each entry's name and
    mtime, in name order) and its size in bytes (a folder: its files'), from one stat per entry: every
    visitor's open of a link makes this check, and it stat'ed each file of a folder three times."""
    try:
        st = path.stat()
    except OSError:
        return "", 0
    stamp = f"{st.st_mtime_ns}:{st.st_size}"
    if not stat.S_ISDIR(st.st_mode):
        return stamp, st.st_size
    size, names = 0, ""
    try:
        with os.scandir(path) as it:
            entries = sorted(it, key=lambda e: e.name)
        for e in entries:
            es = e.stat()  # follows links, as Path.stat did
            names += f"{e.name}{es.st_mtime_ns}"
            if stat.S_ISREG(es.st_mode):
                size += es.st_size
    except OSError:  # a folder that cannot be listed is stamped by its own stat (as before)
        return stamp, size
    return stamp + names, size


@dataclass
class Opened:
    key: str
    rollout: Rollout
    path: Path
    choice: TokenizerChoice
    table: object | None  # viewer.tokenizer.TokenTable
    link: str = ""  # query string reopening this rollout when it is not a plain path (a dataset row)


def _weight(op: Opened) -> int:
    # What an entry holds is all shares (_shares): the rollout (one parse shown with several tokenizers is
    # several entries) and the tokenizer with its token table (shared by every rollout shown with it).
    return 0


_TOK_BYTES: dict[int, tuple[Any, int]] = {}  # per tokenizer (weakly): its bytes with its token table


def _tok_shares(tok: Any) -> dict[tuple, int]:
    """The share a tokenizer loaded from a folder (an upload's ``tokenizer/``, a typed folder) is in the
    cache: it and its token table, counted once however many rollouts are shown with it (issue 36,
    finding 2). The bundled tokenizers and Hub names are kept by the process anyway: no share."""
    if tok is None or not folder_loaded(tok):
        return {}

    def weigh() -> int:
        try:
            table = approx_nbytes(token_table(tok))
        except TypeError:  # not a fast tokenizer: no table
            table = 0
        return tokenizer_nbytes(tok) + table

    return {("tokenizer", id(tok)): per_tokenizer(_TOK_BYTES, tok, weigh)}


def _shares(op: Opened) -> dict[tuple, int]:
    return {("parse", id(op.rollout)): approx_nbytes(op.rollout), **_tok_shares(op.choice.tokenizer)}


class RolloutStore:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.memo = Memo(int(settings.cache_mb * 2**20))
        self._recipes: OrderedDict[str, Callable[[], Opened]] = OrderedDict()
        self._lock = threading.Lock()
        self.reloads = 0  # evicted rollouts opened again on demand (tests and logs read it)
        self.limits = settings.limits()  # the resource budgets (viewer/budgets.py), read once
        self._heavy_gate = threading.Semaphore(1)

    _RECIPES = 4096  # closures of a path / a row number: bytes each, never rollouts

    def _recipe(self, key: str, make: Callable[[], Opened]) -> None:
        with self._lock:
            self._recipes[key] = make
            self._recipes.move_to_end(key)
            while len(self._recipes) > self._RECIPES:
                self._recipes.popitem(last=False)

    def _remember(self, item: Opened) -> Opened:
        return self.memo.put(("rollout", item.key), item, _weight(item), _shares(item))

    def forget_under(self, folders: list[Path]) -> int:
        """Drop every rollout opened from inside ``folders`` (a closed session's uploads, which the disk
        keeper just deleted) with what was derived from it: nobody can open them again, so they must not
        sit in the shared cache until evicted (issue 36). Returns how many cache entries went."""
        roots = [Path(f).resolve() for f in folders]
        if not roots:
            return 0
        keys: set[str] = set()
        tokenizers: set[int] = set()  # the tokenizers the dropped rollouts were shown with (an upload's own)

        def owned(k, v) -> bool:
            if isinstance(k, tuple) and k[:1] == ("rollout",) and isinstance(v, Opened) and v.path is not None:
                p = Path(v.path).resolve()
                if any(p == r or p.is_relative_to(r) for r in roots):
                    keys.add(v.key)
                    tokenizers.add(id(v.choice.tokenizer))
                    return True
            return False

        n = self.memo.drop_where(owned)
        n += self.memo.drop_where(lambda k, v: isinstance(k, tuple) and len(k) > 1 and k[0] == "derived"
                                  and k[1] in keys)
        # A tokenizer loaded from an upload's own files (kept under its files' digest) goes with the last
        # rollout shown with it: ≈ 20 MB a tokenizer that nobody can name again (the room attack's residue).
        kept = {id(v.choice.tokenizer) for k, v in self.memo.items() if k[:1] == ("rollout",)}
        n += self.memo.drop_where(lambda k, v: isinstance(k, tuple) and k[:1] == ("tokenizer",)
                                  and id(v) in tokenizers - kept)
        with self._lock:
            for k in keys:
                self._recipes.pop(k, None)
        return n + loaded.forget_under(roots)

    def _cached(self, key: str) -> Opened | None:
        return self.memo.get(("rollout", key))

    def derived(self, key: str, what: tuple, make: Callable[[], Any]) -> Any:
        """A value derived from the rollout under ``key`` (``what`` names it, e.g.
        ``("turn", 2, "mask")``), made once for every session and kept in the shared cache.
        Keys change when the source file does, so a value never outlives what it shows.
        What is sent to browsers is derived here, so the ``response_mb`` budget is held here:
        a bigger value raises BudgetExceeded (and is not kept)."""
        lim = self.limits

        def weigh(value: Any) -> int:
            n = approx_nbytes(value)
            lim.check_bytes("response_mb", n, " ".join(str(w) for w in what) or "answer")
            return n

        return self.memo.get_or_make(("derived", key, *what), make, weigh)

    def _heavy(self, path: Path | None, read: Callable[[], Opened], size: int | None = None) -> Callable[[], Opened]:
        """``read`` gated when ``path`` is big (over ``HEAVY_BYTES``): such opens run one at a
        time, so visitors opening big files hold at most one of the browsing workers
        (``VIEWER_BROWSE_CONCURRENCY``) between them; one who waits longer than
        ``HEAVY_WAIT_S`` is told to try again instead of holding another."""
        if path is None or (_size(path) if size is None else size) <= HEAVY_BYTES:
            return read

        def gated() -> Opened:
            if not self._heavy_gate.acquire(timeout=HEAVY_WAIT_S):
                raise SourceError(f"{path.name}: another large file is being opened; try again in a moment "
                                  f"(files over {HEAVY_BYTES >> 20} MB open one at a time)")
            try:
                return read()
            finally:
                self._heavy_gate.release()
        return gated

    def open(self, path: Path, tokenizer_override: str = "") -> Opened:
        """Read a source (folder or file) and pick its tokenizer. Raises SourceError if unreadable."""
        path = Path(path)
        stamp, size = _stamp(path)
        key = hashlib.sha1(f"{path.resolve()}|{stamp}|{tokenizer_override}".encode()).hexdigest()[:16]
        plain = hashlib.sha1(f"{path.resolve()}|{stamp}|".encode()).hexdigest()[:16]

        def read() -> Opened:
            # the rollout does not depend on the tokenizer: another tokenizer for an open source reuses
            # its parse (issue 36, finding 5: each Apply tokenizer parsed the whole upload again)
            shown = self._cached(plain) if key != plain else None
            rollout = shown.rollout if shown is not None else load_source(path, self.settings)
            capture_dir = path if path.is_dir() else path.parent
            return self._with_tokenizer(key, rollout, path, capture_dir, tokenizer_override)

        read = self._heavy(path, read, size)
        self._recipe(key, read)
        # A room opening the same link at once parses it once; the others wait for that read.
        return self.memo.get_or_make(("rollout", key), read, _weight, _shares)

    def open_shared(self, ident: str, read: Callable[[], tuple[Rollout, Path | None]], link: str = "",
                    tokenizer_override: str = "", path: Path | None = None) -> Opened:
        """A rollout that is not a plain path but is the same for everyone who names it the
        same way (a dataset row: ``ident`` = source, row, file stamp). ``read`` returns the
        rollout and its capture folder (or None); the tokenizer is :func:`tokenizer_for`'s choice."""
        key = hashlib.sha1(f"shared|{ident}|{tokenizer_override}".encode()).hexdigest()[:16]

        def make() -> Opened:
            rollout, capture_dir = read()
            path = Path(capture_dir) if capture_dir else Path(rollout.source)
            op = self._with_tokenizer(key, rollout, path, capture_dir, tokenizer_override)
            return replace(op, link=link)

        make = self._heavy(path, make)
        self._recipe(key, make)
        return self.memo.get_or_make(("rollout", key), make, _weight, _shares)

    def _with_tokenizer(self, key: str, rollout: Rollout, path: Path, capture_dir: Path | None,
                        override: str) -> Opened:
        with kept_by(self._keep_tokenizer):  # a folder's tokenizer: in this cache, shared by identical files
            choice = tokenizer_for(rollout, self.settings, override, capture_dir=capture_dir)
        # Ids made from text (no token ids in the file) are shown with the tokenizer that made them
        # (tokenizer_for): say why in those words, not as if the user had typed an override.
        derived = rollout.origin.tokenizer
        if derived and choice.ok and (override or derived) == derived:
            choice = replace(choice, message=rollout.origin.tokenizer_note
                             or f"Token ids made from the text with the {derived} tokenizer, and shown with it.")
        table = token_table(choice.tokenizer, choice.name) if choice.tokenizer is not None else None
        return self._keep_recorded(Opened(key, rollout, path, choice, table))

    def _keep_tokenizer(self, digest: str, load: Callable[[], Any]) -> Any:
        """The tokenizer loaded from files with this ``digest``, kept in the cache (within ``cache_mb``, with
        its token table) and loaded once however many visitors ask for it at once (same files, same key)."""
        return self.memo.get_or_make(("tokenizer", digest), load, lambda tok: 0, _tok_shares)

    def _keep_recorded(self, op: Opened) -> Opened:
        """A rollout whose file recorded the trainer's logprobs (a prime-rl token export) has them as its
        rescore from the start: the mismatch views show them without a model run. Put again when the
        rescores' own cache let them go while the rollout stayed (a model's rescore is kept)."""
        from ..rescore.recorded import has_recorded, recorded_result
        from . import rescores

        if has_recorded(op.rollout) and rescores.get(op.key) is None:
            rescores.put(op.key, recorded_result(op.rollout, self.settings.rescore_flag_delta))
        return op

    def put(self, rollout: Rollout, capture_dir: Path | None = None, tokenizer_override: str = "",
            reload: Callable[[], Rollout] | None = None, link: str = "") -> Opened:
        """Cache a rollout that did not come from a path (a dataset row, a live capture).
        ``reload`` reads it again (e.g. the same dataset row) if the cache evicts it;
        ``link`` is the query string that reopens it."""
        key = hashlib.sha1(f"{rollout.source}|{id(rollout)}|{tokenizer_override}".encode()).hexdigest()[:16]
        path = Path(capture_dir) if capture_dir else Path(rollout.source)
        if reload is not None:
            self._recipe(key, lambda: replace(self._with_tokenizer(key, reload(), path, capture_dir,
                                                                   tokenizer_override), link=link))
        op = self._with_tokenizer(key, rollout, path, capture_dir, tokenizer_override)
        op.link = link
        return self._remember(op)

    def get(self, key: str | None) -> Opened | None:
        """The rollout opened under ``key``; re-opened from its recipe if the cache evicted it;
        None when the key is unknown or its source can no longer be read."""
        if not key:
            return None
        hit = self._cached(key)
        if hit is not None:
            return self._keep_recorded(hit)
        with self._lock:
            make = self._recipes.get(key)
        if make is None:
            return None

        def again() -> Opened:
            self.reloads += 1
            return replace(make(), key=key)

        try:  # sessions that lost the same rollout wait for one re-open
            return self.memo.get_or_make(("rollout", key), again, _weight, _shares)
        except Exception as e:  # the file is gone or unreadable now: the caller says so, the log says why
            _LOG.warning("re-opening %s failed: %s: %s", key, type(e).__name__, e)
            return None
