"""How many rows a JSON file holds, told without building them (a folder's files are counted before any is read).

:func:`file_rows` counts by msgspec's skip. Whether an array is a list of rows or one conversation is told
by :func:`one_conversation` from its first elements' keys alone.

:func:`viewer.sources.jsonio.rows_of_json` takes an array as ONE conversation when its first element is a
chat or opencode message, or its first five are OpenHands events; it looks at a few keys and two scalar
values. Deciding that by parsing the five elements whole cost as much as parsing an OpenHands event file a
second time (a folder of 7,579 is counted before any is read, issue 35): here msgspec skips everything but
those keys. Where its skip could accept what the stdlib refuses (invalid UTF-8, an integer past Python's
digit limit, an escape msgspec rejects) the answer is None, and the caller parses the elements as before.
"""
from __future__ import annotations

import re
from typing import Callable

import msgspec

from viewer.sources.recordtypes import long_digit_run
from viewer.sources.jsonio import WHITESPACE_BYTES as _WS  # (JSON's whitespace)

__all__ = ["file_rows", "one_conversation"]

_UNSET = msgspec.UNSET


class _Head(msgspec.Struct):
    """The keys of an array element that rows_of_json's rule reads (every value left unparsed)."""

    info: msgspec.Raw = _UNSET
    parts: msgspec.Raw = _UNSET
    role: msgspec.Raw = _UNSET
    content: msgspec.Raw = _UNSET
    conversations: msgspec.Raw = _UNSET
    id: msgspec.Raw = _UNSET
    timestamp: msgspec.Raw = _UNSET
    source: msgspec.Raw = _UNSET
    action: msgspec.Raw = _UNSET
    observation: msgspec.Raw = _UNSET


_HEAD = msgspec.json.Decoder(_Head)
_INT = re.compile(rb"-?(?:0|[1-9][0-9]*)|true|false")  # json.loads gives an int (a bool is one, to isinstance)
_SOURCES = ("agent", "user", "environment")


def one_conversation(first: list[bytes]) -> bool | None:
    """For an array whose first (up to five) elements are the bytes ``first``: True where
    :func:`~viewer.sources.jsonio.rows_of_json` makes it one row (one conversation), False where each element
    is a row, None where only parsing them tells (an element not an object, or one the skip may misjudge)."""
    heads = []
    for raw in first:
        if raw[:1] != b"{" or long_digit_run(raw):
            return None
        try:
            raw.decode("utf-8")  # (json.loads's first step: the parse below skips the strings unchecked)
            heads.append(_HEAD.decode(raw))
        except (UnicodeDecodeError, msgspec.DecodeError, RecursionError):
            return None
    if not heads:
        return False
    h = heads[0]
    if (h.info is not _UNSET and h.parts is not _UNSET) or (
            h.role is not _UNSET and h.content is not _UNSET and h.conversations is _UNSET):
        return True  # chat or opencode messages
    return all(_is_event(h) for h in heads)  # OpenHands events


def _is_event(h: _Head) -> bool:
    """rows_of_json's test of an OpenHands event: an int id, a timestamp, a known source, an action or observation."""
    if h.id is _UNSET or h.timestamp is _UNSET or h.source is _UNSET or (h.action is _UNSET and h.observation is _UNSET):
        return False
    if not _INT.fullmatch(bytes(h.id)):
        return False
    source = bytes(h.source)
    if source[:1] != b'"' or len(source) > 80:  # (the longest name, every letter escaped, is 68 bytes)
        return False
    try:
        return msgspec.json.decode(source) in _SOURCES
    except msgspec.DecodeError:
        return False




class _Wrapper(msgspec.Struct):
    """The keys of a JSON object that :func:`rows_of_json` takes its rows from (each left unparsed)."""

    rows: msgspec.Raw = msgspec.UNSET
    data: msgspec.Raw = msgspec.UNSET
    records: msgspec.Raw = msgspec.UNSET


_WRAPPER = msgspec.json.Decoder(_Wrapper)
_RAW_LIST = msgspec.json.Decoder(list[msgspec.Raw])


def file_rows(raw: bytes, by_element: Callable[[list[bytes]], bool]) -> int | None:
    """How many rows :func:`rows_of_json` finds in the JSON file ``raw``, counted by msgspec's skip, which builds
    nothing: an object is one row, or its ``rows`` / ``data`` / ``records`` list of objects; an array is its
    elements, or one row where ``by_element`` (its first five) says it is one conversation (OpenHands events).
    None where msgspec does not take it (parse it whole, which says why). (Looking for the keys in the text cost
    more than the skip: ~28 us each in a 50 KB trajectory.)"""
    head = raw.lstrip(_WS)[:1]
    try:
        if head == b"[":
            items = _RAW_LIST.decode(raw)
            return len(items) if items and by_element([bytes(x) for x in items[:5]]) else min(len(items), 1)
        if head != b"{":
            return None
        wrapper = _WRAPPER.decode(raw)
        for key in ("rows", "data", "records"):  # (rows_of_json's order)
            held = getattr(wrapper, key)
            if held is not msgspec.UNSET and memoryview(held)[:1] == b"[":
                items = _RAW_LIST.decode(held)
                if items and memoryview(items[0])[:1] == b"{":
                    return len(items)
    except (msgspec.DecodeError, RecursionError):
        return None
    return 1
