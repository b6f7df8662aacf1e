"""Reading a rollout: its header, a turn's conversation, the task and the problems found."""
from __future__ import annotations

import json
from typing import Any, Iterable

from ..rollout import Problem, Rollout, Turn
from .escape import esc, fmt, kv

__all__ = ["rollout_header", "conversation_html", "task_html", "problems_html"]


def rollout_header(r: Rollout, tokenizer_note: str = "") -> str:
    s = r.stats()
    reward = "unknown" if r.reward is None else f"{r.reward:.3g}"
    parts = [
        kv("format", r.format), kv("model", r.model or "unknown"),
        kv("turns", f'{s["turns"]} ({s["trained_turns"]} trained)'),
        kv("filtered calls", s["filtered_calls"]),
        _tokens_pill(r, s),
        kv("mean logprob", fmt(s["mean_logprob"])),
        kv("reward", reward, "ri-reward"),
    ]
    summ = r.summary if isinstance(r.summary, dict) else {}
    if summ.get("spell_tool_call_as_pieces"):
        parts.append(kv("capture option", "tool-call tags spelled as pieces"))
    note = f'<div class="ri-note">{esc(tokenizer_note)}</div>' if tokenizer_note else ""
    warn = ""
    if r.problems:
        n_err = sum(1 for p in r.problems if p.severity == "error")
        warn = (f'<div class="ri-warn">{len(r.problems)} problem(s) reading this source '
                f'({n_err} errors): see the Problems tab. The rest is shown.</div>')
    return (f'<div class="ri-header"><div class="ri-source">{esc(r.source)}</div>'
            f'<div class="ri-kvs">{"".join(parts)}</div>{note}{warn}</div>')

def _tokens_pill(r: Rollout, s: dict[str, Any]) -> str:
    """The rollout's token counts, saying what they count: the token view counts one turn, this pill every agent
    turn, summed; a turn with no prompt ids (text only) adds nothing here, and the pill says so rather than
    read as a count that contradicts the token view (issue 41, point 8)."""
    agent = r.agent_turns
    if not agent:
        book = r.filtered_calls
        return kv("tokens", f"no agent turn ({len(book)} filtered call(s): "
                            f"{sum(len(t.prompt_ids) for t in book):,} prompt · "
                            f"{sum(len(t.output_ids) for t in book):,} output, not trained)")
    scope = "tokens, 1 turn" if len(agent) == 1 else f"tokens, {len(agent)} turns summed"
    bare = sum(1 for t in agent if not t.prompt_ids)
    prompt = (f'{s["prompt_tokens"]:,} prompt' if not bare else
              f'{s["prompt_tokens"]:,} prompt ({bare} turn(s) without prompt ids)' if bare < len(agent) else
              "prompt not recorded as ids")
    return kv(scope, f'{prompt} · {s["output_tokens"]:,} output · {s["trained_tokens"]:,} trained')


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
