"""OpenAI chat messages as evaluation harnesses save them, made into the shape readers hand on.

verifiers (``results.jsonl``) and tau-bench (``traj``) both save the OpenAI chat messages of a
rollout, each with its own leftovers: SDK fields set to null (``function_call``, ``refusal``,
``annotations``, ``provider_specific_fields``), tool calls saved as JSON *strings* (older
verifiers), tool-call arguments as a string or an object, tool replies without
``tool_call_id``. :func:`chat_message` keeps what a chat template reads (``role``, ``content``,
``tool_calls``, ``tool_call_id``, ``name``, ``reasoning_content``) in the OpenAI shape;
:func:`link_tool_replies` gives a reply with no ``tool_call_id`` the id of the call it answers.

A row's messages are read at parser speed (issue 35): :func:`chat_messages` makes a list whose
messages are all ``{role, content}`` at once (:func:`plain_messages`), a role-and-content message
without a call, and a tool call of a name and text arguments, without a function call each; the
rules of :func:`chat_message` decide everything else. tau-bench's rows skip all of it where they can
(:mod:`viewer.sources.chat_typed`).
"""
from __future__ import annotations

import json
from operator import itemgetter
from typing import Any

from viewer.rollout import Problem
from viewer.sources.formats import RowRef

__all__ = ["chat_message", "chat_messages", "plain_messages", "link_tool_replies", "roles", "ROLE_SET"]

ROLE_SET = _ROLE_SET = frozenset(("system", "developer", "user", "assistant", "tool"))  # the chat roles kept
_ROLE = itemgetter("role")
# The keys that add to a message's role and content; any other key (SDK leftovers) is dropped.
_EXTRA = frozenset(("reasoning_content", "reasoning", "provider_specific_fields", "tool_calls", "tool_call_id",
                    "name"))
_REASONING = frozenset(("reasoning_content", "reasoning", "provider_specific_fields"))


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


def _tool_calls(calls: list[Any], ref: RowRef, path: str, i: int | None, problems: list[Problem]
                ) -> list[dict[str, Any]]:
    """The calls that are tool calls, of the message at ``path[i]`` (see :func:`_tool_call`; the usual
    one, a function's name and its arguments as text, is made here without a call)."""
    made = []
    for j, c in enumerate(calls):
        fn = c.get("function") if type(c) is dict else None
        if type(fn) is dict and type(name := fn.get("name")) is str and type(args := fn.get("arguments")) is str:
            made.append({"id": str(c.get("id") or ""), "type": "function",
                         "function": {"name": name, "arguments": args}})
        elif (t := _tool_call(c, ref, f"{_where(path, i)}.tool_calls[{j}]", problems)) is not None:
            made.append(t)
    return made


def _where(path: str, i: int | None) -> str:
    return path if i is None else f"{path}[{i}]"


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
    role = m.get("role") if isinstance(m, dict) else None
    if not isinstance(role, str) or role not in _ROLE_SET:
        problems.append(Problem(ref.label, ref.where(where), f"not a chat message (role {role!r}); skipped"))
        return None
    return _made(m, role, ref, where, None, problems)


def _made(m: dict[str, Any], role: str, ref: RowRef, path: str, i: int | None, problems: list[Problem]
          ) -> dict[str, Any]:
    """The message ``m`` (at ``path[i]``) of a chat role, made."""
    out: dict[str, Any] = {"role": role, "content": m.get("content")}
    if _EXTRA.isdisjoint(m):  # role and content only (with SDK leftovers): most messages
        return out
    if not _REASONING.isdisjoint(m) and (reasoning := _reasoning(m)) is not None:
        out["reasoning_content"] = reasoning
    calls = m.get("tool_calls")
    if isinstance(calls, list) and calls and (made := _tool_calls(calls, ref, path, i, problems)):
        out["tool_calls"] = made
    if role == "tool":
        if isinstance(v := m.get("tool_call_id"), str):
            out["tool_call_id"] = v
        if isinstance(v := m.get("name"), str):
            out["name"] = v
    return out


def plain_messages(msgs: list[Any]) -> list[dict[str, Any]] | None:
    """Every message made at once when each is exactly ``{role, content}`` with a chat role (verifiers'
    rows): one comprehension and C passes, no check per message in Python; None otherwise."""
    try:
        if sum(map(len, msgs)) != 2 * len(msgs):  # a message of other keys (or not a dict: then below)
            return None
        out = [{"role": m["role"], "content": m["content"]} for m in msgs]  # only a dict takes a str key
        if _ROLE_SET.issuperset(map(_ROLE, out)):
            return out
    except (KeyError, TypeError):  # a message without role or content, not a dict, an unhashable role
        pass
    return None


def chat_messages(msgs: Any, ref: RowRef, path: str, problems: list[Problem]) -> list[dict[str, Any]]:
    """Every message of the list at ``path`` (see :func:`chat_message`)."""
    if not isinstance(msgs, list):
        return []
    out = plain_messages(msgs)
    if out is not None:
        return out
    out = []
    for i, m in enumerate(msgs):
        role = m.get("role") if type(m) is dict else None
        if type(role) is not str or role not in _ROLE_SET:  # not a message (or a subclass): the rules decide
            if (msg := chat_message(m, ref, f"{path}[{i}]", problems)) is not None:
                out.append(msg)
        elif _EXTRA.isdisjoint(m):  # _made's first case, without the call
            out.append({"role": role, "content": m.get("content")})
        else:
            out.append(_made(m, role, ref, path, i, problems))
    return out


def roles(msgs: list[dict[str, Any]]) -> list[str]:
    """The roles of messages :func:`chat_messages` made, in one C pass."""
    return list(map(_ROLE, msgs))


def link_tool_replies(msgs: list[dict[str, Any]], ref: RowRef, path: str, problems: list[Problem],
                      told: list[str] | None = None) -> None:
    """Give each tool reply without a ``tool_call_id`` the id of the call it answers (``told``: the
    messages' roles, where the caller has them).

    The k-th tool reply after an assistant message answers that message's k-th call (how the
    harnesses run them). Said once per rollout: the pairing is ours, not the file's."""
    if told is None:
        told = roles(msgs)
    if "tool" not in told:
        return
    calls: list[str] = []
    linked = 0
    for m, role in zip(msgs, told):
        if role == "assistant":
            calls = [c["id"] for c in m["tool_calls"]] if "tool_calls" in m else []
        elif role == "tool":
            call_id = calls.pop(0) if calls else ""
            if call_id and not m.get("tool_call_id"):
                m["tool_call_id"] = call_id
                linked += 1
    if linked:
        what = "1 tool reply carries" if linked == 1 else f"{linked} tool replies carry"
        problems.append(Problem(ref.label, ref.where(path), f"{what} no tool_call_id; each is linked to the call "
                                "it follows, in order", "warning"))
