"""Tolerant JSON / JSONL reading that says exactly where a file is broken.

Readers call :func:`read_records` for record files (a JSON array, JSONL, or an object
wrapping a list) and :func:`read_document` for single documents (task.json, ...). Both
check the file size *before* opening the file, never raise on bad content, and return
what could be salvaged plus :class:`~viewer.rollout.Problem` values that name the file,
line and column. Interpreting the records is the caller's business.

Record numbers in messages are 0-based (``record 3`` is ``trace[3]``); line and column
numbers are 1-based, as editors show them.
"""
from __future__ import annotations

import gc
import json
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from viewer.budgets import BudgetExceeded, Limits
from viewer.rollout import Problem

__all__ = ["RecordFile", "Document", "read_records", "read_document", "size_problem", "line_col",
           "WRAPPER_KEYS", "gc_paused", "jsonl_record", "SKIP", "nesting_exceeded",
           "number_error", "rows_of_json", "WHITESPACE", "WHITESPACE_BYTES"]

# Objects that wrap the record list, tried in this order (first list wins).
WRAPPER_KEYS = ("trace", "records", "turns", "proxy_turns", "entries", "data")

_decoder = json.JSONDecoder()
# The whitespace JSON allows between tokens (RFC 8259 §2): the one definition every reader here uses
WHITESPACE = " \t\r\n"
WHITESPACE_BYTES = WHITESPACE.encode()


def nesting_exceeded(label: str, where: str, limits: Limits | None) -> BudgetExceeded:
    """The error for a JSON value nested deeper than the parser's recursion allows (json's C
    parser stops there with RecursionError): the ``nesting`` budget, with the file and place."""
    import sys

    # The limit is the parser's (Python's recursion limit), not the YAML ``nesting`` budget: a
    # depth check of every parsed record would cost a walk of the whole trace.
    public = bool(limits is not None and limits.public)
    return BudgetExceeded("nesting", sys.getrecursionlimit(), None,
                          f"{label}: {where}: a JSON value nested deeper than the parser accepts", public)


def number_error(e: ValueError) -> str:
    """What to say when json gave up on a value without a position: a number of more digits than
    Python converts (``sys.get_int_max_str_digits``, 4,300), which could otherwise cost seconds each."""
    text = str(e)
    detail = text.split(":", 1)[1].split(";")[0].strip() if ":" in text else ""
    return "a number with too many digits" + (f" ({detail})" if detail else "")


@contextmanager
def gc_paused():
    """Pause the cyclic GC while parsing: JSON builds millions of acyclic containers and
    repeated full collections over them cost ~30% of the parse time on big traces."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def line_col(text: str, pos: int) -> tuple[int, int]:
    """1-based (line, column) of character offset ``pos`` in ``text``."""
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return line, col


@dataclass
class RecordFile:
    """Records read from one file. ``lines[i]`` is record i's first line (None if unknown).

    ``container`` is how the records were stored: "array", "jsonl", "object" (a wrapper
    object, ``wrapper`` holds it minus the list) or "single" (one record object).
    ``parsed`` is False when nothing at all could be read (missing, too big, not JSON).
    """

    label: str
    records: list[Any] = field(default_factory=list)
    container: str = "array"
    problems: list[Problem] = field(default_factory=list)
    parsed: bool = True
    wrapper: dict[str, Any] | None = None
    _lines: list[int | None] | None = None
    _text: str | None = None

    def line_of(self, index: int) -> int | None:
        """The record's first line; computed lazily (only error paths need it)."""
        if self._lines is None:
            self._lines = _array_lines(self._text) if self._text is not None else []
            self._text = None  # the text was kept only for this; let it go
        return self._lines[index] if 0 <= index < len(self._lines) else None

    def where(self, index: int, path: str = "") -> str:
        """``record 3 (line 4) .logprobs``: the place a Problem names."""
        line = self.line_of(index)
        loc = f"record {index}" + (f" (line {line})" if line else "")
        return f"{loc} {path}".rstrip() if path else loc


@dataclass
class Document:
    """One JSON document; ``value`` is None when it could not be read."""

    label: str
    value: Any = None
    problems: list[Problem] = field(default_factory=list)


def size_problem(path: Path, label: str, max_mb: float | None) -> Problem | None:
    """A Problem if ``path`` is larger than ``max_mb`` (checked with stat, nothing read)."""
    if max_mb is None:
        return None
    try:
        size = path.stat().st_size
    except OSError as e:
        return Problem(label, "", f"cannot stat file: {e.strerror or e}")
    if size > max_mb * 1024 * 1024:
        return Problem(label, "", f"file is {size / 1048576:.1f} MB, over the {max_mb:g} MB limit "
                                  "(max_file_mb / VIEWER_MAX_FILE_MB); not read")
    return None


def _read_text(path: Path, label: str, max_mb: float | None, problems: list[Problem]) -> str | None:
    p = size_problem(path, label, max_mb)
    if p is not None:
        problems.append(p)
        return None
    try:
        raw = path.read_bytes()
    except OSError as e:
        problems.append(Problem(label, "", f"cannot read file: {e.strerror or e}"))
        return None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        problems.append(Problem(label, f"byte {e.start}", "not valid UTF-8; undecodable bytes replaced"))
        return raw.decode("utf-8-sig", errors="replace")


def read_document(path: Path, label: str | None = None, max_mb: float | None = None) -> Document:
    """Parse one JSON document, reporting line/column of a syntax error (and a document nested
    past the parser's depth as the ``nesting`` budget)."""
    label = label or path.name
    doc = Document(label)
    text = _read_text(path, label, max_mb, doc.problems)
    if text is None:
        return doc
    try:
        with gc_paused():
            doc.value = json.loads(text)
    except json.JSONDecodeError as e:
        doc.problems.append(Problem(label, f"line {e.lineno}, column {e.colno}", f"invalid JSON: {e.msg}"))
    except ValueError as e:
        doc.problems.append(Problem(label, "", f"invalid JSON: {number_error(e)}"))
    except RecursionError:
        doc.problems.append(Problem(label, "", str(nesting_exceeded(label, "document", None)).split(": ", 1)[1]))
    return doc


def read_records(path: Path, label: str | None = None, max_mb: float | None = None,
                 limits: Limits | None = None) -> RecordFile:
    """Read a record file: JSON array, JSONL, a wrapper object, or one record.

    Fast path: one ``json.loads`` of the whole text. On failure: JSONL is parsed line by
    line (a bad line is reported and skipped); a broken array is salvaged element by
    element with ``raw_decode`` up to the first error, whose line/column is reported.
    """
    label = label or path.name
    rf = RecordFile(label)
    text = _read_text(path, label, max_mb, rf.problems)
    if text is None:
        rf.parsed = False
        return rf
    start = len(text) - len(text.lstrip(WHITESPACE))
    if start == len(text):
        rf.problems.append(Problem(label, "", "file is empty", "warning"))
        rf._lines = []
        return rf
    try:
        with gc_paused():
            value = json.loads(text)
    except RecursionError:
        raise nesting_exceeded(label, "the document", limits) from None
    except ValueError as bad:  # json.JSONDecodeError, or a number over Python's 4,300 digits
        err = bad if isinstance(bad, json.JSONDecodeError) else json.JSONDecodeError(number_error(bad), text, start)
        if text[start] == "[":
            _salvage_array(text, start, rf, err)
        elif _first_line_is_object(text, start):
            _read_jsonl(text, rf, limits)
        else:
            rf.problems.append(Problem(label, f"line {err.lineno}, column {err.colno}",
                                       f"invalid JSON: {err.msg}"))
            rf.parsed = False
        return rf
    _accept_value(value, text, rf)
    if limits is not None:
        limits.check("records", len(rf.records), f"{label}: the records")
    return rf


def _accept_value(value: Any, text: str, rf: RecordFile) -> None:
    if isinstance(value, list):
        rf.records, rf.container, rf._text = value, "array", text
        return
    if isinstance(value, dict):
        for key in WRAPPER_KEYS:
            if isinstance(value.get(key), list):
                rf.records, rf.container = value[key], "object"
                rf.wrapper = {k: v for k, v in value.items() if k != key}
                rf.wrapper["_list_key"] = key
                rf._lines = []
                return
        rf.records, rf.container, rf._lines = [value], "single", [1]
        return
    rf.problems.append(Problem(rf.label, "line 1", f"expected a JSON array or object, got {type(value).__name__}"))
    rf.parsed = False


def _first_line_is_object(text: str, start: int) -> bool:
    end = text.find("\n", start)
    first = text[start:] if end < 0 else text[start:end]
    try:
        return isinstance(json.loads(first), dict)
    except (ValueError, RecursionError):  # not JSON, a number of too many digits, nested too deep
        return False


SKIP = object()  # what jsonl_record returns for a blank or broken line


def jsonl_record(line: str, n: int, label: str, problems: list[Problem], limits: Limits | None = None) -> Any:
    """The record on JSONL line ``n``; :data:`SKIP` for a blank line or a broken one (which is
    reported, located, in ``problems``). The whole-file and the streaming reader share it."""
    if not line.strip():
        return SKIP
    try:
        return json.loads(line)
    except RecursionError:
        raise nesting_exceeded(label, f"line {n}", limits) from None
    except json.JSONDecodeError as e:
        problems.append(Problem(label, f"line {n}, column {e.colno}", f"invalid JSON line skipped: {e.msg}"))
        return SKIP
    except ValueError as e:
        problems.append(Problem(label, f"line {n}", f"invalid JSON line skipped: {number_error(e)}"))
        return SKIP


def _read_jsonl(text: str, rf: RecordFile, limits: Limits | None = None) -> None:
    rf.container = "jsonl"
    lines: list[int | None] = []
    for n, line in enumerate(text.split("\n"), start=1):
        rec = jsonl_record(line, n, rf.label, rf.problems, limits)
        if rec is not SKIP:
            if limits is not None:
                limits.check("records", len(rf.records) + 1, f"{rf.label}: line {n}")
            rf.records.append(rec)
            lines.append(n)
    rf._lines = lines


def _salvage_array(text: str, start: int, rf: RecordFile, err: json.JSONDecodeError) -> None:
    """Keep every complete element of a broken/truncated array; report where it broke."""
    pos = start + 1
    n = len(text)
    lines: list[int | None] = []
    line, line_pos = 1 + text.count("\n", 0, pos), pos  # incremental line counting
    while True:
        while pos < n and text[pos] in WHITESPACE:
            pos += 1
        if pos >= n:
            msg = "truncated: the array is not closed"
            break
        if text[pos] == "]" and not rf.records:
            msg = ""
            break
        line += text.count("\n", line_pos, pos)
        line_pos = pos
        try:
            value, end = _decoder.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            msg = f"invalid or truncated JSON: {e.msg}"
            pos = e.pos
            break
        except ValueError as e:
            msg = f"invalid JSON: {number_error(e)}"
            break
        rf.records.append(value)
        lines.append(line)
        pos = end
        while pos < n and text[pos] in WHITESPACE:
            pos += 1
        if pos < n and text[pos] == ",":
            pos += 1
            continue
        if pos < n and text[pos] == "]":
            msg = "unexpected content after the array" if text[pos + 1:].strip() else ""
            pos += 1
            break
        msg = "truncated: the array is not closed" if pos >= n else "expected ',' or ']' between records"
        break
    rf._lines = lines
    if not msg:  # the array itself was fine: the error is elsewhere (should not happen)
        msg = f"invalid JSON: {err.msg}"
        pos = err.pos
    ln, col = line_col(text, min(pos, n))
    rf.problems.append(Problem(rf.label, f"line {ln}, column {col}",
                               f"{msg}; kept the {len(rf.records)} complete record(s) before it"))


def _array_lines(text: str | None) -> list[int | None]:
    """First line of each element of a valid top-level array (error paths only)."""
    if not text:
        return []
    rf = RecordFile("")
    start = len(text) - len(text.lstrip(WHITESPACE))
    if not text.startswith("[", start):
        return []
    _salvage_array(text, start, rf, json.JSONDecodeError("", text, 0))
    return list(rf._lines or [])


def rows_of_json(value: Any) -> list[Any]:
    """Rows of a JSON document: an array of objects, a wrapper object, or one object. A list that is
    one conversation (chat or opencode messages, OpenHands events) is one row."""
    if isinstance(value, list):
        # A list of opencode {info, parts} messages (or of chat messages) is ONE conversation.
        if value and all(isinstance(v, dict) for v in value[:5]) and (
                ("info" in value[0] and "parts" in value[0])
                or ("role" in value[0] and "content" in value[0] and "conversations" not in value[0])):
            return [{"messages": value}]
        # A list of OpenHands events (a trajectory download) is ONE rollout: {id, source, action|observation}.
        if value and all(isinstance(v, dict) and isinstance(v.get("id"), int) and "timestamp" in v
                         and v.get("source") in ("agent", "user", "environment")
                         and ("action" in v or "observation" in v) for v in value[:5]):
            return [{"history": value}]
        return [v if isinstance(v, dict) else {"messages": v} if isinstance(v, list) else v for v in value]
    if isinstance(value, dict):
        for key in ("rows", "data", "records"):
            if isinstance(value.get(key), list) and value[key] and isinstance(value[key][0], dict):
                return list(value[key])
        return [value]
    return [value]
