"""Capture folders (the seed dataset's layout) and single trace / turns files -> Rollout.

Reads: ``trace.json`` (JSON array or JSONL of proxy records: the OpenEnv interception
proxy's, our recording proxy's superset, newer TRL entries, the OpenEnv capture
contract), ``turns.json`` (per-turn ids + mask), ``task.json``, ``visible_tests.txt``,
``held_out_tests.json``, ``summary.json`` (docs/FORMATS.md §2). Any of them may be missing
except that the trace or the turns file must exist. An OpenEnv ``RolloutResult``
(``proxy_turns``) is read as a trace without request/response.

Boundaries: this module parses and validates; which calls are agent turns and how a
missing mask is derived lives in :mod:`viewer.turns`. It never re-tokenises (prompt ids
are left empty with ``prompt_source="none"`` when not recorded). Bad data never raises:
it becomes a located :class:`Problem`; only a source with nothing readable raises
:class:`~viewer.sources.SourceError` (via :func:`read_capture`).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from viewer.config import Settings
from viewer.rollout import Problem, Rollout, Turn
from viewer.sources.jsonio import gc_paused
from viewer.sources.jsonstream import RecordStream, open_records
from viewer.layout import TRACE_NAMES, TURNS_NAMES
from viewer.sources.proxyrecord import Ctx, SharedHistory, turn_from_record
from viewer.sources.sidefiles import (model_of, read_held_out, read_rollout_result, read_summary, read_task,
                                      read_visible_tests)
from viewer.sources.turnsfile import merge_turns_file
from viewer.turns import classify_calls, derive_training
from viewer.layout import HELD_OUT_TESTS, SUMMARY, TASK, VISIBLE_TESTS

__all__ = ["TRACE_NAMES", "TURNS_NAMES", "CaptureFiles", "find_capture_files", "trace_file", "read_capture", "complete",
           "is_turns_record", "CaptureUnreadable"]

_TURNS_KEYS = ("output_ids", "prompt_ids", "mask")
_TRACE_KEYS = ("request", "response", "completion_tokens", "completion_token_ids", "logprobs",
               "per_token_logps", "prompt_token_ids", "loss_mask")


class CaptureUnreadable(Exception):
    """Nothing in the source could be parsed (raised as SourceError by the dispatcher)."""


@dataclass
class CaptureFiles:
    """Which files of a capture exist (None = absent)."""

    root: Path
    trace: Path | None = None
    turns: Path | None = None
    task: Path | None = None
    visible_tests: Path | None = None
    held_out_tests: Path | None = None
    summary: Path | None = None


def _first(folder: Path, names: tuple[str, ...]) -> Path | None:
    return next((folder / n for n in names if (folder / n).is_file()), None)


def trace_file(folder: Path) -> Path | None:
    """The trace :func:`find_capture_files` names, without looking for the other files (lint's raw checks)."""
    return _first(folder, TRACE_NAMES)


def find_capture_files(folder: Path) -> CaptureFiles:
    """Locate the capture files in ``folder`` (no parsing)."""
    def one(name: str) -> Path | None:
        return folder / name if (folder / name).is_file() else None

    return CaptureFiles(folder, trace_file(folder), _first(folder, TURNS_NAMES), one(TASK),
                        one(VISIBLE_TESTS), one(HELD_OUT_TESTS), one(SUMMARY))


def is_turns_record(rec: Any) -> bool:
    """A turns.json entry (``output_ids``) rather than a proxy trace record."""
    return isinstance(rec, dict) and "output_ids" in rec and not any(k in rec for k in ("request", "response"))


def read_capture(path: Path, settings: Settings | None = None) -> Rollout:
    """Read a capture folder, or a single trace / turns / RolloutResult file.

    The trace and turns files are streamed: each record becomes a Turn of packed columns
    as soon as it is parsed and is then dropped, so memory stays well under the file size.
    Raises :class:`CaptureUnreadable` when neither a trace nor a turns file could be parsed.
    """
    settings = settings or Settings()
    path = Path(path)
    if path.is_dir():
        files = find_capture_files(path)
        if files.trace is None and files.turns is None:
            raise CaptureUnreadable(f"{path}: no trace.json or turns.json in this folder")
        fmt = "capture"
    else:
        files = CaptureFiles(path.parent, trace=path)
        fmt = "trace"
    with gc_paused():  # millions of acyclic containers: collections would cost time and free nothing
        return _read(path, files, fmt, settings)


def _read(path: Path, files: CaptureFiles, fmt: str, settings: Settings) -> Rollout:
    ctx = Ctx()
    max_mb = settings.max_file_mb
    lim = settings.limits()  # records stop the stream; turns and tokens are checked as each turn is made
    ro = Rollout(source=str(path), format=fmt)
    trace_rs = open_records(files.trace, files.trace.name, max_mb, lim, trace=True) if files.trace else None
    turns_rs = open_records(files.turns, files.turns.name, max_mb, lim) if files.turns else None
    # A single file holding turns entries is a turns file, not a trace.
    if fmt == "trace" and trace_rs is not None and is_turns_record(trace_rs.first()):
        turns_rs, trace_rs, fmt = trace_rs, None, "turns"
        ro.format = fmt
    for rs in (trace_rs, turns_rs):
        if rs is not None and not rs.parsed:
            ctx.problems.extend(rs.problems)
    if not any(rs is not None and rs.parsed for rs in (trace_rs, turns_rs)):
        raise CaptureUnreadable(_join(ctx.problems) or f"{path}: unreadable")

    turns: list[Turn] = []
    has_trace = False
    if trace_rs is not None and trace_rs.parsed:
        if trace_rs.wrapper and trace_rs.wrapper.get("_list_key") == "proxy_turns":
            ro.format = "openenv-rollout-result" if fmt == "trace" else fmt
            read_rollout_result(trace_rs.wrapper, ro)
        records = _recognised(trace_rs, _TRACE_KEYS, "proxy trace records", ctx)
        history = SharedHistory()  # each request repeats the conversation so far: keep its messages once
        for i, rec in enumerate(records):
            t = turn_from_record(rec, i, trace_rs, ctx)
            if t is not None:
                history.share(t)
                check_turn(lim, t, len(turns), f"{trace_rs.label}: {trace_rs.where(i)}")
                turns.append(t)
        ctx.problems.extend(trace_rs.problems)
        has_trace = trace_rs.parsed
        if has_trace and not records.count and not trace_rs.problems:
            ctx.add(trace_rs.label, "", "trace has no records", "warning")
        classify_calls(turns)
    if turns_rs is not None and turns_rs.parsed:
        records = _recognised(turns_rs, _TURNS_KEYS, "turns entries", ctx)
        turns = merge_turns_file(turns, records, turns_rs, ctx, has_trace=has_trace)
        for k, t in enumerate(turns):
            check_turn(lim, t, k, f"{turns_rs.label}: turn {k}")
        ctx.problems.extend(turns_rs.problems)
        if turns_rs.parsed and not records.count and not turns_rs.problems:
            ctx.add(turns_rs.label, "", "turns file has no entries", "warning")
    if not has_trace and not (turns_rs is not None and turns_rs.parsed):
        raise CaptureUnreadable(_join(ctx.problems))
    complete(ro, turns, files, ctx, max_mb)
    ro.problems = ctx.problems
    read = (files.trace, files.turns, files.task, files.visible_tests, files.held_out_tests, files.summary)
    ro.origin = ro.origin.replace(files=tuple(p.name for p in read if p is not None))
    return ro


def complete(ro: Rollout, turns: list, files: CaptureFiles, ctx: Ctx, max_mb: float) -> None:
    """What every read of a capture ends with (here, and each version a follower assembles:
    :mod:`viewer.sources.follow`): training derived, turns numbered, the model named, and the small side
    files (task, tests, summary) read into ``ro``."""
    derive_training(turns)
    for i, t in enumerate(turns):
        t.index = i
    ro.turns, ro.model = turns, model_of(turns)
    for side, read in ((files.task, read_task), (files.visible_tests, read_visible_tests),
                       (files.held_out_tests, read_held_out), (files.summary, read_summary)):
        if side is not None:
            read(side, ro, ctx, max_mb)


class _recognised:
    """The records of a stream, once one of the first 50 has one of ``keys``; none otherwise.

    Those first records are held back until one matches, so a file of another format is
    reported ("format not recognised", the stream marked unparsed) without reading it all.
    """

    def __init__(self, rs: RecordStream, keys: tuple[str, ...], what: str, ctx: Ctx):
        self.rs, self.keys, self.what, self.ctx = rs, keys, what, ctx
        self.count = 0

    def _has(self, rec: Any) -> bool:
        return isinstance(rec, dict) and any(k in rec for k in self.keys)

    def __iter__(self) -> Iterator[Any]:
        it = iter(self.rs)
        held: list[Any] = []
        for rec in it:
            self.count += 1
            held.append(rec)
            if self._has(rec):
                break
            if len(held) >= 50:
                it.close()
                return self._reject()
        else:
            if held:  # the stream ended before any record matched
                return self._reject()
        yield from held
        del held
        for rec in it:
            self.count += 1
            yield rec

    def _reject(self) -> None:
        self.ctx.add(self.rs.label, "", f"not {self.what}: no record has any of {', '.join(self.keys)}; "
                                        "format not recognised")
        self.rs.parsed = False


def check_turn(lim, t: Turn, k: int, where: str) -> None:
    """The ``turns`` and ``turn_tokens`` budgets for turn ``k`` (raises BudgetExceeded)."""
    lim.check("turns", k + 1, where)
    lim.check("turn_tokens", len(t.prompt_ids) + len(t.output_ids), where)


def _join(problems: list[Problem]) -> str:
    return "; ".join(str(p).split(": ", 1)[1] for p in problems)
