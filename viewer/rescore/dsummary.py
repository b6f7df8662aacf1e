"""The summary of a dataset rescore, computed from its per-token table alone (docs/MISMATCH.md, "Summary").

Everything here is read back from the table :mod:`viewer.rescore.dataset` builds (and writes to
parquet), sorted by rollout, row and position first, so the local and the Ray engine (whose blocks
arrive in any order) give the same numbers, and anyone can recompute them from the parquet file
with pandas. Statistics are float64 over the tokens whose Δ is finite; the ratio quantiles are of
exp(Δ), numpy's default (linear) interpolation. No torch, no gradio.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from viewer.rescore import importance as IS

__all__ = ["QUANTILES", "summarize", "group_stats"]

QUANTILES = (0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99)


def _q(q: float) -> str:
    return f"p{round(q * 100):02d}"


def _num(v: float) -> float | None:
    return float(v) if v is not None and math.isfinite(v) else None


def _cols(table) -> dict[str, np.ndarray]:
    """The columns the summary reads, as numpy (null Δ → NaN, null flags → False, null labels → "unknown")."""
    import pyarrow.compute as pc

    from viewer.rescore.dataset import changed_column

    out = {"delta": pc.fill_null(table["delta"], math.nan).to_numpy().astype(np.float64),
           "turn": table["turn"].to_numpy()}
    for c in ("rollout", "model", "verdict", "context"):
        out[c] = np.array([v if v is not None else "unknown" for v in table[c].to_pylist()], dtype=object)
    out["reward"] = pc.fill_null(table["reward"], math.nan).to_numpy().astype(np.float64)
    for m in IS.MODES:
        out[m] = pc.fill_null(table[changed_column(m)], False).to_numpy(zero_copy_only=False).astype(bool)
    return out


def group_stats(c: dict[str, np.ndarray], sel: np.ndarray, threshold: float) -> dict[str, Any]:
    """Stats of the tokens ``sel`` picks: counts, mean Δ, mean / max |Δ|, ratio quantiles, flagged,
    and per importance-sampling mode the trained tokens its bounds clip (truncate) or zero (mask)."""
    d = c["delta"][sel]
    fin = d[np.isfinite(d)]
    ad = np.abs(fin)
    trained = int(sel.sum())
    ratio = np.exp(fin)
    return {"trained_tokens": trained, "tokens": int(fin.size), "rollouts": int(len(set(c["rollout"][sel]))),
            "mean_delta": _num(fin.mean()) if fin.size else None,
            "mean_abs_delta": _num(ad.mean()) if fin.size else None,
            "max_abs_delta": _num(ad.max()) if fin.size else None,
            "ratio_quantiles": {_q(q): _num(np.quantile(ratio, q)) if fin.size else None for q in QUANTILES},
            "flagged": int((ad > threshold).sum()),
            "is": {m: {"changed": int(c[m][sel].sum()),
                       "fraction": (int(c[m][sel].sum()) / trained) if trained else None} for m in IS.MODES}}


def _by(c: dict[str, np.ndarray], key: str, threshold: float) -> dict[str, Any]:
    vals = c[key]
    keys = sorted(set(vals.tolist()), key=lambda v: (isinstance(v, str), v))
    return {str(k): group_stats(c, vals == k, threshold) for k in keys}


def _ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks (ties share the mean of their ranks), as Spearman's rho uses them."""
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x), dtype=np.float64)
    sx = x[order]
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and sx[j + 1] == sx[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def _pearson(x: np.ndarray, y: np.ndarray) -> float | None:
    if len(x) < 2 or np.std(x) == 0 or np.std(y) == 0:
        return None  # undefined: fewer than two rollouts, or one side constant
    return _num(float(np.corrcoef(x, y)[0, 1]))


def reward_block(c: dict[str, np.ndarray]) -> dict[str, Any]:
    """Per rollout (with a reward and a scored token): mean |Δ| and mean Δ against the reward."""
    names = sorted(set(c["rollout"].tolist()))
    mad, md, rw = [], [], []
    for n in names:
        sel = c["rollout"] == n
        d = c["delta"][sel]
        d = d[np.isfinite(d)]
        r = c["reward"][sel][0]
        if d.size and math.isfinite(r):
            mad.append(float(np.abs(d).mean()))
            md.append(float(d.mean()))
            rw.append(float(r))
    x, s, y = np.array(mad), np.array(md), np.array(rw)
    return {"rollouts": len(rw),
            "pearson_mean_abs_delta": _pearson(x, y), "spearman_mean_abs_delta": _pearson(_ranks(x), _ranks(y))
            if len(rw) >= 2 else None,
            "pearson_mean_delta": _pearson(s, y)}


def summarize(table, *, threshold: float, clip_min: float | None, clip_max: float | None) -> dict[str, Any]:
    """The summary blocks of a per-token table: ``totals``, ``by_model``, ``by_turn``, ``by_context``,
    ``by_verdict``, ``drift`` (Δ where the trainer's context changed vs where it did not) and ``reward``."""
    table = table.sort_by([("rollout", "ascending"), ("row", "ascending"), ("position", "ascending")])
    c = _cols(table)
    everything = np.ones(table.num_rows, dtype=bool)
    changed = (c["context"] == "changed") | (c["verdict"] == "REALIGN")
    unchanged = (c["context"] == "same") & ~changed
    return {"is": {"modes": list(IS.MODES), "clip_min": clip_min, "clip_max": clip_max},
            "totals": group_stats(c, everything, threshold),
            "by_model": _by(c, "model", threshold), "by_turn": _by(c, "turn", threshold),
            "by_context": _by(c, "context", threshold), "by_verdict": _by(c, "verdict", threshold),
            "drift": {"changed": group_stats(c, changed, threshold),
                      "unchanged": group_stats(c, unchanged, threshold)},
            "reward": reward_block(c)}
