"""tau-bench results: the JSON list ``run.py`` writes (``results/<agent>-<model>-...json``).

sierra-research/tau-bench ``tau_bench/run.py`` dumps ``[EnvRunResult.model_dump(), ...]``
(``tau_bench/types.py``): one result per (task, trial), each

* ``task_id`` (index into the env's tasks), ``trial``, ``reward`` (0.0 / 1.0);
* ``info``: ``task`` ``{user_id, actions, instruction, outputs}`` (the user simulator's
  instruction and the gold actions), ``source``, ``user_cost``, ``reward_info``
  ``{reward, info: {r_actions | r_outputs, ...}, actions}``; a run that raised holds
  ``{error, traceback}`` instead, with an empty ``traj``;
* ``traj``: the agent's OpenAI chat messages (system policy, user-simulator turns, assistant
  messages with ``tool_calls`` whose ``arguments`` are JSON strings, ``tool`` replies), as
  litellm returned them (null ``function_call``, ``provider_specific_fields``, ...).

Forks add keys (``records``); they are kept in the row, not read. The model is only in the
file's *name* (``tool-calling-<model>-<temperature>_range_...``), not in the rows, so ``model``
stays empty; the tools' definitions are the environment's, not in the file. No token ids:
the token view is derived.
"""
from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from viewer.rollout import Problem
from viewer.sources.chat_messages import chat_messages, link_tool_replies, roles
from viewer.sources.chat_typed import MESSAGES, is_typed, made
from viewer.sources.derive import Conversation
from viewer.sources.formats import RowFormat, RowRef, as_float, as_json, conversation_size, text_of

__all__ = ["FORMAT", "read_row", "summarize", "decode"]


def detect(cols: set[str], first: dict[str, Any] | None) -> bool:
    if not {"task_id", "reward", "info", "traj"} <= cols:
        return False
    traj = (first or {}).get("traj", [])
    return isinstance(traj, list) and all(isinstance(m, dict) and "role" in m for m in traj[:3])


def _task(info: Any) -> dict[str, Any]:
    task = info.get("task") if isinstance(info, dict) else None
    return task if isinstance(task, dict) else {}


class _Row(msgspec.Struct, forbid_unknown_fields=True):
    """A result as ``run.py`` writes it, ``traj`` typed (:mod:`viewer.sources.chat_typed`). Another key (a
    fork's), or a message of another shape: decoded generically (nothing is skipped unchecked)."""

    task_id: Any = UNSET
    reward: Any = UNSET
    info: Any = UNSET
    traj: MESSAGES | UnsetType = UNSET
    trial: Any = UNSET
    records: Any = UNSET


_DECODER = msgspec.json.Decoder(_Row)
_FIELDS = _Row.__struct_fields__


def decode(raw: bytes) -> dict[str, Any] | None:
    """A row's JSON text as its dict, ``traj`` typed; None where it does not fit (RowFormat.decode)."""
    try:
        row = _DECODER.decode(raw)
    except (msgspec.DecodeError, RecursionError):  # (ValidationError is a DecodeError)
        return None
    return {k: v for k in _FIELDS if (v := getattr(row, k)) is not UNSET}


def read_row(row: dict[str, Any], ref: RowRef) -> Conversation:
    problems: list[Problem] = []
    traj = as_json(row.get("traj"), ref, ".traj")
    if not isinstance(traj, list):
        raise ref.error(".traj", f"expected a list of messages, got {type(traj).__name__}")
    info = as_json(row.get("info"), ref, ".info")
    msgs = made(traj) if is_typed(traj) else chat_messages(traj, ref, ".traj", problems)
    link_tool_replies(msgs, ref, ".traj", problems)
    if "assistant" not in roles(msgs):
        err = info.get("error") if isinstance(info, dict) else None
        why = f": the run failed: {text_of(err)[:300]}" if err else ""
        problems.append(Problem(ref.label, ref.where(".traj"),
                                f"no assistant message ({len(traj)} message(s) in traj){why}"))
    task = _task(info)
    summary = {k: info[k] for k in ("reward_info", "user_cost", "source", "error") if isinstance(info, dict)
               and k in info}
    summary["trial"] = row.get("trial")
    instr = task.get("instruction") if isinstance(task.get("instruction"), str) else None
    return Conversation(messages=msgs, tools=[], model=None, agent=None,
                        task={"task_id": row.get("task_id"), **task}, instruction=instr,
                        reward=as_float(row.get("reward")), summary=summary, problems=problems)


def summarize(row: dict[str, Any]) -> dict[str, Any]:
    traj = row.get("traj")
    turns, length = conversation_size(made(traj) if is_typed(traj) else traj)
    info = row.get("info") if isinstance(row.get("info"), dict) else {}
    trial = row.get("trial")
    label = f"task {row.get('task_id')}" + (f" trial {trial}" if trial is not None else "")
    return {"agent": None, "model": None, "task": label, "reward": as_float(row.get("reward")),
            "result": "error" if info.get("error") else None, "turns": turns, "length": length}


FORMAT = RowFormat("tau-bench", "tau-bench results (a JSON list of {task_id, reward, info, traj, trial})", detect,
                   read_row, summarize, fields=("task_id", "reward", "info", "traj"), decode=decode)
