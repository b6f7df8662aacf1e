"""The rescore panel's importance-sampling view (TRL 1.16 GRPO, docs/MISMATCH.md): the four modes'
effect side by side, TRL's five metrics for the chosen mode and the KL estimators. Values come from
:mod:`viewer.rescore.importance`; every value is escaped here."""
from __future__ import annotations

import math
from typing import Any

from .escape import esc, notice_html

__all__ = ["importance_html", "is_turn_marks"]

_ROWS = (("tokens changed", "fraction_changed", "{:.1%}"), ("clipped / zeroed tokens", None, None),
         ("weight removed", "weight_removed", "{:+.2%}"), ("effective sample size", "ess_fraction", "{:.1%}"))


def _fmt(v: Any, spec: str = "{:.6g}") -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "—"
    return spec.format(v)


def _bound(v: float | None) -> str:
    return "none" if v is None else f"{v:g}"


def importance_html(result: Any, mode: str, clip_min: float | None, clip_max: float | None) -> str:
    """The effect table (four modes, the chosen one marked), TRL's metrics under its names, KL."""
    from viewer.rescore import importance as IS

    if result is None:
        return notice_html("Importance sampling: rescore first; the table then shows what each of TRL's four "
                           "modes does to the trained tokens with these bounds.")
    try:
        IS.check_bounds(mode, clip_min, clip_max)
    except ValueError as e:
        return notice_html(f"Importance sampling: {e}", "error")
    batch = IS.batch_from_rescore(result)
    eff = IS.effect(batch, clip_min, clip_max)
    res = IS.importance(batch, mode, clip_min, clip_max)
    head = "".join(f'<th class="{"ri-is-on" if m == mode else ""}">{esc(m)}</th>' for m in IS.MODES)
    body = []
    for label, key, spec in _ROWS:
        cells = []
        for m in IS.MODES:
            e = eff[m]
            if "error" in e:
                cells.append(f'<td title="{esc(e["error"])}">—</td>')
                continue
            if key is None:
                text = f"{e['zeroed']:,} zeroed" if m.endswith("_mask") else f"{e['changed']:,} clipped"
            else:
                text = _fmt(e[key], spec)
            cells.append(f'<td class="{"ri-is-on" if m == mode else ""}">{esc(text)}</td>')
        body.append(f"<tr><th>{esc(label)}</th>{''.join(cells)}</tr>")
    metrics = "".join(f"<tr><th>{esc(k)}</th><td>{esc(_fmt(v))}</td></tr>" for k, v in res.metrics.items())
    k = IS.kl(batch)
    kl = "".join(f"<tr><th>{esc(n)}</th><td>{esc(_fmt(k['per_token'][n]))}</td>"
                 f"<td>{esc(_fmt(k['per_sequence'][n]))}</td></tr>" for n in ("k1", "k2", "k3"))
    n = sum(sum(m) for _, _, m in batch)
    return (f'<div class="ri-is" id="ri-is-view"><div class="ri-note">Importance sampling as TRL 1.16 GRPO applies it '
            f"(<code>vllm_importance_sampling_mode</code> <b>{esc(mode)}</b>, clip "
            f"[{esc(_bound(clip_min))}, {esc(_bound(clip_max))}]) over {n:,} trained tokens in {len(batch):,} "
            "sequences (trainer rows). Each mode with these bounds:</div>"
            f'<table class="ri-is-effect"><tr><th></th>{head}</tr>{"".join(body)}</table>'
            f'<div class="ri-is-side"><table class="ri-is-metrics"><tr><th>TRL metric ({esc(mode)})</th><th>value</th>'
            f"</tr>{metrics}</table>"
            '<table class="ri-is-kl"><tr><th>KL(sampler ‖ trainer)</th><th>per token</th><th>per sequence</th></tr>'
            f"{kl}</table></div></div>")


def is_turn_marks(result: Any, turn: int, choice: tuple[str, float | None, float | None] | None) -> dict[int, Any]:
    """output index → (ratio applied, 'c' clipped / 'z' zeroed / None) for ``turn``'s trained tokens under
    ``choice`` (mode, clip min, clip max); empty without a choice or with invalid bounds."""
    from viewer.rescore import importance as IS

    td = result.turn(turn) if result is not None and choice else None
    if td is None:
        return {}
    mode, lo, hi = choice
    try:
        marks = IS.marks(result, mode, lo, hi)
    except ValueError:
        return {}
    out = {}
    for k, p in zip(td.output_index, td.positions):
        got = marks.get((td.row, p))
        if got is not None:
            ratio, changed = got
            out[k] = (ratio, ("z" if mode.endswith("_mask") else "c") if changed else None)
    return out
