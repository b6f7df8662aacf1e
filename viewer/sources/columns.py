"""Per-token columns: validate id/logprob/mask lists and return them packed.

Shared by the readers. Validation is done with whole-list C-level checks first
(``msgspec.convert`` against the clean types, the packing itself) and falls back to a per-item scan only when something is wrong,
so a clean 2M-token trace costs a few passes at C speed. Clean columns come back packed
(:mod:`viewer.packed`: 4 bytes an id, 8 a logprob, 1 a mask entry) so a reader that
keeps them holds machine arrays, not Python objects.

Each checker returns a :class:`Checked` value: the usable list (possibly a prefix) and
an error message (None when clean) for the caller to wrap in a located Problem.
"""
from __future__ import annotations

import struct
import sys
from dataclasses import dataclass
from typing import Annotated, Any, Generic, TypeVar

import msgspec

from viewer.packed import Packed, pack_floats, pack_ids, pack_mask, pack_mask_01
from viewer.sources.openai_wire import TOKEN_ID_PREFIX, token_id

__all__ = ["Checked", "check_ids", "check_logprobs", "check_mask", "ids_from_token_strings", "token_id_ints",
           "TOKEN_ID_PREFIX"]

_NUM = {float, int}
T = TypeVar("T")


@dataclass
class Checked(Generic[T]):
    """A validated column; ``error`` says what was wrong (the value is then a cleaned version)."""

    value: list[T] | None
    error: str | None = None


_int_list = msgspec.json.Decoder(list[int])
MAX_ID = 2 ** 31  # no vocabulary comes near; a bigger "id" (a 4,000-digit number) is bad data, not a token

# The clean cases, checked in C passes over the list (3-5x faster than the type set and min/max
# passes): ints that are not bools (msgspec), packed as 32-bit (so in [-2**31, 2**31)), none negative
# (the packed bytes' sign bytes are all under 0x80); numbers (not bools) under 1e-3, NaN refused by
# the comparison, -inf accepted. Exactly what the per-item rules below accept as clean, so the result
# is the same; anything refused here goes through those rules as before.
_CLEAN_LOGPROBS = list[Annotated[float, msgspec.Meta(lt=1e-3)]]
_SIGN_BYTE = 3 if sys.byteorder == "little" else 0


def _clean(value: list[Any], kind: Any) -> bool:
    try:
        msgspec.convert(value, kind)
    except msgspec.ValidationError:
        return False
    return True


def _from_bytes(raw: bytes, code: str) -> Packed:
    out = Packed(code)
    out.frombytes(raw)
    return out


def _clean_ids(value: list[Any]) -> Packed | None:
    """``value`` packed when every entry is an int (not a bool) in [0, 2**31), else None. ``struct`` packs
    the list in one C call (half of ``array``'s item-by-item time: NeMo Gym rollouts are two thirds ids)."""
    if not _clean(value, list[int]):
        return None
    try:
        raw = struct.pack(f"{len(value)}i", *value)
    except struct.error:  # an id of 2**31 or more (or under -2**31)
        return None
    return _from_bytes(raw, "i") if raw[_SIGN_BYTE::4].isascii() else None


def _clean_floats(value: list[Any]) -> Packed | list:
    """A clean logprob list as doubles, packed by ``struct`` in one call; ``pack_floats`` where it refuses."""
    try:
        return _from_bytes(struct.pack(f"{len(value)}d", *value), "d")
    except (struct.error, OverflowError):  # (an int past the double range: pack_floats says so as before)
        return pack_floats(value)


def _show(x: Any) -> str:
    s = repr(x)
    return s if len(s) <= 40 else s[:37] + "..."


def check_ids(value: Any) -> Checked[int]:
    """Token ids: a list of non-negative ints. On a bad entry keep the prefix before it."""
    if value is None:
        return Checked(None)
    if not isinstance(value, list):
        return Checked(None, f"expected a list of token ids, got {type(value).__name__}")
    if not value:
        return Checked(value)
    packed = _clean_ids(value)
    if packed is not None:
        return Checked(packed)
    for i, x in enumerate(value):
        if type(x) is not int or x < 0 or x >= MAX_ID:
            return Checked(pack_ids(value[:i]), f"entry {i} is {_show(x)} ({type(x).__name__}), expected a non-negative "
                                      f"int token id under 2**31; kept the {i} ids before it")
    return Checked(value)  # unreachable


def _is_logprob(x: float) -> bool:
    """A log-probability: ≤ 0 up to rounding, or -inf (probability 0); never NaN or +inf."""
    return x == x and x < 1e-3


def check_logprobs(value: Any) -> Checked[float | None]:
    """Logprobs: numbers (floats/ints). Non-numbers become None (position kept)."""
    if value is None:
        return Checked(None)
    if not isinstance(value, list):
        return Checked(None, f"expected a list of logprobs, got {type(value).__name__}")
    if not value or _clean(value, _CLEAN_LOGPROBS):
        return Checked(_clean_floats(value))
    types = set(map(type, value))
    if types <= _NUM and all(_is_logprob(x) for x in value):  # (an int past the double range: as before)
        return Checked(pack_floats(value))
    if types <= _NUM:  # NaN / +Infinity (JSON allows them in Python): not a probability
        bad = [i for i, x in enumerate(value) if not _is_logprob(x)]
        return Checked([x if _is_logprob(x) else None for x in value],
                       f"{len(bad)} logprob(s) are not finite log-probabilities (first: entry {bad[0]} = "
                       f"{value[bad[0]]}); shown as missing")
    bad = [i for i, x in enumerate(value) if type(x) not in _NUM]
    cleaned = [x if type(x) in _NUM else None for x in value]
    first = bad[0]
    return Checked(cleaned, f"{len(bad)} logprob(s) are not numbers (first: entry {first} = "
                            f"{_show(value[first])}); shown as missing")


def check_mask(value: Any) -> Checked[int]:
    """A 0/1 mask (bools and numbers accepted, anything non-zero counts as 1)."""
    if value is None:
        return Checked(None)
    if not isinstance(value, list):
        return Checked(None, f"expected a list of 0/1, got {type(value).__name__}")
    types = set(map(type, value))
    if types <= {int} and set(value) <= {0, 1}:
        return Checked(pack_mask_01(value))
    if types <= {int, bool, float}:
        return Checked(pack_mask(value))
    bad = next(i for i, x in enumerate(value) if type(x) not in (int, bool, float))
    return Checked(None, f"entry {bad} is {_show(value[bad])}, expected 0/1; mask ignored")


def token_id_ints(tokens: list[Any]) -> list[int] | None:
    """Every item exactly ``"token_id:"`` + ASCII digits: their ids, checked and parsed with whole-list
    passes at C speed (millions of items in a long trace); None as soon as one is anything else."""
    try:
        joined = ",".join(tokens)
    except TypeError:  # not all strings
        return None
    # the prefix starts every item and appears nowhere else, and what is left is digits and separators
    if (not joined.startswith(TOKEN_ID_PREFIX) or joined.count("," + TOKEN_ID_PREFIX) != len(tokens) - 1
            or joined.count(TOKEN_ID_PREFIX) != len(tokens)):
        return None
    digits = joined.replace(TOKEN_ID_PREFIX, "")
    if not digits.isascii():
        return None
    ids = None
    if not any(c in digits for c in "- \t\r\n"):  # then what JSON takes as a list of ints is digits and commas
        try:  # "12,7,…" is a JSON array of ints once bracketed: msgspec parses it at C speed
            ids = _int_list.decode(f"[{digits}]")
        except msgspec.DecodeError:  # an empty item ("token_id:"), a leading zero JSON refuses, not digits
            ids = None
    if ids is None:
        if not digits.replace(",", "").isdigit():
            return None
        try:
            ids = [int(x) for x in digits.split(",")]
        except ValueError:  # an empty item
            return None
    return ids if len(ids) == len(tokens) else None


def ids_from_token_strings(tokens: Any) -> Checked[int]:
    """Ids parsed from ``"token_id:N"`` strings (:func:`viewer.sources.openai_wire.token_id`, the
    parser the proxy uses too). ``value`` None = not token-id strings at all."""
    if not isinstance(tokens, list) or not tokens:
        return Checked(None)
    ids = token_id_ints(tokens)  # fast path (the common case, millions of entries): all well-formed
    if ids is not None:
        return Checked(pack_ids(ids))
    out: list[int] = []
    for i, s in enumerate(tokens):
        n = token_id(s)
        if n is None:
            if i == 0:  # plain token text (server ran without --return-tokens-as-token-ids)
                return Checked(None)
            return Checked(pack_ids(out), f"entry {i} is {_show(s)}, not a 'token_id:N' string; kept the {i} ids "
                                          "before it")
        out.append(n)
    return Checked(pack_ids(out))
