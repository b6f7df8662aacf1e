"""Two rollouts side by side: turns paired, and where each pair's token ids first differ.

Used to compare the siblings of a GRPO group (two rollouts of one task), a rollout with a
re-run of itself, or two captures of different tasks. Ids are compared exactly as the trainer
would see them: prompt ids then output ids of each call. A prompt recorded without ids is
rendered the way ``trl-message`` renders it (:func:`viewer.drift.trainer.message_prompt_ids`)
and labelled ``rerender``, so a text-only source is compared on what TRL would train on.

Across tokenizers (the two token tables spell ids differently) ids say nothing: each pair is
then aligned by text (:mod:`viewer.text_align`, UTF-8 bytes) and its divergence is the token
covering the first differing byte on each side (``alignment: "text"``). Same vocabulary, or no
tables to spell the ids with: ids are compared as above (``alignment: "ids"``).

Pairing: the k-th agent turn of A with the k-th agent turn of B; bookkeeping calls (title,
compaction, ...) with the call of the same role and rank on the other side. Pairs follow A's
call order; calls only B has come last, in B's order.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from .drift.causes import common_prefix
from .rollout import Rollout, Turn
from .text_align import TextAlignment, align_text, same_vocab
from .tokens import TokenTexts, turn_tokens

__all__ = ["Divergence", "TurnPair", "Comparison", "pair_turns", "trainer_prompt", "compare"]


@dataclass(frozen=True)
class Divergence:
    """The first position (over prompt + output) where the two id sequences differ.

    ``part`` is ``output`` when the position lies in both outputs (the prompts were identical
    up to there and both had ended), else ``prompt``. An id is None where that side has no
    token at ``position`` (one sequence is a prefix of the other, or the turn is unpaired).
    In a text-aligned pair ``position`` is A's token at the first differing byte and ``b_id`` /
    ``b_text`` B's token there (its position: ``TurnPair.text.b_position``)."""

    position: int
    part: str
    a_id: int | None
    b_id: int | None
    a_text: str | None
    b_text: str | None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class TurnPair:
    """One aligned pair of calls. ``a``/``b`` are the turns as compared (prompt ids rendered
    when they were missing); either is None when the other rollout has no such call."""

    label: str  # "agent 1", "title 1", ...: the rank that paired them
    a: Turn | None
    b: Turn | None
    common_prefix: int  # ids: the common id prefix; text: A's tokens wholly inside the common text
    first_divergence: Divergence | None
    alignment: str = "ids"  # "text" when the two sides' tokenizers differ (see the module doc)
    text: TextAlignment | None = None

    def position(self, which: str) -> int | None:
        """The diverging token's position on side ``which`` (``a``/``b``), None when identical."""
        if self.first_divergence is None:
            return None
        if self.text is not None:
            return self.text.a_position if which == "a" else self.text.b_position
        return self.first_divergence.position

    @staticmethod
    def _side(t: Turn | None) -> dict[str, Any]:
        if t is None:
            return {"turn": None, "prompt_len": 0, "len": 0, "prompt_source": None}
        return {"turn": t.index, "prompt_len": len(t.prompt_ids), "len": len(t.prompt_ids) + len(t.output_ids),
                "prompt_source": t.prompt_source}

    def to_dict(self) -> dict[str, Any]:
        a, b = self._side(self.a), self._side(self.b)
        return {"a_turn": a["turn"], "b_turn": b["turn"], "label": self.label,
                "common_prefix": self.common_prefix,
                "first_divergence": self.first_divergence.to_dict() if self.first_divergence else None,
                "a_prompt_len": a["prompt_len"], "b_prompt_len": b["prompt_len"], "a_len": a["len"],
                "b_len": b["len"], "a_prompt_source": a["prompt_source"], "b_prompt_source": b["prompt_source"],
                "alignment": self.alignment, "text": self.text.to_dict() if self.text is not None else None}


@dataclass
class Comparison:
    a_source: str
    b_source: str
    pairs: list[TurnPair] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    alignment: str = "ids"  # "text": the tokenizers differ, every pair is aligned by text
    tokenizers: tuple[str | None, str | None] = (None, None)

    @property
    def identical(self) -> bool:
        return all(p.first_divergence is None for p in self.pairs)

    @property
    def first_diverging(self) -> TurnPair | None:
        return next((p for p in self.pairs if p.first_divergence is not None), None)

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a_source, "b": self.b_source, "identical": self.identical,
                "turns": [p.to_dict() for p in self.pairs], "notes": list(self.notes), "alignment": self.alignment}


def _rank_keys(r: Rollout) -> list[tuple[tuple[str, int], Turn]]:
    seen: dict[str, int] = {}
    out = []
    for t in r.turns:
        group = "agent" if t.kind == "agent" else (t.role or t.kind)
        seen[group] = seen.get(group, 0) + 1
        out.append(((group, seen[group]), t))
    return out


def pair_turns(a: Rollout, b: Rollout) -> list[tuple[str, Turn | None, Turn | None]]:
    """``(label, turn of a, turn of b)`` for every call of either rollout (see the module doc)."""
    bk = dict(_rank_keys(b))
    used: set[tuple[str, int]] = set()
    out: list[tuple[str, Turn | None, Turn | None]] = []
    for key, t in _rank_keys(a):
        out.append((f"{key[0]} {key[1]}", t, bk.get(key)))
        used.add(key)
    out += [(f"{key[0]} {key[1]}", None, t) for key, t in _rank_keys(b) if key not in used]
    return out


def trainer_prompt(turn: Turn, tok: Any) -> Turn:
    """``turn`` with its prompt ids rendered as ``trl-message`` would, when none were recorded.

    Unchanged when ids exist or nothing can render them (no tokenizer, no chat template, no
    messages); a template that fails is noted in ``origin.rerender_error``."""
    if turn.prompt_ids or tok is None or not getattr(tok, "chat_template", None):
        return turn
    if not (turn.messages or (turn.request or {}).get("messages")):
        return turn
    from .drift.trainer import message_prompt_ids

    try:
        ids = message_prompt_ids(tok, turn)
    except Exception as exc:  # the template fails on this data: say so, compare what we have
        return dataclasses.replace(turn, origin=turn.origin.replace(rerender_error=f"{type(exc).__name__}: {exc}"))
    return dataclasses.replace(turn, prompt_ids=ids, prompt_source="rerender")


def _text(t: Turn, table: TokenTexts | None, i: int) -> str | None:
    n = len(t.prompt_ids) + len(t.output_ids)
    if i >= n:
        return None
    if table is not None:
        ids = t.prompt_ids if i < len(t.prompt_ids) else t.output_ids
        j = i if i < len(t.prompt_ids) else i - len(t.prompt_ids)
        return table.texts([ids[j]])[0]
    return turn_tokens(t, None).texts[i]  # the token view's own text without a tokenizer


def _part(a: Turn | None, b: Turn | None, ka: int, kb: int) -> str:
    in_out_a = a is None or ka >= len(a.prompt_ids)
    in_out_b = b is None or kb >= len(b.prompt_ids)
    part = "output" if in_out_a and in_out_b and a is not None and b is not None else "prompt"
    if a is None or b is None:  # an unpaired call: its own part at position 0
        one = a if a is not None else b
        part = "prompt" if one.prompt_ids else "output"
    return part


def _text_pair(label: str, a: Turn | None, b: Turn | None, tables: tuple[Any, Any]) -> TurnPair:
    sa = (list(a.prompt_ids) + list(a.output_ids)) if a is not None else []
    sb = (list(b.prompt_ids) + list(b.output_ids)) if b is not None else []
    al = align_text(sa, sb, tables[0], tables[1])
    if a is not None and b is not None and al.divergence_byte is None:
        return TurnPair(label, a, b, len(sa), None, "text", al)
    ka, kb = al.a_position, al.b_position
    ta, tb = al.token("a"), al.token("b")
    div = Divergence(position=ka, part=_part(a, b, ka, kb), a_id=ta.id if ta else None, b_id=tb.id if tb else None,
                     a_text=ta.text if ta else None, b_text=tb.text if tb else None)
    return TurnPair(label, a, b, ka, div, "text", al)


def _pair(label: str, a: Turn | None, b: Turn | None, tables: tuple[Any, Any]) -> TurnPair:
    sa = (list(a.prompt_ids) + list(a.output_ids)) if a is not None else []
    sb = (list(b.prompt_ids) + list(b.output_ids)) if b is not None else []
    k = common_prefix(sa, sb)
    if a is not None and b is not None and k == len(sa) == len(sb):
        return TurnPair(label, a, b, k, None)
    part = _part(a, b, k, k)
    div = Divergence(position=k, part=part,
                     a_id=sa[k] if k < len(sa) else None, b_id=sb[k] if k < len(sb) else None,
                     a_text=_text(a, tables[0], k) if a is not None else None,
                     b_text=_text(b, tables[1], k) if b is not None else None)
    return TurnPair(label, a, b, k, div)


def compare(a: Rollout, b: Rollout, *, tok_a: Any = None, tok_b: Any = None,
            table_a: TokenTexts | None = None, table_b: TokenTexts | None = None) -> Comparison:
    """Pair the calls of ``a`` and ``b`` and find each pair's first divergence.

    ``tok_*`` render prompts that have no ids (as the trainer would); ``table_*`` give the
    token texts (``viewer.tokenizer.TokenTable``; without one, the recorded bytes). Two tables
    with different vocabularies make every pair a text alignment (see the module doc)."""
    name_a = getattr(table_a, "name", None) or getattr(tok_a, "name_or_path", None)
    name_b = getattr(table_b, "name", None) or getattr(tok_b, "name_or_path", None)
    res = Comparison(a.source, b.source, tokenizers=(name_a, name_b))
    # Ids are comparable when both tables spell every id alike (whatever the tokenizers are
    # called); without both tables nothing can spell them, so ids are all there is.
    by_text = table_a is not None and table_b is not None and not same_vocab(table_a, table_b)
    if by_text:
        res.alignment = "text"
        res.notes.append(f"The rollouts use different tokenizers ({name_a} vs {name_b}): each pair is aligned by "
                         "text (UTF-8 bytes) and diverges at the first differing byte.")
    elif tok_a is not None and tok_b is not None and name_a != name_b and (table_a is None or table_b is None):
        res.notes.append(f"The rollouts use different tokenizers ({name_a} vs {name_b}): the same text may have "
                         "different ids.")
    for label, ta, tb in pair_turns(a, b):
        ta = trainer_prompt(ta, tok_a) if ta is not None else None
        tb = trainer_prompt(tb, tok_b) if tb is not None else None
        for side, t in (("A", ta), ("B", tb)):
            if t is not None and t.origin.rerender_error:
                res.notes.append(f"{side} turn {t.index}: chat template failed: {t.origin.rerender_error}")
            elif t is not None and not t.prompt_ids and t.kind == "agent":
                res.notes.append(f"{side} turn {t.index}: no prompt ids and none could be rendered "
                                 "(no tokenizer or no messages): only outputs are compared.")
        res.pairs.append((_text_pair if by_text else _pair)(label, ta, tb, (table_a, table_b)))
    return res
