"""Lint one rollout, or every rollout of a source (a capture, a folder of captures, a dataset: read
one at a time by the drift scan's reader, :func:`viewer.drift.corpus.iter_rollouts`, with progress
and cancel), and count the hits per rule.
"""
from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from viewer.config import Settings
from viewer.layout import TOKENIZER_DIR, is_capture_dir
from viewer.rollout import Rollout

from .checks import ids_out_of_vocab, rollout_checks
from .integrity import integrity_checks
from .records import record_checks
from .rules import RULES, Hit, select_rules

__all__ = ["lint_rollout", "lint_source", "VocabCache", "MAX_LISTED_HITS", "has_errors"]

# hits listed in a source's result (every hit is counted in ``rules``; the list is for reading)
MAX_LISTED_HITS = 5000


# a capture's own tokenizer/ compared byte for byte with those resolved before: at most this many files / bytes
_SAME_FILES, _SAME_BYTES = 16, 64 << 20


class VocabCache:
    """Vocabulary size per (model, capture folder): one tokenizer load per model over a scan.

    Without an override or a derived view's tokenizer, a capture folder's tokenizer is chosen from its own
    ``tokenizer/`` files alone, or from the model name when it has none. So a folder whose ``tokenizer/``
    holds the same plain files, byte for byte, as one resolved before (a folder of copies of one capture)
    gets that one's answer, and so does a folder without one for a model seen before: comparing the files
    costs a tenth of the content hash resolving a folder does (1.5 MB of SmolLM2 files: 0.14 ms, 1.0 ms)."""

    def __init__(self, settings: Settings):
        self.settings, self._got = settings, {}  # type: dict[tuple[str | None, str | None], int | None]
        self._same: list[tuple[str | None, tuple[tuple[str, bytes], ...], int | None]] = []
        self._kept = 0

    def __call__(self, ro: Rollout, folder: Path | None) -> int | None:
        from viewer.tokenizer import tokenizer_for

        key = (ro.model, str(folder) if folder else None)
        if key in self._got:
            return self._got[key]
        files = self._own_files(ro, folder)
        n = -1 if files is None else next((n for model, have, n in self._same if model == ro.model and have == files), -1)
        if n == -1:
            tok = tokenizer_for(ro, self.settings, capture_dir=folder).tokenizer
            n = len(tok) if tok is not None else None
            size = sum(len(b) for _, b in files or ())
            if files is not None and self._kept + size <= _SAME_BYTES:
                self._same.append((ro.model, files, n))
                self._kept += size
        self._got[key] = n
        return n

    def _own_files(self, ro: Rollout, folder: Path | None) -> tuple[tuple[str, bytes], ...] | None:
        """The capture's ``tokenizer/`` as (name, bytes) of each file, when the tokenizer is chosen from those
        alone: no override or derived view's tokenizer, a real folder (not a link) of plain files only, with
        ``tokenizer.json``; () when it has no tokenizer of its own (``tokenizer/tokenizer.json``: the model's is
        chosen). None otherwise (resolved the usual way)."""
        from viewer.tokenizer import derived_with

        if folder is None or derived_with(ro) or (getattr(self.settings, "tokenizer", "") or "").strip():
            return None
        d = folder / TOKENIZER_DIR
        try:
            if not (d / "tokenizer.json").is_file():  # (what makes it the capture's tokenizer folder)
                return ()
            if d.is_symlink():
                return None
            with os.scandir(d) as it:
                entries = sorted((e for _, e in zip(range(_SAME_FILES + 1), it)), key=lambda e: e.name)
            if len(entries) > _SAME_FILES or "tokenizer.json" not in {e.name for e in entries}:
                return None
            if not all(e.is_file(follow_symlinks=False) for e in entries):
                return None
            if sum(e.stat(follow_symlinks=False).st_size for e in entries) > _SAME_BYTES:
                return None
            return tuple((e.name, Path(e.path).read_bytes()) for e in entries)
        except OSError:
            return None


def _capture_folder(ro: Rollout) -> Path | None:
    src = str(ro.source or "")
    if not src or src.startswith("hf://"):
        fetched = ro.origin.fetched_to
        return Path(fetched) if fetched and is_capture_dir(Path(fetched)) else None
    p = Path(src)
    return p if is_capture_dir(p) else None


def lint_rollout(ro: Rollout, settings: Settings | None = None, *, select: tuple[str, ...] | None = None,
                 vocab: VocabCache | None = None) -> list[Hit]:
    """Every selected rule's hits on ``ro`` (and its capture folder, when it was read from one),
    in rule order, then turn order."""
    settings = settings or Settings()
    chosen = set(select or select_rules(None))
    folder = _capture_folder(ro)
    hits: list[Hit] = []
    raw: set[int] = set()
    if folder is not None:
        got, raw = record_checks(ro, folder, settings)
        hits.extend(got)
    nan_at = {(h.turn, h.position) for h in hits if h.rule == "RI011"}
    # the reader shows a NaN as a gap: that gap is the NaN's (RI011), not a missing logprob (RI005)
    hits.extend(h for h in rollout_checks(ro, raw) if not (h.rule == "RI005" and (h.turn, h.position) in nan_at))
    hits.extend(integrity_checks(ro))
    if "RI012" in chosen:
        n = (vocab or VocabCache(settings))(ro, folder)
        if n:
            hits.extend(ids_out_of_vocab(ro, n))
    row = ro.origin.row
    order = {r.id: k for k, r in enumerate(RULES)}
    out = [h if row is None else replace(h, row=row) for h in hits if h.rule in chosen]
    return sorted(out, key=lambda h: (order[h.rule], -1 if h.turn is None else h.turn))


def has_errors(hits: list[dict[str, Any]] | list[Hit]) -> bool:
    return any((h.level if isinstance(h, Hit) else h["level"]) == "error" for h in hits)


def lint_source(source: str | Path, settings: Settings | None = None, *, select: tuple[str, ...] | None = None,
                limit: int | None = None, progress: Callable[[int, int | None], None] | None = None,
                cancel: Callable[[], bool] | None = None) -> dict[str, Any]:
    """Lint every rollout of ``source``: the hits (up to MAX_LISTED_HITS, each with its app link),
    hits and rollouts per rule, totals, and the rollouts that could not be read."""
    from viewer.drift.corpus import iter_rollouts

    settings = settings or Settings()
    chosen = select or select_rules(None)
    rollouts = iter_rollouts(source, settings, limit)
    total = rollouts.total()
    spec = str(source)
    per_rule = {r.id: {"name": r.name, "level": r.level, "hits": 0, "rollouts": 0} for r in RULES if r.id in chosen}
    listed: list[dict[str, Any]] = []
    n = n_hits = 0
    failing = 0
    vocab = VocabCache(settings)
    for ro in rollouts:
        if cancel is not None and cancel():
            break
        hits = lint_rollout(ro, settings, select=chosen, vocab=vocab)
        n += 1
        n_hits += len(hits)
        failing += has_errors(hits)
        for rid in {h.rule for h in hits}:
            per_rule[rid]["rollouts"] += 1
        link_to = spec if ro.origin.row is not None else ro.source
        for h in hits:
            per_rule[h.rule]["hits"] += 1
            if len(listed) < MAX_LISTED_HITS:
                listed.append({"rollout": ro.source, **h.to_dict(link_to)})
        if progress is not None:
            progress(n, total)
    levels = {lv: sum(v["hits"] for v in per_rule.values() if v["level"] == lv) for lv in ("error", "warning", "info")}
    return {"source": spec, "selected": list(chosen), "rules": per_rule, "hits": listed,
            "totals": {"rollouts": n, "unreadable": len(rollouts.errors), "hits": n_hits,
                       "listed": len(listed), "rollouts_with_errors": failing, **levels},
            "errors": list(rollouts.errors), "cancelled": bool(cancel is not None and cancel())}
