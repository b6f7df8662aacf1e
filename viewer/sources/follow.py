"""A capture folder, trace or turns file that is still being written, read as it grows.

:class:`Follower` keeps one :class:`~viewer.sources.tail.Tail` per record file and turns each new
proxy record into its :class:`~viewer.rollout.Turn` once (:func:`viewer.sources.proxyrecord.turn_from_record`,
the capture reader's parser); :meth:`Follower.poll` reads only the bytes added since the last poll and
says whether anything changed; :meth:`Follower.rollout` assembles the rollout read so far the way
:func:`viewer.sources.capture.read_capture` does (calls classified, the turns file merged, masks derived,
side files read), on copies of the kept turns, so the next poll's rules see pristine records again.
A folder's record file may change under it (a live capture's ``proxy_trace.jsonl`` until the capture
writes ``trace.json``): the new file is read from the start, with a note, and once the capture is
complete the rollout is what opening the finished folder gives.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from viewer.config import Settings
from viewer.rollout import Problem, Rollout, Turn
from viewer.sources.capture import CaptureFiles, check_turn, complete, find_capture_files, is_turns_record
from viewer.sources.proxyrecord import Ctx, SharedHistory, turn_from_record
from viewer.sources.recordtypes import decode_trace_record
from viewer.sources.tail import Tail
from viewer.sources.turnsfile import merge_turns_file
from viewer.turns import classify_calls

__all__ = ["Follower", "Tail", "followable"]


def followable(path: Path, settings: Settings | None = None) -> str:
    """"" when ``path`` can be followed (a capture folder, a trace or turns file), else why not. A data file of
    rows (a dataset) is refused by name: its rows are not followed (yet), only records of one rollout."""
    from viewer.sources import SourceError, open_dataset

    path = Path(path)
    if not path.exists():
        return f"{path.name}: no such file or folder"
    try:
        src = open_dataset(path, settings or Settings())
    except (SourceError, OSError, ValueError) as e:
        return str(e)
    if not src.is_capture:
        fmt = getattr(src.format, "name", "rows")
        return (f"{path.name}: a dataset of rows ({fmt}); following reads a capture folder, a trace or a turns "
                "file as it grows")
    return ""

class Follower:
    """One growing source. Not thread-safe: :mod:`viewer.live` serialises the polls of a shared one."""

    def __init__(self, path: Path, settings: Settings | None = None):
        self.path = Path(path)
        self.settings = settings or Settings()
        self.folder = self.path.is_dir()
        self.version = 0  # bumped by every poll that read something new (or restarted a file)
        self.notes: list[str] = []
        self._trace: Tail | None = None
        self._turns_tail: Tail | None = None
        self._turns: list[Turn] = []  # one pristine Turn per trace record (copied for each rollout)
        self._entries: list[Any] = []  # the turns file's entries, merged into each rollout
        self._ctx = Ctx()
        self._history = SharedHistory()
        self._limits = self.settings.limits()
        self._gone: list[int] = []  # bytes read by tails no longer followed (bytes_read stays a total)
        self._single_turns = False  # a single file found to hold turns entries, not proxy records
        self._sides: tuple = ()  # (name, size, mtime) of a folder's side files at the last poll

    # ------------------------------------------------------------------ reading
    @property
    def bytes_read(self) -> int:
        """Every byte this follower has read from disk, restarts included."""
        return sum(self._gone) + sum(t.bytes_read for t in (self._trace, self._turns_tail) if t is not None)

    @property
    def waiting(self) -> bool:
        """A record file ends inside a record (its writer is not done with it)."""
        return any(t.waiting for t in (self._trace, self._turns_tail) if t is not None)

    def _files(self) -> CaptureFiles:
        if self.folder:
            return find_capture_files(self.path)
        if self._single_turns:
            return CaptureFiles(self.path.parent, turns=self.path)
        return CaptureFiles(self.path.parent, trace=self.path)

    def _tail(self, old: Tail | None, path: Path | None, typed) -> Tail | None:
        if old is not None and path is not None and old.path == path:
            return old
        if old is not None:
            self._gone.append(old.bytes_read)
            self.notes.extend(old.notes)
            now = f"{path.name} is read now" if path is not None else "it is gone"
            self.notes.append(f"{old.label} is no longer the record file ({now}): read from the start")
        if path is None:
            return None
        return Tail(path, typed=typed, max_bytes=int(self.settings.max_file_mb * 2**20))

    def poll(self) -> bool:
        """Read what the record files gained since the last poll; True when the rollout changed."""
        files = self._files()
        trace = self._tail(self._trace, files.trace, decode_trace_record)
        turns = self._tail(self._turns_tail, files.turns, None)
        changed = trace is not self._trace or turns is not self._turns_tail
        if trace is not self._trace:
            self._restart_trace()
        if turns is not self._turns_tail:
            self._entries = []
        self._trace, self._turns_tail = trace, turns
        if trace is not None:
            recs, restarted = trace.read()
            if restarted:
                self._restart_trace()
                changed = True
            if recs and not self.folder and not self._turns and is_turns_record(recs[0]):
                # a single file of turns entries is a turns file, not a trace (as read_capture decides)
                self._turns_tail, self._trace, self._single_turns = trace, None, True
                self._entries.extend(recs)
                recs = []
                changed = True
            for rec in recs:
                t = turn_from_record(rec, len(self._turns), trace, self._ctx)
                if t is not None:
                    self._history.share(t)
                    check_turn(self._limits, t, len(self._turns), f"{trace.label}: {trace.where(len(self._turns))}")
                    self._turns.append(t)
            changed = changed or bool(recs)
        if self._turns_tail is not None and self._turns_tail is not self._trace:
            recs, restarted = self._turns_tail.read()
            if restarted:
                self._entries = []
            self._entries.extend(recs)
            changed = changed or bool(recs) or restarted
        # a folder's side files come late (a capture writes summary.json and the tests' outcome when it ends):
        # a new or changed one is a new version, so the task, the reward and the checks that read them fill in
        sides = self._side_stamps(files)
        if sides != self._sides:
            self._sides = sides
            changed = True
        if changed:
            self.version += 1
        return changed

    def _side_stamps(self, files: CaptureFiles) -> tuple:
        if not self.folder:
            return ()
        out = []
        for p in (files.task, files.visible_tests, files.held_out_tests, files.summary):
            try:
                st = p.stat() if p is not None else None
            except OSError:  # removed between the listing and the stat: absent
                st = None
            out.append((p.name, st.st_size, st.st_mtime_ns) if st is not None else None)
        return tuple(out)

    def _restart_trace(self) -> None:
        self._turns, self._ctx, self._history = [], Ctx(), SharedHistory()

    # ------------------------------------------------------------------ the rollout so far
    def rollout(self) -> Rollout:
        """The rollout as read so far (a new value each call: the follower keeps its own records)."""
        fmt = "capture" if self.folder else ("turns" if self._trace is None and self._turns_tail is not None else "trace")
        ro = Rollout(source=str(self.path), format=fmt)
        ctx = Ctx(list(self._ctx.problems))
        turns = [copy.copy(t) for t in self._turns]
        has_trace = self._trace is not None and self._trace.count > 0
        classify_calls(turns)
        tt = self._turns_tail
        if tt is not None and self._entries:
            turns = merge_turns_file(turns, self._entries, tt, ctx, has_trace=has_trace)
            for k, t in enumerate(turns):
                check_turn(self._limits, t, k, f"{tt.label}: turn {k}")
        files = self._files()  # (a single record file has no side files: only its own path is set)
        complete(ro, turns, files, ctx, self.settings.max_file_mb)  # side files read when a version is assembled
        for tail in (self._trace, self._turns_tail):
            if tail is not None:
                ctx.problems.extend(tail.problems)
        notes = self.notes + [n for t in (self._trace, self._turns_tail) if t is not None for n in t.notes]
        ctx.problems.extend(Problem(self.path.name, "", n, "warning") for n in notes)
        ro.problems = ctx.problems
        used = (self._trace, self._turns_tail)
        names = [t.path.name for t in used if t is not None]
        if self.folder:
            names += [p.name for p in (files.task, files.visible_tests, files.held_out_tests, files.summary)
                      if p is not None]
        ro.origin = ro.origin.replace(files=tuple(dict.fromkeys(names)))
        return ro
