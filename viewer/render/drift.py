"""The Drift tab: a turn's drift report, trainer rows and the scan summary (inputs: viewer.drift values).

Styles live in ``viewer/ui/assets/app.css`` (``.ri-drift``, ``.ri-d-*``)."""
from __future__ import annotations

import json
from typing import Any, TYPE_CHECKING

from .escape import esc, fmt, kv, notice_html
from .glossary import explain

if TYPE_CHECKING:  # the type only: rendering needs no analysis code
    from ..drift.results import ScanResult

__all__ = ["drift_turn_html", "drift_roundtrip_html", "drift_template_html", "drift_prefix_html",
           "drift_rows_html", "drift_empty_html", "drift_scan_html", "drift_note_html"]


def drift_note_html() -> str:
    """What the Drift tab follows and what a repro file is (fixed text beside its buttons)."""
    return ('<div class="ri-note">Follows the turn selected under Tokens. Repro: one small JSON per drift case '
            "(ids around the break, text, tokenizer, chat-template hash, cause) to attach to a bug report.</div>"
            # the tab's later panels one click away from its top (issue 41, point 10: the scan sat ~4,000 px down)
            '<div class="ri-note ri-jump">Further down: <a href="#drift-cost-panel" data-jump="drift-cost-panel">'
            'Gradient cost ↓</a> · <a href="#drift-scan-panel" data-jump="drift-scan-panel">Dataset scan ↓</a></div>')


_DRIFT_SPAN_LIMIT = 150  # changed spans listed per turn (the rest counted)


def _badge(text: Any, state: str, term: str | None = None) -> str:
    """A verdict badge; a verdict the glossary explains (FORK, REALIGN, ...) says what it means on hover."""
    why = explain(term if term is not None else str(text))
    title = f' title="{esc(why)}"' if why else ""
    return f'<span class="ri-d-badge ri-d-{esc(state)}"{title}>{esc(text)}</span>'


def _state(equal: bool | None) -> str:
    return "na" if equal is None else ("ok" if equal else "bad")


def _vis(text: str) -> str:
    from ..tokenizer import visible

    return visible(text)


def _chips(ids: list[int], pieces: list[str], *, lps: list[float | None] | None = None,
           special: list[bool] | None = None, start: int | None = None, brk: int | None = None) -> str:
    """One chip per token: visible text, id (and sampled logprob, position when given)."""
    out = []
    for n, (i, p) in enumerate(zip(ids, pieces)):
        sp = bool(special and n < len(special) and special[n])
        pos = (start + n) if start is not None else None
        cls = "ri-d-chip" + (" ri-d-brk" if brk is not None and pos is not None and pos >= brk else "")
        extra = ""
        if lps is not None and n < len(lps):
            extra += f"<small>lp {esc(fmt(lps[n], 2))}</small>"
        if pos is not None:
            extra += f"<small>@{pos}</small>"
        out.append(f'<span class="{cls}"><span class="tk{" sp" if sp else ""}">{esc(_vis(p)) or "∅"}</span>'
                   f"<small>{esc(i)}</small>{extra}</span>")
    return f'<span class="ri-d-chips">{"".join(out)}</span>'


def _special_of(table: Any, ids: list[int]) -> list[bool] | None:
    # TokenTable.special answers every id (False outside the vocabulary): nothing to catch here
    return table.special(ids) if table is not None else None


def drift_roundtrip_html(rt: Any, table: Any = None) -> str:
    """Section 1: ``decode → encode`` of the output, changed spans side by side."""
    head = "<h4>Output round trip: decode(sampled ids) → encode(text)</h4>"
    if rt.unchecked:
        return f'<section class="ri-d-sec" data-check="roundtrip">{head}{_badge("not checked", "na")} {esc(rt.unchecked)}</section>'
    if rt.equal:
        return (f'<section class="ri-d-sec" data-check="roundtrip">{head}{_badge("identical", "ok")} '
                f'the {rt.n_sampled:,} sampled ids re-encode to exactly the same ids.</section>')
    causes = ", ".join(f"{c} × {n}" for c, n in sorted(rt.causes.items(), key=lambda kv: -kv[1]))
    rows = []
    for n, s in enumerate(rt.changed_spans[:_DRIFT_SPAN_LIMIT]):
        rows.append(
            f'<tr data-cause="{esc(s.cause)}"><td>{n}</td><td>{s.start}–{s.end}<br><small>re {s.re_start}–{s.re_end}</small></td>'
            f"<td>{s.char_start}–{s.char_end}</td><td class=\"ri-d-cause\">{esc(s.cause)}<br><small>{esc(s.al_class)}</small></td>"
            f"<td>{_chips(s.sampled_ids, s.sampled_pieces, lps=s.sampled_logprobs, special=_special_of(table, s.sampled_ids))}</td>"
            f"<td>{_chips(s.reencoded_ids, s.reencoded_pieces, special=_special_of(table, s.reencoded_ids))}</td></tr>")
    more = len(rt.changed_spans) - _DRIFT_SPAN_LIMIT
    tail = f'<div class="ri-note">… {more:,} more changed spans not listed.</div>' if more > 0 else ""
    return (f'<section class="ri-d-sec" data-check="roundtrip">{head}{_badge("not equal", "bad")} '
            f"{rt.n_sampled:,} sampled ids → {rt.n_reencoded:,} re-encoded ids; "
            f"{len(rt.changed_spans):,} changed span(s), first at output token {esc(rt.first_mismatch)}; "
            f'causes: <span class="ri-d-cause">{esc(causes)}</span>'
            '<div class="ri-d-scroll"><table class="ri-d-table"><thead><tr><th>#</th><th>tokens</th><th>chars</th>'
            "<th>cause</th><th>sampled pieces (id, logprob)</th><th>re-encoded pieces (id)</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></div>{tail}</section>")


def _classification_html(cl: Any, labels: tuple[str, str]) -> str:
    if cl is None:
        return ""
    return (f'<div class="ri-d-ev">cause {_badge(cl.cause, "bad")} <span class="ri-note">({esc(cl.al_class)})</span> '
            f"{esc(cl.evidence)}</div>"
            f'<div class="ri-d-side"><div><b>{esc(labels[0])}</b><div class="ri-d-text">{esc(cl.common_text)}'
            f"<mark>{esc(cl.a_text)}</mark></div></div>"
            f'<div><b>{esc(labels[1])}</b><div class="ri-d-text">{esc(cl.common_text)}'
            f"<mark>{esc(cl.b_text)}</mark></div></div></div>")


def _windows_html(wa: Any, wb: Any, brk: int | None, labels: tuple[str, str], table: Any) -> str:
    if wa is None or wb is None:
        return ""
    return (f'<div class="ri-d-side"><div><b>{esc(labels[0])} from token {wa.start}</b>'
            f"{_chips(wa.ids, wa.pieces, special=_special_of(table, wa.ids), start=wa.start, brk=brk)}</div>"
            f'<div><b>{esc(labels[1])} from token {wb.start}</b>'
            f"{_chips(wb.ids, wb.pieces, special=_special_of(table, wb.ids), start=wb.start, brk=brk)}</div></div>")


_VARIANT_LABEL = {
    "vllm": "vLLM-style render (tool-call arguments parsed to objects, request's chat_template_kwargs applied)",
    "plain": "plain TRL-style render (messages and tools as recorded, no kwargs)",
}


def drift_template_html(tc: Any, table: Any = None) -> str:
    """Section 2: the prompt re-rendered through the chat template vs the recorded ids."""
    src = {"engine": "the engine's prompt_token_ids", "stored": "the stored prompt_ids"}.get(tc.prompt_source,
                                                                                         f"{tc.prompt_source} ids")
    head = f"<h4>Prompt re-render (what the trainer would see) vs {esc(src)}</h4>"
    if tc.unchecked and tc.vllm is None:
        return f'<section class="ri-d-sec" data-check="template">{head}{_badge("not checked", "na")} {esc(tc.unchecked)}</section>'
    parts = [f'<div class="ri-note">chat_template_kwargs: {esc(json.dumps(tc.chat_template_kwargs, ensure_ascii=False))} · '
             f"{tc.stored_len:,} recorded prompt ids</div>"]
    for rc in (tc.vllm, tc.plain):
        if rc is None:
            continue
        label = f'<div data-variant="{esc(rc.variant)}"><b>{esc(_VARIANT_LABEL.get(rc.variant, rc.variant))}</b>: '
        if rc.error:
            parts.append(f"{label}{_badge('render failed', 'na')} {esc(rc.error)}</div>")
        elif rc.equal:
            parts.append(f"{label}{_badge('equal', 'ok')} {rc.rendered_len:,} ids, identical.</div>")
        else:
            parts.append(f"{label}{_badge('differs', 'bad')} first divergence at prompt token "
                         f"{esc(rc.first_mismatch)} (recorded {tc.stored_len:,}, rendered {rc.rendered_len:,} ids)"
                         f"{_windows_html(rc.stored_window, rc.rendered_window, rc.first_mismatch, ('recorded', 'rendered'), table)}"
                         f"{_classification_html(rc.classification, ('recorded', 'rendered'))}</div>")
    return f'<section class="ri-d-sec" data-check="template">{head}{"".join(parts)}</section>'


def drift_prefix_html(pc: Any, turn: Any = None, prev: Any = None, table: Any = None) -> str:
    """Section 3: does this prompt extend the previous agent turn's prompt + output?"""
    this = f"turn {turn.index}" if turn is not None else "this turn"
    before = f"turn {prev.index}" if prev is not None else "the previous turn"
    head = f"<h4>Turn-to-turn prefix audit: does {esc(this)}'s prompt extend {esc(before)}'s prompt + output?</h4>"
    if pc.status == "first":
        why = pc.unchecked or "first agent turn: nothing to extend."
        return f'<section class="ri-d-sec" data-check="prefix">{head}{_badge("first", "na")} {esc(why)}</section>'
    if pc.status == "clean":
        return (f'<section class="ri-d-sec" data-check="prefix">{head}{_badge("clean", "ok")} all {pc.held_len:,} '
                f"held tokens are a prefix of the {pc.next_len:,}-token prompt.</section>")
    where = "inside the previous turn's sampled output" if pc.in_output else "inside the previous turn's prompt"
    body = (f"{_badge('broken', 'bad')} breaks at held token {esc(pc.divergence)} ({where}): "
            f"{pc.matched:,} of {pc.held_len:,} held tokens match; <b>{pc.tokens_rerendered:,}</b> tokens re-rendered.")
    if pc.unchecked:
        body += f' <span class="ri-note">({esc(pc.unchecked)})</span>'
    body += _windows_html(pc.held_window, pc.next_window, pc.divergence, ("held (prompt + output)", "next prompt"), table)
    body += _classification_html(pc.classification, ("held (prompt + output)", "next prompt"))
    return f'<section class="ri-d-sec" data-check="prefix">{head}{body}</section>'


def drift_rows_html(tr: Any, turn_index: int | None = None) -> str:
    """Section 4: the named trainer's rows (a :class:`viewer.drift.TrainerRows`): which trainer and
    why, CLEAN / REALIGN / FORK per turn with matched, drift and lost gradient, the turns it
    leaves out, TRL's tally and the totals."""
    spec = tr.spec
    head = (f'<h4 data-trainer="{esc(spec.mode)}">Trainer rows: {esc(spec.label)}</h4>'
            f'<div class="ri-note" data-trainer-reason="1">{"chosen automatically: " if spec.auto else ""}'
            f"{esc(spec.reason)}</div>")
    if tr.error is not None:
        return (f'<section class="ri-d-sec" data-check="rows">{head}<div class="ri-notice ri-error" '
                f'data-trainer-error="1">No rows: {esc(tr.error)}</div></section>')
    rows = tr.rows
    trs = []
    for v in rows.verdicts:
        lost = f"{v.tokens_losing_gradient:,}" + (f" (of turn {v.lost_from_turn})" if v.lost_from_turn is not None else "")
        cur = ' class="ri-d-cur"' if turn_index is not None and v.turn == turn_index else ""
        state = {"CLEAN": "ok", "FIRST": "na"}.get(v.verdict, "bad")
        trs.append(f'<tr{cur} data-turn="{v.turn}"><td>{v.turn}</td><td>{_badge(v.verdict, state)}</td>'
                   f"<td>{v.matched:,}</td><td>{v.drift:,}</td><td>{v.held_len:,}</td><td>{lost}</td>"
                   f"<td>{v.trained_tokens:,}</td><td>{v.own_tokens_lost:,}</td><td>{v.kept_trained:,}</td>"
                   f"<td>{'—' if v.row is None else v.row}</td><td></td></tr>")
    for e in tr.excluded:
        cur = ' class="ri-d-cur"' if turn_index is not None and e.turn == turn_index else ""
        trs.append(f'<tr{cur} data-turn="{e.turn}"><td>{e.turn}</td><td>{_badge("not in chain", "na")}</td>'
                   f'<td colspan="8"></td><td>{esc(e.reason)}</td></tr>')
    c, t = rows.counts(), rows.tally
    notes = "".join(f'<div class="ri-warn">{esc(n)}</div>' for n in tr.notes)
    totals = (f'<div class="ri-d-ev" data-rows="{len(rows.rows)}" data-losing="{rows.tokens_losing_gradient}">'
              f"rollout totals: {len(rows.rows)} row(s) kept ({len(rows.dropped)} dropped, no trained "
              f"token) · CLEAN {c['CLEAN']} · REALIGN {c['REALIGN']} · FORK {c['FORK']} · drift tokens "
              f"{t.drift_tokens:,} (max {t.drift_max:,}) · sampled trained tokens "
              f"{rows.trained_tokens:,} · kept with gradient {rows.kept_trained_tokens:,} · "
              f"<b>losing gradient {rows.tokens_losing_gradient:,}</b></div>")
    return (f'<section class="ri-d-sec" data-check="rows">{head}{notes}'
            '<table class="ri-d-table"><thead><tr><th>turn</th><th>verdict</th><th>matched</th><th>drift</th>'
            "<th>held</th><th>tokens losing gradient</th><th>trained tokens</th><th>own tokens lost</th>"
            "<th>kept trained</th><th>row</th><th>note</th></tr></thead>"
            f"<tbody>{''.join(trs)}</tbody></table>{totals}</section>")


def _rerender_badge(tc: Any) -> str:
    """The header's re-render badge, in the words of the section below: ``tc.equal`` is the
    vLLM-style render's answer, so when the plain TRL-style render (the one a trl-message trainer
    re-renders) answers otherwise, the badge names both instead of calling the prompt "equal" above
    a section that says "differs"."""
    if tc.equal is None:
        return _badge("re-render: not checked", "na")
    plain = tc.plain
    if plain is None or plain.error or plain.equal is None or plain.equal == tc.equal:
        return _badge("re-render: " + ("equal" if tc.equal else f"{tc.cause}"), _state(tc.equal))
    def said(equal: bool, cause: str | None) -> str:
        return "equal" if equal else "differs" + (f" ({cause})" if cause else "")
    return _badge(f"re-render: vLLM-style {said(tc.equal, tc.cause)}, TRL-style {said(plain.equal, plain.cause)}",
                  "bad")


def drift_turn_html(report: Any, table: Any = None, tokenizer_note: str = "") -> str:
    """The whole per-turn drift report (a :class:`viewer.drift.TurnReport`)."""
    t = report.turn
    rt, tc, pc = report.roundtrip, report.template, report.prefix
    badges = [
        _badge("round trip: " + ("identical" if rt.equal else ("not checked" if rt.equal is None else
                                                            f"{len(rt.changed_spans)} span(s), {rt.cause}")),
               _state(rt.equal)),
        _rerender_badge(tc),
        _badge("prefix: " + pc.status + (f", {pc.cause}" if pc.cause else ""),
               {"clean": "ok", "broken": "bad"}.get(pc.status, "na")),
    ]
    if report.verdict is not None:
        v = report.verdict
        badges.append(_badge(f"row: {v.verdict}" + (f", {v.tokens_losing_gradient} lose gradient"
                                                     if v.tokens_losing_gradient else ""),
                             {"CLEAN": "ok", "FIRST": "na"}.get(v.verdict, "bad"), v.verdict))
    elif report.is_agent:
        why = report.trainer.error or report.trainer.excluded_reason(t.index) or "not in the trainer's chain"
        badges.append(_badge(f"row: not in chain ({why})", "na"))
    notes = []
    if report.tokenizer is None:
        notes.append('<div class="ri-notice ri-error" data-no-tokenizer="1">No tokenizer for this rollout: the round '
                     "trip and the prompt re-render need one and are not checked. The prefix audit and the trainer "
                     "rows below work on ids alone. Choose a tokenizer under “Open a rollout”.</div>")
    if tokenizer_note:
        notes.append(f'<div class="ri-note">{esc(tokenizer_note)}</div>')
    if not report.is_agent:
        notes.append('<div class="ri-warn">A bookkeeping call (filtered from training): the prefix audit and the '
                     "trainer rows cover agent turns only.</div>")
    head = (f'<div class="ri-d-head"><b>Turn {t.index}</b> · call {t.call} · {esc(t.kind)} ({esc(t.role)}) · '
            f'tokenizer {esc(report.tokenizer or "none")} · {"".join(badges)}</div>')
    return (f'<div class="ri-drift" data-turn="{t.index}" data-drifted="{int(report.drifted)}">'
            f'{head}{"".join(notes)}{drift_roundtrip_html(rt, table)}{drift_template_html(tc, table)}'
            f"{drift_prefix_html(pc, t, report.prev, table)}{drift_rows_html(report.trainer, t.index)}</div>")


def drift_empty_html(message: str) -> str:
    return f'<div class="ri-drift">{notice_html(message)}</div>'

def drift_scan_html(result: ScanResult, note: str = "") -> str:
    """Totals of a dataset scan (:func:`viewer.drift.scan` result)."""
    t = result.get("totals", {})
    causes = ", ".join(f"{c} {n}" for c, n in sorted(t.get("by_cause", {}).items(), key=lambda kv: -kv[1])) or "none"
    state = "cancelled" if t.get("cancelled") else "done"
    parts = [
        kv("rollouts", t.get("rollouts", 0)), kv("turns checked", t.get("turns", 0)),
        kv("drifted turns", t.get("drifted_turns", 0)), kv("round trip drifted", t.get("retokenize_drifted", 0)),
        kv("re-render drifted", t.get("template_drifted", 0)), kv("broken prefixes", t.get("prefix_broken", 0)),
        kv("forked rows", t.get("forked_rows", 0)), kv("tokens losing gradient", t.get("tokens_losing_gradient", 0)),
        kv("unchecked", t.get("unchecked", 0)),
    ]
    extra = f'<div class="ri-note">{esc(note)}</div>' if note else ""
    return (f'<div class="ri-header" data-scan="{state}"><div class="ri-kvs">{"".join(parts)}</div>'
            f'<div class="ri-note">scan {state} · by cause: <span class="ri-d-cause">{esc(causes)}</span></div>{extra}</div>')
