"""Reading the token view's compact payload (``"v": 3``, viewer/render/tokens.py) in tests: the one
decoder every test that looks at a payload's ids, texts, kinds or logprobs goes through.

Written from the format's description, not from the encoder: ``ids`` and ``tl`` are number columns
(each number's 5-bit groups, lowest first, as base64url characters, one from the alphabet's upper half
saying another group follows; ``ids`` may also be a plain list), texts are one string ``tx`` cut at
the UTF-16 lengths ``tl`` (as the JS's ``slice`` cuts it), kinds the flat runs ``kr``
(``[kind, count, ...]``), logprobs the runs ``lr`` (``[[start, [lp, ...]], ...]``, null elsewhere).
:func:`expand` gives back the per-position lists under the names main's payload had (``ids``, ``t``,
``k``, ``lp``), at the same places, so ``safe_json`` of it is main's payload byte for byte
(tests/test_render_payload.py checks that on every bundled turn).
"""
from __future__ import annotations

import json
from typing import Any

__all__ = ["expand", "numbers"]

_DIGITS = {c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")}


def numbers(column: str | list) -> list[int]:
    """A number column read back (a list is already one)."""
    if isinstance(column, list):
        return column
    out, value, shift = [], 0, 0
    for ch in column:
        d = _DIGITS[ch]  # a KeyError: not a digit of the column's alphabet
        value |= (d % 32) << shift
        if d < 32:
            out.append(value)
            value, shift = 0, 0
        else:
            shift += 5
    assert shift == 0, "the column ends inside a number"
    return out


def _texts(joined: str, lens: list[int]) -> list[str]:
    units = joined.encode("utf-16-le", "surrogatepass")
    assert sum(lens) * 2 == len(units), "tl does not add up to tx"
    out, at = [], 0
    for n in lens:
        out.append(units[at:at + 2 * n].decode("utf-16-le", "surrogatepass"))
        at += 2 * n
    return out


def _kinds(runs: list[int], n: int) -> list[int]:
    assert len(runs) % 2 == 0, "kr is [kind, count, ...]"
    out: list[int] = []
    for k, c in zip(runs[::2], runs[1::2]):
        assert c > 0
        out += [k] * c
    assert len(out) == n, f"kr covers {len(out)} positions, the payload has {n}"
    return out


def _logprobs(runs: list, n: int) -> list[float | None]:
    out: list[float | None] = [None] * n
    end = 0
    for start, values in runs:
        assert start >= end and values, "lr runs are in order, not empty"
        out[start:start + len(values)] = values
        end = start + len(values)
    assert len(out) == n
    return out


def expand(payload: str | dict) -> dict[str, Any]:
    """The payload (its JSON or the parsed dict) with ``t``, ``k``, ``lp`` as per-position lists in
    place of ``tx``/``tl``, ``kr``, ``lr`` (other keys as they are, in their order)."""
    d = json.loads(payload) if isinstance(payload, str) else payload
    assert d["v"] == 3, f"not a compact token view payload: v={d.get('v')}"
    ids = numbers(d["ids"])
    n = len(ids)
    out: dict[str, Any] = {}
    for key, value in d.items():
        if key == "ids":
            out["ids"] = ids
        elif key == "tx":
            out["t"] = _texts(value, numbers(d["tl"]))
        elif key == "tl":
            continue
        elif key == "kr":
            out["k"] = _kinds(value, n)
        elif key == "lr":
            out["lp"] = _logprobs(value, n)
        else:
            out[key] = value
    assert len(out["t"]) == n
    return out
