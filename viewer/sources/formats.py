"""Row formats: the base every format module imports (docs/FORMATS.md §7).

A :class:`RowFormat` is one trace format whose dataset holds one rollout (or one model
call) per row. Its module (``opencode``, ``harbor``, ``atif``, ``agentcap``,
``messages``, ``contract``) parses a row into a :class:`~viewer.sources.derive.Conversation`
and summarises a row for the row table. This module imports no format module: the list of
formats and detection live in :mod:`viewer.sources.registry`.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable

from viewer.sources.derive import Conversation
from viewer.sources.rowdata import RowReadError

__all__ = ["RowFormat", "RowRef", "as_json", "as_float", "text_of", "conversation_size", "SUMMARY_FIELDS",
           "RowReadError"]

SUMMARY_FIELDS = ("agent", "model", "task", "reward", "result", "turns", "length")


@dataclass(frozen=True)
class RowRef:
    """Where a row lives, for Problem locations: ``row 12 .conversations[3].content``."""

    label: str
    row: int

    def where(self, path: str = "") -> str:
        return f"row {self.row} {path}".rstrip() if path else f"row {self.row}"

    def error(self, path: str, message: str) -> RowReadError:
        return RowReadError(self.where(path), message)


@dataclass(frozen=True)
class RowFormat:
    name: str
    title: str
    detect: Callable[[set[str], dict[str, Any] | None], bool]
    read: Callable[[dict[str, Any], RowRef], Conversation]
    summarize: Callable[[dict[str, Any]], dict[str, Any]]
    light: tuple[str, ...] = ()  # cheap columns: enough to summarise light_fields
    light_fields: frozenset[str] = field(default_factory=frozenset)
    dedupe: tuple[str, str] | None = None  # (key column, version column): keep the highest version
    # A stored row that holds several rollouts (an Atropos group, an Inspect log's samples): its
    # rollouts, each a dict that ``read`` and ``summarize`` take (viewer.sources.subrows).
    expand: Callable[[dict[str, Any]], list[dict[str, Any]]] | None = None
    # The top-level fields that mark this format: "unknown format" names the format closest to a
    # refused file by them, with the field that ruled it out (viewer.sources.registry.closest_format).
    fields: tuple[str, ...] = ()
    # The format's own decode of a stored row's JSON text (bytes): only the fields read, skipping the
    # rest unbuilt (viewer.sources.typedrow); None where json.loads's rules must decide. The row layer
    # uses it for every row read once this format is chosen (RowDataset.decode).
    decode: Callable[[bytes], Any] | None = None
    # A stored JSONL line counted and expanded from its bytes (viewer.sources.subrows.RawLines), with expand.
    lines: Any = None
    # Files the producer writes beside its rows with the rows' own extension (Inspect's eval-set manifests,
    # logs.json and eval-set.json, beside .json logs): a run folder lists each as a group of its own, so one
    # that is not this format's row is named and left out, not read as a bad row (viewer.sources.runfolder).
    side_files: tuple[str, ...] = ()


# --------------------------------------------------------------------------- helpers

def as_json(value: Any, ref: RowRef, path: str, problems: list | None = None) -> Any:
    """A value that may be a JSON string (parquet string columns): parsed, or a located error."""
    if isinstance(value, (bytes, bytearray)):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str):
        s = value.strip()
        if s[:1] in ("{", "["):
            try:
                return json.loads(s)
            except json.JSONDecodeError as e:
                raise ref.error(path, f"invalid JSON string (line {e.lineno}, column {e.colno}): {e.msg}") from None
    return value


def as_float(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            v = float(value.strip())
            return v if math.isfinite(v) else None
        except ValueError:
            return None
    return None


def text_of(content: Any) -> str:
    """Text of a message content: a string, or OpenAI content parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return json.dumps(content, ensure_ascii=False, default=str)



def conversation_size(messages: Any) -> tuple[int | None, int | None]:
    """(assistant turns, characters of content) of a message list, or (None, None) if it is not one."""
    if not isinstance(messages, list):
        return None, None
    msgs = [m for m in messages if isinstance(m, dict)]
    return (sum(1 for m in msgs if m.get("role") == "assistant"),
            sum(len(text_of(m.get("content"))) for m in msgs))
