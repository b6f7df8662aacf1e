"""The rescore panel's "why they disagree" view (docs/MISMATCH.md): the sampler's settings, how much
of mean |Δ| they explain, and the residual's outliers, each a deep link to its token in the token
view. Values come from :func:`viewer.rescore.explain.explain`; every value is escaped here."""
from __future__ import annotations

import math
from typing import Any

from .escape import esc, kv, notice_html

__all__ = ["explain_html"]


def _f(v: Any, spec: str = "{:+.4f}") -> str:
    return "—" if v is None or (isinstance(v, float) and not math.isfinite(v)) else spec.format(v)


def _settings(s: dict[str, Any]) -> str:
    parts = [f"T {x.get('temperature'):g}, top-p {x.get('top_p'):g}, top-k {x.get('top_k') or 'off'}"
             for x in s.get("settings") or []]
    return "; ".join(parts) or "—"


def explain_html(doc: dict[str, Any] | None, base_link: str = "") -> str:
    """``doc``: :func:`~viewer.rescore.explain.explain` (with ``tok`` on each outlier); ``base_link``: the
    query string that reopens this rollout ("" : outliers are not links)."""
    if doc is None:
        return notice_html("Why they disagree: rescore first; the sampler's settings (temperature, top-p/top-k, "
                           "logprobs mode) then say which part of Δ is expected by construction.")
    t, s = doc["totals"], doc.get("sampling") or {}
    if not t["tokens"]:
        return notice_html("Why they disagree: no trained token with both logprobs and an expected offset.")
    share = "—" if t["explained"] is None else f"{t['explained']:.1%}"
    head = "".join([kv("logprobs mode", s.get("logprobs_mode") or "unknown"), kv("sampler", _settings(s)),
                    kv("mean Δ", _f(t["mean_delta"])), kv("expected", _f(t["mean_expected"])),
                    kv("residual", _f(t["mean_residual"])), kv("mean |Δ|", _f(t["mean_abs_delta"], "{:.4f}")),
                    kv("mean |residual|", _f(t["mean_abs_residual"], "{:.4f}")),
                    kv("explained by the settings", share)])
    rows = []
    for o in doc.get("outliers") or []:
        where = f"turn {o['turn']}, token {o.get('tok') if o.get('tok') is not None else '—'}"
        if base_link and o.get("tok") is not None:
            q = f"{base_link}&turn={int(o['turn'])}&tok={int(o['tok'])}&mode=delta"
            where = f'<a class="ri-explain-link" href="?{esc(q)}" target="_self">{esc(where)}</a>'
        else:
            where = esc(where)
        rows.append(f"<tr><td>{where}</td><td>{esc(o['id'])}</td><td>{esc(_f(o['delta']))}</td>"
                    f"<td>{esc(_f(o['expected']))}</td><td>{esc(_f(o['residual']))}</td></tr>")
    table = ('<table class="ri-explain-outliers"><tr><th>residual outlier</th><th>id</th><th>Δ observed</th>'
             f'<th>expected</th><th>residual</th></tr>{"".join(rows)}</table>')
    return (f'<div class="ri-explain" id="ri-explain-view"><div class="ri-note">Why they disagree: the part of '
            "Δ = trainer − sampler the sampler's settings make by construction (temperature, and for processed "
            "logprobs the top-p/top-k renormalisation log S), and what is left (residual = Δ − expected: kernels, "
            f'precision, context).</div><div class="ri-kvs">{head}</div>{table}</div>')
