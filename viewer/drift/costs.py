"""What each cause costs in gradient: the fork-threshold sweep and the per-cause attribution
(docs/DRIFT-DOCTOR.md, "What each cause costs").

Everything here re-runs :func:`viewer.drift.rows.stitch` — the exact trainer code — on the
inputs the trainer was fed (:attr:`TrainerRows.inputs`); nothing re-implements the stitching.

* :func:`sweep` — rows, forked rows and trained tokens losing their gradient per fork threshold;
* :func:`lost_by_cause` — every trained token a REALIGN overwrites lost *at that transition*,
  attributed to the cause of the divergence that cut the row there: the held row (rebuilt
  exactly from the verdict: the prompt's first ``matched`` ids, then the previous output from
  ``matched − last_output_start`` on) against the turn's prompt ids, classified by
  :func:`viewer.drift.causes.classify_divergence`. A REALIGN cuts at the first divergence,
  so all of its lost tokens belong to that one cause, and the causes sum to the total;
* :func:`rollout_costs` — both plus the measured what-ifs (:mod:`viewer.drift.whatif`).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from viewer.drift.causes import AL_CLASS, classify_divergence
from viewer.drift.rows import Rows, TrainerTurn, stitch
from viewer.drift.trainer import CONTRACT, TrainerRows

__all__ = ["DEFAULT_SWEEP", "UNCLASSIFIED", "parse_thresholds", "threshold_label", "sweep", "lost_by_cause",
           "LostTokens", "RolloutCosts", "rollout_costs", "new_gradient_block", "merge_gradient"]

DEFAULT_SWEEP: tuple[float, ...] = (0, 64, 256, 1024, math.inf)
UNCLASSIFIED = "unclassified"  # no tokenizer (or ids outside it): the cause cannot be named


def parse_thresholds(text: str) -> tuple[float, ...]:
    """``"0,64,256,1024,inf"`` → thresholds in the order given (ValueError naming the bad item)."""
    out: list[float] = []
    for item in str(text).split(","):
        s = item.strip().lower()
        if s in ("inf", "infinity"):
            out.append(math.inf)
            continue
        try:
            n = int(s)
        except ValueError:
            raise ValueError(f"--sweep-fork-threshold: {item.strip()!r} is not a whole number or 'inf'") from None
        if n < 0:
            raise ValueError(f"--sweep-fork-threshold: {n} is negative (a fork threshold is ≥ 0)")
        out.append(n)
    if not out or len(set(out)) != len(out):
        raise ValueError("--sweep-fork-threshold: give distinct thresholds, e.g. 0,64,256,1024,inf")
    return tuple(out)


def threshold_label(x: float) -> int | str:
    """A threshold as JSON holds it: an int, or ``"inf"`` (no drift is large enough to fork)."""
    return "inf" if x == math.inf else int(x)


def _point(thr: float, r: Rows) -> dict[str, Any]:
    return {"fork_threshold": threshold_label(thr), "rows": len(r.rows), "forked_rows": r.forked_rows,
            "tokens_losing_gradient": r.tokens_losing_gradient, "trained_tokens": r.trained_tokens,
            "kept_trained_tokens": r.kept_trained_tokens}


def sweep(turns: Sequence[TrainerTurn], thresholds: Sequence[float], *, validate: bool) -> list[dict[str, Any]]:
    """One point per threshold: ``stitch`` on the same inputs with that ``fork_threshold``."""
    return [_point(thr, stitch(turns, fork_threshold=thr, validate=validate)) for thr in thresholds]


@dataclass
class LostTokens:
    """``tokens`` trained tokens of turn ``turn``'s output that turn ``at_turn``'s REALIGN overwrote."""

    turn: int | None
    at_turn: int
    tokens: int
    cause: str
    al_class: str | None
    matched: int
    drift: int
    evidence: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def lost_by_cause(turns: Sequence[TrainerTurn], rows: Rows, tok) -> list[LostTokens]:
    """One entry per REALIGN that cost trained tokens (``rows`` = ``stitch(turns, ...)``)."""
    out: list[LostTokens] = []
    for i, v in enumerate(rows.verdicts):
        if v.verdict != "REALIGN" or not v.tokens_losing_gradient:
            continue
        t, prev = turns[i], turns[i - 1]  # verdicts follow the turns; a REALIGN follows a turn in its row
        held = list(t.prompt_ids[:v.matched]) + list(prev.output_ids[v.matched - v.last_output_start:])
        cause, al, ev = UNCLASSIFIED, None, "no tokenizer: the divergence cannot be classified"
        if len(held) != v.held_len:  # cannot happen for stitch's own rows; say so rather than guess
            ev = f"held row not rebuilt ({len(held)} vs {v.held_len} tokens)"
        elif tok is not None:
            try:
                cl = classify_divergence(held, t.prompt_ids, v.matched, tok, a_is_prefix=True,
                                         labels=("held", "next prompt"))
                cause, al, ev = cl.cause, AL_CLASS[cl.cause], cl.evidence
            except (IndexError, KeyError, ValueError) as e:  # ids outside the tokenizer: data, not a crash
                ev = f"divergence not classified: {type(e).__name__}: {e}"
        out.append(LostTokens(v.lost_from_turn, v.turn, v.tokens_losing_gradient, cause, al, v.matched, v.drift,
                              ev))
    return out


@dataclass
class RolloutCosts:
    """The gradient a rollout's drift costs under one trainer, and what the what-ifs recover."""

    lost: list[LostTokens] = field(default_factory=list)
    whatifs: list[dict[str, Any]] = field(default_factory=list)
    sweep: list[dict[str, Any]] | None = None
    total: int = 0

    @property
    def by_cause(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for x in self.lost:
            out[x.cause] = out.get(x.cause, 0) + x.tokens
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"tokens_losing_gradient": self.total, "by_cause": self.by_cause,
                "by_turn": [x.to_dict() for x in self.lost], "what_if": self.whatifs,
                **({"sweep": self.sweep} if self.sweep is not None else {})}


def rollout_costs(rollout, tr: TrainerRows, tok, *, thresholds: Sequence[float] | None = None,
                  whatifs: bool = True) -> RolloutCosts:
    """Per-cause attribution (+ the sweep when ``thresholds``, + the what-ifs) of ``tr``'s rows."""
    out = RolloutCosts()
    if tr.rows is None:
        return out
    out.total = tr.rows.tokens_losing_gradient
    out.lost = lost_by_cause(tr.inputs, tr.rows, tok)
    validate = tr.spec.mode == CONTRACT
    if thresholds is not None:
        out.sweep = sweep(tr.inputs, thresholds, validate=validate)
    if whatifs:
        from viewer.drift.whatif import measure_whatifs

        out.whatifs = measure_whatifs(rollout, tr, tok)
    return out


# ---- a scan's ``gradient`` block: per-rollout costs summed -------------------------------------------------------

def new_gradient_block() -> dict[str, Any]:
    return {"tokens_losing_gradient": 0, "by_cause": {}, "by_turn": [], "what_if": [], "sweep": None}


def merge_gradient(block: dict[str, Any], part: dict[str, Any], rollout: str | None = None) -> None:
    """Add one rollout's :meth:`RolloutCosts.to_dict` (or another block) into ``block``.

    What-ifs are summed over the rollouts where they were measured (``measured_rollouts``), with
    the baseline over the same rollouts, so ``recovered`` compares like with like; the reasons a
    what-if could not be measured are counted (``not_measured``)."""
    block["tokens_losing_gradient"] += part["tokens_losing_gradient"]
    for c, n in part["by_cause"].items():
        block["by_cause"][c] = block["by_cause"].get(c, 0) + n
    block["by_turn"].extend({**x, "rollout": x.get("rollout", rollout)} for x in part["by_turn"])
    if part.get("sweep") is not None:
        if block.get("sweep") is None:
            block["sweep"] = [dict(p) for p in part["sweep"]]
        else:
            for p, q in zip(block["sweep"], part["sweep"]):
                for k, v in q.items():
                    if k != "fork_threshold":
                        p[k] += v
    by_name = {w["name"]: w for w in block["what_if"]}
    for w in part["what_if"]:
        agg = by_name.get(w["name"])
        if agg is None:
            agg = {"name": w["name"], "what": w["what"], "measured_rollouts": 0, "not_measured": {},
                   "baseline_tokens_losing_gradient": 0, "tokens_losing_gradient": 0, "recovered": 0,
                   "rows": 0, "baseline_rows": 0}
            block["what_if"].append(agg)
            by_name[w["name"]] = agg
        if "measured_rollouts" in w:  # another block
            agg["measured_rollouts"] += w["measured_rollouts"]
            for r, n in w["not_measured"].items():
                agg["not_measured"][r] = agg["not_measured"].get(r, 0) + n
        elif w["measured"]:
            agg["measured_rollouts"] += 1
        else:
            agg["not_measured"][w["reason"]] = agg["not_measured"].get(w["reason"], 0) + 1
            continue
        for k in ("baseline_tokens_losing_gradient", "tokens_losing_gradient", "recovered", "rows", "baseline_rows"):
            agg[k] += w[k]
