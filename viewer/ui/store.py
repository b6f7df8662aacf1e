"""Server-side cache of opened rollouts, keyed by a short string kept in gr.State.

Gradio hashes State values around every event, so the (possibly huge) Rollout lives
here and the browser session only holds its key. No gradio import: plain Python.

The cache is small and shared by every visitor, so one session's rollout can be evicted
by another's. Each key also keeps a tiny *recipe* (how it was opened); :meth:`get` of an
evicted key re-opens it from the recipe under the same key, so a session never silently
loses its rollout.
"""
from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from ..config import Settings
from ..rollout import Rollout
from ..sources import load_source
from ..tokenizer import TokenizerChoice, token_table, tokenizer_for

__all__ = ["Opened", "RolloutStore"]


@dataclass
class Opened:
    key: str
    rollout: Rollout
    path: Path
    choice: TokenizerChoice
    table: object | None  # viewer.tokenizer.TokenTable
    link: str = ""  # query string reopening this rollout when it is not a plain path (a dataset row)


class RolloutStore:
    def __init__(self, settings: Settings):
        self.settings = settings
        self._items: OrderedDict[str, Opened] = OrderedDict()
        self._recipes: OrderedDict[str, Callable[[], Opened]] = OrderedDict()
        self._lock = threading.Lock()
        self.reloads = 0  # evicted rollouts opened again on demand (tests and logs read it)

    _RECIPES = 4096  # closures of a path / a row number: bytes each, never rollouts

    def _recipe(self, key: str, make: Callable[[], Opened]) -> None:
        with self._lock:
            self._recipes[key] = make
            self._recipes.move_to_end(key)
            while len(self._recipes) > self._RECIPES:
                self._recipes.popitem(last=False)

    def _remember(self, item: Opened) -> Opened:
        with self._lock:
            self._items[item.key] = item
            self._items.move_to_end(item.key)
            while len(self._items) > max(1, self.settings.cache_rollouts):
                self._items.popitem(last=False)
        return item

    def open(self, path: Path, tokenizer_override: str = "") -> Opened:
        """Read a source (folder or file) and pick its tokenizer. Raises SourceError if unreadable."""
        path = Path(path)
        stamp = ""
        try:
            st = path.stat()
            stamp = f"{st.st_mtime_ns}:{st.st_size}"
            if path.is_dir():
                stamp += "".join(f"{p.name}{p.stat().st_mtime_ns}" for p in sorted(path.iterdir()))
        except OSError:
            pass
        key = hashlib.sha1(f"{path.resolve()}|{stamp}|{tokenizer_override}".encode()).hexdigest()[:16]
        with self._lock:
            hit = self._items.get(key)
        if hit is not None:
            return hit
        rollout = load_source(path, self.settings)
        capture_dir = path if path.is_dir() else path.parent
        self._recipe(key, lambda: self.open(path, tokenizer_override))
        return self._remember(self._with_tokenizer(key, rollout, path, capture_dir, tokenizer_override))

    def _with_tokenizer(self, key: str, rollout: Rollout, path: Path, capture_dir: Path | None,
                        override: str) -> Opened:
        choice = tokenizer_for(rollout, self.settings, override, capture_dir=capture_dir)
        table = token_table(choice.tokenizer, choice.name) if choice.tokenizer is not None else None
        return Opened(key, rollout, path, choice, table)

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
        with self._lock:
            hit = self._items.get(key)
            make = self._recipes.get(key) if hit is None else None
        if hit is not None or make is None:
            return hit
        try:
            op = make()
        except Exception:  # the file is gone or unreadable now: the caller says so
            return None
        self.reloads += 1
        return self._remember(replace(op, key=key))
