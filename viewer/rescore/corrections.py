"""Training–inference mismatch corrections side by side, per trained token (docs/MISMATCH.md#corrections-side-by-side).

Each method is recomputed from the same rows :mod:`viewer.rescore.importance` takes (``(sampler, trainer, mask)``
per sequence, optionally a fourth column: the advantage per token) exactly as its project's code does, read
from that code (float32 throughout; ``exp`` correctly rounded to float32, as importance.py, so a token value is
within 1 float32 ulp of torch's and a sequence value within a relative 1e-5 of its summation order):

* ``trl``: TRL 1.16 GRPO's four vLLM IS modes, :func:`viewer.rescore.importance.importance` itself (reused).
* ``verl``: verl's rollout correction, ``verl/trainer/ppo/rollout_corr_helper.py`` at volcengine/verl
  b178a3cd56f58b2d502255daba591e92833930a7: IS weights (``compute_rollout_correction_weights``: level
  ``token`` = TIS, or ``sequence``; ``exp(clamp(log r, ±20))``, zero off the mask, then ``clamp(max=threshold)``)
  and rejection sampling (``compute_rollout_rejection_mask``: options ``token_k1..3``, ``seq_sum_k1..3``,
  ``seq_mean_k1..3``, ``seq_max_k2..3``, comma-joined, all must pass; ``token_k1`` is masked IS (MIS),
  ``seq_mean_k1`` the geometric-mean ratio). That version has no ``geometric`` IS level and no veto threshold
  any more: ``seq_mean_k1`` bounds the geometric ratio, ``seq_max_*`` a sequence's worst token (verl #4544).
* ``prime_rl_icepop``: prime-rl's IcePop-style masks, ``compute_loss`` in ``src/prime_rl/trainer/rl/loss.py``
  at PrimeIntellect-ai/prime-rl 5f47740ddfb0103148cb750ead3f8920025ca6fb: a token is masked when its ratio
  leaves ``[token_mask_low, token_mask_high]``, or its sequence's geometric-mean ratio leaves
  ``[geo_mask_low, geo_mask_high]``, or the sequence's min / max token ratio passes ``sequence_mask_low`` /
  ``sequence_mask_high``; ``ratio_type="sequence"`` weights by ``clamp(exp(min(Σ log r, 10)), max=sequence_clip_high)``.
* ``prime_rl_dppo``: prime-rl's DPPO masks as its token exports write ``is_masked`` / ``is_masked_high`` /
  ``is_masked_low`` (``_compute_export_tensors`` in ``src/prime_rl/trainer/rl/token_export.py``, the same
  test as ``default_loss_fn`` in ``loss.py``, at prime-rl 559b44772e471d1538537b8805cc77f3824a5e64):
  ``Δp = exp(trainer) − exp(sampler)``; a positive advantage masks ``Δp > dppo_mask_high``, any other
  (zero included, as ``torch.where`` does) ``Δp < −dppo_mask_low``. It needs the advantage's sign.

Every token gets a state: kept, clipped (its weight was bounded) or masked (its weight is 0). The counts
and disagreements are pure functions of the rows and thresholds: a slider recomputes them, no model runs.
tests/test_corrections.py checks each method against its project's code (tests/oracle/). No torch, no gradio.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from viewer.rescore import importance as IS

__all__ = ["METHODS", "DEFAULTS", "PRESETS", "KEPT", "CLIPPED", "MASKED", "STATES", "Correction", "correct",
           "counts", "disagree", "RS_OPTIONS", "SAFETY_BOUND"]

METHODS = ("trl", "verl", "prime_rl_icepop", "prime_rl_dppo")
KEPT, CLIPPED, MASKED = 0, 1, 2
STATES = ("kept", "clipped", "masked")
SAFETY_BOUND = 20.0  # verl's exp(±20) clamp on log ratios
RS_OPTIONS = ("token_k1", "token_k2", "token_k3", "seq_sum_k1", "seq_sum_k2", "seq_sum_k3",
              "seq_mean_k1", "seq_mean_k2", "seq_mean_k3", "seq_max_k2", "seq_max_k3")
# each project's own defaults (verl RolloutCorrectionConfig; prime-rl's LossConfig at 5f47740dd; DefaultLossConfig)
DEFAULTS: dict[str, dict[str, Any]] = {
    "trl": {"mode": IS.DEFAULT_MODE, "clip_min": IS.DEFAULT_CLIP_MIN, "clip_max": IS.DEFAULT_CLIP_MAX},
    "verl": {"is_level": "sequence", "is_threshold": 2.0, "rs": None, "rs_threshold": None},
    "prime_rl_icepop": {"token_mask_low": 0.125, "token_mask_high": 8.0, "geo_mask_low": 0.1, "geo_mask_high": 10.0,
                        "sequence_mask_low": 0.0, "sequence_mask_high": 100.0, "sequence_clip_high": 10.0,
                        "ratio_type": "token"},
    "prime_rl_dppo": {"dppo_mask_low": 0.2, "dppo_mask_high": 0.2, "advantage": None},
}
# the names RL papers and configs use, as (method, params) of the code that implements them
PRESETS: dict[str, tuple[str, dict[str, Any]]] = {
    "tis": ("verl", {"is_level": "token", "is_threshold": 2.0}),
    "mis": ("verl", {"is_level": None, "rs": "token_k1", "rs_threshold": "0.5_2.0"}),
    "geometric": ("verl", {"is_level": None, "rs": "seq_mean_k1", "rs_threshold": "0.999_1.001"}),
    "icepop": ("prime_rl_icepop", {"geo_mask_low": 0.0, "geo_mask_high": math.inf, "sequence_mask_low": 0.0,
                                   "sequence_mask_high": math.inf}),
}


@dataclass
class Correction:
    """Per row (positions as given): ``ratio`` the importance ratio the method looks at (the token's, or its
    sequence's repeated), ``weight`` the factor on the token's loss term (0 when masked, NaN where the
    project's code gives NaN), ``state`` KEPT / CLIPPED / MASKED (−1 off the mask) and the row's ``mask``.
    ``flags``: extra per-token columns of the project (prime-rl's ``is_masked_high`` / ``is_masked_low``)."""

    method: str
    params: dict[str, Any]
    ratio: list[np.ndarray]
    weight: list[np.ndarray]
    state: list[np.ndarray]
    mask: list[np.ndarray]
    flags: dict[str, list[np.ndarray]] = field(default_factory=dict)


def _f32(values: Sequence[Any]) -> np.ndarray:
    return np.array([math.nan if v is None else float(v) for v in values], dtype=np.float32)


def _exp(x: np.ndarray) -> np.ndarray:
    """float32 exp, correctly rounded (via float64): torch's is within 1 ulp of it (see importance.py)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.exp(np.asarray(x, dtype=np.float32).astype(np.float64)).astype(np.float32)


def _rows(rows: Sequence[Sequence[Any]]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]]:
    out = []
    for k, row in enumerate(rows):
        if len(row) not in (3, 4):
            raise ValueError(f"row {k}: expected (sampler, trainer, mask[, advantages]), got {len(row)} columns")
        s, t = _f32(row[0]), _f32(row[1])
        m = np.array([bool(x) for x in row[2]], dtype=bool)
        a = _f32(row[3]) if len(row) == 4 and row[3] is not None else None
        if not (len(s) == len(t) == len(m)) or (a is not None and len(a) != len(m)):
            raise ValueError(f"row {k}: sampler, trainer, mask (and advantages) differ in length")
        out.append((s, t, m, a))
    return out


def correct(rows: Sequence[Sequence[Any]], method: str, **params: Any) -> Correction:
    """One method's per-token ratio / weight / state over ``rows``; ``params`` override the method's
    :data:`DEFAULTS` (a preset name of :data:`PRESETS` is accepted as ``method``). Bad thresholds raise
    ValueError with the project's own rule."""
    if method in PRESETS:
        base, preset = PRESETS[method]
        method, params = base, {**preset, **params}
    if method not in DEFAULTS:
        raise ValueError(f"unknown correction method {method!r}: use one of {', '.join(METHODS + tuple(PRESETS))}")
    unknown = set(params) - set(DEFAULTS[method])
    if unknown:
        raise ValueError(f"{method} has no parameter {', '.join(sorted(unknown))}")
    p = {**DEFAULTS[method], **params}
    fn = {"trl": _trl, "verl": _verl, "prime_rl_icepop": _icepop, "prime_rl_dppo": _dppo}[method]
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        return fn(_rows(rows), p, method)


def _trl(rows: list, p: dict, name: str) -> Correction:
    res = IS.importance([(s, t, m) for s, t, m, _ in rows], p["mode"], p["clip_min"], p["clip_max"])
    hit = CLIPPED if p["mode"].endswith("_truncate") else MASKED
    states = [np.where(m, np.where(res.changed(k), hit, KEPT), -1).astype(np.int8) for k, m in enumerate(res.mask)]
    return Correction(name, p, res.raw, res.ratio, states, res.mask)


def _state(m: np.ndarray, clipped: np.ndarray, masked: np.ndarray) -> np.ndarray:
    return np.where(m, np.where(masked, MASKED, np.where(clipped, CLIPPED, KEPT)), -1).astype(np.int8)


def _rs_thresholds(options: list[str], spec: Any) -> dict[str, tuple[float | None, float]]:
    """verl's ``_parse_rollout_rs_thresholds``: one spec shared or one per option; ``*k1``: ``lower_upper``
    (a lone number is the upper bound, lower its inverse), others a single upper bound; all positive."""
    if spec is None:
        raise ValueError("rollout_rs_threshold must be provided for rejection sampling.")
    if isinstance(spec, bool) or not isinstance(spec, (int, float, str)):
        raise TypeError("rollout_rs_threshold must be a string or numeric value specifying per-option thresholds.")
    raw = [str(spec)] if isinstance(spec, (int, float)) else [x.strip() for x in spec.split(",") if x.strip()]
    if not raw:
        raise ValueError("rollout_rs_threshold must contain at least one threshold value.")
    if len(raw) not in (1, len(options)):
        raise ValueError(f"rollout_rs_threshold expects either one threshold shared by all options or exactly "
                         f"{len(options)} thresholds to match the provided rollout_rs options.")
    raw = raw * len(options) if len(raw) == 1 else raw
    out: dict[str, tuple[float | None, float]] = {}
    for opt, s in zip(options, raw):
        if not opt.endswith("k1") and "_" in s:
            raise ValueError(f"rollout_rs_threshold for option '{opt}' must provide a single upper bound "
                             f"without '_'. Received '{s}'.")
        if opt.endswith("k1") and "_" not in s:
            try:  # verl computes the inverse outside its try: a bad number is float()'s own error
                lo_s, hi_s = str(1.0 / float(s)), s
            except ZeroDivisionError:  # verl raises ZeroDivisionError here; a clear ValueError instead
                raise ValueError(f"Thresholds for option '{opt}' must be positive, got {s}.") from None
        else:
            lo_s, hi_s = s.split("_", 1) if opt.endswith("k1") else (None, s)
        try:
            lo, hi = (None if lo_s is None else float(lo_s)), float(hi_s)
        except ValueError:
            raise ValueError(f"Invalid numeric threshold '{s}' for option '{opt}'.") from None
        if lo is not None and (lo <= 0 or hi <= 0):
            raise ValueError(f"Thresholds for option '{opt}' must be positive, got {s}.")
        if lo is None and hi <= 0:
            raise ValueError(f"Threshold for option '{opt}' must be positive, got {s}.")
        out[opt] = (lo, hi)
    return out


def _verl(rows: list, p: dict, name: str) -> Correction:
    level, thr, rs = p["is_level"], p["is_threshold"], p["rs"]
    if level is not None and level not in ("token", "sequence"):
        raise ValueError(f"Invalid rollout_is: {level}. Must be one of {{'token', 'sequence'}}.")
    if level is not None and not (thr is not None and thr > 0):
        raise ValueError(f"rollout_is_threshold must be positive, got {thr}.")
    options: list[str] = []
    if rs is not None:
        if not isinstance(rs, str):
            raise ValueError("rollout_rs must be a non-empty string (comma separated for multiple options).")
        for o in (x.strip() for x in rs.split(",") if x.strip()):
            if o not in RS_OPTIONS:
                raise ValueError(f"Invalid rollout_rs option: {o}. Must be one of {sorted(RS_OPTIONS)}.")
            options += [o] if o not in options else []
        if not options:
            raise ValueError("rollout_rs must contain at least one valid option.")
    bounds = _rs_thresholds(options, p["rs_threshold"]) if options else {}
    if not any(m.any() for _, _, m, _ in rows):  # compute_rollout_correction_and_rejection_mask's first check
        raise ValueError("response_mask must contain at least one valid token (1).")
    thr32 = np.float32(thr if thr is not None else np.inf)
    ratios, weights, states, masks = [], [], [], []
    for s, t, m, _ in rows:
        lr = t - s
        mf = m.astype(np.float32)
        safe = np.clip(lr, -SAFETY_BOUND, SAFETY_BOUND)
        if level == "sequence":
            total = (np.where(m, lr, np.float32(0)) * mf).sum(dtype=np.float32)  # verl_F.masked_sum
            raw = np.full(len(m), _exp(np.clip(total, -SAFETY_BOUND, SAFETY_BOUND)), np.float32)
        else:
            raw = _exp(safe)
        weight = np.minimum(raw * mf, thr32) if level is not None else np.ones(len(m), np.float32)
        clipped = (raw * mf > thr32) if level is not None else np.zeros(len(m), bool)
        keep = np.ones(len(m), bool)
        for opt in options:
            keep &= _rs_keep(opt, bounds[opt], safe, m)
        ratios.append(raw)
        weights.append(np.where(keep, weight, np.float32(0)).astype(np.float32) * mf)
        states.append(_state(m, clipped, ~keep))
        masks.append(m)
    return Correction(name, p, ratios, weights, states, masks)


def _rs_keep(opt: str, bound: tuple[float | None, float], safe: np.ndarray, m: np.ndarray) -> np.ndarray:
    """One rejection option's per-position keep, as ``compute_rollout_rejection_mask`` (a NaN fails it).
    k1 compares ``−log r`` (not ``log r``) with ``[log lower, log upper]``, as verl's code does."""
    lo, hi = bound
    k = {"k1": -safe, "k2": np.float32(0.5) * safe * safe, "k3": _exp(safe) - np.float32(1.0) - safe}[opt[-2:]]
    mf = m.astype(np.float32)
    if opt.startswith("token"):
        stat = k
    elif opt.startswith("seq_max"):
        stat = np.where(m, k, np.float32(-np.inf)).max() if len(m) else np.float32(-np.inf)
        stat = np.float32(0) if stat == -np.inf else stat
    else:
        stat = (np.where(m, k, np.float32(0)) * mf).sum(dtype=np.float32)
        if opt.startswith("seq_mean"):  # masked_mean: sum / (count + 1e-8), the count promoted to float32
            stat = np.float32(stat / (np.float32(m.sum()) + np.float32(1e-8)))
    if lo is not None:
        ok = (stat >= np.float32(math.log(lo))) & (stat <= np.float32(math.log(hi)))
    else:
        ok = stat <= np.float32(hi)
    return np.broadcast_to(ok, m.shape).copy()


def _icepop(rows: list, p: dict, name: str) -> Correction:
    for lo, hi in (("token_mask_low", "token_mask_high"), ("geo_mask_low", "geo_mask_high"),
                   ("sequence_mask_low", "sequence_mask_high")):
        if p[lo] < 0 or p[hi] < 0 or p["sequence_clip_high"] < 0:
            raise ValueError(f"{lo} / {hi} / sequence_clip_high must be >= 0")
        if p[lo] >= p[hi]:
            raise ValueError(f"{lo} ({p[lo]}) must be less than {hi} ({p[hi]})")
    if p["ratio_type"] not in ("token", "sequence"):
        raise ValueError(f"ratio_type must be 'token' or 'sequence', not {p['ratio_type']!r}")
    f = {k: np.float32(v) for k, v in p.items() if k != "ratio_type"}
    ratios, weights, states, masks, lows, highs = [], [], [], [], [], []
    for s, t, m, _ in rows:
        lr = t - s
        tr = _exp(lr)
        n = np.float32(max(int(m.sum()), 1))  # _safe_mean: sum over the mask / clamp_min(count, 1)
        geo = _exp(np.float32(lr[m].sum(dtype=np.float32) / n))
        seq_min = np.where(m, tr, np.float32(np.inf)).min() if len(m) else np.float32(np.inf)
        seq_max = np.where(m, tr, np.float32(-np.inf)).max() if len(m) else np.float32(-np.inf)
        t_low, t_high = tr < f["token_mask_low"], tr > f["token_mask_high"]
        whole = (geo < f["geo_mask_low"]) | (geo > f["geo_mask_high"]) | (seq_min < f["sequence_mask_low"]) \
            | (seq_max > f["sequence_mask_high"])
        masked = t_low | t_high | whole
        if p["ratio_type"] == "sequence":
            seq_lr = np.minimum((t - t) + lr[m].sum(dtype=np.float32), np.float32(10.0))  # the detach trick's value
            raw = _exp(seq_lr)
            ratio = np.minimum(raw, f["sequence_clip_high"])
            clipped = raw > f["sequence_clip_high"]
        else:
            raw, ratio, clipped = tr, tr, np.zeros(len(m), bool)
        keep = m & ~masked
        ratios.append(raw)
        weights.append(np.where(keep, ratio, np.float32(0)).astype(np.float32))
        states.append(_state(m, clipped, masked))
        masks.append(m)
        lows.append(m & t_low)
        highs.append(m & t_high)
    return Correction(name, p, ratios, weights, states, masks, {"is_masked_low": lows, "is_masked_high": highs})


def _dppo(rows: list, p: dict, name: str) -> Correction:
    lo, hi = p["dppo_mask_low"], p["dppo_mask_high"]
    if lo < 0 or hi < 0:
        raise ValueError("dppo_mask_low / dppo_mask_high must be >= 0")
    ratios, weights, states, masks, lows, highs = [], [], [], [], [], []
    for k, (s, t, m, a) in enumerate(rows):
        if a is None:
            if p["advantage"] is None:
                raise ValueError(f"row {k}: prime-rl's DPPO masks depend on the advantage's sign: give the rows "
                                 "advantages or an advantage")
            a = np.full(len(m), p["advantage"], np.float32)
        ratio = _exp(t - s)
        delta = _exp(t) - _exp(s)
        inv_high, inv_low = delta > np.float32(hi), delta < -np.float32(lo)
        pos, neg = a > 0, a < 0
        masked = m & np.where(pos, inv_high, inv_low)
        ratios.append(ratio)
        weights.append(np.where(m & ~masked, ratio, np.float32(0)).astype(np.float32))
        states.append(_state(m, np.zeros(len(m), bool), masked))
        masks.append(m)
        highs.append(m & pos & inv_high)
        lows.append(m & neg & inv_low)
    return Correction(name, p, ratios, weights, states, masks, {"is_masked_high": highs, "is_masked_low": lows})


def counts(c: Correction) -> dict[str, dict[str, int]]:
    """Trained tokens and sequences (those with a trained token) kept / clipped / masked. A sequence is
    masked if any of its tokens is, else clipped if any is, else kept."""
    tok = {name: 0 for name in STATES}
    seq = {name: 0 for name in STATES}
    for st, m in zip(c.state, c.mask):
        s = st[m]
        for i, name in enumerate(STATES):
            tok[name] += int((s == i).sum())
        if s.size:
            seq["masked" if (s == MASKED).any() else "clipped" if (s == CLIPPED).any() else "kept"] += 1
    return {"tokens": {**tok, "total": sum(tok.values())}, "sequences": {**seq, "total": sum(seq.values())}}


def disagree(a: Correction, b: Correction) -> dict[str, Any]:
    """Where two corrections of the same rows treat a trained token differently (another state): per row
    a bool array, the token and sequence counts, and how many of each (state a, state b) pair."""
    if len(a.mask) != len(b.mask) or any(len(x) != len(y) or (x != y).any() for x, y in zip(a.mask, b.mask)):
        raise ValueError("the two corrections are not of the same rows")
    per_row = [m & (x != y) for x, y, m in zip(a.state, b.state, a.mask)]
    pairs: dict[str, int] = {}
    for x, y, d in zip(a.state, b.state, per_row):
        for i, j in zip(x[d], y[d]):
            key = f"{STATES[i]}/{STATES[j]}"
            pairs[key] = pairs.get(key, 0) + 1
    return {"per_token": per_row, "tokens": int(sum(int(d.sum()) for d in per_row)),
            "sequences": sum(1 for d in per_row if d.any()), "pairs": dict(sorted(pairs.items()))}
