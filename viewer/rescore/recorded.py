"""Trainer logprobs a file recorded: the mismatch views' result without a model run.

A rescore (:func:`viewer.rescore.rescore`) runs a model over the trainer rows to get the
trainer's logprob of every trained token. Some files already hold it, computed by the real
trainer during training: a prime-rl token export (viewer.sources.prime_rl) records
``trainer_logprobs`` next to the sampler's ``inference_logprobs`` for every token, on the
one sequence it trained. Those turns carry it as :attr:`viewer.rollout.Turn.trainer_logprobs`,
and :func:`recorded_result` turns them into the same :class:`~viewer.rescore.values.RescoreResult`
a rescore produces, so the token view's Δ mode, the rescore panel (per-turn table, Δ plot,
ratio histogram, importance sampling, explain) and ``rescore --json`` show them as they are.

Row semantics: the recorded sequence is the trainer's one row (row 0); each turn's output
sits at its prompt's length in it (the turn's prompt is every token before its output), so
``positions`` index that row. The first turn's verdict is FIRST and every later one CLEAN:
its prompt extends the row with context, nothing is overwritten or forked. The context is
``unknown``: the file holds the trainer's ids only, not the engine's prompt to compare with.
"""
from __future__ import annotations

import math
from typing import Any

from viewer.rescore.values import UNKNOWN, RescoreResult, TurnDelta
from viewer.rollout import Rollout

__all__ = ["recorded_result", "has_recorded", "RECORDED_MODEL", "RECORDED_DEVICE"]

RECORDED_MODEL = "recorded by the trainer"
RECORDED_DEVICE = "recorded"  # what marks a result as read from the file (no model ran)


def has_recorded(rollout: Rollout | None) -> bool:
    """Does any agent turn carry the trainer's own logprobs?"""
    return rollout is not None and any(t.trainer_logprobs is not None for t in rollout.agent_turns)


def _num(v: Any) -> float:
    """A logprob as a float; a missing one (null in the file) as NaN, which every view leaves out."""
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else math.nan


def recorded_result(rollout: Rollout | None, threshold: float = 0.5) -> RescoreResult | None:
    """The rescore-shaped result of ``rollout``'s recorded trainer logprobs (None when it has none);
    ``threshold``: |Δ| above which a token is flagged (``Settings.rescore_flag_delta``)."""
    if not has_recorded(rollout):
        return None
    turns: list[TurnDelta] = []
    for k, t in enumerate(rollout.agent_turns):
        tr = t.trainer_logprobs
        if tr is None or len(tr) != len(t.output_ids):
            continue
        start = len(t.prompt_ids)
        td = TurnDelta(t.index, 0, "FIRST" if k == 0 else "CLEAN", UNKNOWN)
        lps = list(t.logprobs)
        for i, m in enumerate(t.loss_mask):
            if not m or start + i == 0:  # untrained, or nothing before it to predict it from
                continue
            td.output_index.append(i)
            td.positions.append(start + i)
            td.ids.append(int(t.output_ids[i]))
            td.sampler.append(_num(lps[i]) if i < len(lps) else math.nan)
            td.trainer.append(_num(tr[i]))
        if td.positions:
            turns.append(td)
    src = rollout.format or "the file"
    trainer = {"mode": "recorded", "chosen": "recorded",
               "reason": f"trainer logprobs recorded in the file ({src}): the trainer's own values, no model run"}
    notes = [f"Trainer logprobs recorded by the trainer itself ({src}), not recomputed: Δ = trainer − sampler is "
             "the mismatch the trainer saw, with its kernels, dtype and sampling temperature."]
    return RescoreResult(RECORDED_MODEL, RECORDED_DEVICE, "as trained", 1.0, threshold, trainer, turns, 0.0, False,
                         notes, rows=1)
