"""Plain OpenAI-messages rows: one conversation per JSONL line (scripted-expert traces).

A line is ``{"messages": [...], "tools"?: [...], "model"?, "reward"?, ...}`` or a bare
list of messages. Messages are OpenAI chat messages (``role``, ``content``, optional
``tool_calls``, ``reasoning_content``); the view is derived through a chat template.
"""
from __future__ import annotations

from typing import Any

from viewer.rollout import Problem
from viewer.sources.derive import Conversation
from viewer.sources.formats import RowFormat, RowRef, as_float, as_json, conversation_size, text_of

__all__ = ["FORMAT", "read_row", "summarize"]

_REWARD = ("reward", "score", "result")
_TASK = ("task", "task_id", "instruction", "prompt", "problem")


def detect(cols: set[str], first: dict[str, Any] | None) -> bool:
    if "messages" not in cols:
        return False
    msgs = (first or {}).get("messages")
    if isinstance(msgs, str):
        return msgs.lstrip().startswith("[")
    return isinstance(msgs, list) and (not msgs or (isinstance(msgs[0], dict) and "role" in msgs[0]))


def read_row(row: dict[str, Any], ref: RowRef) -> Conversation:
    problems: list[Problem] = []
    msgs = as_json(row.get("messages"), ref, ".messages")
    if not isinstance(msgs, list):
        raise ref.error(".messages", f"expected a list of messages, got {type(msgs).__name__}")
    out = []
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            problems.append(Problem(ref.label, ref.where(f".messages[{i}]"),
                                    "not a message with a role; skipped"))
            continue
        out.append({k: v for k, v in m.items() if v is not None or k == "content"})
    tools = as_json(row.get("tools"), ref, ".tools")
    tools = [t for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []
    reward = next((as_float(row[k]) for k in _REWARD if k in row), None)
    task = {k: row[k] for k in _TASK + ("metadata",) if row.get(k) is not None} or None
    instr = next((str(row[k]) for k in ("instruction", "prompt", "problem") if isinstance(row.get(k), str)), None)
    if instr is None:
        instr = next((text_of(m.get("content")) for m in out if m.get("role") == "user"), None)
    ctk = row.get("chat_template_kwargs") if isinstance(row.get("chat_template_kwargs"), dict) else None
    return Conversation(messages=out, tools=tools, model=row.get("model") or None, agent=row.get("agent") or None,
                        task=task, instruction=instr, reward=reward, problems=problems, chat_template_kwargs=ctk)


def summarize(row: dict[str, Any]) -> dict[str, Any]:
    turns, length = conversation_size(row.get("messages"))
    task = next((row[k] for k in _TASK if isinstance(row.get(k), str)), None)
    reward = next((as_float(row[k]) for k in _REWARD if k in row), None)
    return {"agent": row.get("agent"), "model": row.get("model"), "task": task, "reward": reward,
            "result": None, "turns": turns, "length": length}


FORMAT = RowFormat("messages", "OpenAI chat-messages JSONL (one conversation per line)", detect, read_row,
                   summarize, fields=("messages",))
