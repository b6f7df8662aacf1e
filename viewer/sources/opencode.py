"""opencode sessions (docs/FORMATS.md §3): export rows (13point5 ``train.jsonl``) and ``{info, parts}`` lists.

Export row: ``session_id, agent, exported_at, session{info, messages[{info, parts}]},
metadata, batch_id``. The same session may appear in several batches; the dataset layer
keeps the row with the highest ``batch_id`` (``dedupe``). A bare ``opencode export``
document (``{info, messages}``) and a server-API message list (``[{info, parts}]``, read
as one row ``{"messages": [...]}``) are read the same way.

Rebuilding the chat: one assistant message = one model step; its ``text`` parts are the
content, ``reasoning`` parts the reasoning, ``tool`` parts become ``tool_calls`` followed
by ``tool`` messages holding ``state.output`` (or the error). The export holds neither
opencode's system prompt nor its tool definitions, so derived prompts lack them (said in
a warning). Text only: the token view is always derived.
"""
from __future__ import annotations

import json
from typing import Any

from viewer.rollout import Problem, RolloutOrigin
from viewer.sources.derive import Conversation
from viewer.sources.formats import RowFormat, RowRef, as_json

__all__ = ["FORMAT", "read_row", "summarize", "chat_from_messages"]


def detect(cols: set[str], first: dict[str, Any] | None) -> bool:
    if {"session_id", "session"} <= cols:
        return True
    msgs = (first or {}).get("messages")
    if {"info", "messages"} <= cols and (first is None or isinstance(msgs, str)):
        return True  # parquet (no row seen) or a JSON-string column: the names are all there is to go on
    # {info, messages} alone is not enough: mini-swe-agent's trajectories are {info, messages} of chat
    # messages (issue 35); an opencode export's messages are {info, parts}
    return isinstance(msgs, list) and bool(msgs) and isinstance(msgs[0], dict) and {"info", "parts"} <= set(msgs[0])


def _session(row: dict[str, Any], ref: RowRef) -> tuple[dict[str, Any], list[Any], str]:
    if "session" in row:
        s = as_json(row.get("session"), ref, ".session")
        if not isinstance(s, dict):
            raise ref.error(".session", f"expected an opencode export object, got {type(s).__name__}")
        msgs = s.get("messages")
        if not isinstance(msgs, list):
            raise ref.error(".session.messages", f"expected a list of messages, got {type(msgs).__name__}")
        return (s.get("info") if isinstance(s.get("info"), dict) else {}), msgs, ".session.messages"
    msgs = as_json(row.get("messages"), ref, ".messages")
    if not isinstance(msgs, list):
        raise ref.error(".messages", f"expected a list of messages, got {type(msgs).__name__}")
    return (row.get("info") if isinstance(row.get("info"), dict) else {}), msgs, ".messages"


def _tool_output(state: dict[str, Any]) -> str:
    status = state.get("status")
    if status == "completed":
        return str(state.get("output", ""))
    if status == "error":
        return f"[tool error] {state.get('error', '')}"
    return f"[tool {status or 'state unknown'}]"


def chat_from_messages(msgs: list[Any], ref: RowRef, path: str, problems: list[Problem]
                       ) -> tuple[list[dict[str, Any]], str | None]:
    """OpenAI-style chat + the model id, from opencode ``{info, parts}`` messages."""
    chat: list[dict[str, Any]] = []
    model = None
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or not isinstance(m.get("info"), dict):
            problems.append(Problem(ref.label, ref.where(f"{path}[{i}]"), "not an {info, parts} message; skipped"))
            continue
        info, parts = m["info"], m.get("parts")
        if not isinstance(parts, list):
            problems.append(Problem(ref.label, ref.where(f"{path}[{i}].parts"), "parts is not a list; skipped"))
            continue
        role = info.get("role")
        texts, reasoning, calls, results = [], [], [], []
        for j, p in enumerate(parts):
            if not isinstance(p, dict):
                continue
            kind = p.get("type")
            if kind == "text" and not p.get("ignored"):
                texts.append(str(p.get("text", "")))
            elif kind == "reasoning":
                reasoning.append(str(p.get("text", "")))
            elif kind == "file":
                texts.append(f"[file: {p.get('filename') or p.get('url', '')}]")
            elif kind == "tool":
                state = p.get("state") if isinstance(p.get("state"), dict) else {}
                cid = str(p.get("callID") or f"call_{i}_{j}")
                args = state.get("input") if isinstance(state.get("input"), dict) else {}
                calls.append({"id": cid, "type": "function",
                              "function": {"name": str(p.get("tool", "?")),
                                           "arguments": json.dumps(args, ensure_ascii=False)}})
                results.append({"role": "tool", "tool_call_id": cid, "name": str(p.get("tool", "?")),
                                "content": _tool_output(state)})
        if role == "assistant":
            model = model or (f"{info.get('providerID')}/{info['modelID']}" if info.get("providerID")
                              and info.get("modelID") else info.get("modelID"))
            msg: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts)}
            if reasoning:
                msg["reasoning_content"] = "\n".join(reasoning)
            if calls:
                msg["tool_calls"] = calls
            if info.get("error"):
                problems.append(Problem(ref.label, ref.where(f"{path}[{i}].info.error"),
                                        f"assistant step ended with an error: {json.dumps(info['error'])[:300]}",
                                        "warning"))
            chat.append(msg)
            chat.extend(results)
        elif role == "user":
            chat.append({"role": "user", "content": "\n".join(texts)})
        else:
            problems.append(Problem(ref.label, ref.where(f"{path}[{i}].info.role"), f"unknown role {role!r}; skipped"))
    return chat, model


def read_row(row: dict[str, Any], ref: RowRef) -> Conversation:
    problems: list[Problem] = []
    info, msgs, path = _session(row, ref)
    chat, model = chat_from_messages(msgs, ref, path, problems)
    problems.append(Problem(ref.label, "", "opencode exports hold neither the system prompt nor the tool "
                                           "definitions: derived prompts lack them", "warning"))
    task = {k: info[k] for k in ("id", "title", "slug", "directory", "version") if k in info} or None
    # the export's own names for this row, kept when typed as the exporter writes them
    kept: dict[str, Any] = {}
    for k, typ in (("session_id", str), ("batch_id", int), ("exported_at", str)):
        v = row.get(k)
        if type(v) is typ:
            kept[k] = v
        elif v is not None:
            problems.append(Problem(ref.label, ref.where(f".{k}"), f"expected {typ.__name__}, got "
                                                                   f"{type(v).__name__}; not kept", "warning"))
    origin = RolloutOrigin(**kept)
    instr = next((m["content"] for m in chat if m["role"] == "user"), None)
    return Conversation(messages=chat, model=model, agent=row.get("agent") or "opencode", task=task,
                        instruction=instr, problems=problems, origin=origin)


def summarize(row: dict[str, Any]) -> dict[str, Any]:
    out = {"agent": row.get("agent") or "opencode", "model": None, "task": None, "reward": None,
           "result": None, "turns": None, "length": None}
    s = row.get("session") if "session" in row else row
    if isinstance(s, str):
        try:
            s = json.loads(s)
        except json.JSONDecodeError:
            s = None
    if isinstance(s, dict):
        info = s.get("info") if isinstance(s.get("info"), dict) else {}
        out["task"] = info.get("title")
        msgs = s.get("messages") if isinstance(s.get("messages"), list) else []
        asst = [m["info"] for m in msgs if isinstance(m, dict) and isinstance(m.get("info"), dict)
                and m["info"].get("role") == "assistant"]
        out["turns"] = len(asst)
        out["model"] = next((a.get("modelID") for a in asst if a.get("modelID")), None)
        out["length"] = sum(len(str(p.get("text", ""))) + len(str((p.get("state") or {}).get("output", "")))
                            for m in msgs if isinstance(m, dict) for p in (m.get("parts") or [])
                            if isinstance(p, dict))
    return out


FORMAT = RowFormat("opencode", "opencode session exports / {info, parts} messages", detect, read_row, summarize,
                   light=("session_id", "agent", "batch_id", "exported_at"),
                   light_fields=frozenset({"agent"}), dedupe=("session_id", "batch_id"),
                   fields=("session_id", "session", "info", "messages"))
