"""Shared checks for the talk files: one error type, one way to read a bounded JSON document."""
from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["TalkError", "MAX_TALK_BYTES", "MAX_TEXT", "MAX_ITEMS", "read_json", "text_field", "index_field",
           "range_field", "mode_field", "source_field", "read_doc", "dump_doc"]

MAX_TALK_BYTES = 1_000_000  # a notes or deck file is small; a bigger one is refused before parsing
MAX_TEXT = 2000  # one note's text
MAX_ITEMS = 500  # notes in a file / steps in a deck
MODES = ("mask", "logprob", "delta", "drift")


class TalkError(ValueError):
    """A notes or deck file was refused; ``str(e)`` names the file's place and what is wrong."""


def read_json(data: bytes | str, what: str) -> Any:
    raw = data.encode() if isinstance(data, str) else bytes(data)
    if len(raw) > MAX_TALK_BYTES:
        raise TalkError(f"{what}: {len(raw):,} bytes, over the {MAX_TALK_BYTES:,}-byte limit")
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise TalkError(f"{what}: not UTF-8 (byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise TalkError(f"{what}: not JSON: {e.msg} at line {e.lineno} column {e.colno}") from None


def text_field(obj: dict, key: str, where: str, max_len: int = MAX_TEXT, required: bool = False) -> str:
    v = obj.get(key, "")
    if v is None:
        v = ""
    if not isinstance(v, str):
        raise TalkError(f"{where}.{key}: expected text, got {type(v).__name__}")
    if "\x00" in v or len(v) > max_len:
        raise TalkError(f"{where}.{key}: over {max_len:,} characters or not text")
    if required and not v.strip():
        raise TalkError(f"{where}.{key}: required")
    return v


def index_field(obj: dict, key: str, where: str, required: bool = False) -> int | None:
    v = obj.get(key)
    if v is None:
        if required:
            raise TalkError(f"{where}.{key}: required")
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 10**9:
        raise TalkError(f"{where}.{key}: expected a whole number ≥ 0, got {v!r:.40}")
    return v


def range_field(obj: dict, key: str, where: str, required: bool = False) -> tuple[int, int] | None:
    v = obj.get(key)
    if v is None:
        if required:
            raise TalkError(f"{where}.{key}: required")
        return None
    if not (isinstance(v, list) and len(v) == 2 and all(isinstance(x, int) and not isinstance(x, bool)
                                                         and 0 <= x < 10**9 for x in v) and v[0] <= v[1]):
        raise TalkError(f"{where}.{key}: expected [first, last] token positions (first ≤ last), got {v!r:.60}")
    return (v[0], v[1])


def mode_field(obj: dict, key: str, where: str) -> str:
    v = obj.get(key) or "mask"
    if v not in MODES:
        raise TalkError(f"{where}.{key}: expected one of {', '.join(MODES)}, got {v!r:.40}")
    return v


_SOURCE = re.compile(r"[^\x00-\x1f]{1,4096}")


def source_field(obj: dict, key: str, where: str, required: bool = False) -> str:
    """Kept as text: a source is checked (sample list, data root, Hub name) only when it is opened,
    by :func:`viewer.visitor.source`, exactly like a deep link's ``?source=``."""
    v = text_field(obj, key, where, 4096, required)
    if v and not _SOURCE.fullmatch(v):
        raise TalkError(f"{where}.{key}: control characters in a source")
    return v


def read_doc(data: bytes | str, what: str, items_key: str, version: int) -> tuple[dict, Any]:
    """A talk file's top level: an object of our version; returns it and its ``items_key`` value."""
    doc = read_json(data, what)
    if not isinstance(doc, dict):
        raise TalkError(f"{what}: expected an object with a '{items_key}' list")
    if doc.get("version", version) != version:
        raise TalkError(f"{what}.version: this viewer reads version {version}, got {doc.get('version')!r:.20}")
    return doc, doc.get(items_key)


def dump_doc(doc: dict, what: str) -> str:
    """A talk file's text as it is written (a file, a session, a download): indented when that fits in
    :data:`MAX_TALK_BYTES`, else compact, so what is stored can always be read back by :func:`read_json`
    (issue 36: a 976 KB file, accepted, was written indented past the limit and could then not be read).
    Raises :class:`TalkError` when even the compact text is over the limit: nothing is stored then."""
    text = json.dumps(doc, ensure_ascii=False, indent=1) + "\n"
    if len(text.encode("utf-8")) > MAX_TALK_BYTES:
        text = json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n"
        n = len(text.encode("utf-8"))
        if n > MAX_TALK_BYTES:
            raise TalkError(f"{what}: {n:,} bytes, over the {MAX_TALK_BYTES:,}-byte limit (remove some text)")
    return text
