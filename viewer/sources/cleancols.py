"""Token id and logprob columns checked and packed as :mod:`viewer.sources.columns` does, the clean
case in fewer passes (issue 35: a NeMo Gym rollout is two thirds numbers).

``columns.check_ids`` packs a clean list with ``array`` (item by item, 18 ns an id) after msgspec's
type pass, then copies the bytes to check their signs; ``check_logprobs`` packs with ``array`` too.
Here the packing is ``struct``'s (one C call over the list, half the time; it refuses an id past 32
bits), the type pass msgspec's, the sign check the packed bytes': the same ``Packed`` values. A list
that is not clean (a bool, a negative or float id, a logprob over 1e-3, NaN, None) goes to the
columns function itself, so the values kept and the messages are its own.
"""
from __future__ import annotations

import struct
import sys
from typing import Annotated, Any

import msgspec

from viewer.packed import Packed
from viewer.sources.columns import Checked, check_ids, check_logprobs

__all__ = ["ids_checked", "logprobs_checked"]

_CLEAN_LOGPROBS = list[Annotated[float, msgspec.Meta(lt=1e-3)]]  # check_logprobs's clean case
_SIGN_BYTE = 3 if sys.byteorder == "little" else 0


def _packed(raw: bytes, code: str) -> Packed:
    out = Packed(code)
    out.frombytes(raw)
    return out


def ids_checked(value: Any) -> Checked[int]:
    """``columns.check_ids(value)``."""
    if type(value) is not list or not value:
        return check_ids(value)
    try:
        msgspec.convert(value, list[int])  # ints, not bools
        raw = struct.pack(f"{len(value)}i", *value)  # (struct.error past 32 bits)
    except (msgspec.ValidationError, struct.error):
        return check_ids(value)
    return Checked(_packed(raw, "i")) if raw[_SIGN_BYTE::4].isascii() else check_ids(value)  # (a negative id)


def logprobs_checked(value: Any) -> Checked[float | None]:
    """``columns.check_logprobs(value)``."""
    if type(value) is not list or not value:
        return check_logprobs(value)
    try:
        msgspec.convert(value, _CLEAN_LOGPROBS)  # numbers (not bools) under 1e-3: no NaN, no +inf
    except msgspec.ValidationError:
        return check_logprobs(value)
    return Checked(_packed(struct.pack(f"{len(value)}d", *value), "d"))
