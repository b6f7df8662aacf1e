"""vLLM logprob entries -> packed top-k and token-bytes columns (:mod:`viewer.packed`).

An entry is ``{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", ...}]}``
per output position. A long trace has millions of alternatives, so the common shape (every
alternative a ``"token_id:N"`` string with a numeric logprob) is packed with whole-list
passes at C speed; anything else goes item by item with the exact rules of
:func:`viewer.sources.openai_wire.token_id` (the parser the proxy uses): a malformed item is
skipped, a token that is not ``"token_id:N"`` is kept as text.

Only the sampled entry's ``bytes`` are kept: under ``--return-tokens-as-token-ids`` the
top-k entries' bytes spell "token_id:N", not the token (docs/CAPTURE.md §1.1).
"""
from __future__ import annotations

from itertools import accumulate
from operator import attrgetter
from typing import Any

from viewer.packed import NO_ID, BytesColumn, Packed, TopKColumn, pack_ids
from viewer.sources.columns import token_id_ints
from viewer.sources.openai_wire import token_id
from viewer.sources.recordtypes import LogprobEntry, entries_as_dicts

__all__ = ["topk_column", "bytes_column", "entry_values"]

_NUM = {int, float}


def entry_values(entries: list[Any], key: str) -> list[Any]:
    """``entry[key]`` of each entry; None where an entry is not an object or lacks it."""
    if entries and type(entries[0]) is LogprobEntry:  # typed: every entry has every field
        return list(map(attrgetter(key), entries))
    try:
        return [e[key] for e in entries]
    except (KeyError, TypeError):
        return [e.get(key) if isinstance(e, dict) else None for e in entries]


def topk_column(entries: list[Any], n: int) -> TopKColumn:
    """The top-k alternatives of the first ``n`` entries (positions past the entries: none)."""
    entries = entries[:n]
    col = None
    if entries and type(entries[0]) is LogprobEntry:
        col = _typed_topk(entries)
        if col is None:  # a token that is not "token_id:N": the item-by-item rules, which read dicts
            entries = entries_as_dicts(entries)
    if col is None:
        col = _fast_topk(entries)
    if col is None:
        col = _slow_topk(entries)
    if len(col) < n:
        last = col.starts[-1]
        col.starts.extend([last] * (n - len(col)))
        col._n = n
    return col


def _packed_topk(tops: list[list[Any]], toks: list[Any], lps: list[Any]) -> TopKColumn | None:
    if not toks:
        return TopKColumn(Packed("i", [0] * (len(tops) + 1)), Packed("i"), Packed("d"), None)
    ids = token_id_ints(toks)
    if ids is None:
        return None
    return TopKColumn(Packed("i", accumulate(map(len, tops), initial=0)), pack_ids(ids), Packed("d", lps), None)


def _typed_topk(entries: list[LogprobEntry]) -> TopKColumn | None:
    """Typed entries (:mod:`viewer.sources.recordtypes`): the types are known, only the token strings
    are checked; None when one is not ``"token_id:N"``."""
    tops = [e.top_logprobs for e in entries]
    return _packed_topk(tops, [t.token for ts in tops for t in ts], [t.logprob for ts in tops for t in ts])


def _fast_topk(entries: list[Any]) -> TopKColumn | None:
    """Every alternative ``{"token": "token_id:N", "logprob": number}``: packed at C speed; else None."""
    try:
        tops = [e["top_logprobs"] for e in entries]
        flat = [t for ts in tops for t in ts]
        toks = [t["token"] for t in flat]
        lps = [t["logprob"] for t in flat]
    except (KeyError, TypeError, IndexError):
        return None
    if flat and (set(map(type, toks)) != {str} or not set(map(type, lps)) <= _NUM):
        return None
    return _packed_topk(tops, toks, lps)


def _top_item(d: Any) -> tuple[int | None, str | None, float] | None:
    if not isinstance(d, dict):
        return None
    lp = d.get("logprob")
    if type(lp) not in _NUM:
        return None
    tok = d.get("token")
    tid = None
    if isinstance(tok, str):
        tid = token_id(tok)
        if tid is not None:
            tok = None
    else:
        tok = None
    if tid is None and type(d.get("token_id")) is int:
        tid = d["token_id"]
    return tid, tok, float(lp)


def _slow_topk(entries: list[Any]) -> TopKColumn:
    starts, ids, lps, toks = [0], [], [], []
    for e in entries:
        tops = e.get("top_logprobs") if isinstance(e, dict) else None
        if isinstance(tops, list):
            for item in map(_top_item, tops):
                if item is not None:
                    ids.append(NO_ID if item[0] is None else item[0])
                    toks.append(item[1])
                    lps.append(item[2])
        starts.append(len(ids))
    return TopKColumn(Packed("i", starts), pack_ids(ids), Packed("d", lps),
                      toks if any(t is not None for t in toks) else None)


def bytes_column(entries: list[Any], n: int) -> BytesColumn:
    """The sampled token's bytes at each of the first ``n`` positions (None: not recorded or invalid)."""
    entries = entries[:n]
    raw = entry_values(entries, "bytes")
    parts: list[bytes] | None = None
    missing: set[int] = set()
    if set(map(type, raw)) == {list}:
        try:
            parts = list(map(bytes, raw))  # every one valid: at C speed
        except (TypeError, ValueError):
            parts = None
    if parts is None:
        parts = []
        for i, b in enumerate(raw):
            v = None
            if isinstance(b, list):
                try:
                    v = bytes(b)
                except (TypeError, ValueError):
                    v = None
            if v is None:
                missing.add(i)
                v = b""
            parts.append(v)
    missing.update(range(len(parts), n))
    parts.extend(b"" for _ in range(n - len(parts)))
    return BytesColumn(b"".join(parts), pack_ids(list(accumulate(map(len, parts), initial=0))), frozenset(missing))
