"""Training rows as TRL's message-mode trainer stitches them (FORMATS.md §2.4 step 4).

Walk the kept turns in order holding a row (ids + completion mask + old logprobs) and
the start of the last output. For each new turn, ``matched`` = common prefix of the row
and the turn's prompt ids, ``drift`` = row length − matched:

* CLEAN   — drift == 0: append the prompt tail as context (mask 0, logprob 0.0);
* REALIGN — matched ≥ last output start and drift < ``fork_threshold_tokens``: cut the
  row at ``matched`` and append the prompt tail as context. The cut-off sampled tokens
  of the last answer **lose their gradient** (mask 1 → gone, replaced by context);
* FORK    — otherwise: close the row and start a new one with the whole prompt.

Then the turn's output is appended (mask 1 + its logprobs when trained, else mask 0 /
0.0). Rows without a trained token are dropped. The first turn gets verdict ``FIRST``.
Each row also records which turn (and prompt / output part) every token came from.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from viewer.drift import common_prefix
from viewer.rollout import Turn

__all__ = ["RowSpan", "TrainingRow", "TurnVerdict", "Rows", "build_rows", "FORK_THRESHOLD_TOKENS"]

FORK_THRESHOLD_TOKENS = 1024  # TRL's default `fork_threshold_tokens`


@dataclass
class RowSpan:
    """Tokens [start, end) of a row came from ``turn``'s prompt tail or output."""

    start: int
    end: int
    turn: int
    part: str  # "prompt" | "output"


@dataclass
class TrainingRow:
    input_ids: list[int] = field(default_factory=list)
    completion_mask: list[int] = field(default_factory=list)
    old_log_probs: list[float] = field(default_factory=list)
    spans: list[RowSpan] = field(default_factory=list)

    @property
    def trained_tokens(self) -> int:
        return sum(self.completion_mask)

    @property
    def turns(self) -> list[int]:
        return list(dict.fromkeys(s.turn for s in self.spans))

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "turns": self.turns, "trained_tokens": self.trained_tokens}

    def _truncate(self, n: int) -> None:
        del self.input_ids[n:], self.completion_mask[n:], self.old_log_probs[n:]
        kept = []
        for s in self.spans:
            if s.start >= n:
                continue
            kept.append(RowSpan(s.start, min(s.end, n), s.turn, s.part))
        self.spans = kept

    def _append(self, ids: Sequence[int], mask: int, lps: Sequence[float], turn: int, part: str) -> None:
        if not ids:
            return
        start = len(self.input_ids)
        self.input_ids.extend(ids)
        self.completion_mask.extend([mask] * len(ids))
        self.old_log_probs.extend(lps)
        self.spans.append(RowSpan(start, len(self.input_ids), turn, part))


@dataclass
class TurnVerdict:
    """How one turn was stitched.

    ``tokens_losing_gradient``: sampled mask-1 tokens of turn ``lost_from_turn`` that this
    turn's REALIGN cut off; ``own_tokens_lost``: this turn's own trained tokens that a
    later REALIGN cut off; ``kept_trained``: its trained tokens left in the kept rows.
    ``row`` indexes :attr:`Rows.rows` (None when the row was dropped or the turn skipped).
    """

    turn: int
    verdict: str  # FIRST | CLEAN | REALIGN | FORK | SKIPPED
    matched: int = 0
    drift: int = 0
    held_len: int = 0
    last_output_start: int = 0
    row: int | None = None
    trained: bool = False
    trained_tokens: int = 0
    tokens_losing_gradient: int = 0
    lost_from_turn: int | None = None
    own_tokens_lost: int = 0
    kept_trained: int = 0
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Rows:
    rows: list[TrainingRow]
    verdicts: list[TurnVerdict]
    dropped_rows: int = 0
    fork_threshold_tokens: int = FORK_THRESHOLD_TOKENS
    dropped: list[TrainingRow] = field(default_factory=list)  # the rows left without a trained token

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

    def counts(self) -> dict[str, int]:
        out = {"FIRST": 0, "CLEAN": 0, "REALIGN": 0, "FORK": 0, "SKIPPED": 0}
        for v in self.verdicts:
            out[v.verdict] += 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"rows": [r.to_dict() for r in self.rows], "verdicts": [v.to_dict() for v in self.verdicts],
                "dropped_rows": self.dropped_rows, "fork_threshold_tokens": self.fork_threshold_tokens,
                "tokens_losing_gradient": self.tokens_losing_gradient, "trained_tokens": self.trained_tokens,
                "kept_trained_tokens": self.kept_trained_tokens, "counts": self.counts()}


def build_rows(turns: Sequence[Turn], *, fork_threshold_tokens: int = FORK_THRESHOLD_TOKENS,
               prompt_ids: Callable[[Turn], Sequence[int]] | None = None,
               is_trained: Callable[[Turn], bool] | None = None,
               drop_untrained: bool = False) -> Rows:
    """Stitch ``turns`` (normally ``rollout.agent_turns``) into training rows.

    ``prompt_ids(turn)`` chooses the prompt ids the trainer sees (default: the recorded
    ``turn.prompt_ids``; TRL itself re-renders, e.g. ``lambda t: render_prompt_ids(tok,
    t.messages, t.tools, normalize_tool_arguments=False)``). ``is_trained`` defaults to
    ``turn.trained``. ``drop_untrained`` mimics a ``train_turn_fn`` filter that removes
    untrained turns before stitching (the opencode example's ``has_tool_call``).
    """
    get_prompt = prompt_ids or (lambda t: t.prompt_ids)
    trained_of = is_trained or (lambda t: bool(t.trained))
    rows: list[TrainingRow] = []
    verdicts: list[TurnVerdict] = []
    row_of_verdict: list[int | None] = []
    buf: TrainingRow | None = None
    last_out = 0
    for t in turns:
        trained = trained_of(t)
        if drop_untrained and not trained:
            continue
        p = list(get_prompt(t) or [])
        v = TurnVerdict(turn=t.index, verdict="FIRST", trained=trained)
        if not p:
            v.verdict, v.reason = "SKIPPED", "no prompt ids"
            verdicts.append(v)
            row_of_verdict.append(None)
            continue
        if buf is None:
            buf = TrainingRow()
            rows.append(buf)
            buf._append(p, 0, [0.0] * len(p), t.index, "prompt")
        else:
            v.held_len, v.last_output_start = len(buf.input_ids), last_out
            v.matched = common_prefix(buf.input_ids, p)
            v.drift = len(buf.input_ids) - v.matched
            if v.drift == 0:
                v.verdict = "CLEAN"
            elif v.matched >= last_out and v.drift < fork_threshold_tokens:
                v.verdict = "REALIGN"
                lost = sum(buf.completion_mask[v.matched:])
                if lost:
                    v.tokens_losing_gradient = lost
                    v.lost_from_turn = next((s.turn for s in reversed(buf.spans) if s.part == "output"), None)
                    for pv in reversed(verdicts):
                        if pv.turn == v.lost_from_turn:
                            pv.own_tokens_lost += lost
                            break
                buf._truncate(v.matched)
            else:
                v.verdict = "FORK"
                buf = TrainingRow()
                rows.append(buf)
            tail = p[len(buf.input_ids):]
            buf._append(tail, 0, [0.0] * len(tail), t.index, "prompt")
        last_out = len(buf.input_ids)
        o = list(t.output_ids)
        if trained:
            lps = [float(x) if x is not None else 0.0 for x in t.logprobs[:len(o)]]
            lps += [0.0] * (len(o) - len(lps))
            v.trained_tokens = len(o)
        else:
            lps = [0.0] * len(o)
        buf._append(o, 1 if trained else 0, lps, t.index, "output")
        verdicts.append(v)
        row_of_verdict.append(len(rows) - 1)
    # drop rows without a trained token; renumber
    keep = [i for i, r in enumerate(rows) if r.trained_tokens > 0]
    new_index = {old: new for new, old in enumerate(keep)}
    for v, ri in zip(verdicts, row_of_verdict):
        v.row = new_index.get(ri) if ri is not None else None
    kept_rows = [rows[i] for i in keep]
    kept: dict[int, int] = {}
    for r in kept_rows:
        for s in r.spans:
            if s.part == "output":
                kept[s.turn] = kept.get(s.turn, 0) + sum(r.completion_mask[s.start:s.end])
    for v in verdicts:
        v.kept_trained = kept.get(v.turn, 0)
    dropped = [r for i, r in enumerate(rows) if i not in new_index]
    return Rows(kept_rows, verdicts, dropped_rows=len(rows) - len(keep), fork_threshold_tokens=fork_threshold_tokens,
                dropped=dropped)
