"""mini-swe-agent native trajectories (``*.traj.json``): one rollout per file.

What mini-swe-agent writes (``src/minisweagent/agents/default.py``: ``DefaultAgent.serialize``,
``save``; documented in ``docs/usage/output_files.md``) is one JSON object::

    {info: {exit_status, submission, model_stats{instance_cost, api_calls}, config{agent, agent_type,
            model{model_name, ...}, model_type, environment, environment_type}, mini_version,
            traceback?, exception_str?},
     messages: [{role, content, extra?, tool_calls?, tool_call_id?, reasoning_content?, ...}],
     trajectory_format: "mini-swe-agent-1" | "mini-swe-agent-1.1" | ...,
     instance_id?}

``messages`` is the conversation the model saw, in OpenAI chat shape: ``system``, ``user``
(the task, and observations of text-based models), ``assistant`` (its ``tool_calls`` with
toolcall models) and ``tool`` (``tool_call_id``). v2 (format 1.1) ends with a
``role: "exit"`` message holding the submission or the error: it is not part of the prompt,
so it is left out of the chat (its ``extra.exit_status`` is ``info.exit_status``). The
``extra`` field (parsed actions, the raw API response, cost) is mini-swe-agent's own
bookkeeping, not sent to the model.

Without ``trajectory_format`` the ``{info, messages}`` keys would pass for an opencode export,
so this format is detected first, by that field. No token ids and no tool definitions are
saved: the token view is derived through a chat template, text only.
"""
from __future__ import annotations

from typing import Any, Optional, TypedDict

from viewer.rollout import Problem
from viewer.sources.derive import Conversation
from viewer.sources.formats import RowFormat, RowRef, as_json, text_of
from viewer.sources.swe_agent import openai_tool_calls
from viewer.sources.typedrow import typed

__all__ = ["FORMAT", "read_row", "summarize"]

_ROLES = ("system", "user", "assistant", "tool")


def detect(cols: set[str], first: dict[str, Any] | None) -> bool:
    fmt = (first or {}).get("trajectory_format")
    return "trajectory_format" in cols and isinstance(fmt, str) and fmt.startswith("mini-swe-agent")


def _info(row: dict[str, Any]) -> dict[str, Any]:
    info = row.get("info")
    return info if isinstance(info, dict) else {}


def _model(info: dict[str, Any]) -> str | None:
    config = info.get("config") if isinstance(info.get("config"), dict) else {}
    model = config.get("model") if isinstance(config.get("model"), dict) else {}
    name = model.get("model_name")
    return name if isinstance(name, str) and name else None


def _message(m: dict[str, Any], i: int, ref: RowRef, problems: list[Problem]) -> dict[str, Any]:
    """The chat message the model saw: mini-swe-agent's ``extra`` and provider fields dropped."""
    out: dict[str, Any] = {"role": m["role"], "content": text_of(m.get("content"))}
    if m["role"] == "assistant":
        if m.get("tool_calls"):
            calls = openai_tool_calls(m["tool_calls"], ref, f".messages[{i}].tool_calls", problems)
            if calls:
                out["tool_calls"] = calls
        psf = m.get("provider_specific_fields") if isinstance(m.get("provider_specific_fields"), dict) else {}
        reasoning = m.get("reasoning_content") or psf.get("reasoning_content")
        if isinstance(reasoning, str) and reasoning:
            out["reasoning_content"] = reasoning
    elif m["role"] == "tool":
        out["tool_call_id"] = str(m.get("tool_call_id") or "")
    return out


def read_row(row: dict[str, Any], ref: RowRef) -> Conversation:
    problems: list[Problem] = []
    messages = as_json(row.get("messages"), ref, ".messages")
    if not isinstance(messages, list):
        raise ref.error(".messages", f"expected a list of messages, got {type(messages).__name__}")
    chat: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        if role == "exit":  # the run's end (submission or error): never shown to the model
            continue
        if role not in _ROLES:
            problems.append(Problem(ref.label, ref.where(f".messages[{i}]"),
                                    f"not a chat message (role {role!r}); skipped"))
            continue
        chat.append(_message(m, i, ref, problems))
    info = _info(row)
    status = info.get("exit_status")
    if not any(m["role"] == "assistant" for m in chat):
        problems.append(Problem(ref.label, ref.where(".messages"),
                                f"no model reply: the run ended (exit_status {status!r}) before the model's first "
                                "answer; nothing to show as generated tokens", "warning"))
    if any(m.get("tool_calls") for m in chat):
        problems.append(Problem(ref.label, "", "mini-swe-agent trajectories hold no tool definitions: derived "
                                               "prompts lack them", "warning"))
    task = {k: row[k] for k in ("instance_id", "trajectory_format") if isinstance(row.get(k), str)} or None
    summary = {k: info[k] for k in ("exit_status", "submission", "model_stats", "mini_version", "exception_str")
               if info.get(k) is not None} or None
    instr = next((m["content"] for m in chat if m["role"] == "user"), None)
    return Conversation(messages=chat, model=_model(info), agent="mini-swe-agent", task=task, instruction=instr,
                        summary=summary, problems=problems)


def summarize(row: dict[str, Any]) -> dict[str, Any]:
    info = _info(row)
    messages = row.get("messages") if isinstance(row.get("messages"), list) else []
    chat = [m for m in messages if isinstance(m, dict) and m.get("role") in _ROLES]
    status = info.get("exit_status")
    task = row.get("instance_id")
    return {"agent": "mini-swe-agent", "model": _model(info), "task": task if isinstance(task, str) else None,
            "reward": None, "result": status if isinstance(status, str) else None,
            "turns": sum(1 for m in chat if m.get("role") == "assistant"),
            "length": sum(len(text_of(m.get("content"))) for m in chat)}


class _Reasoning(TypedDict, total=False):
    reasoning_content: Any


class _Message(TypedDict, total=False):
    """A message's fields read here (its ``extra``, mini-swe-agent's bookkeeping, skipped: a third of a file)."""

    role: Any
    content: Any
    tool_calls: Any
    tool_call_id: Any
    reasoning_content: Any
    provider_specific_fields: Optional[_Reasoning]  # (null in toolcall models' replies)


class _ModelConfig(TypedDict, total=False):
    model_name: Any


class _Config(TypedDict, total=False):
    model: _ModelConfig


class _Info(TypedDict, total=False):
    """The run's info read here (its agent and environment config and the traceback skipped)."""

    exit_status: Any
    submission: Any
    model_stats: Any
    mini_version: Any
    exception_str: Any
    config: _Config


class _Trajectory(TypedDict, total=False):
    info: _Info
    messages: list[_Message]
    trajectory_format: Any
    instance_id: Any


FORMAT = RowFormat("mini-swe-agent", "mini-swe-agent trajectory (.traj.json)", detect, read_row, summarize,
                   fields=("trajectory_format", "info", "messages"), decode=typed(_Trajectory))
