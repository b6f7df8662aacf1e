"""SWE-agent trajectories (``*.traj``): one rollout per file.

What SWE-agent writes (``sweagent/agent/agents.py``: ``DefaultAgent.get_trajectory_data`` /
``save_trajectory``; types in ``sweagent/types.py``) is one JSON object::

    {trajectory: [{action, observation, response, thought, execution_time, state, query?, extra_info?}],
     history: [{role: system|user|assistant|tool, content, agent, message_type?, is_demo?, thought?,
                action?, tool_calls?, tool_call_ids?, thinking_blocks?}],
     info: {exit_status, submission, model_stats{instance_cost, tokens_sent, tokens_received, api_calls},
            edited_files30?, ...},
     replay_config?: the run's config (an object in older files, its JSON string in newer ones),
     environment: the environment's name}

``history`` is the conversation the model saw (before SWE-agent's history processors), so it
is the chat we rebuild: system and user messages as they are, assistant messages with their
``tool_calls`` (already OpenAI shape: ``{id, type, function{name, arguments}}``), and ``tool``
messages whose ``tool_call_ids`` (a one-element list) name the call. ``thinking_blocks``
become ``reasoning_content``. Older SWE-agent saved the history *before* the final step, so
the last ``trajectory`` step (usually ``submit``) may be missing from it: such steps are
appended from ``trajectory[i].response`` with a warning, so that every model call is a turn.

The file holds neither token ids nor the tool definitions (they are built from SWE-agent's
tool bundles at run time): the token view is derived through a chat template, text only.
"""
from __future__ import annotations

import json
from typing import Any, TypedDict

import msgspec

from viewer.rollout import Problem
from viewer.sources.derive import Conversation
from viewer.sources.formats import RowFormat, RowRef, as_json, text_of
from viewer.sources.rowjson import loads
from viewer.sources.typedrow import typed

__all__ = ["FORMAT", "read_row", "summarize", "openai_tool_calls"]

_ROLES = ("system", "user", "assistant", "tool")


def detect(cols: set[str], first: dict[str, Any] | None) -> bool:
    """A ``history`` of SWE-agent messages: each names its ``role`` and the ``agent`` it belongs to."""
    if "history" not in cols:
        return False
    history = (first or {}).get("history")
    return (isinstance(history, list) and bool(history) and isinstance(history[0], dict)
            and "role" in history[0] and "agent" in history[0])


def _config(row: dict[str, Any]) -> dict[str, Any]:
    """``replay_config`` as an object (newer SWE-agent stores its JSON string)."""
    rc = row.get("replay_config")
    if isinstance(rc, str):
        try:
            rc = json.loads(rc)
        except ValueError:
            return {}
    return rc if isinstance(rc, dict) else {}


def _model(config: dict[str, Any]) -> str | None:
    agent = config.get("agent")
    model = agent.get("model") if isinstance(agent, dict) else None
    name = model.get("name") if isinstance(model, dict) else None
    return name if isinstance(name, str) and name else None


def _task_id(config: dict[str, Any]) -> str | None:
    ps = config.get("problem_statement")
    pid = ps.get("id") if isinstance(ps, dict) else None
    return pid if isinstance(pid, str) else None


def _info(row: dict[str, Any]) -> dict[str, Any]:
    info = row.get("info")
    return info if isinstance(info, dict) else {}


def openai_tool_calls(value: Any, ref: RowRef, path: str, problems: list[Problem]) -> list[dict[str, Any]]:
    """OpenAI tool calls; ``arguments`` kept as a JSON string (an object is serialised)."""
    calls = as_json(value, ref, path)
    if not isinstance(calls, list):
        problems.append(Problem(ref.label, ref.where(path), f"expected a list of tool calls, got "
                                                           f"{type(calls).__name__}; ignored", "warning"))
        return []
    out = []
    for j, c in enumerate(calls):
        fn = c.get("function") if isinstance(c, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            problems.append(Problem(ref.label, ref.where(f"{path}[{j}]"), "not a function tool call; skipped",
                                    "warning"))
            continue
        args = fn.get("arguments")
        out.append({"id": str(c.get("id") or f"call_{j}"), "type": "function",
                    "function": {"name": fn["name"], "arguments": args if isinstance(args, str)
                                 else json.dumps(args if args is not None else {}, ensure_ascii=False)}})
    return out


def _reasoning(blocks: Any) -> str | None:
    """Anthropic-style ``thinking_blocks`` ([{type: thinking, thinking}]) as one text."""
    if not isinstance(blocks, list):
        return None
    texts = [str(b.get("thinking")) for b in blocks if isinstance(b, dict) and b.get("thinking")]
    return "\n".join(texts) or None


def _message(entry: dict[str, Any], role: Any, i: int, ref: RowRef, problems: list[Problem]
             ) -> dict[str, Any] | None:
    """The history entry ``i`` (of ``role``) as a chat message; None (said) for a role of no chat."""
    if role not in _ROLES:
        problems.append(Problem(ref.label, ref.where(f".history[{i}].role"), f"unknown role {role!r}; skipped"))
        return None
    content = entry.get("content")
    msg: dict[str, Any] = {"role": role, "content": content if type(content) is str else text_of(content)}
    if role == "assistant":
        if entry.get("tool_calls"):
            calls = openai_tool_calls(entry["tool_calls"], ref, f".history[{i}].tool_calls", problems)
            if calls:
                msg["tool_calls"] = calls
        reasoning = _reasoning(entry.get("thinking_blocks")) if "thinking_blocks" in entry else None
        if reasoning:
            msg["reasoning_content"] = reasoning
    elif role == "tool":
        ids = entry.get("tool_call_ids")
        call_id = ids[0] if isinstance(ids, list) and ids else entry.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            problems.append(Problem(ref.label, ref.where(f".history[{i}].tool_call_ids"),
                                    "tool message names no call; shown as a user message", "warning"))
            msg["role"] = "user"
        else:
            msg["tool_call_id"] = call_id
    return msg


def _history(row: dict[str, Any], ref: RowRef) -> list[Any]:
    history = as_json(row.get("history"), ref, ".history")
    if not isinstance(history, list):
        raise ref.error(".history", f"expected a list of messages, got {type(history).__name__}")
    return history


def _chat(history: list[Any], ref: RowRef, problems: list[Problem]
          ) -> tuple[list[dict[str, Any]], str | None, int, int, bool]:
    """(messages of the first entry's agent, the task text, how many assistant messages there are, how
    many of them are demonstrations, whether any has tool calls)."""
    main = next((e.get("agent") for e in history if isinstance(e, dict)), None)
    msgs: list[dict[str, Any]] = []
    append = msgs.append
    replies = demo_replies = other_agent = 0
    calls = False  # whether a message has tool calls
    instr = None  # the first user message that is not a demonstration: the task
    for i, entry in enumerate(history):
        if not isinstance(entry, dict):
            problems.append(Problem(ref.label, ref.where(f".history[{i}]"), "not a message object; skipped"))
            continue
        get = entry.get
        if get("agent") != main:  # SWE-agent sends the model only its own agent's entries
            other_agent += 1
            continue
        role = get("role")
        if role == "user" or role == "system" or (role == "assistant" and not get("tool_calls")
                                                  and "thinking_blocks" not in entry):
            content = get("content")  # most entries: role and text, made here without a call
            msg = {"role": role, "content": content if type(content) is str else text_of(content)}
        elif (msg := _message(entry, role, i, ref, problems)) is None:
            continue
        else:
            role = msg["role"]  # (a tool reply naming no call is shown as a user's)
            calls = calls or "tool_calls" in msg
        if role == "assistant":
            replies += 1
            if get("is_demo"):
                demo_replies += 1
        elif instr is None and role == "user" and not get("is_demo"):
            instr = msg["content"]
        append(msg)
    if other_agent:
        problems.append(Problem(ref.label, ref.where(".history"), f"{other_agent} entries of agents other than "
                                                                  f"{main!r} skipped (not in this agent's prompt)",
                                "warning"))
    if demo_replies:
        problems.append(Problem(ref.label, ref.where(".history"),
                                f"{demo_replies} assistant message(s) are demonstrations (is_demo): shown as turns "
                                "though the model did not generate them", "warning"))
    return msgs, instr, replies, demo_replies, calls


def _steps(row: dict[str, Any]) -> list[Any]:
    """``trajectory`` as a list (its steps left unparsed, ``msgspec.Raw``, by the typed decode)."""
    steps = row.get("trajectory")
    return steps if isinstance(steps, list) else []


def _step(raw: msgspec.Raw) -> Any:
    """A step the typed decode left unparsed: its :class:`_Step` fields (json.loads's values where it is not
    an object of them; the row's text was checked whole by the typed decode)."""
    try:
        return _STEP.decode(raw)
    except (msgspec.DecodeError, RecursionError):  # (ValidationError is a DecodeError)
        return loads(bytes(raw), "utf-8")


def _append_missing_steps(row: dict[str, Any], msgs: list[dict[str, Any]], n_replies: int, ref: RowRef,
                          problems: list[Problem]) -> None:
    """Trajectory steps past the history's last reply (older files left out the final step), appended."""
    steps = _steps(row)[n_replies:]
    if not steps:
        return
    steps = [_step(s) if type(s) is msgspec.Raw else s for s in steps]
    missing = [s if isinstance(s, dict) else {} for s in steps]
    for j, step in enumerate(missing):
        if j:  # between two appended steps, the observation the model saw in between
            msgs.append({"role": "user", "content": str(missing[j - 1].get("observation") or "")})
        msgs.append({"role": "assistant", "content": str(step.get("response") or "")})
    problems.append(Problem(ref.label, ref.where(f".trajectory[{n_replies}]"),
                            f"{len(missing)} step(s) missing from .history (older SWE-agent saved it before the "
                            "final step): appended from .trajectory[].response, without tool calls", "warning"))


def read_row(row: dict[str, Any], ref: RowRef) -> Conversation:
    problems: list[Problem] = []
    msgs, instr, replies, demo_replies, calls = _chat(_history(row, ref), ref, problems)
    _append_missing_steps(row, msgs, replies - demo_replies, ref, problems)  # (messages without tool calls)
    if calls:
        problems.append(Problem(ref.label, "", "SWE-agent .traj files hold no tool definitions: derived prompts "
                                               "lack them", "warning"))
    info, config = _info(row), _config(row)
    task = {k: v for k, v in (("id", _task_id(config)), ("environment", row.get("environment"))) if v} or None
    summary = {k: info[k] for k in ("exit_status", "submission", "model_stats") if k in info} or None
    return Conversation(messages=msgs, model=_model(config), agent="swe-agent", task=task, instruction=instr,
                        summary=summary, problems=problems)


def summarize(row: dict[str, Any]) -> dict[str, Any]:
    history = row.get("history") if isinstance(row.get("history"), list) else []
    entries = [e for e in history if isinstance(e, dict)]
    main = entries[0].get("agent") if entries else None
    mine = [e for e in entries if e.get("agent") == main]
    replies = sum(1 for e in mine if e.get("role") == "assistant" and not e.get("is_demo"))
    steps = _steps(row)
    demos = sum(1 for e in mine if e.get("role") == "assistant" and e.get("is_demo"))
    status, config = _info(row).get("exit_status"), _config(row)
    return {"agent": "swe-agent", "model": _model(config), "task": _task_id(config), "reward": None,
            "result": status if isinstance(status, str) else None,
            "turns": max(replies, len(steps)) + demos,
            "length": sum(len(text_of(e.get("content"))) for e in mine)}


class _Entry(TypedDict, total=False):
    """The history entry fields read here (``thought`` and ``action`` repeat the content: skipped)."""

    role: Any
    agent: Any
    content: Any
    tool_calls: Any
    thinking_blocks: Any
    is_demo: Any
    tool_call_ids: Any
    tool_call_id: Any


class _Step(TypedDict, total=False):
    """What a trajectory step adds when the history lacks it (its ``query``, ``state``... are skipped)."""

    response: Any
    observation: Any


_STEP = msgspec.json.Decoder(_Step)


class _Info(TypedDict, total=False):
    exit_status: Any
    submission: Any
    model_stats: Any


class _Model(TypedDict, total=False):
    name: Any


class _Agent(TypedDict, total=False):
    model: _Model


class _Problem(TypedDict, total=False):
    id: Any


class _Replay(TypedDict, total=False):
    """The run's config: its model's name and the task's id (the rest, tools and environment, skipped)."""

    agent: _Agent
    problem_statement: _Problem


class _Trajectory(TypedDict, total=False):
    history: list[_Entry]
    # (each step repeats a reply of the history: read only where the history lacks it, _append_missing_steps)
    trajectory: list[msgspec.Raw]
    info: _Info
    replay_config: _Replay | str | None  # (newer SWE-agent: its JSON string, parsed when read)
    environment: Any


FORMAT = RowFormat("swe-agent", "SWE-agent trajectory (.traj)", detect, read_row, summarize,
                   fields=("history", "trajectory", "info"), decode=typed(_Trajectory))
