"""Training rows exactly as TRL's ``_chain_to_sequences`` builds them (docs/TRAINER.md).

The stitching is the same in TRL 1.14 and 1.16: a builder holds ``tokens``, ``loss_mask``,
``logprobs`` and where the last output started. For each later turn, ``matched`` = common
prefix of the held tokens and the turn's prompt ids, ``drift`` = held length − matched:

* CLEAN   — drift == 0: append the prompt tail as context (mask 0, logprob 0.0);
* REALIGN — matched ≥ last output start and drift < ``fork_threshold``: overwrite the held
  tokens from ``matched`` on with the prompt tail as context. The overwritten sampled
  tokens of the last answer **lose their gradient**;
* FORK    — otherwise: a new builder starts with this turn.

Then the output is appended: mask 1 on every token (1.14), or its per-token mask (1.16,
which also validates lengths). Rows are the builders with a trained token. The list
operations below are TRL's own, in the same order, so odd inputs (a logprob list shorter
than the output under 1.14) come out the way TRL leaves them. On top of TRL's result we
keep provenance: which turn (and prompt / output part) every row token came from, and
per turn the verdict and how many of its trained tokens survive.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from viewer.drift.causes import common_prefix

__all__ = ["FORK_THRESHOLD_TOKENS", "TrainerTurn", "RowSpan", "TrainingRow", "TurnVerdict", "Tally", "Rows",
           "stitch"]

FORK_THRESHOLD_TOKENS = 1024  # `fork_threshold_tokens` in TRL's opencode example


@dataclass(frozen=True)
class TrainerTurn:
    """TRL's ``TurnRecord`` (prompt ids, output ids, their logprobs, 1.16's output mask) for our turn ``turn``.

    ``output_mask`` None = every output token trained (1.14's only behaviour)."""

    turn: int
    prompt_ids: list[int]
    output_ids: list[int]
    output_log_probs: list[Any]
    output_mask: list[int] | None = None


@dataclass
class RowSpan:
    """Tokens [start, end) of a row came from ``turn``'s prompt tail or output."""

    start: int
    end: int
    turn: int
    part: str  # "prompt" | "output"


@dataclass
class TrainingRow:
    """TRL's ``TrainingSequence`` (input_ids, completion_mask, old_log_probs) plus provenance spans."""

    input_ids: list[int] = field(default_factory=list)
    completion_mask: list[int] = field(default_factory=list)
    old_log_probs: list[Any] = field(default_factory=list)
    spans: list[RowSpan] = field(default_factory=list)

    @property
    def trained_tokens(self) -> int:
        return len(self.completion_mask) - self.completion_mask.count(0)  # masks are 0/1 ints

    @property
    def turns(self) -> list[int]:
        return list(dict.fromkeys(s.turn for s in self.spans))

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "turns": self.turns, "trained_tokens": self.trained_tokens}


@dataclass
class TurnVerdict:
    """How one turn of the chain was stitched.

    ``trained_tokens``: its output tokens appended with mask 1; ``tokens_losing_gradient``:
    mask-1 tokens of turn ``lost_from_turn`` that this turn's REALIGN overwrote;
    ``own_tokens_lost``: this turn's own trained tokens a later REALIGN overwrote;
    ``kept_trained``: its trained tokens left in the rows. ``row`` indexes
    :attr:`Rows.rows` (None when its builder had no trained token and was dropped).
    """

    turn: int
    verdict: str  # FIRST | CLEAN | REALIGN | FORK
    matched: int = 0
    drift: int = 0
    held_len: int = 0
    last_output_start: int = 0
    row: int | None = None
    trained_tokens: int = 0
    tokens_losing_gradient: int = 0
    lost_from_turn: int | None = None
    own_tokens_lost: int = 0
    kept_trained: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Tally:
    """TRL's drift tally over the T−1 transitions (TRL keeps them as floats; they are counts)."""

    clean: int = 0
    realign: int = 0
    fork: int = 0
    transitions: int = 0
    drift_tokens: int = 0
    drift_max: int = 0

    def add(self, kind: str, drift: int) -> None:
        setattr(self, kind.lower(), getattr(self, kind.lower()) + 1)
        self.transitions += 1
        self.drift_tokens += drift
        self.drift_max = max(self.drift_max, drift)

    def merge(self, other: Tally) -> None:
        for k in ("clean", "realign", "fork", "transitions", "drift_tokens"):
            setattr(self, k, getattr(self, k) + getattr(other, k))
        self.drift_max = max(self.drift_max, other.drift_max)

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass
class Rows:
    """The rows TRL trains on, the per-turn verdicts and TRL's tally."""

    rows: list[TrainingRow]
    verdicts: list[TurnVerdict]
    tally: Tally
    fork_threshold: int = FORK_THRESHOLD_TOKENS
    dropped: list[TrainingRow] = field(default_factory=list)  # builders left without a trained token

    @property
    def tokens_losing_gradient(self) -> int:
        return sum(v.tokens_losing_gradient for v in self.verdicts)

    @property
    def trained_tokens(self) -> int:
        """Sampled tokens appended with mask 1 (before any REALIGN)."""
        return sum(v.trained_tokens for v in self.verdicts)

    @property
    def kept_trained_tokens(self) -> int:
        return sum(r.trained_tokens for r in self.rows)

    @property
    def forked_rows(self) -> int:
        return self.tally.fork

    def verdict(self, turn: int) -> TurnVerdict | None:
        return next((v for v in self.verdicts if v.turn == turn), None)

    def counts(self) -> dict[str, int]:
        out = {"FIRST": 0, "CLEAN": 0, "REALIGN": 0, "FORK": 0}
        for v in self.verdicts:
            out[v.verdict] += 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"rows": [r.to_dict() for r in self.rows], "verdicts": [v.to_dict() for v in self.verdicts],
                "tally": self.tally.to_dict(), "dropped_rows": len(self.dropped),
                "fork_threshold": self.fork_threshold, "tokens_losing_gradient": self.tokens_losing_gradient,
                "trained_tokens": self.trained_tokens, "kept_trained_tokens": self.kept_trained_tokens,
                "counts": self.counts()}


def _truthy(values: Sequence[Any]) -> int:
    """How many of ``values`` are truthy (``sum(1 for m in values if m)`` at C speed: it runs over
    every output token of every turn of a scan)."""
    return sum(map(bool, values))


class _Builder:
    """TRL's ``_SampleBuilder`` (same list operations), with provenance spans."""

    def __init__(self, fork_threshold: int, validate: bool):
        self.fork_threshold, self.validate = fork_threshold, validate
        self.row = TrainingRow()
        self.last_response_start_idx: int | None = None

    def classify(self, prompt_ids: list[int]) -> tuple[str, int, int]:
        tokens = self.row.input_ids
        matched = common_prefix(tokens, prompt_ids)
        drift = len(tokens) - matched
        if drift == 0:
            return "CLEAN", matched, 0
        start = self.last_response_start_idx
        if start is not None and matched >= start and drift < self.fork_threshold:
            return "REALIGN", matched, drift
        return "FORK", matched, drift

    def append_turn(self, t: TrainerTurn, kind: str, matched: int = 0) -> tuple[int, int | None]:
        """Append ``t`` as CLEAN or REALIGN (``matched``: the common prefix :meth:`classify` found;
        TRL computes it again, to the same value); return how many mask-1 tokens a REALIGN
        overwrote, and whose."""
        r, lost, owner = self.row, 0, None
        if kind == "REALIGN":
            tail = t.prompt_ids[matched:]
            lost = _truthy(r.completion_mask[matched:])
            owner = next((s.turn for s in reversed(r.spans) if s.part == "output" and s.end > matched), None)
            r.input_ids[matched:] = tail
            r.completion_mask[matched:] = [0] * len(tail)
            r.old_log_probs[matched:] = [0.0] * len(tail)
            r.spans = [RowSpan(s.start, min(s.end, matched), s.turn, s.part) for s in r.spans if s.start < matched]
            self._span(matched, t.turn, "prompt")
        else:
            start = len(r.input_ids)
            self._append(t.prompt_ids[start:], mask=0)
            self._span(start, t.turn, "prompt")
        self.last_response_start_idx = len(r.input_ids)
        start = len(r.input_ids)
        self._append(t.output_ids, mask=t.output_mask if t.output_mask is not None else 1,
                     logprobs=t.output_log_probs)
        self._span(start, t.turn, "output")
        return lost, owner

    def _span(self, start: int, turn: int, part: str) -> None:
        if len(self.row.input_ids) > start:
            self.row.spans.append(RowSpan(start, len(self.row.input_ids), turn, part))

    def _append(self, ids: list[int], *, mask: int | list[int], logprobs: list[Any] | None = None) -> None:
        r = self.row
        if not self.validate:  # TRL 1.14: a uniform mask, an empty logprob list becomes zeros
            r.input_ids.extend(ids)
            r.completion_mask.extend([mask] * len(ids))  # type: ignore[list-item]
            r.old_log_probs.extend(logprobs if logprobs else [0.0] * len(ids))
            return
        masks = [mask] * len(ids) if isinstance(mask, int) else mask  # TRL 1.16, same checks and messages
        if len(masks) != len(ids):
            raise ValueError("loss mask must contain one entry per token")
        if any(masks) and logprobs is None:
            raise ValueError("trainable tokens require one sampled logprob per token")
        if logprobs is not None and len(logprobs) != len(ids):
            raise ValueError("logprobs must contain one entry per token")
        r.input_ids.extend(ids)
        r.completion_mask.extend(masks)
        r.old_log_probs.extend(logprobs if logprobs is not None else [0.0] * len(ids))


def _chain_one(builders: list[_Builder], t: TrainerTurn, v: TurnVerdict, verdicts: list[TurnVerdict],
               tally: Tally, fork_threshold: int, validate: bool) -> None:
    """One turn of ``_chain_to_sequences``' loop, filling ``v``."""
    if not builders:
        builders.append(_Builder(fork_threshold, validate))
        builders[-1].append_turn(t, "CLEAN")
        return
    b = builders[-1]
    v.held_len, v.last_output_start = len(b.row.input_ids), b.last_response_start_idx or 0
    kind, v.matched, v.drift = b.classify(t.prompt_ids)
    v.verdict = kind
    tally.add(kind, v.drift)
    if kind == "FORK":
        builders.append(_Builder(fork_threshold, validate))
        builders[-1].append_turn(t, "CLEAN")
        return
    lost, v.lost_from_turn = b.append_turn(t, kind, v.matched)
    if lost:
        v.tokens_losing_gradient = lost
        owner = next((pv for pv in reversed(verdicts) if pv.turn == v.lost_from_turn), None)
        if owner is not None:
            owner.own_tokens_lost += lost


def stitch(turns: Sequence[TrainerTurn], *, fork_threshold: int = FORK_THRESHOLD_TOKENS,
           validate: bool = False) -> Rows:
    """Chain ``turns`` (in order) into rows as ``_chain_to_sequences`` does.

    ``validate`` = TRL 1.16's length checks (a ValueError with TRL's message, prefixed
    with the turn, on a bad turn).
    """
    builders: list[_Builder] = []
    verdicts: list[TurnVerdict] = []
    builder_of: list[int] = []
    tally = Tally()
    for t in turns:
        t = TrainerTurn(t.turn, list(t.prompt_ids), list(t.output_ids), list(t.output_log_probs),
                        None if t.output_mask is None else list(t.output_mask))
        v = TurnVerdict(turn=t.turn, verdict="FIRST")
        try:
            _chain_one(builders, t, v, verdicts, tally, fork_threshold, validate)
        except ValueError as e:  # TRL 1.16's own message, located
            raise ValueError(f"turn {t.turn}: {e}") from e
        v.trained_tokens = len(t.output_ids) if t.output_mask is None else _truthy(t.output_mask)
        verdicts.append(v)
        builder_of.append(len(builders) - 1)
    keep = [i for i, b in enumerate(builders) if any(b.row.completion_mask)]
    new_index = {old: new for new, old in enumerate(keep)}
    rows = [builders[i].row for i in keep]
    kept: dict[int, int] = {}
    for r in rows:
        for s in r.spans:
            if s.part == "output":
                kept[s.turn] = kept.get(s.turn, 0) + _truthy(r.completion_mask[s.start:s.end])
    for v, bi in zip(verdicts, builder_of):
        v.row = new_index.get(bi)
        v.kept_trained = kept.get(v.turn, 0)
    dropped = [b.row for i, b in enumerate(builders) if i not in new_index]
    return Rows(rows, verdicts, tally, fork_threshold=fork_threshold, dropped=dropped)
