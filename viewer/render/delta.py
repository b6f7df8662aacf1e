"""Rescore (trainer vs sampler logprobs) for the browser: the token view's Δ arrays and the summary line."""
from __future__ import annotations

import math
from typing import Any

from .escape import esc, kv, notice_html
from .fixes import turn_fixes
from .importance import is_turn_marks

__all__ = ["turn_delta", "rescore_summary_html", "rescore_turn_rows", "rescore_note_html", "RESCORE_COLUMNS"]

RESCORE_COLUMNS = ["turn", "row", "verdict", "context", "tokens", "mean |Δ|", "max |Δ|", "ratio min", "ratio max",
                   "flagged"]


def _r(v: float | None, digits: int = 6) -> float | None:
    return None if v is None or not math.isfinite(v) else round(v, digits)


def turn_delta(result: Any, turn: int, prompt_len: int, n: int, fix_params: Any = None) -> dict[str, Any] | None:
    """What the token view needs to paint turn ``turn`` (``n`` positions, output from ``prompt_len``)
    in Δ mode: trainer logprob ``tr`` and Δ ``dl`` per position (null where the trainer trains no
    token), and whether the trainer's context for this turn is the sampler's. None without a rescore.
    ``fix_params``: the correction methods' parameters per view mode (:func:`viewer.render.fixes.turn_fixes`)."""
    if result is None:
        return None
    td = result.turn(turn)
    tr: list[float | None] = [None] * n
    dl: list[float | None] = [None] * n
    choice = getattr(result, "is_choice", None)
    marks = is_turn_marks(result, turn, choice)
    isr: list[float | None] = [None] * n   # the IS ratio TRL would apply (mode / bounds: result.is_choice)
    ism: list[str | None] = [None] * n     # 'c' clipped, 'z' zeroed by those bounds
    ex: list[float | None] = [None] * n    # Δ the sampler's settings expect (viewer.rescore.expected)
    if td is not None:
        for k, s, t, e in zip(td.output_index, td.sampler, td.trainer, td.expected or [None] * len(td.sampler)):
            i = prompt_len + k
            if 0 <= i < n and t is not None:
                tr[i] = _r(t)
                dl[i] = _r(t - s) if math.isfinite(s) else None
                ex[i] = _r(e) if isinstance(e, float) else None
                if k in marks:
                    isr[i], ism[i] = _r(marks[k][0]), marks[k][1]
    seq = None
    if choice and choice[0].startswith("sequence") and any(ism):  # one ratio per row: the whole row is hit
        seq = ("zeroed" if choice[0].endswith("_mask") else "clipped", next(v for v in isr if v is not None))
    out = {"tr": tr, "dl": dl, "model": result.model, "thr": result.threshold,
           "ctx": td.context if td is not None else None, "ctx_at": td.context_at if td is not None else None,
           "verdict": td.verdict if td is not None else None, "row": td.row if td is not None else None}
    if any(e for e in ex):  # only when the settings expect an offset: the payload without one stays as it was
        out["ex"] = ex
    if choice and marks:  # only with an IS choice: the payload without one stays as it was
        out["is"] = {"mode": choice[0], "min": choice[1], "max": choice[2], "r": isr, "m": ism, "seq": seq}
    fix = turn_fixes(result, turn, prompt_len, n, fix_params)  # each correction method per token (render/fixes.py)
    if fix:
        out["fix"] = fix
    return out


def rescore_turn_rows(result: Any) -> list[list[Any]]:
    """One table row per rescored turn (:data:`RESCORE_COLUMNS`)."""
    def r(v: Any, digits: int) -> Any:  # the summary's precision: Δ to 4 decimals, ratios to 3
        return None if v is None else round(v, digits)

    out = []
    for t in (result.to_json()["turns"] if result is not None else []):
        out.append([t["turn"], t["row"], t["verdict"], t["context"], t["tokens"], r(t["mean_abs_delta"], 4),
                    r(t["max_abs_delta"], 4), r(t["ratio_min"], 3), r(t["ratio_max"], 3), t["flagged"]])
    return out


def rescore_summary_html(result: Any, note: str = "") -> str:
    """Model, device, totals and notes of a rescore (every value escaped)."""
    if result is None:
        return notice_html(note or "No rescore yet: pick a model and press Rescore.")
    doc = result.to_json()
    t = doc["totals"]
    parts = [kv("model", result.model), kv("device", f"{result.device} · {result.dtype}"),
             kv("trainer", doc["trainer"].get("mode")), kv("tokens", f"{t['tokens']:,}"),
             kv("mean |Δ|", "—" if t["mean_abs_delta"] is None else f"{t['mean_abs_delta']:.4f}"),
             kv("max |Δ|", "—" if t["max_abs_delta"] is None else f"{t['max_abs_delta']:.4f}"),
             kv("ratio", "—" if t["ratio_min"] is None else f"{t['ratio_min']:.3f} – {t['ratio_max']:.3f}"),
             kv(f"|Δ| > {result.threshold}", t["flagged"]),
             kv("context changed", f"{t['context_changed_tokens']:,} tokens"),
             kv("time", f"{result.seconds:.1f} s")]
    notes = list(result.notes) + ([note] if note else [])
    if result.cancelled:
        notes.insert(0, "cancelled: partial results")
    extra = "".join(f'<div class="ri-note">{esc(n)}</div>' for n in notes)
    return f'<div class="ri-rescore"><div class="ri-kvs">{"".join(parts)}</div>{extra}</div>'


def rescore_note_html() -> str:
    """What the rescore panel does (fixed text at the top of the panel)."""
    return ('<div class="ri-note">Runs the model over the exact rows the trainer feeds (Drift tab → trainer rows) '
            "and compares each trained token's logprob with the sampler's: Δ = trainer − sampler, "
            "ratio = exp(Δ). The token view then has a <b>delta</b> colour mode; tokens whose context the trainer "
            "changed (a re-rendered prompt, REALIGN) are underlined, so drift is told apart from numerics.</div>")
