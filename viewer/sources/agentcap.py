"""agentcap captures (docs/FORMATS.md §5): one row per model call, ``request``/``response`` JSON strings.

``response`` is the upstream body, or ``{"stream": true, "raw": "<SSE>"}`` for streamed
calls: :func:`parse_sse` rebuilds the assistant message from the ``data:`` chunks
(content, reasoning, tool-call fragments by index, finish reason, usage, and token ids /
logprobs when the upstream was asked for them, which agentcap normally does not do).

A row becomes the conversation ``request.messages + [reply]``, derived per assistant
turn; the last turn is this call. When the reply carries vLLM ``token_ids`` that turn is
exact.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from viewer.rollout import Problem, RolloutOrigin, Turn, TurnOrigin
from viewer.sources.columns import check_ids, check_logprobs
from viewer.sources.derive import Conversation
from viewer.sources.formats import RowFormat, RowRef, as_json
from viewer.sources.openai_wire import StreamAccumulator

__all__ = ["FORMAT", "read_row", "summarize", "parse_sse", "SSEResult"]

_MARK = {"request_id", "served_model", "captured_at", "served_by", "upstream_url"}


def detect(cols: set[str], first: dict[str, Any] | None) -> bool:
    if not {"request", "response"} <= cols or not (_MARK & cols):
        return False
    return first is None or isinstance(first.get("request"), (str, dict))


@dataclass
class SSEResult:
    message: dict[str, Any] = field(default_factory=lambda: {"role": "assistant", "content": ""})
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    model: str | None = None
    prompt_token_ids: list[int] | None = None
    token_ids: list[int] = field(default_factory=list)
    logprob_entries: list[Any] = field(default_factory=list)
    events: int = 0
    done: bool = False
    problems: list[str] = field(default_factory=list)


def parse_sse(raw: str) -> SSEResult:
    """Rebuild a chat completion from an OpenAI-style SSE stream (``data: {...}`` events), with
    the same parser the recording proxy uses."""
    acc = StreamAccumulator()
    acc.feed(raw)
    acc.finish()
    out = SSEResult(model=acc.head.get("model"), usage=acc.usage if isinstance(acc.usage, dict) else None,
                    prompt_token_ids=acc.prompt_token_ids, token_ids=acc.token_ids, logprob_entries=acc.logprobs,
                    finish_reason=acc.finish_reason, events=acc.events, done=acc.done, problems=list(acc.problems))
    msg = acc.message(reasoning_key="reasoning_content", fill_ids=True)
    out.message = {"role": "assistant", "content": msg.get("content", ""),
                   **{k: v for k, v in msg.items() if k in ("reasoning_content", "tool_calls")}}
    if not out.done and out.events:
        out.problems.append("SSE stream ended without 'data: [DONE]' (truncated capture?)")
    return out


def _reply(resp: Any, ref: RowRef, problems: list[Problem]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(assistant message, info) from a response cell (body or streamed raw SSE)."""
    info: dict[str, Any] = {}
    if not isinstance(resp, dict):
        raise ref.error(".response", f"expected a JSON object, got {type(resp).__name__}")
    if resp.get("stream") and isinstance(resp.get("raw"), str):
        r = parse_sse(resp["raw"])
        for p in r.problems:
            problems.append(Problem(ref.label, ref.where(".response.raw"), p, "warning"))
        info.update(streamed=True, sse_events=r.events, finish_reason=r.finish_reason, usage=r.usage,
                    model=r.model, token_ids=r.token_ids, prompt_token_ids=r.prompt_token_ids,
                    logprob_entries=r.logprob_entries)
        return r.message, info
    if "_unparsed_raw" in resp:
        problems.append(Problem(ref.label, ref.where(".response._unparsed_raw"), "agentcap could not parse the "
                                "upstream body; no reply"))
        return {"role": "assistant", "content": ""}, info
    choices = resp.get("choices")
    ch = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    msg = dict(ch.get("message") or {"role": "assistant", "content": ""})
    if "reasoning" in msg and "reasoning_content" not in msg:
        msg["reasoning_content"] = msg.pop("reasoning")
    lp = ch.get("logprobs") if isinstance(ch.get("logprobs"), dict) else {}
    info.update(streamed=False, finish_reason=ch.get("finish_reason"), usage=resp.get("usage"),
                model=resp.get("model"), token_ids=ch.get("token_ids") or [],
                prompt_token_ids=resp.get("prompt_token_ids"), logprob_entries=lp.get("content") or [])
    if not ch:
        problems.append(Problem(ref.label, ref.where(".response.choices"), "response has no choices", "warning"))
    return msg, info


def read_row(row: dict[str, Any], ref: RowRef) -> Conversation:
    problems: list[Problem] = []
    req = as_json(row.get("request"), ref, ".request")
    if not isinstance(req, dict):
        raise ref.error(".request", f"expected a JSON object, got {type(req).__name__}")
    body = req.get("body") if isinstance(req.get("body"), dict) and "messages" not in req else req
    msgs = body.get("messages")
    if not isinstance(msgs, list):
        raise ref.error(".request.messages", f"expected a list of messages, got {type(msgs).__name__}")
    resp = as_json(row.get("response"), ref, ".response")
    reply, info = _reply(resp, ref, problems)
    reply = {"role": "assistant", **{k: v for k, v in reply.items() if k != "role"}}
    messages = [m for m in msgs if isinstance(m, dict)] + [reply]
    tools = [t for t in (body.get("tools") or []) if isinstance(t, dict)]
    model = body.get("model") or row.get("model") or row.get("served_model") or info.get("model")
    n_asst = sum(1 for m in messages if m.get("role") == "assistant")
    exact: list[Turn | None] | None = None
    ids = check_ids(info.get("token_ids") or None)
    if ids.value:
        t = Turn(index=n_asst - 1, call=n_asst, kind="agent", role="main", trained=True, messages=messages[:-1],
                 tools=tools, response=reply, request=body, output_ids=ids.value, output_source="engine",
                 mask=[1] * len(ids.value), finish_reason=info.get("finish_reason"))
        p = check_ids(info.get("prompt_token_ids"))
        if p.value:
            t.prompt_ids, t.prompt_source = p.value, "engine"
        entries = info.get("logprob_entries") or []
        lps = check_logprobs([e.get("logprob") if isinstance(e, dict) else None for e in entries] or None)
        if lps.value and len(lps.value) == len(ids.value):
            t.logprobs = lps.value
        t.origin = TurnOrigin(mask_source="derived", kind_source="record", message_index=len(messages) - 1)
        exact = [None] * (n_asst - 1) + [t]
    task = {k: row[k] for k in ("task_id", "run_id", "turn", "request_id", "provider", "upstream_url", "label",
                                "served_model", "served_by") if row.get(k) is not None} or None
    summary = {k: info[k] for k in ("streamed", "sse_events", "finish_reason", "usage") if info.get(k) is not None}
    instr = next((m.get("content") for m in messages if m.get("role") == "user" and isinstance(m.get("content"), str)),
                 None)
    conv = Conversation(messages=messages, tools=tools, model=model, task=task, instruction=instr,
                        summary=summary or None, problems=problems, exact_turns=exact,
                        origin=RolloutOrigin(this_call_turn=n_asst - 1))
    ctk = body.get("chat_template_kwargs")
    conv.chat_template_kwargs = ctk if isinstance(ctk, dict) else None
    return conv


def summarize(row: dict[str, Any]) -> dict[str, Any]:
    req, resp = row.get("request"), row.get("response")
    n = None
    if isinstance(req, str):
        n = req.count('"role": "assistant"') + req.count('"role":"assistant"') + 1
    length = sum(len(x) for x in (req, resp) if isinstance(x, str)) or None
    return {"agent": row.get("agent"), "model": row.get("model") or row.get("served_model"),
            "task": row.get("task_id"), "reward": None, "result": None, "turns": n, "length": length}


FORMAT = RowFormat("agentcap", "agentcap captures (one model call per row)", detect, read_row, summarize,
                   light=("model", "served_model", "task_id", "run_id", "turn", "request_id"),
                   light_fields=frozenset({"model", "task"}),
                   fields=("request", "response", "request_id", "served_model"))
