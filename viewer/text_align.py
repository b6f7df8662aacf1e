"""Two token sequences from different tokenizers, aligned by the text they spell.

Ids of two vocabularies are not comparable (``<|im_start|>`` is 151644 in Qwen3 and 1 in
SmolLM2), so a comparison across tokenizers joins each side's token **bytes** (the exact
bytes of :class:`viewer.tokenizer.TokenTable`, byte-level: a token may hold part of a
multi-byte character), finds the first byte where the two texts differ, and maps that byte
back to the token covering it on each side. Byte offsets, not ``str`` indices: a token that
ends inside a UTF-8 character still has an exact place.
"""
from __future__ import annotations

import bisect
import dataclasses
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any, Sequence

from .drift.causes import common_prefix

__all__ = ["TokenAt", "TextAlignment", "same_vocab", "align_text"]

RUN = 3  # tokens shown on each side of the diverging token


@dataclass(frozen=True)
class TokenAt:
    """One token of a side: its position over prompt + output, id, display text and byte span."""

    position: int
    id: int
    text: str
    start: int
    end: int

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class TextAlignment:
    """Where two sides' texts part. ``divergence_byte`` is None when the texts are equal.

    ``a_position`` / ``b_position``: the token covering the first differing byte on that side
    (the side's length when its text ends there, so it has no such token); ``a_common_tokens``
    equals ``a_position``: the tokens before it lie wholly inside the common text.
    ``a_run`` / ``b_run``: the tokens around it, for showing both tokenizations side by side."""

    common_bytes: int
    a_bytes: int
    b_bytes: int
    divergence_byte: int | None
    a_position: int
    b_position: int
    a_run: list[TokenAt] = field(default_factory=list)
    b_run: list[TokenAt] = field(default_factory=list)

    @property
    def a_common_tokens(self) -> int:
        return self.a_position

    @property
    def b_common_tokens(self) -> int:
        return self.b_position

    def token(self, which: str) -> TokenAt | None:
        """The diverging token of side ``which`` (``a``/``b``), None when that side has ended."""
        pos = self.a_position if which == "a" else self.b_position
        run = self.a_run if which == "a" else self.b_run
        return next((t for t in run if t.position == pos), None)

    def to_dict(self) -> dict[str, Any]:
        ta, tb = self.token("a"), self.token("b")
        return {"common_bytes": self.common_bytes, "a_bytes": self.a_bytes, "b_bytes": self.b_bytes,
                "divergence_byte": self.divergence_byte,
                "a_common_tokens": self.a_common_tokens, "b_common_tokens": self.b_common_tokens,
                "a_token": ta.to_dict() if ta else None, "b_token": tb.to_dict() if tb else None,
                "a_run": [t.to_dict() for t in self.a_run], "b_run": [t.to_dict() for t in self.b_run]}


def same_vocab(ta: Any, tb: Any) -> bool:
    """True when two token tables give every id the same bytes and special flag: ids are then
    comparable whatever the tokenizers are called (a capture's own copy of Qwen3 and the bundled one)."""
    if ta is tb:
        return True
    n = len(ta)
    if n != len(tb):
        return False
    everything = range(n)
    return ta.bytes_list(everything) == tb.bytes_list(everything) and ta.special(everything) == tb.special(everything)


def _run(ids: Sequence[int], texts: list[str], starts: list[int], ends: list[int], pos: int) -> list[TokenAt]:
    lo, hi = max(0, pos - RUN), min(len(ids), pos + RUN + 1)
    return [TokenAt(i, ids[i], texts[i - lo], starts[i], ends[i]) for i in range(lo, hi)]


def align_text(ids_a: Sequence[int], ids_b: Sequence[int], table_a: Any, table_b: Any) -> TextAlignment:
    """Align ``ids_a`` (spelled by ``table_a``) with ``ids_b`` (``table_b``) by their bytes."""
    ba, bb = table_a.bytes_list(ids_a), table_b.bytes_list(ids_b)
    text_a, text_b = b"".join(ba), b"".join(bb)
    k = common_prefix(text_a, text_b)
    ends_a, ends_b = list(accumulate(len(x) for x in ba)), list(accumulate(len(x) for x in bb))
    if k == len(text_a) == len(text_b):
        return TextAlignment(k, len(text_a), len(text_b), None, len(ids_a), len(ids_b))
    # the first token ending past byte k covers it (tokens with no bytes sit before it)
    pa, pb = bisect.bisect_right(ends_a, k), bisect.bisect_right(ends_b, k)
    runs = []
    for ids, table, ends, pos in ((ids_a, table_a, ends_a, pa), (ids_b, table_b, ends_b, pb)):
        starts = [0, *ends[:-1]]
        lo, hi = max(0, pos - RUN), min(len(ids), pos + RUN + 1)
        runs.append(_run(ids, table.texts(list(ids[lo:hi])), starts, ends, pos))
    return TextAlignment(k, len(text_a), len(text_b), k, pa, pb, runs[0], runs[1])
