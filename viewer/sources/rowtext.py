"""JSON and JSONL files of rows, read a row at a time by byte span (the row layer's text files, issue 35).

:class:`TextRows` is the part of :class:`viewer.sources.rowdata.RowDataset` that reads them: a JSONL
file's line offsets, a JSON array's element spans (:mod:`viewer.sources.rowarray`), one row decoded
from its bytes (:mod:`viewer.sources.rowjson`), the file kept open between rows; a JSON file that is
not an array of rows (one object, one conversation, anything msgspec would not decode) parsed whole,
size-capped, as before. A row's errors name its line (or element) and file.
"""
from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable

from viewer.sources.jsonio import WHITESPACE_BYTES as _WS, rows_of_json
from viewer.sources.rowerror import RowReadError
from viewer.sources.rowjson import loads  # json.loads's values and errors, at msgspec's speed
from viewer.sources.rowarray import ARRAY_CHUNK, index_array
from viewer.sources.rowcount import file_rows, one_conversation
from viewer.sources.rowspans import SpanReader, scan_lines

__all__ = ["TextRows", "DataFile"]

_TOO_DEEP = "invalid JSON: nested deeper than the parser accepts"
_UNTRIED = object()  # (_line_value: the format's decode not yet asked)
_GIVE_UP, _RETRY = 8, 64


@dataclass
class DataFile:
    """One data file of a :class:`~viewer.sources.rowdata.RowDataset` and what is known of its rows (here,
    where :class:`TextRows` reads it; ``rowdata`` exports it)."""

    path: str  # path on the filesystem
    name: str  # what messages show (relative to the dataset root)
    kind: str  # parquet | jsonl | json
    size: int | None = None
    num_rows: int | None = None  # None until counted
    row_groups: list[int] | None = None  # parquet: rows per row group
    line_offsets: list[int] = field(default_factory=list)  # jsonl: byte offset of each known line
    complete: bool = False  # jsonl: offsets scanned to the end
    rows: list[Any] | None = None  # json: parsed rows (a file read whole)
    unread: bool = False  # counted as one rollout without being read (a .traj; a folder of conversations)
    spans: tuple[Any, Any] | None = None  # json: (starts, ends) of each row's bytes (an array, read by row)
    columns: list[str] | None = None


class TextRows:
    """Reading a JSON / JSONL :class:`~viewer.sources.rowdata.DataFile` (a mixin of ``RowDataset``, whose
    ``_open``, limits and ``_spans`` it uses)."""

    max_file_bytes: int
    max_cell_bytes: int
    max_scan_bytes: int
    _spans: SpanReader | None
    # A row format's own decode of a row's bytes (RowFormat.decode, set once the format is chosen): the
    # fields its reader uses; None from it, or no decode, and json.loads's rules decide (rowjson.loads).
    decode: Callable[[bytes], Any] | None = None
    # JSONL rows the decode refused in a row: past _GIVE_UP, one row in _RETRY is offered to it, the others
    # go to json's rules at once (what its None gives): a file of rows it does not take (verifiers' tool calls
    # saved as JSON text) paid a failed typed decode a row, 7%.
    _refused: int = 0

    def _json_rows(self, f: DataFile) -> list[Any] | None:
        """A JSON file's rows when it was read whole; None when it is an array read by element (f.spans) or,
        in a dataset of several files, a file counted without being kept (read by :meth:`_object_rows`)."""
        if f.rows is None and f.spans is None and f.num_rows is None:
            several = len(getattr(self, "files", ())) > 1
            # a folder's local files are read again when their row is, so not all held; a remote one (the Hub)
            # would be fetched twice: its rows are kept, as before
            reread = several and self._local
            try:
                if f.size is not None and f.size > self.max_file_bytes:
                    raise RowReadError(f.name, f"file is {f.size / 1048576:.1f} MB, over the "
                                               f"{self.max_file_bytes / 1048576:g} MB limit (VIEWER_MAX_FILE_MB); not read")
                if several and f.kind == "json" and self._conversations:  # a folder of conversations (its first
                    f.num_rows, f.unread = 1, True  # JSON file was one, say OpenHands events): the others are too
                    return None  # (one that is not says so when read); on the Hub, fetched when their row is
                self._conversation_seen = False
                if several and (f.kind == "zip" or f.name.endswith(ONE_ROLLOUT_FILES)):  # one rollout a file:
                    f.num_rows, f.unread = 1, True  # counted unread (4,000 trajectories are shown at once),
                    return None  # read when its row is
                if f.kind == "zip":  # an Inspect AI .eval log: its members, gathered into one row
                    f.rows = self._zip_rows(f)
                    f.num_rows = 1
                    return f.rows
                small = f.size is not None and f.size <= ARRAY_CHUNK
                if small:
                    raw = self._file_bytes(f)  # (read once)
                else:
                    with self._open(f) as fh:  # a big array: its elements' spans (an object: its first bytes)
                        spans = index_array(fh, self._rows_by_element)
                        if spans is not None:
                            f.spans, f.num_rows = spans, len(spans[0])
                            self._first_counted(False)  # (an array of rows)
                            return None
                        fh.seek(0)
                        raw = fh.read()
                if reread and self.objects_are_rows and raw.lstrip(_WS)[:1] == b"{":  # the format counts it
                    f.num_rows, self._raw_last = 1, (f, raw)  # (from these bytes, next: one_row_bytes)
                    return None
                if reread and (n := file_rows(raw, self._rows_by_element)) is not None:  # a folder: not all held
                    f.num_rows = n
                    self._first_counted(n == 1 and self._conversation_seen)
                    return None
                if small and (spans := index_array(io.BytesIO(raw), self._rows_by_element,
                                                   chunk=min(ARRAY_CHUNK, max(1 << 16, len(raw) + 1)))) is not None:
                    f.spans, f.num_rows = spans, len(spans[0])
                    self._first_counted(False)
                    return None
                f.rows = rows_of_json(_whole_value(f.name, raw))
                if several:  # (the Hub: kept when counted)
                    self._first_counted(len(f.rows) == 1 and self._conversation_seen)
            except RowReadError as e:
                if not several:
                    raise
                f.rows = [e]  # one file of a folder that does not parse: one row saying why, the others read
            f.num_rows = len(f.rows)
        return f.rows

    def _first_counted(self, conversation: bool) -> None:
        """The first JSON file counted decides whether the folder's are conversations (``_conversations``)."""
        if self._conversations is None:
            self._conversations = conversation

    def _object_rows(self, f: DataFile) -> list[Any]:
        """The rows of a file of a folder that was counted, not kept (:func:`file_rows`, ``ONE_ROLLOUT_FILES``,
        an ``.eval`` log): read and decoded now, the format's own decode where the file is one row; the last
        file's rows are kept (a file of many rows is read once for them)."""
        last = self._object_last
        if last is not None and last[0] is f:
            return last[1]
        self._object_last = None
        try:
            if f.kind == "zip":
                rows = self._zip_rows(f)
            else:
                raw = self._listed_bytes(f)
                value = self.decode(raw) if self.decode is not None and f.num_rows == 1 else None
                rows = [value] if value and type(value) is dict else rows_of_json(_whole_value(f.name, raw))
        except RowReadError as e:
            rows = [e]
        except OSError as e:
            rows = [RowReadError(f.name, f"cannot read: {e}")]
        if len(rows) != f.num_rows:
            rows = [RowReadError(f.name, f"holds {len(rows) or 'no'} rows, where this folder's files hold one rollout "
                                         f"each (counted unread){': open it by itself' if rows else ''}" if f.unread
                                 else f"holds {len(rows)} rows now, {f.num_rows} when counted (file changed?)")]
        self._object_last = (f, rows)
        return rows

    def _listed_bytes(self, f: DataFile) -> bytes:
        """A file read at most as big as it was listed (a read of the size limit allocated that much); a
        RowReadError for one over the limit or grown since it was listed."""
        raw = self._file_bytes(f, min(f.size if f.size is not None else self.max_file_bytes, self.max_file_bytes) + 1)
        if len(raw) > self.max_file_bytes:
            raise RowReadError(f.name, f"file is over the {self.max_file_bytes / 1048576:g} MB limit "
                                       "(VIEWER_MAX_FILE_MB); not read")
        if f.size is not None and len(raw) > f.size:
            raise RowReadError(f.name, "has grown since it was listed (file changed?): open it again")
        return raw

    def _file_bytes(self, f: DataFile, n: int = -1) -> bytes:
        """The first ``n`` bytes of ``f`` (-1: all), counted. A local file is read by the os: fsspec's open and
        its file object cost ~12 us a file, a third of decoding an OpenHands event file, over a folder of 7,579."""
        if not self._local:
            with self._open(f) as fh:
                return fh.read(n)
        self._say(f"fetching {f.name}")
        if n < 0:
            with open(f.path, "rb") as fh:
                raw = fh.read()
        else:  # (os.read: a third less than open()'s file object; a read stops short only at the end, or past 2 GB:
            # at the listed size, the end is taken as reached; a file grown since gives more than that)
            fd = os.open(f.path, os.O_RDONLY)  # (not inherited by a child: PEP 446)
            try:
                raw = os.read(fd, n)
                while 0 < len(raw) < n and len(raw) != f.size and (more := os.read(fd, n - len(raw))):
                    raw += more
            finally:
                os.close(fd)
        self._counter.add(len(raw))
        return raw

    @cached_property
    def _local(self) -> bool:
        return _is_local(getattr(self, "fs", None))

    def one_row_bytes(self, f: DataFile) -> bytes | None:
        """The bytes of a JSON file of a folder that is one row and was counted without being kept (a log a
        file), for a format that counts its rollouts from them (subrows.RawLines); None for any other file, or
        one that cannot be read as it was listed (the row layer then reads it, and says why)."""
        if f.kind != "json" or f.rows is not None or f.spans is not None or f.num_rows != 1 or f.size is None:
            return None
        last, self._raw_last = self._raw_last, None
        if last is not None and last[0] is f:
            return last[1]
        try:
            raw = self._listed_bytes(f)
        except (RowReadError, OSError):
            return None
        return raw if len(raw) == f.size else None

    def _zip_rows(self, f: DataFile) -> list[Any]:
        with self._open(f) as fh:
            data = fh.read()  # the zip's directory is at its end: read whole (size-capped by the listing)
        from viewer.sources.evalzip import read_inspect_eval

        return [read_inspect_eval(data, f.name, self.max_file_bytes, self.limits)]

    _object_last: tuple[DataFile, list[Any]] | None = None  # (the object file read last, its rows)
    # A folder's JSON file was counted as one conversation (an array of chat messages or OpenHands events): the
    # folder's other JSON files are counted one row each, unread (7,579 event files were each read twice)
    _conversations: bool | None = None
    _conversation_seen: bool = False  # (set by _rows_by_element: the array it was shown is one conversation)
    # Set by a format that counts a stored row's rollouts from its bytes (subrows.ExpandedRows with RawLines): a
    # folder's JSON object file is one stored row, its bytes kept from counting until the format has counted them
    objects_are_rows: bool = False
    _raw_last: tuple[DataFile, bytes] | None = None

    def _scan_lines(self, f: DataFile, upto: int | None) -> None:
        """Extend f.line_offsets until line ``upto`` is known (None: to the end).

        With ``max_scan_bytes`` (a Hub source: ``VIEWER_MAX_FILE_MB``) a file listed as bigger is
        not counted, and no scan reads past that many bytes of it: the line wanted (or the
        row count) is out of reach, and the message says so."""
        if f.complete or (upto is not None and len(f.line_offsets) > upto + 1):
            return
        cap = self.max_scan_bytes
        if cap and upto is None and f.size is not None and f.size > cap:
            raise RowReadError(f.name, f"file is {f.size / 1048576:.1f} MB, over the {cap / 1048576:g} MB limit "
                                       "(VIEWER_MAX_FILE_MB); its rows are not counted")
        if not f.line_offsets:
            f.line_offsets.append(0)
        want = f"line {upto + 1}" if upto is not None else "its end"
        with self._open(f) as fh:
            fh.seek(f.line_offsets[-1])
            pos = scan_lines(fh, f.line_offsets, upto, cap, lambda: RowReadError(
                f.name, f"{want} is past the first {cap / 1048576:g} MB of the file, the limit (VIEWER_MAX_FILE_MB); "
                        "not read"))
        if pos is None:
            return
        # the last offset is the end of the file: a final line without "\n" still counts
        if f.line_offsets[-1] != pos:
            f.line_offsets.append(pos)
        f.complete = True
        f.num_rows = len(f.line_offsets) - 1

    def _span_row(self, f: DataFile, r: int, local: int) -> Any:
        """Row ``r``, line or array element ``local`` of ``f``, read by its byte span."""
        if f.spans is not None:
            a, b = f.spans[0][local], f.spans[1][local]
            return self._element_value(r, local, f.name, self._span_reader(f).read(a, b))
        if len(f.line_offsets) <= local + 1:
            self._scan_lines(f, local)
        a, b = f.line_offsets[local], f.line_offsets[local + 1]
        if b - a > self.max_cell_bytes:
            return RowReadError(f"row {r} (line {local + 1} of {f.name})", f"line is {(b - a) / 1048576:.1f} MB, "
                                f"over the {self.max_cell_bytes / 1048576:g} MB cell limit; not parsed")
        spans = self._spans
        raw = (spans if spans is not None and spans.path == f.path else self._span_reader(f)).read(a, b)
        decode = self.decode
        if decode is not None and a:  # the usual row: the format's decode, without _line_value's call and checks
            # (a verifiers row is read in ~10 us all told: each call between counts)
            refused = self._refused
            if refused >= _GIVE_UP and (refused - _GIVE_UP) % _RETRY:  # rows of another shape: not tried
                self._refused = refused + 1
                return self._line_value(r, local, f.name, raw, False, None)
            try:
                value = decode(raw)
            except (ValueError, RecursionError):  # the row's error: _line_value makes it (decoding again)
                return self._line_value(r, local, f.name, raw, False)
            if value and type(value) is dict:
                self._refused = 0
                return value
            self._refused = refused + 1
            return self._line_value(r, local, f.name, raw, False, value)  # ({} and None: json's rules decide)
        return self._line_value(r, local, f.name, raw, a == 0)

    def _span_reader(self, f: DataFile) -> SpanReader:
        """The file read last, kept open: opening it for every row cost more than parsing the row."""
        if self._spans is None or self._spans.path != f.path:
            old, self._spans = self._spans, SpanReader(f.path, self._open(f))
            if old is not None:
                old.close()
        return self._spans

    def _rows_by_element(self, first: list[bytes]) -> bool:
        """Whether an array whose first elements are ``first`` is a list of rows, not one row (chat messages,
        OpenHands events: :func:`rows_of_json` decides by the first five; from their keys alone where
        :func:`one_conversation` can tell). An element that does not decode: no (the file is then parsed
        whole, which says why)."""
        one = one_conversation(first)
        if one is None:
            try:
                values = [loads(b, "utf-8") for b in first]
            except (ValueError, RecursionError):
                return False
            row = rows_of_json(values)[:1]
            one = bool(row and isinstance(row[0], dict) and any(row[0].get(k) is values for k in ("messages", "history")))
        self._conversation_seen = one
        return not one

    def _element_value(self, r: int, local: int, name: str, raw: bytes) -> Any:
        """One element of a JSON array (its span was checked with the whole file) as its row."""
        try:
            value = (self.decode and self.decode(raw)) or loads(raw, "utf-8")
        except RecursionError:
            return RowReadError(f"row {r} (element {local} of {name})", _TOO_DEEP)
        except ValueError as e:  # not expected: msgspec's skip accepted the file and every byte is UTF-8
            return RowReadError(f"row {r} (element {local} of {name})", f"invalid JSON: {e}")
        if isinstance(value, list):  # jsonio.rows_of_json's rule for an array's elements
            value = {"messages": value}
        # a cell (a string) is never longer than the bytes that spell it
        return self._check_cells(r, value) if len(raw) > self.max_cell_bytes else value

    def _line_value(self, r: int, local: int, name: str, raw: bytes, first: bool, decoded: Any = _UNTRIED) -> Any:
        """One JSONL line as a row dict (a list: its messages), or the RowReadError saying why not. ``decoded``:
        what the format's decode already gave for ``raw``, not asked again."""
        try:
            if decoded is _UNTRIED:
                decoded = self.decode and self.decode(raw)
            value = decoded or loads(raw, "utf-8-sig" if first else "utf-8", blank={})
        except RecursionError:
            return RowReadError(f"row {r} (line {local + 1} of {name})", _TOO_DEEP)
        except ValueError as e:  # JSONDecodeError, UnicodeDecodeError, a number of too many digits
            col = f", column {e.colno}" if isinstance(e, json.JSONDecodeError) else ""
            return RowReadError(f"row {r} (line {local + 1}{col} of {name})", f"invalid JSON: {e}")
        value = {"messages": value} if isinstance(value, list) else value
        if not isinstance(value, dict):
            return RowReadError(f"row {r} (line {local + 1} of {name})",
                                f"expected a JSON object, got {type(value).__name__}")
        return value  # no cell check: lines over the cell limit are refused unread, and a cell is shorter

    def _check_cells(self, r: int, value: Any) -> Any:
        if isinstance(value, dict):
            for k, v in value.items():
                if isinstance(v, str) and len(v) > self.max_cell_bytes:
                    return RowReadError(f"row {r} .{k}", f"cell is {len(v) / 1048576:.1f} MB, over the "
                                                         f"{self.max_cell_bytes / 1048576:g} MB cell limit; not read")
        return value


# Files that hold one trajectory by what writes them (SWE-agent's *.traj, mini-swe-agent's *.traj.json): one row
# each in a folder, counted without being read (a file that does not parse is that row's error when it is read)
ONE_ROLLOUT_FILES = (".traj", ".traj.json")


def _is_local(fs: Any) -> bool:
    from fsspec.implementations.local import LocalFileSystem

    return isinstance(fs, LocalFileSystem)


def _whole_value(name: str, raw: bytes) -> Any:
    """A JSON file parsed whole, as json.loads gives it; a RowReadError in json's words where it refuses it."""
    try:
        return loads(raw, "utf-8-sig")
    except RecursionError:
        raise RowReadError(name, _TOO_DEEP) from None
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError, a number of too many digits
        where = f"line {e.lineno}, column {e.colno}" if isinstance(e, json.JSONDecodeError) else "bytes"
        raise RowReadError(f"{name} {where}", f"invalid JSON: {e}") from None
