"""Correction methods across a dataset (viewer/ui/fixes_dataset.py): per method the tokens and sequences it
keeps, clips and masks, and per pair of methods how many it treats differently, from
:func:`viewer.rescore.dataset_fixes.dataset_corrections`. Every value goes through :func:`esc`.
"""
from __future__ import annotations

from typing import Any, Mapping

from .escape import esc, notice_html

__all__ = ["dataset_corrections_html", "DATASET_NOTE"]

DATASET_NOTE = ("Upload the per-token parquet a dataset rescore writes (<code>python -m viewer rescore SOURCE --model M "
                "--out FILE.parquet</code>; <code>--model recorded</code> where the files carry trainer logprobs): "
                "each method runs over every trainer sequence in it, as the token view's correction modes do.")


def _pct(n: int, total: int) -> str:
    return f"{n:,} ({n / total:.1%})" if total else f"{n:,}"


def _params(p: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in p.items() if v is not None)


def dataset_corrections_html(doc: Mapping[str, Any] | None, name: str = "", error: str = "") -> str:
    """The counts table and the disagreement table of ``doc`` (None: the note alone; ``error``: a refusal)."""
    if error:
        return notice_html(error, "error")
    if doc is None:
        return f'<div class="ri-note">{DATASET_NOTE}</div>'
    head = (f"{esc(name)}: {doc['rollouts']:,} rollouts, {doc['sequences']:,} trainer sequences, "
            f"{doc['tokens']:,} trained tokens")
    rows = []
    for m, got in doc["methods"].items():
        if "error" in got:
            rows.append(f'<tr><th>{esc(m)}</th><td colspan="6" class="ri-error">{esc(got["error"])}</td>'
                        f'<td>{esc(_params(got["params"]))}</td></tr>')
            continue
        c = got["counts"] or {"tokens": {"total": 0}, "sequences": {"total": 0}}
        t, s = c["tokens"], c["sequences"]
        cells = [_pct(t.get(k, 0), t["total"]) for k in ("kept", "clipped", "masked")]
        cells += [_pct(s.get(k, 0), s["total"]) for k in ("kept", "clipped", "masked")]
        rows.append(f'<tr data-method="{esc(m)}"><th>{esc(m)}</th>' + "".join(f"<td>{esc(x)}</td>" for x in cells)
                    + f'<td>{esc(_params(got["params"]))}</td></tr>')
    table = ('<table class="ri-is-effect ri-fx-dataset"><tr><th>method</th><th>tokens kept</th><th>clipped</th>'
             '<th>masked</th><th>sequences kept</th><th>clipped</th><th>masked</th><th>parameters</th></tr>'
             f'{"".join(rows)}</table>')
    pairs = []
    for key, d in doc["disagree"].items():
        a, b = key.split("|")
        detail = ", ".join(f"{k} {v:,}" for k, v in d["pairs"].items())
        pairs.append(f'<tr data-pair="{esc(key)}"><th>{esc(a)} / {esc(b)}</th><td>{esc(_pct(d["tokens"], doc["tokens"]))}'
                     f'</td><td>{esc(_pct(d["sequences"], doc["sequences"]))}</td><td>{esc(detail)}</td></tr>')
    dis = ('<table class="ri-is-effect ri-fx-disagree"><tr><th>methods</th><th>tokens treated differently</th>'
           f'<th>sequences</th><th>state a / state b</th></tr>{"".join(pairs)}</table>') if pairs else ""
    return f'<div class="ri-is" id="fx-dataset-view"><div class="ri-note">{head}</div>{table}{dis}</div>'
