"""Why trainer and sampler disagree, per token: observed Δ, the part the sampler's settings expect,
and the residual (docs/MISMATCH.md, "Why they disagree"). Pure values, no torch.

``residual = Δ − expected``: what a kernel, precision or context difference leaves once the
temperature and nucleus renormalisation are taken out. Per rollout, ``explained`` is the share of
mean |Δ| the settings account for, ``1 − mean|residual| / mean|Δ|``; the residual's outliers (the
largest |residual|) are the tokens a numeric difference moves most.
"""
from __future__ import annotations

import math
from typing import Any

__all__ = ["explain", "TOP_N"]

TOP_N = 10


def _r(v: float) -> float:
    return round(float(v), 6)


def _ok(v: Any) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)


def explain(result: Any, rollout: Any = None, top: int = TOP_N) -> dict[str, Any]:
    """Per token (``tokens``), per rollout (``totals``) and the ``top`` residual outliers of a
    :class:`~viewer.rescore.values.RescoreResult`. With ``rollout``, each outlier carries ``tok``, its
    index in the token view (prompt length + output index), for a link."""
    toks: list[dict[str, Any]] = []
    for td in result.turns:
        exp = td.expected or [None] * len(td.sampler)
        for k, p, i, s, t, e in zip(td.output_index, td.positions, td.ids, td.sampler, td.trainer, exp):
            if not (_ok(s) and _ok(t) and _ok(e)):
                continue
            d = t - s
            toks.append({"turn": td.turn, "row": td.row, "position": p, "output_index": k, "id": i,
                         "delta": _r(d), "expected": _r(e), "residual": _r(d - e)})
    n = len(toks)

    def mean(key: str, f=lambda x: x) -> float | None:
        return _r(sum(f(x[key]) for x in toks) / n) if n else None

    mad, mar = mean("delta", abs), mean("residual", abs)
    totals = {"tokens": n, "mean_delta": mean("delta"), "mean_expected": mean("expected"),
              "mean_residual": mean("residual"), "mean_abs_delta": mad, "mean_abs_expected": mean("expected", abs),
              "mean_abs_residual": mar,
              "explained": _r(1 - mar / mad) if n and mad else None}
    outliers = sorted(toks, key=lambda x: -abs(x["residual"]))[:max(0, int(top))]
    if rollout is not None:
        for o in outliers:
            try:
                o["tok"] = len(rollout.turn(o["turn"]).prompt_ids) + o["output_index"]
            except KeyError:
                o["tok"] = None
    return {"sampling": dict(getattr(result, "sampling", {}) or {}), "totals": totals,
            "outliers": [dict(o) for o in outliers], "tokens": toks}
