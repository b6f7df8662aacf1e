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
                       page_tokens: int = 50000, note: str = "") -> str:
    """JSON string the token view draws from (see viewer/ui/assets/token_view.js).

    Arrays are parallel over prompt+output positions. ``k`` is the kind per position:
    0 context, 1 trained output, 2 untrained output. ``lp`` is null on the prompt.
    """
    p = tt.prompt_len
    n = len(tt.ids)
    mask = turn.mask
    kinds = [0] * p + [(1 if k < len(mask) and mask[k] else 2) for k in range(n - p)]
    if turn.prompt_mask:
        for i, m in enumerate(turn.prompt_mask[:p]):
            if m:
                kinds[i] = 1
    lps: list[float | None] = [None] * p + [_lp(turn.logprobs[k]) if k < len(turn.logprobs) else None
                                            for k in range(n - p)]
    top: dict[str, list] = {}
    if turn.top_logprobs:
        for k, alts in enumerate(turn.top_logprobs):
            if alts:
                top[str(p + k)] = [[a.id, _lp(a.logprob)] for a in alts]
    payload = {
        "v": 1,
        "turn": turn.index,
        "trained": turn.trained,
        "kind": turn.kind,
        "role": turn.role,
        "prompt_len": p,
        "prompt_source": turn.prompt_source,
        "output_source": turn.output_source,
        "exact": tt.exact_text,
        "ids": tt.ids,
        "t": tt.texts,
        "sp": [i for i, s in enumerate(tt.special) if s],
        "k": kinds,
        "lp": lps,
        "top": top,
        "alt": {str(k): v for k, v in tt.alt_texts.items()},
        "oov": tt.out_of_vocab,
        "low": low,
        "tail": max(0, int(context_tail)),
        "page": max(1000, int(page_tokens)),
        "focus": list(focus) if focus else None,
        "mode": mode if mode in ("mask", "logprob") else "mask",
        "note": note,
    }
    return safe_json(payload)


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
