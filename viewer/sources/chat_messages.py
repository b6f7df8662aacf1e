"""OpenAI chat messages as evaluation harnesses save them, made into the shape readers hand on.

verifiers (``results.jsonl``) and tau-bench (``traj``) both save the OpenAI chat messages of a
rollout, each with its own leftovers: SDK fields set to null (``function_call``, ``refusal``,
``annotations``, ``provider_specific_fields``), tool calls saved as JSON *strings* (older
verifiers), tool-call arguments as a string or an object, tool replies without
``tool_call_id``. :func:`chat_message` keeps what a chat template reads (``role``, ``content``,
``tool_calls``, ``tool_call_id``, ``name``, ``reasoning_content``) in the OpenAI shape;
:func:`link_tool_replies` gives a reply with no ``tool_call_id`` the id of the call it answers.
"""
from __future__ import annotations

import json
from typing import Any

from viewer.rollout import Problem
from viewer.sources.formats import RowRef

__all__ = ["chat_message", "chat_messages", "link_tool_replies"]

_ROLES = ("system", "developer", "user", "assistant", "tool")


def _tool_call(call: Any, ref: RowRef, where: str, problems: list[Problem]) -> dict[str, Any] | None:
    """One tool call as ``{"id", "type": "function", "function": {"name", "arguments": str}}``."""
    if isinstance(call, str):  # older verifiers saved each call as its JSON text
        try:
            call = json.loads(call)
        except json.JSONDecodeError as e:
            problems.append(Problem(ref.label, ref.where(where), f"a tool call saved as text that is not JSON "
                                                                 f"({e.msg}); skipped"))
            return None
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        problems.append(Problem(ref.label, ref.where(where), "not a tool call with a function name; skipped"))
        return None
    args = fn.get("arguments")
    if not isinstance(args, str):  # an object (or nothing): templates expect the JSON text
        args = json.dumps(args if args is not None else {}, ensure_ascii=False)
    return {"id": str(call.get("id") or ""), "type": "function", "function": {"name": fn["name"], "arguments": args}}


def _reasoning(m: dict[str, Any]) -> str | None:
    """The first non-empty text of ``reasoning_content``, ``reasoning``, ``provider_specific_fields.reasoning``."""
    for v in (m.get("reasoning_content"), m.get("reasoning")):
        if v and isinstance(v, str):
            return v
    extra = m.get("provider_specific_fields")
    v = extra.get("reasoning") if isinstance(extra, dict) else None
    return v if v and isinstance(v, str) else None


def chat_message(m: Any, ref: RowRef, where: str, problems: list[Problem]) -> dict[str, Any] | None:
    """The message at ``where`` in the OpenAI shape, or None (reported) when it is not a message."""
    if not isinstance(m, dict) or m.get("role") not in _ROLES:
        role = m.get("role") if isinstance(m, dict) else None
        problems.append(Problem(ref.label, ref.where(where), f"not a chat message (role {role!r}); skipped"))
        return None
    out: dict[str, Any] = {"role": m["role"], "content": m.get("content")}
    reasoning = _reasoning(m)
    if reasoning is not None:
        out["reasoning_content"] = reasoning
    calls = m.get("tool_calls")
    if isinstance(calls, list) and calls:
        made = [_tool_call(c, ref, f"{where}.tool_calls[{j}]", problems) for j, c in enumerate(calls)]
        if any(c is not None for c in made):
            out["tool_calls"] = [c for c in made if c is not None]
    if m["role"] == "tool":
        for k in ("tool_call_id", "name"):
            if isinstance(m.get(k), str):
                out[k] = m[k]
    return out


def chat_messages(msgs: Any, ref: RowRef, path: str, problems: list[Problem]) -> list[dict[str, Any]]:
    """Every message of the list at ``path`` (see :func:`chat_message`)."""
    out = []
    for i, m in enumerate(msgs if isinstance(msgs, list) else []):
        msg = chat_message(m, ref, f"{path}[{i}]", problems)
        if msg is not None:
            out.append(msg)
    return out


def link_tool_replies(msgs: list[dict[str, Any]], ref: RowRef, path: str, problems: list[Problem]) -> None:
    """Give each tool reply without a ``tool_call_id`` the id of the call it answers.

    The k-th tool reply after an assistant message answers that message's k-th call (how the
    harnesses run them). Said once per rollout: the pairing is ours, not the file's."""
    calls: list[str] = []
    linked = 0
    for m in msgs:
        if m["role"] == "assistant":
            calls = [c["id"] for c in m.get("tool_calls", [])]
        elif m["role"] == "tool":
            call_id = calls.pop(0) if calls else ""
            if not m.get("tool_call_id") and call_id:
                m["tool_call_id"] = call_id
                linked += 1
    if linked:
        what = "1 tool reply carries" if linked == 1 else f"{linked} tool replies carry"
        problems.append(Problem(ref.label, ref.where(path), f"{what} no tool_call_id; each is linked to the call "
                                "it follows, in order", "warning"))
