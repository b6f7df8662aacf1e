"""Loaded tokenizers: one object per set of identical files, kept by a byte-bounded cache.

A tokenizer folder is known by what is in it (:func:`folder_digest`: the sha256 of its tokenizer
files' names and bytes), not by where it is: uploads that ship the same ``tokenizer.json`` + config
share one loaded tokenizer (and so one token table), and a typed override that resolves to the same
files reuses it (same inputs, same key). Issue 36, finding 2: each upload loaded its own (~17 MB with
its table), outside ``cache_mb``.

Who keeps a loaded tokenizer: the cache of whoever loads it (:func:`kept_by`): the app's store keeps
it in its byte-bounded cache (viewer/memo.py), weighed by :func:`tokenizer_nbytes`, with the rollouts
shown with it; without one (the CLI, a scan), the last few loaded stay. Identical files loaded again
while the first object is still held anywhere get that object (a weak table by digest): memory is
never spent twice on the same files, and nothing here keeps a tokenizer its holders let go.
"""
from __future__ import annotations

import contextvars
import hashlib
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .bundled import LOADING
from .files import MAX_TOKENIZER_FILE_MB, TOKENIZER_FILES

__all__ = ["folder_digest", "folder_loaded", "forget_under", "kept_by", "load_tokenizer", "tokenizer_nbytes"]

_RECENT = 4  # without a keeper: the last few tokenizers loaded stay (the CLI opens one or two)
_MAX_ENTRIES = 256  # a folder with more entries than this is known by its path, not its content
_RUST_PER_JSON_BYTE = 8  # a loaded fast tokenizer holds ~7-8x its tokenizer.json (Qwen3: 80 MB for 11 MB)

_LIVE: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # digest -> the tokenizer loaded from it
_LIVE_LOCK = threading.Lock()
_KEEPER: contextvars.ContextVar[Callable[[str, Callable[[], Any]], Any] | None] = contextvars.ContextVar(
    "tokenizer_keeper", default=None)
_SIZES: dict[int, tuple[Any, int]] = {}  # id(tokenizer) -> (weak ref, bytes of its tokenizer files)


def _hash_file(h, p: Path, limit: int) -> None:
    with open(p, "rb") as fh:
        left = limit
        while left > 0 and (chunk := fh.read(min(1 << 20, left))):
            h.update(chunk)
            left -= len(chunk)


def folder_digest(path: str | Path) -> str:
    """What a tokenizer folder holds, as one sha256: each tokenizer file's name, size and bytes; any other
    plain file's name and size, and its bytes when it is small (a model folder's weights are stat'ed, not
    read); links that are not tokenizer files are ignored. A folder that cannot be listed, or has more than
    ``_MAX_ENTRIES`` entries, is known by its resolved path and stamp instead (not shared)."""
    d = Path(path)
    h = hashlib.sha256()
    limit = MAX_TOKENIZER_FILE_MB << 20
    try:
        with os.scandir(d) as it:
            entries = sorted((e for _, e in zip(range(_MAX_ENTRIES + 1), it)), key=lambda e: e.name)
        if len(entries) > _MAX_ENTRIES:
            raise OSError("too many entries")
        for e in entries:
            known = e.name in TOKENIZER_FILES
            if not e.is_file(follow_symlinks=known):
                continue
            size = e.stat(follow_symlinks=known).st_size
            h.update(f"{e.name}\0{size}\0".encode())
            if known or size <= limit:
                _hash_file(h, Path(e.path), limit)
    except OSError:
        st = d.stat() if d.exists() else None
        return "path:" + hashlib.sha256(f"{d.resolve()}|{st and st.st_mtime_ns}".encode()).hexdigest()
    return h.hexdigest()


@contextmanager
def kept_by(keep: Callable[[str, Callable[[], Any]], Any]) -> Iterator[None]:
    """Within this block, a tokenizer loaded from a folder is kept by ``keep(digest, load)`` (it returns
    the tokenizer: the one it keeps under ``digest``, or ``load()``'s)."""
    token = _KEEPER.set(keep)
    try:
        yield
    finally:
        _KEEPER.reset(token)


def load_tokenizer(path: str):
    """The tokenizer of a local folder (``tokenizer.json`` + optional config; never online), shared with
    every folder holding the same files."""
    digest = folder_digest(path)
    keep = _KEEPER.get()
    if keep is not None:
        return keep(digest, lambda: _shared(digest, path))
    return _recent(digest, path)


_RECENT_HELD: OrderedDict[str, tuple[str, Any]] = OrderedDict()  # digest -> (folder, tokenizer), last used last
_RECENT_LOCK = threading.Lock()


def _recent(digest: str, path: str):
    with _RECENT_LOCK:
        hit = _RECENT_HELD.get(digest)
        if hit is not None:
            _RECENT_HELD.move_to_end(digest)
            return hit[1]
    tok = _shared(digest, path)
    with _RECENT_LOCK:
        _RECENT_HELD[digest] = (str(Path(path).resolve()), tok)
        while len(_RECENT_HELD) > _RECENT:
            _RECENT_HELD.popitem(last=False)
    return tok


def forget_under(folders: list[Path]) -> int:
    """Let go of the recently loaded tokenizers that were loaded from inside ``folders`` (a closed session's
    uploads, deleted: a certify or scan there loaded the upload's own tokenizer without a keeper, and ≈ 20 MB
    each stayed until four newer loads pushed them out: the room attack's residue, issue 36). How many."""
    roots = [Path(f).resolve() for f in folders]
    with _RECENT_LOCK:
        gone = [d for d, (folder, _) in _RECENT_HELD.items()
                if any(Path(folder) == r or Path(folder).is_relative_to(r) for r in roots)]
        for d in gone:
            del _RECENT_HELD[d]
    return len(gone)


def _shared(digest: str, path: str):
    with _LIVE_LOCK:
        tok = _LIVE.get(digest)
    if tok is not None:
        return tok
    with LOADING:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    _note_size(tok, path)
    with _LIVE_LOCK:
        try:
            return _LIVE.setdefault(digest, tok)  # two loads of the same files at once: the first one wins
        except TypeError:  # not weak-referenceable: not shared
            return tok


def _note_size(tok, folder: str) -> None:
    n = 0
    for name in ("tokenizer.json", "vocab.json", "merges.txt"):
        try:
            n += os.path.getsize(os.path.join(folder, name))
        except OSError:
            pass
    try:
        _SIZES[id(tok)] = (weakref.ref(tok, lambda _, k=id(tok): _SIZES.pop(k, None)), n)
    except TypeError:
        pass


def folder_loaded(tok) -> bool:
    """True for a tokenizer :func:`load_tokenizer` loaded (from a folder: kept only by its keeper); False for
    the bundled ones and Hub names, which the process keeps anyway."""
    hit = _SIZES.get(id(tok))
    return hit is not None and hit[0]() is tok


def tokenizer_nbytes(tok) -> int:
    """About the memory a loaded tokenizer holds: its Python parts (:func:`viewer.memo.approx_nbytes`) or
    its Rust backend, taken as ~8x its vocabulary files (invisible to ``sys.getsizeof``), whichever is more."""
    from ..memo import approx_nbytes

    files = _SIZES[id(tok)][1] if folder_loaded(tok) else 0
    return max(approx_nbytes(tok), _RUST_PER_JSON_BYTE * files)
