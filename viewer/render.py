"""The only place HTML (and the token view's JSON payload) is built. Everything is escaped.

Agent traces are untrusted: model text, tool output and file contents may hold
``<img onerror>``, ``</script>``, ``${...}`` or ``{{x}}``. Every string that reaches the
browser goes through :func:`esc` here, or travels as JSON that the browser only ever
assigns with ``textContent``. Never put data into a Gradio ``html_template``.
"""
from __future__ import annotations

import html
import json
import math
from typing import Any, Iterable

from .rollout import Problem, Rollout, Turn
from .tokens import TurnTokens

__all__ = ["esc", "safe_json", "token_view_payload", "rollout_header", "conversation_html",
           "task_html", "problems_html", "notice_html"]


def esc(value: Any) -> str:
    """HTML-escape any value for text or a quoted attribute."""
    return html.escape("" if value is None else str(value), quote=True)


def safe_json(obj: Any) -> str:
    """JSON for the browser: ``<`` escaped so no ``</script>`` or ``<script`` can appear."""
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
            .replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _lp(v: float | None) -> float | None:
    if v is None or not math.isfinite(v):
        return None
    return round(v, 4)


def token_view_payload(turn: Turn, tt: TurnTokens, *, low: float, context_tail: int,
                       focus: tuple[int, int] | None = None, mode: str = "mask",
                       page_tokens: int = 50000, note: str = "", link: str = "") -> str:
    """JSON string the token view draws from (see viewer/ui/assets/token_view.js).

    ``link`` is the query string (without ``tok=``) that reopens this turn, or "" when the
    source cannot be linked (an upload).

    Arrays are parallel over prompt+output positions. ``k`` is the kind per position:
    0 context, 1 trained output, 2 untrained output. ``lp`` is null on the prompt.
    """
    p = tt.prompt_len
    n = len(tt.ids)
    mask = turn.loss_mask
    kinds = [0] * p + [(1 if k < len(mask) and mask[k] else 2) for k in range(n - p)]
    if turn.prompt_mask:
        for i, m in enumerate(turn.prompt_mask[:p]):
            if m:
                kinds[i] = 1
    top: dict[str, list] = {}
    if turn.top_logprobs:
        for k, alts in enumerate(turn.top_logprobs):
            if alts:
                top[str(p + k)] = [[a.id, _lp(a.logprob)] for a in alts]
    return token_payload(tt.ids, tt.texts, kinds, special=tt.special,
                         logprobs=[None] * p + list(turn.logprobs)[: n - p], prompt_len=p, turn=turn.index,
                         trained=turn.trained, kind=turn.kind, role=turn.role, prompt_source=turn.prompt_source,
                         output_source=turn.output_source, exact=tt.exact_text, oov=tt.out_of_vocab, low=low,
                         context_tail=context_tail, page_tokens=page_tokens, note=note, top=top,
                         alt=tt.alt_texts, focus=focus, mode=mode, link=link)


def _kv(label: str, value: Any, cls: str = "") -> str:
    return (f'<span class="ri-kv {esc(cls)}"><span class="ri-k">{esc(label)}</span>'
            f'<span class="ri-v">{esc(value)}</span></span>')


def _fmt(v: float | None, digits: int = 3) -> str:
    return "—" if v is None else f"{v:.{digits}f}"


def rollout_header(r: Rollout, tokenizer_note: str = "") -> str:
    s = r.stats()
    reward = "unknown" if r.reward is None else f"{r.reward:.3g}"
    parts = [
        _kv("format", r.format), _kv("model", r.model or "unknown"),
        _kv("turns", f'{s["turns"]} ({s["trained_turns"]} trained)'),
        _kv("filtered calls", s["filtered_calls"]),
        _kv("tokens", f'{s["prompt_tokens"]:,} prompt · {s["output_tokens"]:,} output · '
                      f'{s["trained_tokens"]:,} trained'),
        _kv("mean logprob", _fmt(s["mean_logprob"])),
        _kv("reward", reward, "ri-reward"),
    ]
    summ = r.summary if isinstance(r.summary, dict) else {}
    if summ.get("spell_tool_call_as_pieces"):
        parts.append(_kv("capture option", "tool-call tags spelled as pieces"))
    note = f'<div class="ri-note">{esc(tokenizer_note)}</div>' if tokenizer_note else ""
    warn = ""
    if r.problems:
        n_err = sum(1 for p in r.problems if p.severity == "error")
        warn = (f'<div class="ri-warn">{len(r.problems)} problem(s) reading this source '
                f'({n_err} errors): see the Problems tab. The rest is shown.</div>')
    return (f'<div class="ri-header"><div class="ri-source">{esc(r.source)}</div>'
            f'<div class="ri-kvs">{"".join(parts)}</div>{note}{warn}</div>')


def notice_html(message: str, kind: str = "info") -> str:
    return f'<div class="ri-notice ri-{esc(kind)}">{esc(message)}</div>'


def _pretty_args(args: Any) -> str:
    if isinstance(args, str):
        try:
            return json.dumps(json.loads(args), indent=2, ensure_ascii=False)
        except (ValueError, TypeError):
            return args
    return json.dumps(args, indent=2, ensure_ascii=False)


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        out = []
        for part in content:
            if isinstance(part, dict):
                out.append(str(part.get("text", part.get("content", json.dumps(part, ensure_ascii=False)))))
            else:
                out.append(str(part))
        return "\n".join(out)
    return json.dumps(content, ensure_ascii=False)


def _message_html(m: dict[str, Any], label: str | None = None) -> str:
    role = str(m.get("role", "?"))
    head = esc(label or role)
    body = []
    reasoning = m.get("reasoning") or m.get("reasoning_content")
    if reasoning:
        body.append(f'<details class="ri-reasoning"><summary>reasoning</summary>'
                    f'<pre>{esc(_content_text(reasoning))}</pre></details>')
    text = _content_text(m.get("content"))
    if text:
        body.append(f"<pre>{esc(text)}</pre>")
    for c in m.get("tool_calls") or []:
        if not isinstance(c, dict):
            continue
        fn = c.get("function") or {}
        body.append(f'<div class="ri-toolcall"><span class="ri-toolname">{esc(fn.get("name", "?"))}</span>'
                    f'<span class="ri-callid">{esc(c.get("id", ""))}</span>'
                    f'<pre>{esc(_pretty_args(fn.get("arguments", "")))}</pre></div>')
    if m.get("tool_call_id"):
        head += f' <span class="ri-callid">{esc(m.get("tool_call_id"))}</span>'
    if not body:
        body.append('<pre class="ri-empty">(empty)</pre>')
    return f'<div class="ri-msg ri-role-{esc(role)}"><div class="ri-role">{head}</div>{"".join(body)}</div>'


def conversation_html(turn: Turn, show_system: bool = True) -> str:
    """The turn's request messages, then the response, then the tools offered."""
    msgs = []
    for m in turn.messages:
        if not isinstance(m, dict):
            continue
        if m.get("role") == "system" and not show_system:
            continue
        if m.get("role") == "system":
            msgs.append(f'<details class="ri-system"><summary>system prompt '
                        f'({len(_content_text(m.get("content"))):,} chars)</summary>{_message_html(m)}</details>')
        else:
            msgs.append(_message_html(m))
    resp = turn.response or {}
    status = "trained" if turn.trained else ("bookkeeping (filtered)" if turn.kind != "agent" else "not trained")
    resp_html = _message_html({"role": "assistant", **resp}, f"response · {status} · finish: {turn.finish_reason}")
    if turn.error:
        resp_html += f'<div class="ri-warn">upstream error: {esc(turn.error)}</div>'
    tools = ""
    if turn.tools:
        items = []
        for t in turn.tools:
            fn = (t or {}).get("function", t) if isinstance(t, dict) else {}
            items.append(f'<details class="ri-tool"><summary><b>{esc(fn.get("name", "?"))}</b> '
                         f'{esc(str(fn.get("description", ""))[:120])}</summary>'
                         f'<pre>{esc(json.dumps(fn.get("parameters", {}), indent=2, ensure_ascii=False))}</pre></details>')
        tools = f'<div class="ri-tools"><div class="ri-role">tools offered ({len(turn.tools)})</div>{"".join(items)}</div>'
    return (f'<div class="ri-convo"><div class="ri-convo-head">Turn {turn.index} · call {turn.call} · '
            f'{esc(turn.kind)} ({esc(turn.role)}) · {len(turn.messages)} request messages</div>'
            f'{"".join(msgs)}<div class="ri-response">{resp_html}</div>{tools}</div>')


def _tests_table(tests: Iterable[dict[str, Any]]) -> str:
    rows = []
    for i, t in enumerate(tests):
        if not isinstance(t, dict):
            rows.append(f"<tr><td>{i}</td><td colspan=2><pre>{esc(t)}</pre></td></tr>")
            continue
        rows.append(f"<tr><td>{i}</td><td><pre>{esc(t.get('input', ''))}</pre></td>"
                    f"<td><pre>{esc(t.get('output', ''))}</pre></td></tr>")
    return ('<table class="ri-tests"><thead><tr><th>#</th><th>input</th><th>expected output</th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>')


def task_html(r: Rollout) -> str:
    parts = []
    reward = "unknown" if r.reward is None else f"{r.reward:.3g}"
    parts.append(f'<div class="ri-reward-big">reward <b>{esc(reward)}</b></div>')
    summ = r.summary if isinstance(r.summary, dict) else {}
    notes = [n for n in (summ.get("outcome_notes") or []) if isinstance(n, str)]
    if notes:  # a free-sampling run's story, plainly: limits hit, no tool call, no solution
        parts.append('<ul class="ri-outcome" data-outcome="1">' + "".join(f"<li>{esc(n)}</li>" for n in notes)
                     + "</ul>")
    if summ.get("spell_tool_call_as_pieces"):
        parts.append('<div class="ri-note" data-pieces="1">Captured with <code>--spell-tool-call-as-pieces</code>: '
                     "the sampler was biased away from the &lt;tool_call&gt; special tokens, so the model spelled "
                     "them as plain pieces (the special_token drift case).</div>")
    if r.instruction:
        parts.append(f'<h3>Instruction</h3><pre class="ri-instruction">{esc(r.instruction)}</pre>')
    if r.visible_tests:
        parts.append(f"<h3>Visible tests</h3><pre>{esc(r.visible_tests)}</pre>")
    if r.held_out_tests:
        parts.append(f"<h3>Held-out tests ({len(r.held_out_tests)})</h3>{_tests_table(r.held_out_tests)}")
    if r.summary:
        parts.append(f'<h3>Summary</h3><pre>{esc(json.dumps(r.summary, indent=2, ensure_ascii=False, default=str))}</pre>')
    if r.task:
        parts.append(f'<details><summary>task.json</summary><pre>'
                     f'{esc(json.dumps(r.task, indent=2, ensure_ascii=False, default=str))}</pre></details>')
    if len(parts) == 1 and r.reward is None:
        parts.append('<div class="ri-note">No task, tests or summary in this source.</div>')
    return f'<div class="ri-task">{"".join(parts)}</div>'


def problems_html(problems: list[Problem]) -> str:
    if not problems:
        return '<div class="ri-note">No problems: every file read cleanly.</div>'
    rows = "".join(f'<tr class="ri-{esc(p.severity)}"><td>{esc(p.severity)}</td><td>{esc(p.file)}</td>'
                   f'<td>{esc(p.where)}</td><td>{esc(p.message)}</td></tr>' for p in problems)
    return ('<table class="ri-problems"><thead><tr><th>severity</th><th>file</th><th>where</th>'
            f'<th>problem</th></tr></thead><tbody>{rows}</tbody></table>')


# ======================================================================================
# Drift (issue 4): per-turn drift report, trainer-row token views, scan summary.
# Inputs are viewer.drift values; every data string goes through esc().
# ======================================================================================

DRIFT_CSS = """
.ri-drift { display: flex; flex-direction: column; gap: 12px; font-size: 13px; }
.ri-drift h4 { margin: 0 0 6px; font-size: 14px; }
.ri-d-sec { border: 1px solid var(--border-color-primary); border-radius: 8px; padding: 8px 12px; }
.ri-d-head { display: flex; flex-wrap: wrap; gap: 6px; align-items: center; }
.ri-d-badge { display: inline-block; padding: 1px 8px; border-radius: 999px; font-size: 12px; font-weight: 600;
  border: 1px solid var(--border-color-primary); }
.ri-d-ok { color: #059669; border-color: rgba(5,150,105,.5); }
.ri-d-bad { color: #dc2626; border-color: rgba(220,38,38,.5); }
.ri-d-na { color: var(--body-text-color-subdued); }
.ri-d-cause { font-family: var(--font-mono); }
.ri-d-table { border-collapse: collapse; width: 100%; font-size: 12.5px; }
.ri-d-table td, .ri-d-table th { border: 1px solid var(--border-color-primary); padding: 3px 6px; vertical-align: top; text-align: left; }
.ri-d-table tr.ri-d-cur td { background: rgba(99,102,241,.10); font-weight: 600; }
.ri-d-chips { display: flex; flex-wrap: wrap; gap: 3px; }
.ri-d-chip { display: inline-flex; flex-direction: column; align-items: center; font-family: var(--font-mono);
  border: 1px solid var(--border-color-primary); border-radius: 4px; padding: 1px 3px; }
.ri-d-chip .tk { white-space: pre; }
.ri-d-chip small { font-size: 10px; color: var(--body-text-color-subdued); }
.ri-d-chip.ri-d-brk { border-color: #dc2626; border-style: dashed; }
.ri-d-side { display: grid; grid-template-columns: 1fr 1fr; gap: 10px; }
.ri-d-side > div > b { font-size: 12px; }
.ri-d-text { font-family: var(--font-mono); font-size: 12px; white-space: pre-wrap; word-break: break-all; margin: 4px 0;
  padding: 4px 6px; border-radius: 4px; background: var(--background-fill-secondary); }
.ri-d-text mark { background: rgba(220,38,38,.25); color: inherit; }
.ri-d-ev { margin: 4px 0; }
.ri-d-scroll { max-height: 460px; overflow: auto; margin-top: 6px; }
.ri-d-scroll thead th { position: sticky; top: 0; background: var(--background-fill-primary); }
"""

_DRIFT_SPAN_LIMIT = 150  # changed spans listed per turn (the rest counted)


def _badge(text: Any, state: str) -> str:
    return f'<span class="ri-d-badge ri-d-{esc(state)}">{esc(text)}</span>'


def _state(equal: bool | None) -> str:
    return "na" if equal is None else ("ok" if equal else "bad")


def _vis(text: str) -> str:
    from .tokenizer import visible

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
            extra += f"<small>lp {esc(_fmt(lps[n], 2))}</small>"
        if pos is not None:
            extra += f"<small>@{pos}</small>"
        out.append(f'<span class="{cls}"><span class="tk{" sp" if sp else ""}">{esc(_vis(p)) or "∅"}</span>'
                   f"<small>{esc(i)}</small>{extra}</span>")
    return f'<span class="ri-d-chips">{"".join(out)}</span>'


def _special_of(table: Any, ids: list[int]) -> list[bool] | None:
    try:
        return table.special(ids) if table is not None else None
    except Exception:
        return None


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


def drift_turn_html(report: Any, table: Any = None, tokenizer_note: str = "") -> str:
    """The whole per-turn drift report (a :class:`viewer.drift.TurnReport`)."""
    t = report.turn
    rt, tc, pc = report.roundtrip, report.template, report.prefix
    badges = [
        _badge("round trip: " + ("identical" if rt.equal else ("not checked" if rt.equal is None else
                                                            f"{len(rt.changed_spans)} span(s), {rt.cause}")),
               _state(rt.equal)),
        _badge("re-render: " + ("equal" if tc.equal else ("not checked" if tc.equal is None else f"{tc.cause}")),
               _state(tc.equal)),
        _badge("prefix: " + pc.status + (f", {pc.cause}" if pc.cause else ""),
               {"clean": "ok", "broken": "bad"}.get(pc.status, "na")),
    ]
    if report.verdict is not None:
        v = report.verdict
        badges.append(_badge(f"row: {v.verdict}" + (f", {v.tokens_losing_gradient} lose gradient"
                                                     if v.tokens_losing_gradient else ""),
                             {"CLEAN": "ok", "FIRST": "na"}.get(v.verdict, "bad")))
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
    return (f'<div class="ri-drift" data-turn="{t.index}" data-drifted="{int(report.drifted)}"><style>{DRIFT_CSS}</style>'
            f'{head}{"".join(notes)}{drift_roundtrip_html(rt, table)}{drift_template_html(tc, table)}'
            f"{drift_prefix_html(pc, t, report.prev, table)}{drift_rows_html(report.trainer, t.index)}</div>")


def drift_empty_html(message: str) -> str:
    return f'<div class="ri-drift"><style>{DRIFT_CSS}</style>{notice_html(message)}</div>'


def token_payload(ids: list[int], texts: list[str], kinds: list[int], *, special: list[bool] | None = None,
                  logprobs: list[float | None] | None = None, prompt_len: int = 0, turn: int = 0,
                  trained: bool = True, kind: str = "agent", role: str = "main", prompt_source: str = "",
                  output_source: str = "", exact: bool = True, oov: list[int] | None = None, low: float = -2.5,
                  context_tail: int = 512, page_tokens: int = 50000, note: str = "",
                  top: dict[str, list] | None = None, alt: dict[int, str] | None = None,
                  focus: tuple[int, int] | None = None, mode: str = "mask", link: str = "") -> str:
    """The token view's JSON (see viewer/ui/assets/token_view.js) from plain parallel arrays.

    ``kinds`` per position: 0 context, 1 trained (mask 1), 2 output without gradient.
    ``top`` maps a position (as a string) to ``[[id, logprob], ...]``; ``alt`` gives the
    texts of those alternative ids.
    """
    n = len(ids)
    lps = [_lp(v) for v in (logprobs or [])] + [None] * max(0, n - len(logprobs or []))
    payload = {
        "v": 1, "turn": turn, "trained": trained, "kind": kind, "role": role, "prompt_len": prompt_len,
        "prompt_source": prompt_source, "output_source": output_source, "exact": exact,
        "ids": list(ids), "t": list(texts), "sp": [i for i, s in enumerate(special or []) if s],
        "k": list(kinds), "lp": lps[:n], "top": top or {}, "alt": {str(k): v for k, v in (alt or {}).items()},
        "oov": list(oov or []), "low": low, "tail": max(0, int(context_tail)), "page": max(1000, int(page_tokens)),
        "focus": list(focus) if focus else None, "mode": mode if mode in ("mask", "logprob") else "mask",
        "note": note, "link": link,
    }
    return safe_json(payload)


def trainer_rows(rows: Any) -> list[tuple[str, Any]]:
    """(label, TrainingRow) for every row the stitcher built (a :class:`viewer.drift.Rows`, or
    None when the trainer could not run): kept rows, then dropped ones."""
    out: list[tuple[str, Any]] = []
    if rows is None:
        return out
    for n, r in enumerate(rows.rows):
        out.append((f"row {n} · turns {', '.join(str(t) for t in r.turns)} · {len(r.input_ids):,} tokens · "
                    f"{r.trained_tokens:,} trained", r))
    for n, r in enumerate(getattr(rows, "dropped", []) or []):
        out.append((f"dropped row {n} · turns {', '.join(str(t) for t in r.turns)} · {len(r.input_ids):,} tokens · "
                    "no trained token left", r))
    return out


def row_view_payload(row: Any, table: Any = None, *, turn: int | None = None, label: str = "", low: float = -2.5,
                     context_tail: int = 512, page_tokens: int = 50000) -> str:
    """One trainer row (a :class:`viewer.drift.TrainingRow`) as a token view: mask 1 = trained.

    Prompt tails are context (0); outputs with mask 1 are trained (1), outputs with mask 0
    are output without gradient (2). ``prompt_len`` is where ``turn``'s output starts (else the
    first output), so the view opens on it. Logprobs are the row's old_log_probs on mask-1 tokens.
    """
    kinds = [0] * len(row.input_ids)
    for s in row.spans:
        if s.part == "output":
            for i in range(s.start, s.end):
                kinds[i] = 1 if row.completion_mask[i] else 2
    outs = [s for s in row.spans if s.part == "output"]
    mark = next((s for s in outs if s.turn == turn), outs[0] if outs else None)
    p = mark.start if mark is not None else len(row.input_ids)
    if table is not None:
        texts, special, oov, exact = (table.texts(row.input_ids), table.special(row.input_ids),
                                      table.out_of_vocab(row.input_ids), True)
    else:
        texts, special, oov, exact = [f"⟨{i}⟩" for i in row.input_ids], None, [], False
    lps = [lp if m else None for lp, m in zip(row.old_log_probs, row.completion_mask)]
    return token_payload(row.input_ids, texts, kinds, special=special, logprobs=lps, prompt_len=p,
                         turn=mark.turn if mark is not None else (turn or 0), trained=row.trained_tokens > 0,
                         prompt_source="trainer row", output_source=label or "trainer row", exact=exact,
                         oov=oov, low=low, context_tail=context_tail, page_tokens=page_tokens)


def drift_scan_html(result: dict[str, Any], note: str = "") -> str:
    """Totals of a dataset scan (:func:`viewer.drift.scan` result)."""
    t = result.get("totals", {})
    causes = ", ".join(f"{c} {n}" for c, n in sorted(t.get("by_cause", {}).items(), key=lambda kv: -kv[1])) or "none"
    state = "cancelled" if t.get("cancelled") else "done"
    parts = [
        _kv("rollouts", t.get("rollouts", 0)), _kv("turns checked", t.get("turns", 0)),
        _kv("drifted turns", t.get("drifted_turns", 0)), _kv("round trip drifted", t.get("retokenize_drifted", 0)),
        _kv("re-render drifted", t.get("template_drifted", 0)), _kv("broken prefixes", t.get("prefix_broken", 0)),
        _kv("forked rows", t.get("forked_rows", 0)), _kv("tokens losing gradient", t.get("tokens_losing_gradient", 0)),
        _kv("unchecked", t.get("unchecked", 0)),
    ]
    extra = f'<div class="ri-note">{esc(note)}</div>' if note else ""
    return (f'<div class="ri-header" data-scan="{state}"><div class="ri-kvs">{"".join(parts)}</div>'
            f'<div class="ri-note">scan {state} · by cause: <span class="ri-d-cause">{esc(causes)}</span></div>{extra}</div>')


__all__ += ["DRIFT_CSS", "drift_turn_html", "drift_roundtrip_html", "drift_template_html", "drift_prefix_html",
            "drift_rows_html", "drift_empty_html", "drift_scan_html", "token_payload", "row_view_payload", "trainer_rows"]


# ---------------------------------------------------------------------------------------
# Datasets (issue 5): status line of the Datasets tab. Every data string goes through esc().
# ---------------------------------------------------------------------------------------


def dataset_status_html(source: str, fmt: str | None, *, alternatives: Iterable[str] = (), total: int | None = None,
                        page: int | None = None, pages: int | None = None, note: str = "",
                        bytes_read: int | None = None, kind: str = "info") -> str:
    """What is open in the Datasets tab: source, format (and the other formats it matches), page, notes."""
    parts = [_kv("source", source), _kv("format", fmt or "unknown")]
    alts = [a for a in alternatives if a]
    if alts:
        parts.append(_kv("also matches", ", ".join(alts)))
    if total is not None:
        parts.append(_kv("rows", f"{total:,}"))
    if page is not None:
        parts.append(_kv("page", f"{page + 1} / {pages if pages is not None else '?'}"))
    if bytes_read is not None:
        parts.append(_kv("read", f"{bytes_read / 1048576:.2f} MB"))
    extra = f'<div class="ri-note">{esc(note)}</div>' if note else ""
    return f'<div class="ri-ds ri-{esc(kind)}"><div class="ri-kvs">{"".join(parts)}</div>{extra}</div>'


__all__ += ["dataset_status_html"]


# --------------------------------------------------------------------------------------
# capture
# --------------------------------------------------------------------------------------

def capture_progress_html(snap: dict | None, job_id: str | None) -> str:
    """Live progress as HTML (every value escaped)."""
    if not snap:
        return notice_html("No capture running. Pick a backend, model and task, then Start.")
    status = snap.get("status", "?")
    kind = {"ok": "info", "running": "info", "queued": "info"}.get(status, "error")
    head = (f"<div class='ri-capture-status ri-{esc(kind)}'><b>{esc(status)}</b> · phase <b>{esc(snap.get('phase'))}</b>"
            f" · {esc(snap.get('calls', 0))} calls recorded · {esc(snap.get('tokens', 0))} tokens"
            f" · {esc(snap.get('elapsed_s', 0))} s · job <code>{esc(job_id)}</code>"
            f" (<a href='?job={esc(job_id)}'>link</a>)</div>")
    if snap.get("error"):
        head += f"<div class='ri-notice ri-error'>{esc(snap['error'])}</div>"
    summ = snap.get("summary") or {}
    if summ.get("reward") is not None or summ.get("tests_total"):
        head += (f"<div>reward <b>{esc(summ.get('reward'))}</b> ({esc(summ.get('tests_passed'))}/"
                 f"{esc(summ.get('tests_total'))} held-out tests) · output folder <code>{esc(snap.get('out'))}</code></div>")
    lines = "\n".join(f"[{ev.get('t', 0):7.1f}s {ev.get('phase', '')}] {ev.get('message', '')}"
                      for ev in snap.get("events") or [])
    return head + f"<pre class='ri-capture-log'>{esc(lines)}</pre>"


__all__ += ["capture_progress_html"]
