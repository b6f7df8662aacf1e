"""Drift over a corpus of rollouts: find them, read them one at a time, pick each one's tokenizer,
scan in chunks (:func:`viewer.drift.scan`) and merge the results, so memory stays bounded by the
chunk, not the dataset. Shared by ``python -m viewer drift`` and the app's scan panel."""
from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from viewer.config import Settings
from viewer.drift.results import ScanError, ScanResult, TokenizerUsed, no_readable_rollout
from viewer.layout import is_capture_dir  # the reader's own list: what `summary` opens, drift scans
from viewer.rollout import Rollout

__all__ = ["ScanInputError", "discover", "iter_rollouts", "scan_source", "is_data_file", "is_dataset_spec", "merge_counts",
           "TokenizerCache"]


class ScanInputError(Exception):
    """The source as a whole cannot be scanned (``not_found`` → exit 2, else 1)."""

    def __init__(self, message: str, not_found: bool = False):
        super().__init__(message)
        self.message = message
        self.not_found = not_found


def is_data_file(spec: str) -> bool:
    """A parquet / JSONL file: many rows, one rollout each (a .json file is read as a capture)."""
    return Path(spec).suffix.lower() in (".parquet", ".jsonl", ".ndjson") and Path(spec).is_file()


def is_dataset_spec(spec: str) -> bool:
    """A spec read row by row (:func:`viewer.sources.open_dataset`): ``hf://``, a data file, or a folder of
    data files that holds no capture folder (SWE-agent's ``*.traj``, Inspect logs: :func:`discover`)."""
    if spec.startswith("hf://") or is_data_file(spec):
        return True
    p = Path(spec)
    return p.is_dir() and not is_capture_dir(p)


def discover(source: str | Path, settings: Settings | None = None) -> list[str]:
    """The rollout specs a SOURCE stands for, in a stable order.

    ``hf://...`` → itself; a file or a capture folder → itself; any other folder → every
    capture folder below it (a capture folder's own subfolders are not searched), except folders
    no visitor may read (:func:`viewer.sources.upload.visible_walk`: uploads; a public app's capture root).
    """
    from viewer.sources.upload import visible_walk

    text = str(source)
    if text.startswith("hf://"):
        return [text]
    p = Path(text).expanduser()
    if not p.exists():
        raise ScanInputError(f"{p}: no such file or folder", not_found=True)
    if p.is_file() or is_capture_dir(p):
        return [str(p)]
    found: list[str] = []
    for root, dirs, _files in visible_walk(p, settings):
        dirs.sort()
        here = Path(root)
        if is_capture_dir(here):
            found.append(str(here))
            dirs.clear()  # a capture folder is a leaf
    if not found and _holds_data_files(p, settings):  # a dataset that is a folder (the Datasets tab opens it)
        return [str(p)]
    if not found:
        raise ScanInputError(f"{p}: no capture folders (with a trace or turns file) and no data files "
                             "(.jsonl, .json, .parquet, .traj, .eval) found under it")
    return found


def _holds_data_files(p: Path, settings: Settings | None) -> bool:
    from viewer.sources.filekinds import data_kind
    from viewer.sources.runfolder import folder_files

    return any(data_kind(f) and not f.rpartition("/")[2].startswith(".") for f in folder_files(p, settings))


def _dataset_rollouts(spec: str, settings: Settings, limit: int | None,
                      errors: list[dict[str, str]]) -> Iterator[Rollout]:
    """Rollouts of a dataset spec (``hf://...`` or a parquet / JSONL / JSON data file), row by row.

    Uses :func:`viewer.sources.open_dataset` (rows read one at a time, the Hub streamed);
    a capture-layout source is one rollout. A bad row is recorded in ``errors`` and skipped.
    Without ``open_dataset`` (older readers) it falls back to one ``load_source``.
    """
    from viewer import sources

    opener = getattr(sources, "open_dataset", None)
    if not callable(opener):
        yield sources.load_source(spec, settings)
        return
    src = opener(spec, settings)
    if src.is_capture:
        yield src.rollout()
        return
    visible = src.visible_rows()
    rows: Iterator[int] = iter(visible) if visible is not None else itertools.count()
    n = 0
    for row in rows:
        if limit is not None and n >= limit:
            return
        try:
            r = src.rollout(row)
        except sources.SourceNotFound:
            return  # past the last row
        except sources.SourceError as e:
            errors.append(ScanError(source=f"{spec} row {row}", error=e.message))
            n += 1
            continue
        n += 1
        yield r


class _Rollouts:
    """Lazy, sized iterable of rollouts: read one at a time, unreadable ones recorded in ``errors``."""

    def __init__(self, specs: list[str], settings: Settings, limit: int | None):
        self.specs, self.settings, self.limit = specs, settings, limit
        self.errors: list[dict[str, str]] = []
        self.first: Rollout | None = None
        self._peeked: list[Rollout] = []
        self._gen = self._read()

    def total(self) -> int | None:
        """How many rollouts the scan will read: None when unknown (a dataset read row by row
        without --limit; before, that was reported as 1 and progress read "5/1")."""
        if len(self.specs) == 1 and is_dataset_spec(self.specs[0]):
            return self.limit
        return min(len(self.specs), self.limit) if self.limit else len(self.specs)

    def _noted(self, r: Rollout) -> Rollout:
        """A rollout with no turn to check is said in ``errors`` with its reader's reason (a run that
        failed, a sample with no reply), never passed over in silence as a scan of nothing."""
        if not r.agent_turns:
            why = next((p.message for p in r.problems if p.severity == "error"), None) or next(
                (p.message for p in r.problems), "no model call in this rollout")
            self.errors.append(ScanError(source=r.source, error=f"no turn to check: {why}"))
        return r

    def _read(self) -> Iterator[Rollout]:
        from viewer.sources import SourceError

        n = 0
        for spec in self.specs:
            if self.limit is not None and n >= self.limit:
                return
            try:
                if is_dataset_spec(spec):
                    for r in _dataset_rollouts(spec, self.settings, self.limit, self.errors):
                        yield self._noted(r)
                        n += 1
                        if self.limit is not None and n >= self.limit:
                            return
                    continue
                from viewer.sources import load_source

                r = load_source(spec, self.settings)
            except SourceError as e:
                self.errors.append(ScanError(source=spec, error=e.message))
                continue
            except Exception as e:  # a reader bug on one rollout must not stop the scan
                self.errors.append(ScanError(source=spec, error=f"{type(e).__name__}: {e}"))
                continue
            n += 1
            yield self._noted(r)

    def peek(self) -> Rollout | None:
        """The first readable rollout (read once, then replayed by iteration)."""
        if not self._peeked:
            self._peeked = list(itertools.islice(self._gen, 1))
        return self._peeked[0] if self._peeked else None

    def __iter__(self) -> Iterator[Rollout]:
        peeked, self._peeked = self._peeked, []
        return itertools.chain(peeked, self._gen)


def iter_rollouts(source: str | Path, settings: Settings | None = None, limit: int | None = None) -> _Rollouts:
    """A lazy sized iterable over the rollouts of SOURCE (see :func:`discover`); ``.errors``
    lists the ones that could not be read (they are skipped, not fatal)."""
    return _Rollouts(discover(source, settings), settings or Settings(), limit)


def merge_counts(into: dict[str, Any], part: dict[str, Any]) -> None:
    """Add one scan result's totals into another (ints summed, dicts merged by key)."""
    for k, v in part.items():
        if k == "cancelled":
            into[k] = into.get(k, False) or v
        elif isinstance(v, dict):
            d = into.setdefault(k, {})
            for kk, vv in v.items():
                d[kk] = d.get(kk, 0) + vv
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            into[k] = into.get(k, 0) + v


class TokenizerCache:
    """One tokenizer per (model, capture tokenizer folder, derived view's tokenizer), resolved once per scan."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self._cache: dict[tuple[str | None, str | None, str | None], Any] = {}

    def __call__(self, r: Rollout):
        from viewer.layout import TOKENIZER_DIR
        from viewer.tokenizer import capture_dir_of, derived_with, tokenizer_for

        cap = capture_dir_of(r)
        own = cap / TOKENIZER_DIR if cap is not None and (cap / TOKENIZER_DIR / "tokenizer.json").is_file() else None
        key = (r.model, str(own) if own else None, derived_with(r))
        if key not in self._cache:
            self._cache[key] = tokenizer_for(r, self.settings, capture_dir=cap)
        return self._cache[key]


def scan_source(source: str | Path | Rollout | list[Rollout], settings: Settings | None = None, *,
                tokenizer: str | None = None, tok: Any = None, tok_name: str | None = None,
                limit: int | None = None,
                progress: Callable[[int, int | None], None] | None = None,
                cancel: threading.Event | None = None, plain: bool = True,
                chunk_rollouts: int = 32, on_rollout: Callable[[Rollout], None] | None = None,
                trainer: str | None = None, train_turns: str | None = None,
                fork_threshold: int | None = None, sweep: tuple[float, ...] | None = None,
                whatifs: bool = False, workers: int | None = None,
                specs: list[str] | None = None) -> ScanResult:
    """Scan SOURCE (a path / spec, or rollouts already in memory) with :func:`viewer.drift.scan`.

    Tokenizer: ``tok`` when given; else the ``tokenizer`` override (it must load, or
    :class:`ScanInputError`); else resolved **per rollout** from its model and capture
    folder (a folder of captures may mix models), consecutive rollouts sharing one being
    scanned together in batches of ``chunk_rollouts``. The result adds ``source``,
    ``tokenizer`` (a name, or the names joined when several were used), ``tokenizers``,
    ``errors`` (unreadable rollouts) and ``totals.unreadable``; each turn record carries
    ``tokenizer``. Raises :class:`ScanInputError` when SOURCE is missing or holds no
    readable rollout. ``on_rollout`` sees every rollout as it is read (the UI keeps a few).
    ``trainer`` / ``train_turns`` / ``fork_threshold`` name the trainer semantics
    (:mod:`viewer.drift.trainer`; None = what each rollout supports); the result's
    ``trainer`` block says which ran, with TRL's tally summed over rollouts. ``sweep`` /
    ``whatifs``: the ``gradient`` block's fork-threshold sweep and what-ifs (:mod:`viewer.drift.costs`).
    ``workers``: processes for the chunks (None: ``settings.scan_workers``, 0 = one per core).
    ``specs``: scan these rollout specs (some of what :func:`discover` found under SOURCE: the search index
    re-scans only the changed ones, :mod:`viewer.search.index`) instead of all of them.
    """
    from viewer import drift
    from viewer.drift.results import empty_totals, new_trainer_block
    from viewer.drift.costs import merge_gradient, new_gradient_block
    from viewer.drift.scan import merge_trainer
    from viewer.drift.trainer import check_args
    from viewer.tokenizer import TokenizerChoice, resolve_tokenizer

    settings = settings or Settings()
    from viewer.drift.pool import default_workers

    n_workers = settings.scan_workers if workers is None else workers
    n_workers = n_workers if n_workers > 0 else default_workers()
    thr = fork_threshold
    try:  # a wrong trainer name is a usage error before anything is read
        check_args(trainer, train_turns, thr)
    except drift.TrainerSpecError as e:
        raise ScanInputError(str(e), not_found=True) from e
    if isinstance(source, Rollout):
        source = [source]
    if isinstance(source, list):
        rollouts: Any = source[:limit] if limit else source
        first = rollouts[0] if rollouts else None
        errors: list[dict[str, str]] = []
        label = ", ".join(r.source for r in rollouts[:3]) + (" …" if len(rollouts) > 3 else "")
    else:
        rollouts = iter_rollouts(source, settings, limit) if specs is None else _Rollouts(list(specs), settings, limit)
        first = rollouts.peek()
        errors = rollouts.errors
        label = str(source)
    if first is None:
        raise ScanInputError(no_readable_rollout(label, errors))
    if tok is not None:
        fixed: TokenizerChoice | None = TokenizerChoice(
            tok_name or getattr(tok, "name_or_path", None) or type(tok).__name__, tok, "local-dir", "")
    elif tokenizer:
        fixed = resolve_tokenizer(None, tokenizer)
        if fixed.tokenizer is None:
            raise ScanInputError(f"tokenizer {tokenizer!r} could not be loaded: {fixed.message}")
    else:
        fixed = None
    pick = (lambda r: fixed) if fixed is not None else TokenizerCache(settings)
    total = rollouts.total() if hasattr(rollouts, "total") else len(rollouts)
    out: dict[str, Any] = {"turns": [], "totals": {}, "trainer": new_trainer_block(thr),
                           "gradient": new_gradient_block()}
    names: dict[str | None, str] = {}
    done = 0

    def tagged() -> Iterator[tuple[Any, Rollout]]:
        for r in rollouts:
            if cancel is not None and cancel.is_set():
                return
            if on_rollout is not None:
                on_rollout(r)
            yield pick(r), r

    # Consecutive rollouts sharing a tokenizer are one scan, fed lazily (chunks of ``chunk_rollouts``
    # inside it; its worker processes stay up for the whole run of them).
    for _key, group in itertools.groupby(tagged(), key=lambda cr: id(cr[0].tokenizer)):
        choice, first = next(group)
        base = done

        def prog(d: int, _t: int | None, base: int = base) -> None:
            if progress is not None:
                progress(base + d, total)

        res = drift.scan(itertools.chain([first], (r for _, r in group)), choice.tokenizer, progress=prog,
                         cancel=cancel, plain=plain, chunk_rollouts=chunk_rollouts, trainer=trainer,
                         train_turns=train_turns, fork_threshold=thr, sweep=sweep, whatifs=whatifs,
                         workers=n_workers)
        for rec in res["turns"]:
            rec["tokenizer"] = choice.name
        out["turns"].extend(res["turns"])
        cancelled = res["totals"].pop("cancelled", False)
        merge_counts(out["totals"], res["totals"])
        merge_trainer(out["trainer"], res["trainer"])
        merge_gradient(out["gradient"], res["gradient"])
        names.setdefault(choice.name, choice.message)
        done += res["totals"]["rollouts"]
        if cancelled:
            break
    if cancel is not None and cancel.is_set():
        out["totals"]["cancelled"] = True
    t = out["totals"]
    for k, v in empty_totals().items():
        t.setdefault(k, v)
    t["unreadable"] = len(errors)
    used = [n for n in names]
    out["source"] = label
    out["tokenizer"] = used[0] if len(used) == 1 else (" + ".join(str(n) for n in used) if used else None)
    out["tokenizers"] = [TokenizerUsed(name=n, note=m) for n, m in names.items()]
    out["errors"] = list(errors)
    return out
