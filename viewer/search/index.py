"""Build a dataset's search index with the drift scan, and find it again.

The scan (:func:`viewer.drift.corpus.scan_source`: rollouts read one at a time, chunks on forked workers,
progress and cancel) reads every rollout once; as each is read (``on_rollout``) its rows are taken
(:mod:`viewer.search.columns`) and linted (:func:`viewer.lint.run.lint_rollout`); the scan's per-turn records
then add the drift causes. Only rollouts whose files changed are scanned again: each spec the scan finds (a
capture folder, a data file) is stamped with its files' paths, sizes and modification times, and the rows of an
unchanged one are copied from the previous index. Stored as Parquet (``rollouts.*.parquet``,
``turns.*.parquet``) named by ``meta.json``, which is replaced last: a reader sees the old index or the new one.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from viewer.config import CACHE_DIR, SAMPLE_DIR, Settings
from viewer.rollout import Rollout

from .columns import ROLLOUTS, TURNS, rollout_key, rollout_row, turn_rows
from .rescored import fill_index as fill_rescored

__all__ = ["IndexInfo", "SearchError", "build_index", "index_path", "load_index", "INDEX_DIR", "VERSION"]

INDEX_DIR = ".rollout-inspector"  # beside a local dataset: <folder>/.rollout-inspector/index/
VERSION = 3  # the tables' layout: an index of another version is rebuilt whole
_BATCH = 2000  # rows a Parquet write takes at once (memory stays bounded by it, not the dataset)


class SearchError(Exception):
    """The index cannot be built or read (a message for the user)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class IndexInfo:
    """An index on disk: where, how big, and what the last build did."""

    source: str
    path: Path
    rollouts: int
    turns: int
    rebuilt: int = 0
    reused: int = 0
    errors: list[dict[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    cancelled: bool = False
    files: dict[str, str] = field(default_factory=dict)  # table name → its Parquet file (absolute path)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "path": str(self.path)}


def _writable(folder: Path) -> bool:
    return folder.is_dir() and os.access(folder, os.W_OK | os.X_OK)


def index_path(source: str | Path, settings: Settings | None = None) -> Path:
    """Where the index of ``source`` lives: beside a local, writable dataset (``<folder>/.rollout-inspector/
    index/``, a data file's under its name), else (``hf://``, a read-only place, the bundled samples, public
    mode) in the user cache under a digest of the source."""
    settings = settings or Settings.from_env()
    text = str(source)
    p = Path(text).expanduser().resolve()
    if not text.startswith("hf://") and not settings.public_mode() and not p.is_relative_to(SAMPLE_DIR.resolve()):
        if p.is_dir() and _writable(p):
            return p / INDEX_DIR / "index"
        if p.is_file() and _writable(p.parent):
            return p.parent / INDEX_DIR / "index" / p.name
    key = text if text.startswith("hf://") else str(Path(text).expanduser().resolve())
    return CACHE_DIR / "index" / hashlib.sha256(key.encode()).hexdigest()[:24]


def _stamp(spec: str) -> str:
    """What says a spec's rollouts changed: its files' paths, sizes and modification times (a Hub spec: its
    name, so it is built once; ``rebuild`` builds it again)."""
    if spec.startswith("hf://"):
        return "hub:" + spec
    p = Path(spec)
    parts: list[str] = []
    if p.is_file():
        st = p.stat()
        parts.append(f"{p.name}\x00{st.st_size}\x00{st.st_mtime_ns}")
    else:
        for root, dirs, files in os.walk(p):
            dirs[:] = sorted(d for d in dirs if d != INDEX_DIR)
            for f in sorted(files):
                try:
                    st = os.stat(os.path.join(root, f))
                except OSError:
                    continue
                parts.append(f"{os.path.relpath(os.path.join(root, f), p)}\x00{st.st_size}\x00{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def _meta(folder: Path) -> dict[str, Any] | None:
    try:
        meta = json.loads((folder / "meta.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("version") != VERSION:
        return None
    files = meta.get("files") or {}
    if not all((folder / str(files.get(k, ""))).is_file() for k in ("rollouts", "turns")):
        return None
    return meta


def load_index(source: str | Path, settings: Settings | None = None, index_dir: Path | None = None) -> IndexInfo | None:
    """The index of ``source`` as last built, or None when there is none (or one of another layout)."""
    folder = Path(index_dir) if index_dir is not None else index_path(source, settings)
    meta = _meta(folder)
    if meta is None:
        return None
    return IndexInfo(source=str(meta.get("source", source)), path=folder, rollouts=int(meta["rollouts"]),
                     turns=int(meta["turns"]), rebuilt=int(meta.get("rebuilt", 0)), reused=int(meta.get("reused", 0)),
                     errors=list(meta.get("errors", [])), seconds=float(meta.get("seconds", 0.0)),
                     files={k: str(folder / v) for k, v in meta["files"].items()})


class _Collect:
    """Takes each rollout's rows as the scan reads it (``on_rollout``), in reading order."""

    def __init__(self, specs: list[str], stamps: dict[str, str], settings: Settings, lint: bool = True):
        from viewer.lint.run import VocabCache

        self.specs, self.stamps, self.settings, self.lint = set(specs), stamps, settings, lint
        # (its row, its turns' rows) per rollout: the Rollout itself is let go as soon as its rows are taken
        self.rollouts: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
        self.seen: dict[str, int] = {}
        self.errors: list[dict[str, str]] = []
        self.vocab = VocabCache(settings)
        self._tokenizers = None

    def _spec_of(self, r: Rollout) -> str:
        if r.source in self.specs:
            return r.source
        hits = [s for s in self.specs if r.source.startswith(s)]
        return max(hits, key=len) if hits else r.source

    def _table(self, r: Rollout):
        """The tokenizer's table, for output tokens whose text the source did not record (loaded once a model,
        the same way, and so the same object, as the scan's)."""
        if all(t.output_bytes is not None for t in r.agent_turns):
            return None
        from viewer.drift.corpus import TokenizerCache
        from viewer.tokenizer import token_table

        self._tokenizers = self._tokenizers or TokenizerCache(self.settings)
        tok = self._tokenizers(r).tokenizer
        return token_table(tok) if tok is not None else None

    def __call__(self, r: Rollout) -> None:
        from viewer.lint.run import lint_rollout

        spec = self._spec_of(r)
        n = self.seen.get(spec, 0)
        self.seen[spec] = n + 1
        rid = rollout_key(spec, r.origin.row, n)
        turns = turn_rows(rid, r, self._table(r))
        row = rollout_row(rid, spec, self.stamps.get(spec, ""), r, turns)
        try:
            hits = lint_rollout(r, self.settings, vocab=self.vocab) if self.lint else []
        except Exception as e:  # a lint bug on one rollout must not stop the index: said in its errors
            hits = []
            self.errors.append({"source": r.source, "error": f"lint failed ({type(e).__name__}: {e})"})
        by_turn = {x["turn"]: x for x in turns}
        rules: list[str] = []
        for h in hits:
            if h.rule not in rules:
                rules.append(h.rule)
            # a hit about the whole rollout (or a call the index does not hold) is placed on its first turn
            t = by_turn.get(h.turn) if h.turn is not None else None
            t = t if t is not None else (turns[0] if turns else None)
            if t is not None and h.rule not in t["lint"]:
                t["lint"].append(h.rule)
        row["lint"] = sorted(rules)
        self.rollouts.append((row, turns))

    def add_scan(self, recs: list[dict[str, Any]]) -> None:
        """The scan's per-turn records, in the order the rollouts were read: one per agent turn each."""
        at = 0
        for row, turns in self.rollouts:
            mine = recs[at:at + len(turns)]
            at += len(turns)
            causes: set[str] = set()
            for t, rec in zip(turns, mine):
                got = {c.get("cause") for c in (rec.get("retokenize") or {}, rec.get("template") or {},
                                                 rec.get("prefix") or {}) if c.get("cause") and not c.get("artefact")}
                lost = (rec.get("row") or {}).get("lost_cause")
                if lost:
                    got.add(lost)
                t["causes"] = sorted(got)
                t["drifted"] = bool(rec.get("drifted"))
                causes |= got
                row["drifted"] += int(t["drifted"])
                row["lost"] += int((rec.get("row") or {}).get("tokens_losing_gradient") or 0)
                row["tokenizer"] = row["tokenizer"] or rec.get("tokenizer")
            row["causes"] = sorted(causes)


def _write(path: Path, schema: pa.Schema, rows: list[dict[str, Any]], old: pa.Table | None) -> int:
    """``rows`` (then the copied ``old`` rows) into one Parquet file, in batches; returns the rows written."""
    n = 0
    with pq.ParquetWriter(path, schema, compression="zstd") as w:
        for i in range(0, len(rows), _BATCH):
            part = pa.Table.from_pylist(rows[i:i + _BATCH], schema=schema)
            w.write_table(part, row_group_size=_BATCH)
            n += part.num_rows
        if old is not None and old.num_rows:
            w.write_table(old.select(schema.names).cast(schema), row_group_size=_BATCH)
            n += old.num_rows
    return n


def _old_rows(folder: Path, meta: dict[str, Any] | None, keep: list[str]) -> tuple[pa.Table | None, pa.Table | None]:
    if meta is None or not keep:
        return None, None
    ro = pq.read_table(folder / meta["files"]["rollouts"], filters=[("spec", "in", keep)])
    tu = pq.read_table(folder / meta["files"]["turns"], filters=[("rid", "in", ro.column("rid").to_pylist())]) \
        if ro.num_rows else None
    return ro, tu


def build_index(source: str | Path, settings: Settings | None = None, *,
                progress: Callable[[int, int | None], None] | None = None, cancel: threading.Event | None = None,
                workers: int | None = None, index_dir: Path | None = None, rebuild: bool = False,
                lint: bool = True) -> IndexInfo:
    """Index ``source`` (what ``python -m viewer drift`` takes): scan the specs that changed since the last
    build (all with ``rebuild``), copy the rest, write the tables. ``progress(done, total)`` per scan chunk;
    ``cancel`` set: the build stops, nothing is written (``cancelled``). ``lint``: each rollout linted
    (:func:`viewer.lint.run.lint_rollout`: its raw-record rules read a capture's files a second time); off,
    ``lint:`` finds nothing. Raises :class:`SearchError` when the
    source is missing or holds no capture, or the index folder cannot be written."""
    from viewer.drift.corpus import ScanInputError, discover

    settings = settings or Settings.from_env()
    t0 = time.perf_counter()
    folder = Path(index_dir) if index_dir is not None else index_path(source, settings)
    try:
        specs = discover(source, settings)
    except ScanInputError as e:
        raise SearchError(e.message) from None
    made = folder  # the outermost folder this build makes: removed again when nothing was readable
    while not made.parent.exists() and made.parent != made:
        made = made.parent
    fresh = not folder.exists()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SearchError(f"{folder}: cannot write the index here ({e.strerror or e})") from None
    with _locked(folder):  # one build at a time: a second one waits, then finds the first's work done
        info = _build(source, settings, folder, specs, progress, cancel, workers, rebuild, lint, t0)
        if info.rollouts or not info.errors or info.cancelled:
            return info
        if fresh:  # an index of nothing, in a folder of files no format reads: not left in the visitor's folder
            shutil.rmtree(folder, ignore_errors=True)
            for up in folder.parents:  # the folders made for it, while empty (another build may use one now)
                if not up.is_relative_to(made) or not _removed(up):
                    break
    from viewer.drift.results import said

    raise SearchError(said(info.errors[0]))  # as drift and lint say it, not "0 hits"


def _removed(folder: Path) -> bool:
    try:
        folder.rmdir()
    except OSError:  # not empty, or gone
        return False
    return True


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    import fcntl

    with open(folder / ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _build(source, settings: Settings, folder: Path, specs: list[str], progress, cancel, workers, rebuild: bool,
           lint: bool, t0: float) -> IndexInfo:
    from viewer.drift.corpus import ScanInputError, scan_source

    stamps = {s: _stamp(s) for s in specs}
    meta = None if rebuild else _meta(folder)
    old_stamps: dict[str, str] = (meta or {}).get("stamps", {})
    changed = [s for s in specs if old_stamps.get(s) != stamps[s]]
    keep = [s for s in specs if s not in set(changed)]
    collect = _Collect(changed, stamps, settings, lint)
    errors: list[dict[str, str]] = []
    if changed:
        try:
            res = scan_source(source, settings, specs=changed, on_rollout=collect, progress=progress,
                              cancel=cancel, workers=workers)
            errors = list(res["errors"])
            collect.add_scan(res["turns"])
        except ScanInputError as e:  # nothing readable among the changed specs
            errors = [{"source": str(source), "error": e.message}]
    errors += collect.errors
    if cancel is not None and cancel.is_set():
        return IndexInfo(source=str(source), path=folder, rollouts=0, turns=0, errors=errors,
                         seconds=time.perf_counter() - t0, cancelled=True)
    old_ro, old_tu = _old_rows(folder, meta, keep)
    # a dataset rescore saved beside the index (viewer/search/rescored.py): its |Δ| and ratio figures
    old_ro, old_tu = fill_rescored(index_path(source, settings), collect.rollouts, old_ro, old_tu, errors)
    tag = uuid.uuid4().hex[:12]
    files = {"rollouts": f"rollouts.{tag}.parquet", "turns": f"turns.{tag}.parquet"}
    n_ro = _write(folder / files["rollouts"], ROLLOUTS, [row for row, _ in collect.rollouts], old_ro)
    n_tu = _write(folder / files["turns"], TURNS, [t for _, ts in collect.rollouts for t in ts], old_tu)
    collect.rollouts.clear()
    seconds = time.perf_counter() - t0
    new_meta = {"version": VERSION, "source": str(source), "files": files, "rollouts": n_ro, "turns": n_tu,
                "rebuilt": len(changed), "reused": len(keep), "errors": errors, "seconds": seconds,
                "stamps": {s: stamps[s] for s in specs}, "built": time.time()}
    tmp = folder / f"meta.{tag}.json"
    tmp.write_text(json.dumps(new_meta))
    os.replace(tmp, folder / "meta.json")
    for p in folder.glob("*.parquet"):  # the previous build's files (a reader that had them open keeps them)
        if p.name not in files.values():
            p.unlink(missing_ok=True)
    return IndexInfo(source=str(source), path=folder, rollouts=n_ro, turns=n_tu, rebuilt=len(changed),
                     reused=len(keep), errors=errors, seconds=seconds,
                     files={k: str(folder / v) for k, v in files.items()})
