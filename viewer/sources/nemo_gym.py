"""NeMo Gym rollout rows (NVIDIA-NeMo/Gym: ``ng_collect_rollouts`` output, committed as
``resources_servers/*/data/example_rollouts.jsonl``).

One JSON object per line, one rollout each. A row is the resources server's verify response
(``BaseVerifyResponse`` in ``nemo_gym/base_resources_server.py``) plus the task's own fields::

    {responses_create_params: {input: str | [item], instructions?, tools: [{type: "function",
                               name, description, parameters}], model?, ...},
     response: {id, model, output: [item], usage, status, ...},   # an OpenAI Responses object
     reward: float, reward_components?: {name: float},
     _ng_task_index, _ng_rollout_index, agent_ref: {name}, ...task and metric fields...}

Items (``nemo_gym/openai_utils.py``): ``message`` (``role`` user / system / developer /
assistant; ``content`` a string or parts ``input_text`` / ``output_text`` / ``refusal``),
``reasoning`` (``summary[].text``, ``content[].text``), ``function_call`` (``name``,
``arguments`` a JSON string, ``call_id``) and ``function_call_output`` (``call_id``,
``output``). With ``return_token_id_information`` the model server puts the engine's
``prompt_token_ids``, ``generation_token_ids`` and ``generation_log_probs`` on ONE item of
each model call (the ``*ForTraining`` item classes): the call's last item
(``ResponsesConverter.postprocess_assistant_message_dict`` in ``nemo_gym/responses_converter.py``)
or, in a rebuilt token-capture response, the item that carried them
(``project_chain_to_output_items`` in ``nemo_gym/token_id_capture/builder.py``).

Reading: one turn per model call. A call is a run of the model's own items (assistant
``message``, ``reasoning``, ``function_call``) in ``response.output``; a ``function_call_output``
or a user/system message ends it (parallel calls: several ``function_call`` items, then their
outputs). A run holding two token-bearing items is two calls (each ends at its token item).
The call's items make one assistant message (text, ``reasoning_content``, ``tool_calls``). A
call whose token item has ids is an exact turn (``engine`` ids and logprobs, mask 1 over the
generated tokens); a call without (an API model's rollout) is derived from the text by the app.
Token fields present but empty (the Hermes agent examples) count as no ids, with a warning.
Assistant items in the request's ``input`` are given history (``Conversation.context``), not
calls of this rollout. An ``output`` that is a list of per-step snapshots (item lists, each
extending the one before: Gym's aviary agent) is read from its last snapshot, with a warning.
"""
from __future__ import annotations

import functools
import json
from typing import Any

from viewer.origin import TurnOrigin
from viewer.rollout import Problem, Turn
from viewer.sources.columns import check_ids, check_logprobs
from viewer.sources.derive import Conversation
from viewer.sources.formats import RowFormat, RowRef, as_float, as_json

__all__ = ["FORMAT", "detect", "read_row", "summarize", "model_calls"]

TOKEN_FIELDS = ("prompt_token_ids", "generation_token_ids", "generation_log_probs")
_NOT_TASK = ("response", "responses_create_params", "reward", "reward_components")
_TASK_NAMES = ("task_id", "instance_id", "problem_id", "id", "uuid", "name")


def detect(cols: set[str], first: dict[str, Any] | None) -> bool:
    """The verify response's two request/response fields; ``response`` a Responses object (a dict
    with ``output``, or a JSON string of one in a parquet column). Materialised inputs (no
    ``response``) and other producers' ``response`` keys are not this format."""
    if not {"response", "responses_create_params"} <= cols:
        return False
    if first is None:
        return True
    resp = first.get("response")
    if isinstance(resp, str):
        return resp.lstrip().startswith("{") and '"output"' in resp
    return isinstance(resp, dict) and isinstance(resp.get("output"), list)


# --------------------------------------------------------------------------- items

def _type(item: dict[str, Any]) -> str | None:
    """An item's type; an easy input message may leave ``type`` out (it defaults to ``message``)."""
    t = item.get("type")
    return t if isinstance(t, str) else ("message" if "role" in item else None)


def _is_model_item(item: Any) -> bool:
    if not isinstance(item, dict):
        return False
    t = _type(item)
    return t in ("reasoning", "function_call") or (t == "message" and item.get("role") == "assistant")


def _has_tokens(item: dict[str, Any]) -> bool:
    return not item.keys().isdisjoint(TOKEN_FIELDS)


def _text(content: Any) -> str:
    """Text of a message's content: a string, or Responses content parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return json.dumps(content, ensure_ascii=False, default=str)
    out = []
    for p in content:
        if isinstance(p, dict) and isinstance(p.get("text"), str):
            out.append(p["text"])
        elif isinstance(p, dict) and isinstance(p.get("refusal"), str):
            out.append(p["refusal"])
        elif isinstance(p, dict) and str(p.get("type", "")).startswith("input_"):
            out.append(f"[{p['type'][6:]}]")  # an image / audio / file part: named, not inlined
        else:
            out.append(p if isinstance(p, str) else json.dumps(p, ensure_ascii=False, default=str))
    return "\n".join(out)


def _split_run(run: list[tuple[int, dict]]) -> list[list[tuple[int, dict]]]:
    """A run of model items as calls: each call ends at its token-bearing item (one per call);
    items after the last token item belong to the last call."""
    marks = [j for j, (_, it) in enumerate(run) if _has_tokens(it)]
    if len(marks) < 2:
        return [run]
    cuts = [m + 1 for m in marks[:-1]]
    return [run[a:b] for a, b in zip([0, *cuts], [*cuts, len(run)])]


def model_calls(output: list[Any]) -> list[list[tuple[int, dict]]]:
    """The model calls of ``response.output``: lists of (index, item) of the model's own items."""
    calls: list[list[tuple[int, dict]]] = []
    run: list[tuple[int, dict]] = []
    for i, it in enumerate(output):
        if _is_model_item(it):
            run.append((i, it))
            continue
        if run:
            calls.extend(_split_run(run))
            run = []
    if run:
        calls.extend(_split_run(run))
    return calls


def _assistant(items: list[dict[str, Any]]) -> dict[str, Any]:
    """One model call's items as one chat assistant message."""
    texts, thoughts, calls = [], [], []
    for it in items:
        t = _type(it)
        if t == "message":
            texts.append(_text(it.get("content")))
        elif t == "reasoning":
            parts = [*(it.get("summary") or []), *(it.get("content") or [])]
            thoughts.extend(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))
        elif t == "function_call":
            args = it.get("arguments")
            calls.append({"id": str(it.get("call_id") or it.get("id") or f"call_{len(calls)}"), "type": "function",
                          "function": {"name": str(it.get("name", "?")),
                                       "arguments": args if isinstance(args, str) else json.dumps(
                                           args if args is not None else {}, ensure_ascii=False)}})
    m: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
    if thoughts:
        m["reasoning_content"] = "\n".join(thoughts)
    if calls:
        m["tool_calls"] = calls
    return m


def _other_message(item: Any, ref: RowRef, path: str, problems: list[Problem]) -> dict[str, Any] | None:
    """A non-model item as a chat message: the user's turn, a system prompt, a tool result."""
    t = _type(item) if isinstance(item, dict) else None
    if t == "function_call_output":
        return {"role": "tool", "tool_call_id": str(item.get("call_id") or ""), "content": _text(item.get("output"))}
    if t == "message" and item.get("role") in ("user", "system", "developer"):
        # Responses' developer role is the chat system role (chat templates know no "developer")
        return {"role": "user" if item["role"] == "user" else "system", "content": _text(item.get("content"))}
    what = f"an item of type {t!r}" if t else f"a {type(item).__name__}, not an item"
    problems.append(Problem(ref.label, ref.where(path), f"{what}: not shown", "warning"))
    return None


def _chat_tools(tools: Any, ref: RowRef, problems: list[Problem]) -> list[dict[str, Any]]:
    """Responses function tools (flat ``{type, name, parameters}``) in the chat shape templates take."""
    out = []
    for i, t in enumerate(tools if isinstance(tools, list) else []):
        if isinstance(t, dict) and t.get("type") == "function" and isinstance(t.get("name"), str):
            fn = {k: t[k] for k in ("name", "description", "parameters") if t.get(k) is not None}
            out.append({"type": "function", "function": fn})
        else:
            kind = t.get("type") if isinstance(t, dict) else type(t).__name__
            problems.append(Problem(ref.label, ref.where(f".responses_create_params.tools[{i}]"),
                                    f"a {kind!r} tool, not a function: not given to the chat template", "warning"))
    return out


# --------------------------------------------------------------------------- exact turns

def _exact_turn(k: int, at: int, msgs: list[dict], tools: list[dict], item: dict[str, Any], step: int,
                ref: RowRef, problems: list[Problem]) -> Turn | None:
    """The engine's ids of one call, or None when its token item has none (then the app derives it)."""
    path = f".response.output[{step}]"
    gen = check_ids(item.get("generation_token_ids"))
    if gen.error:
        problems.append(Problem(ref.label, ref.where(f"{path}.generation_token_ids"), gen.error))
    if not gen.value:
        return None
    t = Turn(index=k, call=k + 1, kind="agent", role="main", trained=True, messages=list(msgs[:at]), tools=tools,
             response=msgs[at], output_ids=gen.value, output_source="engine", mask=[1] * len(gen.value),
             origin=_origin(at, step))
    prompt = check_ids(item.get("prompt_token_ids"))
    if prompt.error or not prompt.value:
        problems.append(Problem(ref.label, ref.where(f"{path}.prompt_token_ids"),
                                prompt.error or "no prompt ids for these generated ids"))
    if prompt.value:
        t.prompt_ids, t.prompt_source = prompt.value, "engine"
    lp = check_logprobs(item.get("generation_log_probs"))
    if lp.value is not None and len(lp.value) == len(gen.value):
        t.logprobs = lp.value
        if lp.error:
            problems.append(Problem(ref.label, ref.where(f"{path}.generation_log_probs"), lp.error, "warning"))
    else:
        why = lp.error or f"{len(lp.value or [])} logprobs for {len(gen.value)} generated ids"
        problems.append(Problem(ref.label, ref.where(f"{path}.generation_log_probs"), f"{why}; not shown"))
    return t


@functools.lru_cache(maxsize=4096)
def _origin(message_index: int, step: int) -> TurnOrigin:
    """An exact turn's provenance: frozen, so the turns at the same place of every row share one."""
    return TurnOrigin(mask_source="derived", kind_source="record", message_index=message_index, step=step)


# --------------------------------------------------------------------------- the row

def _list(value: Any, ref: RowRef, path: str) -> list[Any]:
    value = as_json(value, ref, path)
    if not isinstance(value, list):
        raise ref.error(path, f"expected a list of Responses items, got {type(value).__name__}")
    return value


def _context(params: dict[str, Any], ref: RowRef, problems: list[Problem]) -> list[dict[str, Any]]:
    """The request's instructions and input as chat messages (assistant items: given history)."""
    msgs: list[dict[str, Any]] = []
    if isinstance(params.get("instructions"), str) and params["instructions"]:
        msgs.append({"role": "system", "content": params["instructions"]})
    inp = as_json(params.get("input"), ref, ".responses_create_params.input")
    if isinstance(inp, str):
        return [*msgs, {"role": "user", "content": inp}]
    inp = _list(inp, ref, ".responses_create_params.input")
    run: list[dict[str, Any]] = []
    for i, it in enumerate(inp):
        if _is_model_item(it):
            run.append(it)
            continue
        if run:
            msgs.append(_assistant(run))
            run = []
        m = _other_message(it, ref, f".responses_create_params.input[{i}]", problems)
        if m is not None:
            msgs.append(m)
    if run:
        msgs.append(_assistant(run))
    return msgs


def _task_and_summary(row: dict[str, Any], response: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Task: the row's own fields (ids, expected answers, configs). Summary: reward, its components,
    the numeric metrics the verifier added, and the response's status and usage."""
    task, summary = {}, {"reward": row.get("reward")}
    if isinstance(row.get("reward_components"), dict):
        summary["reward_components"] = row["reward_components"]
    for k, v in row.items():
        if k in _NOT_TASK:
            continue
        if isinstance(v, (bool, int, float)) and not k.startswith("_ng_") and k not in _TASK_NAMES:
            summary[k] = v
        else:
            task[k] = v
    summary["response"] = {k: response.get(k) for k in ("id", "model", "status", "usage", "incomplete_details",
                                                         "error") if response.get(k) is not None}
    return task, summary


def _output(response: dict[str, Any], ref: RowRef, problems: list[Problem]) -> list[Any]:
    """``response.output``; an agent that stored one snapshot of the conversation per step (Gym's
    aviary agent: a list of item lists, each extending the one before) gives its last snapshot."""
    output = _list(response.get("output"), ref, ".response.output")
    if output and all(isinstance(x, list) for x in output):
        problems.append(Problem(ref.label, ref.where(".response.output"),
                                f"a list of {len(output)} conversation snapshots, not items: the last one is read",
                                "warning"))
        return output[-1]
    return output


def _read_calls(output: list[Any], msgs: list[dict], tools: list[dict], ref: RowRef,
                problems: list[Problem]) -> list[Turn | None]:
    """Append the output's messages to ``msgs``, one assistant message per model call; return each
    call's exact turn (None where its items carry no ids)."""
    calls = {c[0][0]: c for c in model_calls(output)}  # by the index of the call's first item
    exact: list[Turn | None] = []
    empty: list[int] = []
    i = 0
    while i < len(output):
        call = calls.get(i)
        if call is None:
            m = _other_message(output[i], ref, f".response.output[{i}]", problems)
            if m is not None:
                msgs.append(m)
            i += 1
            continue
        at = len(msgs)
        msgs.append(_assistant([it for _, it in call]))
        token = next(((j, it) for j, it in call if _has_tokens(it)), None)
        t = _exact_turn(len(exact), at, msgs, tools, token[1], token[0], ref, problems) if token else None
        if token and t is None:
            empty.append(token[0])
        exact.append(t)
        i = call[-1][0] + 1
    if empty:
        problems.append(Problem(ref.label, ref.where(f".response.output[{empty[0]}]"),
                                f"{len(empty)} of {len(exact)} model calls carry token fields with no generated ids; "
                                "their token view is derived from the text", "warning"))
    return exact


def read_row(row: dict[str, Any], ref: RowRef) -> Conversation:
    problems: list[Problem] = []
    response = as_json(row.get("response"), ref, ".response")
    if not isinstance(response, dict):
        raise ref.error(".response", f"expected a Responses object, got {type(response).__name__}")
    params = as_json(row.get("responses_create_params"), ref, ".responses_create_params")
    params = params if isinstance(params, dict) else {}
    output = _output(response, ref, problems)
    tools = _chat_tools(params.get("tools"), ref, problems)
    msgs = _context(params, ref, problems)
    given = len(msgs)  # messages[:given]: the request's history
    exact = _read_calls(output, msgs, tools, ref, problems)
    if not given and msgs and msgs[0]["role"] == "assistant":  # (the anyswe agents' and scicode's rows)
        problems.append(Problem(ref.label, ref.where(".responses_create_params.input"),
                                "empty, and the output starts with the model's reply: the prompt of the first "
                                "model call is not in the file", "warning"))
    if not exact:  # the rollout is kept (its reward, task and prompt), said to have no model output
        problems.append(Problem(ref.label, ref.where(".response.output"),
                                f"no model output among its {len(output)} items (no assistant message, reasoning "
                                "or function_call): no turn to show"))
    n_exact = sum(t is not None for t in exact)
    task, summary = _task_and_summary(row, response)
    instr = next((m["content"] for m in msgs if m["role"] == "user" and m["content"].strip()), None)
    agent = row.get("agent_ref").get("name") if isinstance(row.get("agent_ref"), dict) else None
    conv = Conversation(messages=msgs, tools=tools, model=response.get("model") or params.get("model"),
                        agent=agent if isinstance(agent, str) else None, task=task or None, instruction=instr,
                        reward=as_float(row.get("reward")), summary=summary, problems=problems)
    conv.context = given  # messages[:given] are the request's history: no turn is derived from them
    conv.exact_turns = exact if n_exact else None
    return conv


def _task_name(row: dict[str, Any]) -> Any:
    for k in _TASK_NAMES:
        if isinstance(row.get(k), (str, int)) and not isinstance(row.get(k), bool):
            return row[k]
    return row.get("_ng_task_index")


def _dict(value: Any) -> dict[str, Any]:
    if isinstance(value, str):  # a parquet string column
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def summarize(row: dict[str, Any]) -> dict[str, Any]:
    resp, params = _dict(row.get("response")), _dict(row.get("responses_create_params"))
    output = resp.get("output") if isinstance(resp.get("output"), list) else []
    if output and all(isinstance(x, list) for x in output):  # per-step snapshots (see _output)
        output = output[-1]
    agent = row.get("agent_ref").get("name") if isinstance(row.get("agent_ref"), dict) else None
    resolved = row.get("resolved")
    return {"agent": agent, "model": resp.get("model") or params.get("model"), "task": _task_name(row),
            "reward": as_float(row.get("reward")),
            "result": None if not isinstance(resolved, bool) else ("resolved" if resolved else "unresolved"),
            "turns": len(model_calls(output)),
            "length": sum(len(_text(it.get("content"))) for it in output
                          if isinstance(it, dict) and _type(it) == "message")}


FORMAT = RowFormat("nemo-gym", "NeMo Gym rollouts (Responses output items; engine ids where given)", detect,
                   read_row, summarize, fields=("response", "responses_create_params", "reward"))
