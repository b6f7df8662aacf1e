"""Per-token view model of one turn: what each position shows, independent of HTML.

Joins a Turn's ids with display text from a tokenizer table (exact pieces) or, without a
tokenizer, from the bytes the server recorded in logprobs. Ids outside the vocabulary
become visible placeholders and are counted, never hidden.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence

from .rollout import Turn
from .tokenizer import texts_without_tokenizer

__all__ = ["TokenTexts", "TurnTokens", "turn_tokens"]


class TokenTexts(Protocol):
    """What we need from a tokenizer table (``viewer.tokenizer.TokenTable`` provides it)."""

    def texts(self, ids: Sequence[int]) -> list[str]: ...
    def special(self, ids: Sequence[int]) -> list[bool]: ...
    def out_of_vocab(self, ids: Sequence[int]) -> list[int]: ...


@dataclass
class TurnTokens:
    """Parallel arrays over prompt + output positions of one turn."""

    ids: list[int]
    texts: list[str]
    special: list[bool]
    prompt_len: int
    exact_text: bool  # False: text came from recorded bytes (output) or is a placeholder (prompt)
    out_of_vocab: list[int] = field(default_factory=list)  # absolute positions
    alt_texts: dict[int, str] = field(default_factory=dict)  # texts of top-k alternative ids


def turn_tokens(turn: Turn, table: TokenTexts | None) -> TurnTokens:
    ids = list(turn.prompt_ids) + list(turn.output_ids)
    p = len(turn.prompt_ids)
    if table is not None:
        alt_ids = sorted({a.id for alts in (turn.top_logprobs or []) for a in alts if a.id is not None})
        alt = dict(zip(alt_ids, table.texts(alt_ids))) if alt_ids else {}
        return TurnTokens(ids, table.texts(ids), table.special(ids), p, True,
                          table.out_of_vocab(ids), alt)
    texts = texts_without_tokenizer(turn.prompt_ids, turn.output_ids, turn.output_bytes)
    alt = {a.id: a.token or f"⟨{a.id}⟩" for alts in (turn.top_logprobs or []) for a in alts
           if a.id is not None and a.token and not a.token.startswith("token_id:")}
    return TurnTokens(ids, texts, [False] * len(ids), p, False, [], alt)
