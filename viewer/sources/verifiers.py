"""verifiers ``vf-eval`` results: ``outputs/evals/<env>--<model>/<run>/results.jsonl``.

One line per rollout, as ``verifiers/utils/eval_utils.py`` (and, later,
``verifiers/legacy/utils/save_utils.py::state_to_output``) of PrimeIntellect-ai/verifiers write it:

* ``prompt`` and ``completion``: OpenAI chat messages; the conversation is prompt + completion.
  Older text-completion environments save both as plain strings. Tool calls are dicts whose
  ``function.arguments`` is a JSON string, or (2025-09 files) each call saved whole as a JSON
  string; tool replies of those files carry no ``tool_call_id``.
* ``reward``; one column per reward function / metric (``correct_answer_reward_func``,
  ``total_tool_calls``, ...), newer files also a ``metrics`` dict;
* ``example_id`` (older files: ``id``), ``task``, ``answer``, ``info`` (``oai_tools``: the tool
  definitions), newer files ``tool_defs``, ``error``, ``stop_condition``, ``is_completed``,
  ``is_truncated``, ``timing``/``generation_ms``, ``token_usage``.

The model and environment are not in the rows but in the ``metadata.json`` beside the file, so
``model`` stays empty here. Rows carry no token ids (unless the run saved the ``trajectory`` state
column, which this reader does not read: it says so): the token view is derived.

Read at parser speed (issue 35: 1.85 KB rows, so the per-row Python counts): :func:`decode` decodes a
row whose messages are all ``{role, content}`` (``role`` text), with tool calls in the OpenAI shape (or
each saved as its JSON text, decoded as that shape) or null, into :class:`_Msg` structs, made into the
dicts the reader hands on by ``msgspec.to_builtins`` in C; any other row is decoded generically and the
rules of :mod:`viewer.sources.chat_messages` apply, with the same result.
"""
from __future__ import annotations

import json
import math
from typing import Annotated, Any, Literal, Union

import msgspec

from viewer.rollout import Problem
from viewer.sources.chat_messages import ROLE_SET, chat_messages, link_tool_replies, plain_messages, roles
from viewer.sources.derive import Conversation
from viewer.sources.formats import RowFormat, RowRef, as_float, as_json, text_of

__all__ = ["FORMAT", "read_row", "summarize", "decode"]

# Columns that are not metrics; every other number in a row is one (verifiers flattens them).
_KNOWN = frozenset({"id", "example_id", "prompt", "completion", "task", "answer", "info", "reward", "error",
                    "timing", "is_completed", "is_truncated", "stop_condition", "metrics", "tool_defs",
                    "token_usage", "trajectory", "error_chain", "long_error_chain", "generation_ms",
                    "scoring_ms", "total_ms"})
_OTHER_KEYS: dict[tuple[str, ...], tuple[str, ...]] = {}  # a row's columns -> those not in _KNOWN
_NUMBER = frozenset((int, float, bool))  # isinstance(v, (int, float)) for a JSON value, without the call
_SUMMARY_ORDER = ("error", "stop_condition", "is_completed", "is_truncated", "token_usage", "timing")
_SUMMARY_KEYS = frozenset(_SUMMARY_ORDER)
_NOTHING = (None, "", {})  # task fields left out (a tuple: == decides, as for a literal)


class _Function(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    name: str
    arguments: str  # (an object chat_messages dumps to text: not here)


class _Call(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, gc=False):
    """A tool call as chat_messages makes it: ``{id, type: "function", function: {name, arguments}}``."""

    id: str = ""  # chat_messages: str(id or ""); a null or numeric id is left to it
    type: Literal["function"] = "function"
    function: _Function


class _Msg(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    """A message of ``role`` (text), ``content`` and maybe ``tool_calls``: what ``chat_messages`` makes
    ``{role, content[, tool_calls]}`` of, keys in that order (a null ``tool_calls``, which it drops, left
    out as the default). Any other key, an empty call list, a call saved as JSON text refuse the row's
    typed decode (nothing is skipped unchecked). gc=False: JSON values hold no cycle."""

    role: str
    content: Any
    tool_calls: Annotated[list[_Call], msgspec.Meta(min_length=1)] | None = None


class _TextCallsMsg(_Msg, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    """A message of older verifiers (2025-09), each tool call saved as its JSON text: the texts are decoded
    as :class:`_Call` by :func:`decode`, so the message is then a :class:`_Msg`'s equal."""

    tool_calls: Annotated[list[str], msgspec.Meta(min_length=1)] | None = None  # type: ignore[assignment]


# A row: its messages typed, every other column as the generic decode gives it (a dict, a scalar; a list
# column other than the messages' is one a list of _Msg could be mistaken for: decode checks).
_ROW = dict[str, Union[list[_Msg], str, int, float, bool, None, dict[str, Any]]]
_TEXT_CALLS_ROW = dict[str, Union[list[_TextCallsMsg], str, int, float, bool, None, dict[str, Any]]]
_OBJECT_CALLS, _TEXT_CALLS = msgspec.json.Decoder(_ROW), msgspec.json.Decoder(_TEXT_CALLS_ROW)
_DECODERS = [_OBJECT_CALLS, _TEXT_CALLS]  # the one that took the last row first
_CALL = msgspec.json.Decoder(_Call)
_TYPED = (_Msg, _TextCallsMsg)
_to_dicts = msgspec.to_builtins  # _Msg structs -> [{"role", "content"[, "tool_calls"]}], in C


def decode(raw: bytes) -> dict[str, Any] | None:
    """A row's JSON text with its messages as :class:`_Msg` structs; None where the generic decode must
    decide (a message of other keys, a list in another column: RowFormat.decode). A file's rows save
    their tool calls one way (as objects, or older verifiers' JSON texts): the decoder that took the last
    row is tried first, so a row costs one decode, not a refused one first."""
    row = None
    for decoder in _DECODERS:
        try:
            row = decoder.decode(raw)
            break
        except (msgspec.DecodeError, RecursionError):  # (ValidationError is a DecodeError)
            continue
    else:
        return None
    if decoder is not _DECODERS[0]:
        _DECODERS.reverse()  # (a race between threads only costs a refused decode)
    lists = list(map(type, row.values())).count(list)  # (in C: the messages' columns are the usual lists)
    if lists and lists > (type(row.get("prompt")) is list) + (type(row.get("completion")) is list):
        return None  # a list in another column: it may have been taken for messages
    if decoder is _TEXT_CALLS and not _calls_decoded(row):
        return None
    return row


def _calls_decoded(row: dict[str, Any]) -> bool:
    """Each tool call saved as JSON text made the :class:`_Call` that ``json.loads`` of the text would give
    ``chat_messages``; False where one is not that shape (chat_messages' rules then decide)."""
    for k in ("prompt", "completion"):
        for m in row.get(k) or ():
            if type(m) is _TextCallsMsg and m.tool_calls is not None:
                try:
                    m.tool_calls = list(map(_CALL.decode, m.tool_calls))
                except (ValueError, RecursionError):  # (DecodeError; a lone surrogate: UnicodeEncodeError)
                    return False
    return True


def _typed(msgs: Any) -> bool:
    """Whether ``msgs`` is a list of typed messages (decode makes every list of a row's messages one, or none)."""
    return type(msgs) is list and bool(msgs) and type(msgs[0]) in _TYPED


def _dicts(msgs: Any) -> Any:
    """Typed messages as their dicts (``{role, content}``: what the generic decode's give every rule here)."""
    return _to_dicts(msgs) if _typed(msgs) else msgs


def _is_messages(v: Any) -> bool:
    """Plain text, or a list of chat messages."""
    if isinstance(v, str):
        return True
    return isinstance(v, list) and all(isinstance(m, dict) and "role" in m for m in v[:3])


def detect(cols: set[str], first: dict[str, Any] | None) -> bool:
    """``prompt`` + ``completion`` + ``reward`` with an example id: TRL-style prompt/completion
    datasets have no reward; the check of the first row keeps other shapes out."""
    if not ({"prompt", "completion", "reward"} <= cols and cols & {"example_id", "id"}):
        return False
    if not cols & {"task", "answer", "info", "is_completed"}:
        return False
    return first is None or all(_is_messages(_list_or_text(first.get(k))) for k in ("prompt", "completion"))


def _example_id(row: dict[str, Any]) -> Any:
    return row.get("example_id", row.get("id"))


def _tools(row: dict[str, Any], info: Any, ref: RowRef) -> list[dict[str, Any]]:
    """Tool definitions: ``tool_defs`` (newer) or ``info.oai_tools``, as OpenAI ``{type, function}``."""
    raw = row.get("tool_defs")
    if raw is None and not (isinstance(info, dict) and "oai_tools" in info):
        return []  # (most rows: no tools)
    raw = as_json(raw, ref, ".tool_defs")
    if not isinstance(raw, list) and isinstance(info, dict):
        raw = info.get("oai_tools")
    out = []
    for t in raw if isinstance(raw, list) else []:
        if isinstance(t, dict) and isinstance(t.get("function"), dict):
            out.append(t)
        elif isinstance(t, dict) and isinstance(t.get("name"), str):  # a bare {name, description, parameters}
            out.append({"type": "function", "function": t})
    return out


def _list_or_text(v: Any) -> Any:
    """A message list stored as a JSON string (parquet) parsed; text (a text completion that may
    well start with "[") kept as it is."""
    if isinstance(v, str) and v.lstrip().startswith("["):
        try:
            parsed = json.loads(v)
        except json.JSONDecodeError:
            return v
        return parsed if isinstance(parsed, list) else v
    return v


def _conversation(row: dict[str, Any], ref: RowRef, problems: list[Problem]
                  ) -> tuple[list[dict[str, Any]], int, list[str]]:
    """(prompt + completion messages, how many are the prompt's, their roles)."""
    prompt, completion = row.get("prompt"), row.get("completion")
    if type(prompt) is list and type(completion) is list:  # the usual row: both message lists made at once
        both = prompt + completion
        if _typed(both):  # (decode: every message {role: str, content})
            msgs = _to_dicts(both)
            if ROLE_SET.issuperset(told := roles(msgs)):
                return _checked(msgs, len(prompt), told, row, ref, problems)
        elif (msgs := plain_messages(both)) is not None:
            return _checked(msgs, len(prompt), roles(msgs), row, ref, problems)
    prompt, completion = _list_or_text(_dicts(prompt)), _list_or_text(_dicts(completion))
    if isinstance(prompt, str) or isinstance(completion, str):
        # A text-completion environment: the model continued raw text, no chat template involved.
        problems.append(Problem(ref.label, ref.where(".completion"),
                                "a text-completion rollout (prompt and completion are plain text): shown as one "
                                "user/assistant exchange, so the token view's chat template is ours, not the "
                                "model's input", "warning"))
        before = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else \
            chat_messages(prompt, ref, ".prompt", problems)
        after = [{"role": "assistant", "content": completion}] if isinstance(completion, str) else \
            chat_messages(completion, ref, ".completion", problems)
        return before + after, len(before), roles(before + after)
    if not isinstance(prompt, list) or not isinstance(completion, list):
        bad, v = (".prompt", prompt) if not isinstance(prompt, list) else (".completion", completion)
        raise ref.error(bad, f"expected a list of messages or a string, got {type(v).__name__}")
    before = chat_messages(prompt, ref, ".prompt", problems)
    msgs = before + chat_messages(completion, ref, ".completion", problems)
    return _checked(msgs, len(before), roles(msgs), row, ref, problems)


def _checked(msgs: list[dict[str, Any]], n: int, told: list[str], row: dict[str, Any], ref: RowRef,
             problems: list[Problem]) -> tuple[list[dict[str, Any]], int, list[str]]:
    """A chat rollout's messages (the prompt's first ``n``; ``told``: their roles), its few-shot, empty and
    tool-reply notes said."""
    shots = told[:n].count("assistant")
    if shots:
        problems.append(Problem(ref.label, ref.where(".prompt"),
                                f"the prompt holds {shots} assistant message(s) (few-shot examples): shown as turns, "
                                "though the model did not generate them", "warning"))
    if "assistant" not in told[n:]:
        why = f": {text_of(row.get('error'))[:300]}" if row.get("error") else ""
        problems.append(Problem(ref.label, ref.where(".completion"),
                                f"the completion holds no assistant message (the model produced nothing{why})"))
    if "tool" in told:
        link_tool_replies(msgs, ref, ".completion", problems, told)
    return msgs, n, told


def _metrics(row: dict[str, Any]) -> dict[str, Any]:
    keys = _OTHER_KEYS.get(columns := tuple(row))  # a file's rows share their columns: found once
    if keys is None:
        if len(_OTHER_KEYS) > 64:
            _OTHER_KEYS.clear()
        keys = _OTHER_KEYS[columns] = tuple(k for k in columns if k not in _KNOWN)
    out = {k: v for k in keys if type(v := row[k]) in _NUMBER}
    if isinstance(row.get("metrics"), dict):
        out.update(row["metrics"])
    return out


def read_row(row: dict[str, Any], ref: RowRef) -> Conversation:
    problems: list[Problem] = []
    msgs, n, told = _conversation(row, ref, problems)
    traj = row.get("trajectory")
    if isinstance(traj, list) and any(isinstance(s, dict) and s.get("tokens") for s in traj):
        problems.append(Problem(ref.label, ref.where(".trajectory"),
                                "this row's trajectory carries token ids; this reader does not read them: the token "
                                "view below is derived from the text", "warning"))
    info = row.get("info")
    if info is not None and type(info) is not dict:
        info = as_json(info, ref, ".info")
    task = {}  # (the fields left out at _NOTHING, in this order)
    if (v := row.get("example_id", row.get("id"))) not in _NOTHING:
        task["example_id"] = v
    if (v := row.get("task")) not in _NOTHING:
        task["task"] = v
    if (v := row.get("answer")) not in _NOTHING:
        task["answer"] = v
    if isinstance(info, dict) and (v := {k: x for k, x in info.items() if k != "oai_tools"}) not in _NOTHING:
        task["info"] = v
    told = told[:n]
    instr = text_of(msgs[n - 1 - told[::-1].index("user")].get("content")) if "user" in told else None
    summary = {"metrics": _metrics(row)}
    if not _SUMMARY_KEYS.isdisjoint(row):
        summary.update((k, row[k]) for k in _SUMMARY_ORDER if row.get(k) is not None)
    reward = row.get("reward")
    return Conversation(messages=msgs, tools=_tools(row, info, ref), model=None, agent=None,
                        task=task or None, instruction=instr,
                        reward=reward if type(reward) is float and math.isfinite(reward) else as_float(reward),
                        summary=summary, problems=problems)


def summarize(row: dict[str, Any]) -> dict[str, Any]:
    completion = _list_or_text(_dicts(row.get("completion")))
    if isinstance(completion, str):
        turns, length = 1, len(completion)
    elif isinstance(completion, list):
        msgs = [m for m in completion if isinstance(m, dict)]
        turns = sum(1 for m in msgs if m.get("role") == "assistant")
        length = sum(len(text_of(m.get("content"))) for m in msgs)
    else:
        turns = length = None
    task = row.get("task")
    ex = _example_id(row)
    label = f"example {ex}" if ex is not None else None
    if isinstance(task, str) and task and task != "default":
        label = f"{task} {label or ''}".strip()
    error = row.get("error")
    return {"agent": None, "model": None, "task": label, "reward": as_float(row.get("reward")),
            "result": "error" if error else None, "turns": turns, "length": length}


FORMAT = RowFormat("verifiers", "verifiers vf-eval results.jsonl (prompt + completion messages, reward)", detect,
                   read_row, summarize, fields=("prompt", "completion", "reward", "example_id"), decode=decode)
