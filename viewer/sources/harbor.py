"""Harbor / terminal-bench export rows (docs/FORMATS.md §4.2-4.5), incl. the literal-token variant.

Row: ``conversations[{role, content}]`` (or ShareGPT ``{from, value}``), ``agent, model,
task, episode, result, instruction, verifier_output``, optional ``tool_definitions``,
and for ``--record_literal`` jobs ``prompt_token_ids`` / ``completion_token_ids`` /
``logprobs`` (list of lists, one per agent step). Literal ids are used as exact
(engine) turns; empty literal columns ("verify-or-skip") fall back to a derived view.
Row text is shown as-is (the terminus-2 rows are not derivable from their trajectory).
"""
from __future__ import annotations

from typing import Any

from viewer.rollout import Problem, Turn, TurnOrigin
from viewer.sources.columns import check_ids, check_logprobs
from viewer.sources.derive import Conversation
from viewer.sources.formats import RowFormat, RowRef, as_float, as_json, conversation_size, text_of

__all__ = ["FORMAT", "read_row", "summarize", "messages_of"]

_SHAREGPT = {"human": "user", "gpt": "assistant", "system": "system", "tool": "tool"}
LITERAL = ("prompt_token_ids", "completion_token_ids", "logprobs")


def detect(cols: set[str], first: dict[str, Any] | None) -> bool:
    return "conversations" in cols or "conversations_sharegpt" in cols


def messages_of(row: dict[str, Any], ref: RowRef, problems: list[Problem]) -> list[dict[str, Any]]:
    key = "conversations" if row.get("conversations") is not None else "conversations_sharegpt"
    conv = as_json(row.get(key), ref, f".{key}")
    if not isinstance(conv, list):
        raise ref.error(f".{key}", f"expected a list of messages, got {type(conv).__name__}")
    out = []
    for i, m in enumerate(conv):
        if not isinstance(m, dict):
            problems.append(Problem(ref.label, ref.where(f".{key}[{i}]"),
                                    f"expected a message object, got {type(m).__name__}; skipped"))
            continue
        role = m.get("role", _SHAREGPT.get(str(m.get("from")), m.get("from")))
        content = m.get("content", m.get("value"))
        if not isinstance(role, str):
            problems.append(Problem(ref.label, ref.where(f".{key}[{i}].role"), "message has no role; skipped"))
            continue
        out.append({"role": role, "content": text_of(content)})
    return out


def _tools(row: dict[str, Any], ref: RowRef, problems: list[Problem]) -> list[dict[str, Any]]:
    try:
        tools = as_json(row.get("tool_definitions"), ref, ".tool_definitions")
    except Exception as e:
        problems.append(Problem(ref.label, ref.where(".tool_definitions"), f"{e}; tools ignored", "warning"))
        return []
    return [t for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []


def _literal_turns(row, msgs, tools, ref: RowRef, problems) -> list[Turn | None] | None:
    cols = [as_json(row.get(k), ref, f".{k}") for k in LITERAL]
    if not isinstance(cols[1], list) or not any(isinstance(x, list) and x for x in cols[1]):
        if any(k in row for k in LITERAL):
            problems.append(Problem(ref.label, ref.where(".completion_token_ids"),
                                    "literal-token columns are empty for this row (verify-or-skip): derived view",
                                    "warning"))
        return None
    prompts = cols[0] if isinstance(cols[0], list) else []
    lps = cols[2] if isinstance(cols[2], list) else []
    assistant = [i for i, m in enumerate(msgs) if m["role"] == "assistant"]
    if len(cols[1]) != len(assistant):
        problems.append(Problem(ref.label, ref.where(".completion_token_ids"),
                                f"{len(cols[1])} literal steps for {len(assistant)} assistant messages; "
                                "matched in order, the rest derived", "warning"))
    out: list[Turn | None] = []
    for k, i in enumerate(assistant):
        if k >= len(cols[1]):
            out.append(None)
            continue
        oc = check_ids(cols[1][k])
        if oc.error or not oc.value:
            if oc.error:
                problems.append(Problem(ref.label, ref.where(f".completion_token_ids[{k}]"), oc.error))
            out.append(None)
            continue
        t = Turn(index=k, call=k + 1, kind="agent", role="main", trained=True, messages=msgs[:i], tools=tools,
                 response=msgs[i], output_ids=oc.value, output_source="engine")
        pc = check_ids(prompts[k] if k < len(prompts) else None)
        if pc.error:
            problems.append(Problem(ref.label, ref.where(f".prompt_token_ids[{k}]"), pc.error))
        if pc.value:
            t.prompt_ids, t.prompt_source = pc.value, "engine"
        lc = check_logprobs(lps[k] if k < len(lps) else None)
        if lc.error:
            problems.append(Problem(ref.label, ref.where(f".logprobs[{k}]"), lc.error))
        if lc.value:
            if len(lc.value) != len(t.output_ids):
                n = min(len(lc.value), len(t.output_ids))
                problems.append(Problem(ref.label, ref.where(f".logprobs[{k}]"),
                                        f"{len(lc.value)} logprobs for {len(t.output_ids)} ids; kept {n} aligned"))
                t.output_ids = t.output_ids[:n]
                t.logprobs = lc.value[:n]
            else:
                t.logprobs = lc.value
        t.mask = [1] * len(t.output_ids)
        t.origin = TurnOrigin(mask_source="derived", kind_source="record", message_index=i, literal_step=k)
        out.append(t)
    return out


def read_row(row: dict[str, Any], ref: RowRef) -> Conversation:
    problems: list[Problem] = []
    msgs = messages_of(row, ref, problems)
    tools = _tools(row, ref, problems)
    if msgs and msgs[0]["role"] == "user" and msgs[0]["content"].lstrip().startswith("<tools>"):
        problems.append(Problem(ref.label, ref.where(".conversations[0]"),
                                "the first message starts with a <tools> block (newer Harbor exporter)", "warning"))
    result = row.get("result")
    summary = {k: row[k] for k in ("result", "episode", "trial_name", "run_id", "model_provider", "date",
                                   "trace_source") if row.get(k) is not None}
    if row.get("verifier_output"):
        summary["verifier_output"] = str(row["verifier_output"])
    task = {k: row[k] for k in ("task", "episode", "trial_name", "run_id") if row.get(k) is not None} or None
    conv = Conversation(messages=msgs, tools=tools, model=row.get("model") or None, agent=row.get("agent") or None,
                        task=task, instruction=row.get("instruction") or None, reward=as_float(result),
                        summary=summary or None, problems=problems)
    conv.exact_turns = _literal_turns(row, msgs, tools, ref, problems)
    return conv


def summarize(row: dict[str, Any]) -> dict[str, Any]:
    n_turns, length = conversation_size(row.get("conversations"))
    result = row.get("result")
    return {"agent": row.get("agent"), "model": row.get("model"), "task": row.get("task"),
            "reward": as_float(result), "result": None if result is None else str(result),
            "turns": n_turns, "length": length}


FORMAT = RowFormat("harbor", "Harbor / terminal-bench conversation rows", detect, read_row, summarize,
                   light=("agent", "model", "task", "result", "episode", "trial_name"),
                   light_fields=frozenset({"agent", "model", "task", "reward", "result"}),
                   fields=("conversations", "agent", "model", "task"))
