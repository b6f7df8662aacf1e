"""TRL 1.16 GRPO's vLLM importance-sampling correction, recomputed on rescored rows (docs/MISMATCH.md).

``GRPOTrainer._generate_and_score_completions`` (trl 1.16.0) does, for a batch of sequences::

    diff  = nan_to_num((old − sampling) * mask, nan=0)      # float32, per token (old = trainer)
    diff  = diff.sum(-1, keepdim=True)                      # sequence_* modes only
    ratio = exp(diff)
    ratio = clamp(ratio, C_min, C_max)                      # *_truncate
    ratio = ratio.masked_fill((ratio < C_min) | (ratio > C_max), 0)   # *_mask (a None bound: ±inf)

and logs ``sampling/sampling_logp_difference/{mean,max}`` (|old − sampling| over trained tokens, NaN
left out) and ``sampling/importance_sampling_ratio/{min,mean,max}`` (over trained tokens for token
modes, over every sequence of the batch for sequence modes, an all-masked one included: ratio 1).

The same steps here in numpy float32, in the same order: the subtraction, mask, nan_to_num, clamp and
mask comparisons are the same IEEE float32 operations as torch's, bit for bit. Two steps are not:
``exp`` (torch's vectorised float32 exp is within 1 ulp of the correctly rounded value we compute) and
the sequence sum (torch sums float32 in another order). So token ratios agree within 1 ulp and sequence
ratios within a relative 1e-5; the metrics likewise (tests/test_importance.py checks this against TRL's
own code, docs/MISMATCH.md states it). No torch and no gradio: this module only does arithmetic.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

__all__ = ["MODES", "DEFAULT_MODE", "DEFAULT_CLIP_MAX", "DEFAULT_CLIP_MIN", "METRICS", "IsResult", "check_bounds",
           "importance", "kl", "effect", "batch_from_rescore", "tokens_from_rescore", "marks", "scored_rows"]

MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")
# TRL 1.16 GRPOConfig's defaults (tests/test_importance.py reads them from TRL itself and must agree)
DEFAULT_MODE = "sequence_mask"
DEFAULT_CLIP_MAX: float | None = 3.0
DEFAULT_CLIP_MIN: float | None = None
METRICS = ("sampling/sampling_logp_difference/mean", "sampling/sampling_logp_difference/max",
           "sampling/importance_sampling_ratio/min", "sampling/importance_sampling_ratio/mean",
           "sampling/importance_sampling_ratio/max")


def check_bounds(mode: str, clip_min: float | None, clip_max: float | None) -> None:
    """GRPOConfig's own checks (``__post_init__``): a known mode, min < max, a truncate mode needs a bound."""
    if mode not in MODES:
        raise ValueError(f"unknown importance-sampling mode {mode!r}: use one of {', '.join(MODES)}")
    for name, v in (("clip min", clip_min), ("clip max", clip_max)):
        if v is not None and not math.isfinite(v):
            raise ValueError(f"importance-sampling {name} must be a finite number or none, not {v}")
    if clip_min is not None and clip_max is not None and clip_min >= clip_max:
        raise ValueError(f"importance-sampling clip min ({clip_min}) must be less than clip max ({clip_max})")
    if mode.endswith("_truncate") and clip_min is None and clip_max is None:
        raise ValueError(f"{mode} needs at least one of clip min / clip max")


@dataclass
class IsResult:
    """Per row: the float32 ratio TRL applies to each position (``ratio[r][i]``, 1 where untrained in
    token modes; the row's one ratio repeated in sequence modes) and the unbounded ``raw`` ratio."""

    mode: str
    clip_min: float | None
    clip_max: float | None
    ratio: list[np.ndarray]
    raw: list[np.ndarray]
    mask: list[np.ndarray]
    metrics: dict[str, float]

    def changed(self, r: int) -> np.ndarray:
        """Trained positions of row ``r`` whose unbounded ratio lies outside the bounds: clipped by a
        truncate mode, zeroed by a mask mode."""
        lo = np.float32(-np.inf if self.clip_min is None else self.clip_min)
        hi = np.float32(np.inf if self.clip_max is None else self.clip_max)
        return self.mask[r] & ((self.raw[r] < lo) | (self.raw[r] > hi))


def _f32(values: Sequence[Any]) -> np.ndarray:
    return np.array([math.nan if v is None else float(v) for v in values], dtype=np.float32)


def importance(rows: Sequence[tuple[Sequence[Any], Sequence[Any], Sequence[Any]]], mode: str = DEFAULT_MODE,
               clip_min: float | None = DEFAULT_CLIP_MIN, clip_max: float | None = DEFAULT_CLIP_MAX) -> IsResult:
    """``rows``: one ``(sampler, trainer, mask)`` per sequence of the batch, parallel lists (None / NaN: no
    value). Rows may differ in length: TRL pads with mask 0, which changes neither ratios nor metrics."""
    check_bounds(mode, clip_min, clip_max)
    lo = np.float32(-np.inf if clip_min is None else clip_min)  # TRL compares float32 with float32 bounds
    hi = np.float32(np.inf if clip_max is None else clip_max)
    seq = mode.startswith("sequence")
    ratios, raws, masks, deltas, flat = [], [], [], [], []
    with np.errstate(invalid="ignore", over="ignore"):
        for sampler, trainer, mask in rows:
            s, t = _f32(sampler), _f32(trainer)
            m = np.array([bool(x) for x in mask], dtype=bool)
            if not (len(s) == len(t) == len(m)):
                raise ValueError(f"a row's sampler, trainer and mask differ in length: {len(s)}, {len(t)}, {len(m)}")
            diff = np.nan_to_num((t - s) * m.astype(np.float32), nan=0.0)  # ±inf → ±float32 max, as torch
            if seq:
                diff = np.array([diff.sum(dtype=np.float32)], dtype=np.float32)
            # exp correctly rounded to float32 (via float64): torch's float32 exp agrees in ~99% of values
            # and is never more than 1 ulp away; numpy's own float32 exp is off by 1 ulp far more often
            raw = np.exp(diff.astype(np.float64)).astype(np.float32)
            if mode.endswith("_truncate"):
                ratio = np.clip(raw, lo, hi)
            else:
                ratio = np.where((raw < lo) | (raw > hi), np.float32(0.0), raw).astype(np.float32)
            flat.append(ratio if seq else ratio[m])
            if seq:
                raw, ratio = np.full(len(m), raw[0], np.float32), np.full(len(m), ratio[0], np.float32)
            ratios.append(ratio)
            raws.append(raw)
            masks.append(m)
            d = np.abs(t - s)[m]
            deltas.append(d[~np.isnan(d)])
        metrics = _metrics(deltas, flat)  # a float32 mean of huge ratios may overflow to inf, as in torch
    return IsResult(mode, clip_min, clip_max, ratios, raws, masks, metrics)


def _metrics(deltas: list[np.ndarray], flat: list[np.ndarray]) -> dict[str, float]:
    d = np.concatenate(deltas) if deltas else np.zeros(0, np.float32)
    r = np.concatenate(flat) if flat else np.zeros(0, np.float32)
    # TRL: 0.0 for an empty selection; the mean is a float32 mean
    return {METRICS[0]: float(d.mean(dtype=np.float32)) if d.size else 0.0,
            METRICS[1]: float(d.max()) if d.size else 0.0,
            METRICS[2]: float(r.min()) if r.size else 0.0,
            METRICS[3]: float(r.mean(dtype=np.float32)) if r.size else 0.0,
            METRICS[4]: float(r.max()) if r.size else 0.0}


def kl(rows: Sequence[tuple[Sequence[Any], Sequence[Any], Sequence[Any]]]) -> dict[str, Any]:
    """KL(sampler ‖ trainer) estimators on the sampled (trained) tokens, log r = trainer − sampler:
    k1 = −log r, k2 = (log r)² / 2, k3 = (r − 1) − log r. Per token their mean, per sequence the sum over
    its trained tokens (mean over sequences); tokens without both values are left out. float64."""
    tok = {"k1": [], "k2": [], "k3": []}
    seqs = {"k1": [], "k2": [], "k3": []}
    for sampler, trainer, mask in rows:
        per = {"k1": 0.0, "k2": 0.0, "k3": 0.0}
        n = 0
        for s, t, m in zip(sampler, trainer, mask):
            if not m or s is None or t is None or not (math.isfinite(s) and math.isfinite(t)):
                continue
            lr = float(t) - float(s)
            vals = {"k1": -lr, "k2": lr * lr / 2, "k3": math.expm1(lr) - lr}
            for k, v in vals.items():
                tok[k].append(v)
                per[k] += v
            n += 1
        if n:
            for k in seqs:
                seqs[k].append(per[k])
    return {"tokens": len(tok["k1"]), "sequences": len(seqs["k1"]),
            "per_token": {k: _mean(v) for k, v in tok.items()},
            "per_sequence": {k: _mean(v) for k, v in seqs.items()},
            "sequence_values": {k: [round(x, 9) for x in v] for k, v in seqs.items()}}


def _mean(v: list[float]) -> float | None:
    return round(math.fsum(v) / len(v), 9) if v else None


def effect(rows: Sequence[tuple[Sequence[Any], Sequence[Any], Sequence[Any]]], clip_min: float | None,
           clip_max: float | None) -> dict[str, dict[str, Any]]:
    """What each mode does with these bounds, over trained tokens: the fraction whose weight is clipped
    (truncate) or zeroed (mask), the weight removed (1 − Σ applied / Σ unbounded ratio; negative when a
    lower clip adds weight), and the effective sample size (Σw)² / Σw² of the applied weights, as a
    fraction of the trained tokens. A mode whose bounds are invalid gets ``{"error": ...}``."""
    out: dict[str, dict[str, Any]] = {}
    for mode in MODES:
        try:
            res = importance(rows, mode, clip_min, clip_max)
        except ValueError as e:
            out[mode] = {"error": str(e)}
            continue
        w = np.concatenate([r[m] for r, m in zip(res.ratio, res.mask)]).astype(np.float64) if res.mask else np.zeros(0)
        raw = np.concatenate([r[m] for r, m in zip(res.raw, res.mask)]).astype(np.float64) if res.mask else np.zeros(0)
        n = int(w.size)
        changed = int(sum(int(res.changed(i).sum()) for i in range(len(res.mask))))
        zeroed = int((w == 0).sum()) if mode.endswith("_mask") else 0
        with np.errstate(invalid="ignore", over="ignore"):
            sraw, sw, sw2 = float(raw.sum()), float(w.sum()), float((w * w).sum())
        removed = 1 - sw / sraw if n and math.isfinite(sraw) and sraw > 0 else None
        ess = (sw * sw / sw2) / n if n and sw2 > 0 and math.isfinite(sw2) else (0.0 if n else None)
        out[mode] = {"tokens": n, "changed": changed, "zeroed": zeroed,
                     "fraction_changed": round(changed / n, 6) if n else None,
                     "weight_removed": None if removed is None else round(removed, 6),
                     "ess_fraction": None if ess is None else round(ess, 6)}
    return out


def scored_rows(result: Any) -> list[tuple[int, list[tuple[int, int, int, float, float | None]]]]:
    """(row, its trained tokens as (position, turn, id, sampler, trainer) in row order) for every trainer
    row of ``result``, rows a cancelled rescore did not score left out."""
    by_row: dict[int, list] = {r: [] for r in range(result.rows)}
    for t in result.turns:
        for p, tid, s, v in zip(t.positions, t.ids, t.sampler, t.trainer):
            by_row.setdefault(t.row, []).append((p, t.turn, tid, s, v))
    return [(r, sorted(toks)) for r, toks in sorted(by_row.items()) if not any(x[4] is None for x in toks)]


def batch_from_rescore(result: Any) -> list[tuple[list[Any], list[Any], list[int]]]:
    """The batch TRL would see for a :class:`viewer.rescore.RescoreResult`: one sequence per trainer row,
    its trained tokens (mask 1) in row order; a row with no trained token is an all-masked sequence (it
    counts in the sequence modes' metrics, ratio 1). Rows a cancelled rescore did not score are left out."""
    return [([x[3] for x in toks], [x[4] for x in toks], [1] * len(toks)) if toks else ([math.nan], [math.nan], [0])
            for _, toks in scored_rows(result)]


def tokens_from_rescore(result: Any, res: IsResult) -> list[dict[str, Any]]:
    """Every trained token with its row, turn, row position, id, both logprobs and the ratio applied
    (``res`` computed on :func:`batch_from_rescore` of the same result)."""
    out = []
    for k, (row, toks) in enumerate(scored_rows(result)):
        for i, (p, turn, tid, s, v) in enumerate(toks):
            out.append({"row": row, "turn": turn, "position": p, "id": tid, "sampler": _num(s), "trainer": _num(v),
                        "ratio": _num(float(res.ratio[k][i]))})
    return out


def marks(result: Any, mode: str, clip_min: float | None, clip_max: float | None) -> dict[tuple[int, int], Any]:
    """(row, position) → (ratio applied, changed by the bounds) for every trained token of a rescore."""
    res = importance(batch_from_rescore(result), mode, clip_min, clip_max)
    out = {}
    for k, (row, toks) in enumerate(scored_rows(result)):
        ch = res.changed(k)
        for i, x in enumerate(toks):
            out[(row, x[0])] = (float(res.ratio[k][i]), bool(ch[i]))
    return out


def _num(v: Any) -> float | None:
    """JSON has no NaN / inf: they are written as null (and ``inf`` only arises from an infinite logprob)."""
    return float(v) if v is not None and math.isfinite(v) else None
