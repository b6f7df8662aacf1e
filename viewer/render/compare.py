"""The Compare tab: one table row per turn pair (common prefix, first divergence), and pair labels.

A text-aligned pair (tokenizers differ) shows the common text in bytes and both sides' token
runs around the first differing byte, the token covering it marked (``ri-cmp-at``)."""
from __future__ import annotations

from typing import Any

from .escape import esc, kv

__all__ = ["compare_html", "pair_label"]


def _tok(tid: int | None, text: str | None) -> str:
    if tid is None:
        return '<span class="ri-cmp-none">(no token)</span>'
    return f'<code class="ri-cmp-id">{esc(tid)}</code> <code class="ri-cmp-text">{esc(repr(text))}</code>'


def _run(run: list, pos: int, tid: int | None) -> str:
    """One side's tokens around a text divergence, the diverging token marked."""
    if tid is None:
        return '<span class="ri-cmp-none">(text ends)</span>'
    return "".join(f'<code class="ri-cmp-text{" ri-cmp-at" if t.position == pos else ""}" '
                   f'title="pos {esc(t.position)} · id {esc(t.id)} · bytes {esc(t.start)}–{esc(t.end)}">'
                   f'{esc(repr(t.text))}</code> ' for t in run)


def _text_cells(p: Any) -> tuple[str, str]:
    """(common prefix cell, divergence cells) of a text-aligned pair."""
    al, fd = p.text, p.first_divergence
    common = f"{al.common_bytes:,} B · A {al.a_position:,} / B {al.b_position:,} tok"
    if fd is None:
        return common, "<td colspan=3>identical text</td>"
    return common, (f"<td>byte {esc(f'{al.divergence_byte:,}')} · {esc(fd.part)}<br>"
                    f"A pos {esc(f'{al.a_position:,}')} · B pos {esc(f'{al.b_position:,}')}</td>"
                    f"<td>{_run(al.a_run, al.a_position, fd.a_id)}</td><td>{_run(al.b_run, al.b_position, fd.b_id)}</td>")


def pair_label(pair: Any) -> str:
    """Plain text naming one pair for the pair selector (Gradio shows it as text)."""
    d = pair.to_dict()
    a = "-" if d["a_turn"] is None else d["a_turn"]
    b = "-" if d["b_turn"] is None else d["b_turn"]
    fd = pair.first_divergence
    if pair.text is not None:
        what = ("identical text" if fd is None else
                f"diverges at byte {pair.text.divergence_byte:,} ({fd.part}): A {pair.text.a_position:,}, "
                f"B {pair.text.b_position:,}")
    else:
        what = "identical" if fd is None else f"diverges at {fd.position:,} ({fd.part})"
    return f"{pair.label}: A turn {a} ↔ B turn {b} · {what}"


def compare_html(res: Any, *, current: str | None = None) -> str:
    """A :class:`viewer.comparison.Comparison` as a table; ``current`` is the selected pair's label."""
    verdict = "identical" if res.identical else f"first divergence in {res.first_diverging.label}"
    head = (f'<div class="ri-kvs">{kv("A", res.a_source)}{kv("B", res.b_source)}'
            f'{kv("result", verdict, "ri-reward" if not res.identical else "")}'
            + (kv("alignment", "aligned by text (tokenizers differ: {}, {})".format(*res.tokenizers))
               if res.alignment == "text" else "") + '</div>')
    rows = []
    for p in res.pairs:
        d = p.to_dict()
        fd = p.first_divergence
        cur = " class='ri-d-cur'" if current and pair_label(p) == current else ""
        common = f"{p.common_prefix:,}"
        if p.text is not None:
            common, div = _text_cells(p)
        else:
            div = ("<td colspan=3>identical</td>" if fd is None else
                   f"<td>{esc(f'{fd.position:,}')} · {esc(fd.part)}</td><td>{_tok(fd.a_id, fd.a_text)}</td>"
                   f"<td>{_tok(fd.b_id, fd.b_text)}</td>")
        rows.append(f"<tr{cur}><td>{esc(p.label)}</td><td>{esc('-' if d['a_turn'] is None else d['a_turn'])}</td>"
                    f"<td>{esc('-' if d['b_turn'] is None else d['b_turn'])}</td>"
                    f"<td>{esc(format(d['a_len'], ','))} / {esc(format(d['b_len'], ','))}</td>"
                    f"<td>{esc(common)}</td>{div}</tr>")
    notes = "".join(f'<div class="ri-note">{esc(n)}</div>' for n in res.notes)
    table = ("<table class='ri-d-table ri-cmp-table'><thead><tr><th>pair</th><th>A turn</th><th>B turn</th>"
             "<th>tokens A / B</th><th>common prefix</th><th>first divergence</th><th>A</th><th>B</th></tr></thead>"
             f"<tbody>{''.join(rows)}</tbody></table>")
    return f'<div class="ri-cmp">{head}{notes}{table}</div>'
