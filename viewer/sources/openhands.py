"""OpenHands (formerly OpenDevin): evaluation ``output.jsonl`` rows and trajectory event lists.

An evaluation row (``evaluation/utils/shared.py``: ``EvalOutput``) is one rollout::

    {instance_id, instruction, history: [event], metadata{agent_class, llm_config{model}, model_name?,
     max_iterations, dataset?, ...}, test_result{...}, metrics{accumulated_cost,
     accumulated_token_usage, ...}, error, instance}

(2024 OpenDevin rows have ``id`` for ``instance_id`` and ``history`` as ``[action, observation]``
pairs; they are flattened.) A trajectory file (``/api/.../trajectory``, the tests'
``tests/runtime/trajs/*.json``) is a bare JSON list of the same events, read as one row
``{"history": [...]}`` (``jsonio.rows_of_json``).

An event (``openhands/events/serialization/event.py``: ``event_to_dict``) is
``{id, timestamp, source: agent|user|environment, message, action | observation, args | content +
extras, cause?, tool_call_metadata?{function_name, tool_call_id, model_response{id, choices[{message}]},
total_calls_in_response}, llm_metrics?}``.

The chat is rebuilt the way ``openhands/memory/conversation_memory.py`` builds the prompt:

* ``action: system`` is the system message (its ``args.tools`` the tool definitions);
* a user ``message`` action is a user message;
* one assistant message per distinct model response: the first event that carries
  ``tool_call_metadata.model_response.id`` contributes ``choices[0].message`` (content,
  ``tool_calls``, reasoning); the other actions of that response share it (parallel tool calls);
* an observation with ``tool_call_metadata`` is the ``tool`` reply to ``tool_call_id``;
* an agent action without it is a text turn: a ``message`` action's content, a ``finish``'s
  thought; older non-function-calling actions (``run``, ``run_ipython``, ``browse_interactive``)
  are rebuilt as CodeAct wrote them, thought + ``<execute_bash>``/``<execute_ipython>``/
  ``<execute_browse>`` block (said in a warning);
* other observations (no call id) are user messages; ``null`` and ``agent_state_changed``
  events, ``recall`` actions and their observations (OpenHands renders workspace context
  through its own templates; not rebuilt, said in a warning) are not part of the chat.

No token ids are saved: the token view is derived through a chat template, text only.
"""
from __future__ import annotations

import json
from typing import Any, TypedDict, Union

from viewer.rollout import Problem
from viewer.sources.derive import Conversation
from viewer.sources.formats import RowFormat, RowRef, as_float, as_json, text_of
from viewer.sources.swe_agent import openai_tool_calls
from viewer.sources.typedrow import typed

__all__ = ["FORMAT", "read_row", "summarize", "is_event", "flatten"]

_SOURCES = ("agent", "user", "environment")
# agent-side actions that are not a model's output
_NOT_MODEL = frozenset({"system", "recall", "change_agent_state", "condensation", "condensation_request", "null"})
_SKIPPED_OBS = frozenset({"null", "agent_state_changed", "recall"})
# how CodeAct (non-function-calling) wrote an action in its reply
_BLOCKS = {"run": ("execute_bash", "command"), "run_ipython": ("execute_ipython", "code"),
           "browse_interactive": ("execute_browse", "browser_actions")}


def is_event(e: Any) -> bool:
    """An OpenHands event: a ``source`` and an ``action`` or an ``observation``."""
    return isinstance(e, dict) and e.get("source") in _SOURCES and ("action" in e or "observation" in e)


def flatten(history: list[Any]) -> list[Any]:
    """Events in order; 2024 rows store ``[action, observation]`` pairs."""
    out: list[Any] = []
    for h in history:
        out.extend(h if isinstance(h, list) else [h])
    return out


def detect(cols: set[str], first: dict[str, Any] | None) -> bool:
    if "history" not in cols:
        return False
    history = (first or {}).get("history")
    if isinstance(history, str) and history.lstrip().startswith("["):
        try:
            history = json.loads(history)
        except ValueError:
            return False
    events = flatten(history[:1]) if isinstance(history, list) else []
    return bool(events) and is_event(events[0])


# --------------------------------------------------------------------------- events -> chat

def _response(e: dict[str, Any]) -> tuple[str | None, dict[str, Any] | None]:
    """(model response id, choices[0].message) of an event's ``tool_call_metadata``, or (None, None)."""
    tcm = e.get("tool_call_metadata")
    resp = tcm.get("model_response") if isinstance(tcm, dict) else None
    if not isinstance(resp, dict) or not resp.get("id"):
        return None, None
    choices = resp.get("choices")
    msg = choices[0].get("message") if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
    return str(resp["id"]), msg if isinstance(msg, dict) else None


def _model_message(msg: dict[str, Any] | None, ref: RowRef, path: str, problems: list[Problem]) -> dict[str, Any]:
    if msg is None:
        problems.append(Problem(ref.label, ref.where(path), "model response without choices[0].message; "
                                                            "shown as an empty reply", "warning"))
        return {"role": "assistant", "content": ""}
    out: dict[str, Any] = {"role": "assistant", "content": text_of(msg.get("content"))}
    calls = openai_tool_calls(msg["tool_calls"], ref, f"{path}.tool_calls", problems) if msg.get("tool_calls") else []
    if calls:
        out["tool_calls"] = calls
    if isinstance(msg.get("reasoning_content"), str) and msg["reasoning_content"]:
        out["reasoning_content"] = msg["reasoning_content"]
    return out


def _args(e: dict[str, Any]) -> dict[str, Any]:
    return e["args"] if isinstance(e.get("args"), dict) else {}


def _text_turn(e: dict[str, Any]) -> tuple[str, bool]:
    """(assistant text, rebuilt?) of an agent action that carries no model response."""
    args, action = _args(e), e.get("action")
    if action == "message":
        return str(args.get("content") or e.get("message") or ""), False
    thought = str(args.get("thought") or args.get("final_thought") or "")
    if action in _BLOCKS:
        tag, key = _BLOCKS[action]
        block = f"<{tag}>\n{args.get(key, '')}\n</{tag}>"
        return (f"{thought}\n{block}" if thought else block), True
    return thought, action != "finish"


def _chat(events: list[Any], ref: RowRef, problems: list[Problem]) -> tuple[list[dict], list[dict]]:
    """(messages, tools) from the events, see the module doc."""
    msgs: list[dict[str, Any]] = []
    tools: list[dict[str, Any]] = []
    seen: set[str] = set()
    rebuilt = recalls = 0
    for i, e in enumerate(events):
        path = f".history[{i}]"
        if not isinstance(e, dict) or ("action" not in e and "observation" not in e):
            problems.append(Problem(ref.label, ref.where(path), "not an OpenHands event; skipped"))
            continue
        rid, model_msg = _response(e)
        if rid is not None:
            if rid not in seen:  # the first event of a model response carries the whole reply
                seen.add(rid)
                msgs.append(_model_message(model_msg, ref, f"{path}.tool_call_metadata.model_response.choices[0]"
                                                           ".message", problems))
            if "observation" in e:
                call_id = str((e.get("tool_call_metadata") or {}).get("tool_call_id") or "")
                msgs.append({"role": "tool", "tool_call_id": call_id, "content": text_of(e.get("content"))})
            continue
        if "observation" in e:
            kind = e.get("observation")
            recalls += kind == "recall"
            if kind not in _SKIPPED_OBS:
                msgs.append({"role": "user", "content": text_of(e.get("content"))})
            continue
        action, source = e.get("action"), e.get("source")
        if action == "system":
            msgs.append({"role": "system", "content": text_of(_args(e).get("content"))})
            tools = [t for t in (_args(e).get("tools") or []) if isinstance(t, dict)]
        elif source == "user" and action == "message":
            msgs.append({"role": "user", "content": str(_args(e).get("content") or e.get("message") or "")})
        elif source == "agent" and action not in _NOT_MODEL:
            text, was_rebuilt = _text_turn(e)
            rebuilt += was_rebuilt
            msgs.append({"role": "assistant", "content": text})
    if rebuilt:
        problems.append(Problem(ref.label, ref.where(".history"),
                                f"{rebuilt} agent action(s) carry no model response (non-function-calling "
                                "OpenHands): their text is rebuilt from the thought and the action", "warning"))
    if recalls:
        problems.append(Problem(ref.label, ref.where(".history"),
                                f"{recalls} recall observation(s) (workspace context, microagent knowledge) are "
                                "rendered by OpenHands' own templates: not in the rebuilt prompt", "warning"))
    return msgs, tools


# --------------------------------------------------------------------------- row fields

def _metadata(row: dict[str, Any]) -> dict[str, Any]:
    md = row.get("metadata")
    return md if isinstance(md, dict) else {}


def _model(row: dict[str, Any], events: list[Any]) -> str | None:
    """The run's model: its metadata, else (a bare event list) the first model response's ``model``."""
    md = _metadata(row)
    llm = md.get("llm_config") if isinstance(md.get("llm_config"), dict) else {}
    name = llm.get("model") or md.get("model_name")
    if not name:
        tcm = next((e["tool_call_metadata"] for e in events if isinstance(e, dict)
                    and isinstance(e.get("tool_call_metadata"), dict)), {})
        resp = tcm.get("model_response")
        name = resp.get("model") if isinstance(resp, dict) else None
    return name if isinstance(name, str) and name else None


def _task_id(row: dict[str, Any]) -> str | None:
    tid = row.get("instance_id", row.get("id"))
    return str(tid) if isinstance(tid, (str, int)) and not isinstance(tid, bool) else None


def _reward(row: dict[str, Any]) -> float | None:
    """``test_result.result`` / ``resolved`` where the benchmark scores a bool or a number."""
    tr = row.get("test_result")
    if not isinstance(tr, dict):
        return None
    for key in ("result", "resolved", "score"):
        v = tr.get(key)
        if isinstance(v, (bool, int, float)):
            return as_float(v)
    return None


def _result(row: dict[str, Any], events: list[Any]) -> str | None:
    """The run's end: its ``error``, else ``finish`` when the agent finished."""
    if isinstance(row.get("error"), str) and row["error"].strip():
        return row["error"].strip().splitlines()[0][:200]
    if any(isinstance(e, dict) and e.get("source") == "agent" and e.get("action") == "finish" for e in events):
        return "finish"
    return None


def _events(row: dict[str, Any], ref: RowRef) -> list[Any]:
    history = as_json(row.get("history"), ref, ".history")
    if not isinstance(history, list):
        raise ref.error(".history", f"expected a list of events, got {type(history).__name__}")
    return flatten(history)


def read_row(row: dict[str, Any], ref: RowRef) -> Conversation:
    problems: list[Problem] = []
    events = _events(row, ref)
    msgs, tools = _chat(events, ref, problems)
    if not any(m["role"] == "assistant" for m in msgs):
        problems.append(Problem(ref.label, ref.where(".history"), "no agent action: nothing the model generated",
                                "warning"))
    md = _metadata(row)
    task = {k: v for k, v in (("instance_id", _task_id(row)), ("agent_class", md.get("agent_class")),
                              ("dataset", md.get("dataset")), ("max_iterations", md.get("max_iterations")))
            if v is not None} or None
    metrics = row.get("metrics") if isinstance(row.get("metrics"), dict) else {}
    summary = {k: v for k, v in (("error", row.get("error")), ("test_result", row.get("test_result")),
                                 ("accumulated_cost", metrics.get("accumulated_cost")),
                                 ("accumulated_token_usage", metrics.get("accumulated_token_usage")),
                                 ("result", _result(row, events))) if v is not None} or None
    instr = row.get("instruction") if isinstance(row.get("instruction"), str) else None
    if instr is None:
        instr = next((m["content"] for m in msgs if m["role"] == "user"), None)
    return Conversation(messages=msgs, tools=tools, model=_model(row, events), agent=md.get("agent_class") or "openhands",
                        task=task, instruction=instr, reward=_reward(row), summary=summary, problems=problems)


def count_turns(events: list[Any]) -> int:
    """Model turns: distinct model responses, plus agent actions that carry none."""
    ids, bare = set(), 0
    for e in events:
        if not isinstance(e, dict):
            continue
        rid, _ = _response(e)
        if rid is not None:
            ids.add(rid)
        elif e.get("source") == "agent" and "action" in e and e.get("action") not in _NOT_MODEL:
            bare += 1
    return len(ids) + bare


def summarize(row: dict[str, Any]) -> dict[str, Any]:
    history = row.get("history")
    events = flatten(history) if isinstance(history, list) else []
    md = _metadata(row)
    length = sum(len(str(e.get("message") or "")) for e in events if isinstance(e, dict))
    return {"agent": md.get("agent_class") or "openhands", "model": _model(row, events), "task": _task_id(row),
            "reward": _reward(row), "result": _result(row, events), "turns": count_turns(events),
            "length": length}


class _Message(TypedDict, total=False):
    content: Any
    tool_calls: Any
    reasoning_content: Any


class _Choice(TypedDict, total=False):
    message: _Message


class _Response(TypedDict, total=False):
    """A model response's fields read here (its usage, created, system_fingerprint... skipped)."""

    id: Any
    model: Any
    choices: list[_Choice]


class _CallMetadata(TypedDict, total=False):
    tool_call_id: Any
    model_response: _Response


class _Args(TypedDict, total=False):
    """An action's arguments read here (an edit's file text, its translated code, image urls... skipped)."""

    content: Any
    thought: Any
    final_thought: Any
    tools: Any
    command: Any
    code: Any
    browser_actions: Any


class _Event(TypedDict, total=False):
    """An event's fields read here (an observation's ``extras``, ``llm_metrics``, ``cause`` skipped)."""

    id: Any
    timestamp: Any
    source: Any
    message: Any
    action: Any
    observation: Any
    args: _Args
    content: Any
    tool_call_metadata: _CallMetadata


class _Row(TypedDict, total=False):
    """An evaluation row's fields read here (its ``instance``, the benchmark's whole task record, skipped; a
    bare event list is parsed whole: its events are most of it)."""

    instance_id: Any
    id: Any
    instruction: Any
    history: list[Union[_Event, list[_Event]]]  # (2024 rows: [action, observation] pairs)
    metadata: Any
    test_result: Any
    metrics: Any
    error: Any


FORMAT = RowFormat("openhands", "OpenHands evaluation output.jsonl rows / trajectory event lists", detect,
                   read_row, summarize, fields=("history", "instance_id", "instruction", "metadata", "test_result"),
                   decode=typed(_Row))
