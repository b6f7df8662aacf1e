"""Compact per-token columns: ids, logprobs and masks as machine arrays, top-k and bytes packed.

A long rollout holds millions of token ids, logprobs and top-k alternatives. As Python lists
each id costs ~36 bytes and each top-k alternative a dict of a few hundred; here an id costs
4 bytes, a logprob 8 and an alternative 12, and the per-position values (a list of
:class:`~viewer.rollout.TopLogprob`, the token's bytes) are built only when asked for.

:class:`Packed` is an ``array.array`` that behaves like the list it replaces where callers
rely on list behaviour: ``==`` against a list or tuple compares the values (a plain array is
never equal to a list), a slice stays :class:`Packed`, and ``+`` with a list gives a list.
Every column reports its size in bytes (``nbytes``) so caches can weigh a rollout cheaply.
Pure values; no I/O.
"""
from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any, Iterable

from viewer.rollout import TopLogprob

__all__ = ["Packed", "pack_ids", "pack_floats", "pack_mask", "pack_mask_01", "TopKColumn", "BytesColumn", "NO_ID"]

NO_ID = -(2 ** 31)  # "no id recorded" in a top-k id column (ids are never negative)


class Packed(array):
    """An ``array.array`` that compares equal to a list of the same values (see module doc)."""

    __slots__ = ()

    def __getitem__(self, i):  # type: ignore[override]
        v = array.__getitem__(self, i)
        return Packed(self.typecode, v) if isinstance(i, slice) else v

    def __eq__(self, other: object) -> bool:  # type: ignore[override]
        if isinstance(other, array):
            return array.__eq__(self, other)
        if isinstance(other, (list, tuple)):
            return self.tolist() == list(other)
        return NotImplemented

    def __ne__(self, other: object) -> bool:  # type: ignore[override]
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None  # type: ignore[assignment]  # mutable, like the list it stands for

    def __add__(self, other: Any) -> Any:  # type: ignore[override]
        if isinstance(other, array) and other.typecode == self.typecode:
            return Packed(self.typecode, array.__add__(self, other))
        return self.tolist() + list(other)

    def __radd__(self, other: Any) -> list:
        return list(other) + self.tolist()

    def __copy__(self) -> "Packed":
        return Packed(self.typecode, self)

    def __deepcopy__(self, memo: dict) -> "Packed":
        return Packed(self.typecode, self)

    def __reduce__(self):
        return (_unpickle, (self.typecode, self.tobytes()))

    def __repr__(self) -> str:
        return f"Packed({self.tolist()!r})" if len(self) <= 20 else f"Packed(n={len(self)}, typecode={self.typecode!r})"

    @property
    def nbytes(self) -> int:
        return len(self) * self.itemsize


def _unpickle(typecode: str, raw: bytes) -> Packed:
    p = Packed(typecode)
    p.frombytes(raw)
    return p


def pack_ids(ids: Iterable[int]) -> Packed:
    """Token ids as 32-bit ints (64-bit if any id does not fit, which no vocabulary needs)."""
    try:
        return Packed("i", ids)
    except OverflowError:
        return Packed("q", ids)


def pack_floats(values: list[Any]) -> Packed | list:
    """Logprobs as doubles (exact); a list with a ``None`` (a missing value) is kept as it is."""
    try:
        return Packed("d", values)
    except TypeError:
        return values


def pack_mask(mask: Iterable[Any]) -> Packed:
    """A 0/1 mask from anything truthy (bools, numbers)."""
    return Packed("b", [1 if m else 0 for m in mask])


def pack_mask_01(mask: list[int]) -> Packed:
    """A mask already known to hold only 0 and 1 (C speed)."""
    return Packed("b", mask)


class _Column(Sequence):
    """A length-``n`` read-only sequence whose items are built per position on access."""

    __slots__ = ("_n",)

    def __len__(self) -> int:
        return self._n

    def _at(self, i: int) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self._at(j) for j in range(*i.indices(self._n))]
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError(i)
        return self._at(i)

    def __iter__(self):
        for j in range(self._n):
            yield self._at(j)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n={self._n})"


class TopKColumn(_Column):
    """``column[i]`` = the top-k alternatives at output position i, as TopLogprob values.

    Stored flat: ``starts[i]:starts[i+1]`` indexes ``ids`` / ``logprobs`` / ``tokens``; an id
    of :data:`NO_ID` is "not recorded", ``tokens`` is None when no alternative carries text.
    Built by :mod:`viewer.sources.logprob_entries` from vLLM's logprob entries.
    """

    __slots__ = ("starts", "ids", "logprobs", "tokens")

    def __init__(self, starts: Packed, ids: Packed, logprobs: Packed, tokens: list[str | None] | None):
        self._n = len(starts) - 1
        self.starts, self.ids, self.logprobs, self.tokens = starts, ids, logprobs, tokens

    def _at(self, i: int) -> list[TopLogprob]:
        a, b = self.starts[i], self.starts[i + 1]
        ids, lps, toks = self.ids, self.logprobs, self.tokens
        return [TopLogprob(None if ids[j] == NO_ID else ids[j], toks[j] if toks is not None else None, lps[j])
                for j in range(a, b)]

    @property
    def nbytes(self) -> int:
        extra = 0 if self.tokens is None else 8 * len(self.tokens) + sum(49 + len(t) for t in self.tokens if t)
        return self.starts.nbytes + self.ids.nbytes + self.logprobs.nbytes + extra


class BytesColumn(_Column):
    """``column[i]`` = bytes of the sampled token's text (None if not recorded or invalid).

    Stored as one ``bytes`` blob and offsets; ``missing`` holds the positions with no value.
    """

    __slots__ = ("blob", "starts", "missing")

    def __init__(self, blob: bytes, starts: Packed, missing: frozenset[int]):
        self._n = len(starts) - 1
        self.blob, self.starts, self.missing = blob, starts, missing

    def _at(self, i: int) -> bytes | None:
        if i in self.missing:
            return None
        return self.blob[self.starts[i]:self.starts[i + 1]]

    def to_list(self) -> list[bytes | None]:
        """Every position's value at once (the offsets read as one list, not an item lookup per position)."""
        s, blob = self.starts.tolist(), self.blob
        out: list[bytes | None] = [blob[a:b] for a, b in zip(s, s[1:])]
        for i in self.missing:
            out[i] = None
        return out

    @property
    def nbytes(self) -> int:
        return len(self.blob) + self.starts.nbytes + 64 * len(self.missing)
