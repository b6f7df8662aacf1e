"""What a rescore is about, as pure values: which row tokens to score and what came out.

The trainer's forward pass runs over each trainer row (:mod:`viewer.drift.rows`, the same
rows the Drift tab shows) and gives ``log p(ids[i] | ids[:i])`` for every trained row
position ``i``. The sampler's value for that token is the row's ``old_log_probs[i]``
(what TRL uses as the old policy's logprob), so **Δ = trainer − sampler** is exactly the
log importance ratio TRL would see, and ``ratio = exp(Δ)``.

Δ has two causes: numerics (another kernel, dtype or batch shape over the *same* ids) and
drift (the trainer's context is not what the sampler saw: a re-rendered prompt, a REALIGN).
Each turn therefore says whether its trained tokens' context (the row up to the turn's
output) equals the engine's prompt ids (``context``: ``same`` / ``changed`` / ``unknown``
when the source has no engine ids; docs/TRAINER.md, "Trainer-side logprobs"), so
drift-caused Δ is told apart from numeric Δ.

No torch here: :mod:`viewer.rescore.model` computes the trainer logprobs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from viewer.rollout import Rollout

__all__ = ["RowTarget", "TurnDelta", "RescoreResult", "targets", "context_of", "assemble"]

SAME, CHANGED, UNKNOWN = "same", "changed", "unknown"


@dataclass(frozen=True)
class RowTarget:
    """One trainer row to run: its ids and the trained positions (index into ``input_ids``) to score."""

    row: int
    input_ids: list[int]
    positions: list[int]
    turns: list[int]          # the turn each position's token was sampled in
    output_index: list[int]   # its index among that turn's output tokens
    sampler: list[float]      # the row's old_log_probs at each position


@dataclass
class TurnDelta:
    """The trained tokens of one turn, sampler vs trainer logprobs (parallel lists)."""

    turn: int
    row: int
    verdict: str                     # FIRST / CLEAN / REALIGN / FORK (viewer.drift.rows)
    context: str = UNKNOWN           # same / changed / unknown: the trainer's context vs the engine's prompt
    context_at: int | None = None    # first position where they differ (changed)
    output_index: list[int] = field(default_factory=list)
    sampler: list[float] = field(default_factory=list)
    trainer: list[float | None] = field(default_factory=list)  # None: not scored (cancelled)
    positions: list[int] = field(default_factory=list)  # index into the trainer row's input_ids
    ids: list[int] = field(default_factory=list)        # the token id there
    # Δ the sampler's settings make by construction (viewer.rescore.expected); empty: not computed
    expected: list[float | None] = field(default_factory=list)

    @property
    def deltas(self) -> list[float]:
        return [t - s for s, t in zip(self.sampler, self.trainer) if t is not None and _finite(s) and _finite(t)]

    def stats(self, threshold: float) -> dict[str, Any]:
        d = self.deltas
        ad = [abs(x) for x in d]
        return {"turn": self.turn, "row": self.row, "verdict": self.verdict, "context": self.context,
                "tokens": len(d),
                "mean_delta": _r(sum(d) / len(d)) if d else None,
                "mean_abs_delta": _r(sum(ad) / len(ad)) if ad else None,
                "max_abs_delta": _r(max(ad)) if ad else None,
                "ratio_min": _r(math.exp(min(d))) if d else None,
                "ratio_max": _r(math.exp(max(d))) if d else None,
                "flagged": sum(1 for x in ad if x > threshold)}

    def by_output(self) -> dict[int, tuple[float, float | None]]:
        """output index → (sampler, trainer): what the token view paints."""
        return {k: (s, t) for k, s, t in zip(self.output_index, self.sampler, self.trainer)}


@dataclass
class RescoreResult:
    """A whole rollout rescored: model, where it ran, trainer semantics, per-turn deltas."""

    model: str
    device: str
    dtype: str
    temperature: float
    threshold: float
    trainer: dict[str, Any]
    turns: list[TurnDelta]
    seconds: float = 0.0
    cancelled: bool = False
    notes: list[str] = field(default_factory=list)
    rows: int = 0  # trainer rows in the batch (a row without trained tokens is still a sequence to TRL)
    # (mode, clip min, clip max) the app marks tokens with (viewer.rescore.importance); None: no marks
    is_choice: tuple[str, float | None, float | None] | None = None
    sampling: dict[str, Any] = field(default_factory=dict)  # the sampler settings `expected` is from

    def turn(self, index: int) -> TurnDelta | None:
        return next((t for t in self.turns if t.turn == index), None)

    def totals(self) -> dict[str, Any]:
        d = [x for t in self.turns for x in t.deltas]
        ad = [abs(x) for x in d]
        return {"tokens": len(d),
                "mean_abs_delta": _r(sum(ad) / len(ad)) if ad else None,
                "max_abs_delta": _r(max(ad)) if ad else None,
                "ratio_min": _r(math.exp(min(d))) if d else None,
                "ratio_max": _r(math.exp(max(d))) if d else None,
                "flagged": sum(1 for x in ad if x > self.threshold),
                "context_changed_tokens": sum(len(t.deltas) for t in self.turns if t.context == CHANGED)}

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "device": self.device, "dtype": self.dtype, "temperature": self.temperature,
                "threshold": self.threshold, "trainer": self.trainer,
                "turns": [t.stats(self.threshold) for t in self.turns], "totals": self.totals(),
                "seconds": round(self.seconds, 3), "cancelled": self.cancelled, "notes": list(self.notes)}


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)


def _r(v: float) -> float:
    return round(float(v), 6)


def targets(rows: Any) -> list[RowTarget]:
    """The trained positions of every kept row (a :class:`viewer.drift.Rows`) with their sampler values.

    A trained token at row position 0 has no context to predict it from and is skipped."""
    out: list[RowTarget] = []
    for n, r in enumerate(rows.rows if rows is not None else []):
        pos, turns, oidx, samp = [], [], [], []
        for s in r.spans:
            if s.part != "output":
                continue
            for i in range(max(1, s.start), s.end):
                if r.completion_mask[i]:
                    pos.append(i)
                    turns.append(s.turn)
                    oidx.append(i - s.start)
                    lp = r.old_log_probs[i]
                    samp.append(float(lp) if isinstance(lp, (int, float)) else math.nan)
        if pos:
            out.append(RowTarget(n, list(r.input_ids), pos, turns, oidx, samp))
    return out


def context_of(rollout: Rollout, turn: int, row_ids: list[int], output_start: int) -> tuple[str, int | None]:
    """Does the trainer predict ``turn``'s output from the ids the sampler saw? Compares the row up to
    the output with the engine's prompt ids (``unknown`` when the source has none)."""
    try:
        t = rollout.turn(turn)
    except KeyError:
        return UNKNOWN, None
    if t.prompt_source != "engine" or not t.prompt_ids:
        return UNKNOWN, None
    mine, theirs = row_ids[:output_start], list(t.prompt_ids)
    n = min(len(mine), len(theirs))
    first = next((i for i in range(n) if mine[i] != theirs[i]), None)
    if first is None and len(mine) == len(theirs):
        return SAME, None
    return CHANGED, first if first is not None else n


def assemble(rollout: Rollout, trainer_rows: Any, tgts: list[RowTarget], scores: dict[int, list[float | None]], *,
             model: str, device: str, dtype: str, temperature: float, threshold: float,
             seconds: float = 0.0, cancelled: bool = False, notes: list[str] | None = None,
             expected: dict[int, list[float]] | None = None, sampling: dict[str, Any] | None = None) -> RescoreResult:
    """Group the scored positions (``scores``: row → trainer logprob per target position) by turn;
    ``expected``: row → the settings' expected Δ per position (:mod:`viewer.rescore.expected`)."""
    rows = trainer_rows.rows
    by_turn: dict[int, TurnDelta] = {}
    for tg in tgts:
        got = scores.get(tg.row) or [None] * len(tg.positions)
        exp = (expected or {}).get(tg.row) or [None] * len(tg.positions)
        row = rows.rows[tg.row]
        for turn, k, p, s, t, e in zip(tg.turns, tg.output_index, tg.positions, tg.sampler, got, exp):
            td = by_turn.get(turn)
            if td is None:
                v = rows.verdict(turn)
                start = next(sp.start for sp in row.spans if sp.turn == turn and sp.part == "output")
                ctx, at = context_of(rollout, turn, row.input_ids, start)
                td = by_turn[turn] = TurnDelta(turn, tg.row, v.verdict if v else "?", ctx, at)
            td.output_index.append(k)
            td.sampler.append(s)
            td.trainer.append(t)
            td.positions.append(p)
            td.ids.append(tg.input_ids[p])
            td.expected.append(e)
    return RescoreResult(model, device, dtype, temperature, threshold, trainer_rows.spec.to_dict(),
                         [by_turn[k] for k in sorted(by_turn)], seconds, cancelled, list(notes or []), len(rows.rows),
                         sampling=dict(sampling or {}))
