"""ATIF trajectories (Harbor ``agent/trajectory.json``, docs/FORMATS.md §4.4).

``{schema_version: "ATIF-v1.x", session_id, agent{name, model_name?, tool_definitions?},
steps[{step_id, source: system|user|agent, message, reasoning_content?, tool_calls?,
observation?{results[{source_call_id?, content}]}, metrics?{prompt_token_ids?,
completion_token_ids?, logprobs?}}], final_metrics}``.

Steps become chat messages the way the model saw them (system stays ``system``; an agent
step is an assistant message with ``reasoning_content`` and ``tool_calls``; observation
results become ``tool`` messages, or ``user`` messages when they name no call). Agent
steps whose metrics carry ``completion_token_ids`` (v1.3+) and ``prompt_token_ids``
(v1.4+) are exact turns; the others are derived.
"""
from __future__ import annotations

import json
from typing import Any

from viewer.rollout import Problem, Turn, TurnOrigin
from viewer.sources.columns import check_ids, check_logprobs
from viewer.sources.derive import Conversation
from viewer.sources.formats import RowFormat, RowRef, as_json, text_of

__all__ = ["FORMAT", "read_row", "summarize"]


def detect(cols: set[str], first: dict[str, Any] | None) -> bool:
    if "schema_version" in cols and str((first or {}).get("schema_version", "ATIF")).startswith("ATIF"):
        return True
    return {"steps", "agent", "session_id"} <= cols


def _steps(row, ref) -> list[Any]:
    steps = as_json(row.get("steps"), ref, ".steps")
    if not isinstance(steps, list):
        raise ref.error(".steps", f"expected a list of steps, got {type(steps).__name__}")
    return steps


def read_row(row: dict[str, Any], ref: RowRef) -> Conversation:
    problems: list[Problem] = []
    steps = _steps(row, ref)
    agent = as_json(row.get("agent"), ref, ".agent")
    agent = agent if isinstance(agent, dict) else {}
    tools = [t for t in (agent.get("tool_definitions") or []) if isinstance(t, dict)]
    msgs: list[dict[str, Any]] = []
    exact: list[Turn | None] = []
    any_exact = False
    model = agent.get("model_name")
    for i, s in enumerate(steps):
        if not isinstance(s, dict):
            problems.append(Problem(ref.label, ref.where(f".steps[{i}]"), "not a step object; skipped"))
            continue
        src = s.get("source")
        text = text_of(s.get("message"))
        if src in ("system", "user"):
            msgs.append({"role": src, "content": text})
            continue
        if src != "agent":
            problems.append(Problem(ref.label, ref.where(f".steps[{i}].source"), f"unknown source {src!r}; skipped"))
            continue
        model = model or s.get("model_name")
        m: dict[str, Any] = {"role": "assistant", "content": text}
        if s.get("reasoning_content"):
            m["reasoning_content"] = str(s["reasoning_content"])
        calls = []
        for j, c in enumerate(s.get("tool_calls") or []):
            if not isinstance(c, dict):
                continue
            args = c.get("arguments")
            calls.append({"id": str(c.get("tool_call_id") or f"call_{i}_{j}"), "type": "function",
                          "function": {"name": str(c.get("function_name", "?")),
                                       "arguments": args if isinstance(args, str) else json.dumps(
                                           args if args is not None else {}, ensure_ascii=False)}})
        if calls:
            m["tool_calls"] = calls
        k, at = len(exact), len(msgs)
        msgs.append(m)
        metrics = s.get("metrics") if isinstance(s.get("metrics"), dict) else {}
        t = None
        oc = check_ids(metrics.get("completion_token_ids"))
        if oc.error:
            problems.append(Problem(ref.label, ref.where(f".steps[{i}].metrics.completion_token_ids"), oc.error))
        if oc.value:
            t = Turn(index=k, call=k + 1, kind="agent", role="main", trained=True, messages=list(msgs[:at]),
                     tools=tools, response=m, output_ids=oc.value, output_source="engine",
                     mask=[1] * len(oc.value))
            pc = check_ids(metrics.get("prompt_token_ids"))
            if pc.value:
                t.prompt_ids, t.prompt_source = pc.value, "engine"
            lc = check_logprobs(metrics.get("logprobs"))
            if lc.value and len(lc.value) == len(oc.value):
                t.logprobs = lc.value
            elif lc.value or lc.error:
                problems.append(Problem(ref.label, ref.where(f".steps[{i}].metrics.logprobs"),
                                        lc.error or f"{len(lc.value or [])} logprobs for {len(oc.value)} ids; ignored"))
            t.origin = TurnOrigin(mask_source="derived", kind_source="record", message_index=at, step=i)
            any_exact = True
        exact.append(t)
        obs = s.get("observation") if isinstance(s.get("observation"), dict) else {}
        for r in obs.get("results") or []:
            if not isinstance(r, dict):
                continue
            content = text_of(r.get("content"))
            if r.get("source_call_id"):
                msgs.append({"role": "tool", "tool_call_id": str(r["source_call_id"]), "content": content})
            else:
                msgs.append({"role": "user", "content": content})
    if row.get("continued_trajectory_ref"):
        problems.append(Problem(ref.label, ref.where(".continued_trajectory_ref"),
                                f"continues in {row['continued_trajectory_ref']!r} (not followed)", "warning"))
    final = row.get("final_metrics") if isinstance(row.get("final_metrics"), dict) else None
    task = {"session_id": row.get("session_id"), "schema_version": row.get("schema_version"),
            "agent": {k: v for k, v in agent.items() if k != "tool_definitions"}}
    instr = next((m["content"] for m in msgs if m["role"] == "user" and m["content"].strip()), None)
    return Conversation(messages=msgs, tools=tools, model=model, agent=agent.get("name"), task=task,
                        instruction=instr, summary=final, problems=problems,
                        exact_turns=exact if any_exact else None)


def summarize(row: dict[str, Any]) -> dict[str, Any]:
    agent = row.get("agent") if isinstance(row.get("agent"), dict) else {}
    steps = row.get("steps") if isinstance(row.get("steps"), list) else []
    return {"agent": agent.get("name"), "model": agent.get("model_name"), "task": row.get("session_id"),
            "reward": None, "result": None,
            "turns": sum(1 for s in steps if isinstance(s, dict) and s.get("source") == "agent"),
            "length": sum(len(text_of(s.get("message"))) for s in steps if isinstance(s, dict))}


FORMAT = RowFormat("atif", "ATIF trajectory (Harbor trajectory.json)", detect, read_row, summarize,
                   fields=("schema_version", "session_id", "agent", "steps"))
