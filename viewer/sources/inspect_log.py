"""Inspect AI eval logs (``.json`` and ``.eval``): one rollout per sample, its scores as reward.

Producer: Inspect (github.com/UKGovernmentBEIS/inspect_ai). The schema is read from
``src/inspect_ai/log/_log.py`` (``EvalLog``, ``EvalSpec``, ``EvalSample``), ``model/_chat_message.py``,
``tool/_tool_call.py``, ``_util/content.py`` and ``scorer/_metric.py``:

* a log is ``{version, status: started|success|cancelled|error, eval: {task, task_id, model,
  solver?, run_id, eval_id, created, dataset{name?}, ...}, plan: {steps[{solver, params}]},
  results, stats, samples[...], reductions?}``. A ``.json`` log is that object, one stored row.
  A ``.eval`` log is a zip (``header.json`` or ``_journal/start.json``, ``samples/<id>_epoch_<n>.json``,
  ``reductions.json``, ``summaries.json``) that :func:`viewer.sources.rowdata.read_inspect_eval`
  gathers into the same one object (less each sample's event transcript), so both are one format;
* a sample is ``{id, epoch, input, target, messages[...], output, scores{name: {value, answer?,
  explanation?}}, metadata, error?{message}, attachments{hash: text}, model_usage, total_time, ...}``;
  long strings may be stored as ``"attachment://<hash>"`` with the text in ``attachments``;
* a message is ``{role: system|user|assistant|tool, content: str | [part], id?, source?}``; an
  assistant message has ``tool_calls[{id, function: "name", arguments: {object}, parse_error?,
  type?}]``; a tool message ``tool_call_id``, ``function``, ``error{type, message}?``. Content parts
  are ``{type: text, text}``, ``{type: reasoning, reasoning, summary?, redacted}``, or media
  (``image``, ``audio``, ``video``, ``document``), ``data``, ``tool_use``.

:func:`expand` turns a log into its samples, each carrying the eval header fields it needs (under
``eval``). Messages become OpenAI chat messages (tool-call arguments as a JSON string, reasoning
parts as ``reasoning_content``, a tool error as ``"Error: <message>"``, as Inspect's own OpenAI
provider sends it); media parts are shown as ``[image]``-style placeholders. Logs carry no token
ids: the token view is derived through a chat template. The tool definitions live in the event
transcript, which is not read, so the derived prompt has none.

**Reward**: the sample's first score (``scores`` keeps the task's scorer order), mapped the way
Inspect's ``value_to_float`` maps it by default: numbers and booleans as floats; ``"C"`` 1,
``"P"`` 0.5, ``"I"`` and ``"N"`` 0; ``"yes"``/``"true"`` 1, ``"no"``/``"false"`` 0; a numeric string
as its number. Anything else (a dict or list value, another string, NaN) gives no reward, with a
warning: Inspect would count it 0, which would read as a failed sample. Every score is in the summary.
"""
from __future__ import annotations

import json
from typing import Any, TypedDict

import msgspec

from viewer.rollout import Problem
from viewer.sources.derive import Conversation
from viewer.sources.formats import RowFormat, RowRef, RowReadError, as_float
from viewer.sources.subrows import RawLines
from viewer.sources.typedrow import typed

__all__ = ["FORMAT", "detect", "expand", "read_row", "summarize", "score_to_float"]

_ATTACHMENT = "attachment://"
# The EvalSpec fields a rollout keeps (its model, task and where it came from).
_SPEC_FIELDS = ("task", "task_id", "task_version", "model", "solver", "run_id", "eval_id", "eval_set_id", "created")
_LETTERS = {"C": 1.0, "P": 0.5, "I": 0.0, "N": 0.0}  # Inspect's CORRECT, PARTIAL, INCORRECT, NOANSWER
_WORDS = {"yes": 1.0, "true": 1.0, "no": 0.0, "false": 0.0}
_MEDIA = ("image", "audio", "video", "document")


def detect(cols: set[str], first: dict[str, Any] | None) -> bool:
    """An Inspect log: ``version`` (an int), ``eval`` with ``task`` and ``model``, and ``samples`` or ``plan``."""
    return {"version", "eval"} <= cols and bool(cols & {"samples", "plan"}) and _not_a_log(first or {}) is None


def _not_a_log(row: dict[str, Any]) -> str | None:
    """Why ``row`` is not an Inspect log (:func:`detect`'s rule), None where it is; from the fields the typed
    decode keeps too, so a row read either way is said the same."""
    if missing := [f"`{k}`" for k in ("version", "eval") if k not in row]:
        return f"it has no {' or '.join(missing)}"
    if not isinstance(row["version"], int):
        return f"its `version` is {type(row['version']).__name__}, not an integer"
    spec = row["eval"]
    if not (isinstance(spec, dict) and isinstance(spec.get("task"), str) and isinstance(spec.get("model"), str)):
        return "its `eval` does not name a task and a model"
    if "samples" not in row and "plan" not in row:
        return "it has neither `samples` nor `plan`"
    return None


# --------------------------------------------------------------------------- log -> samples

def expand(row: dict[str, Any]) -> list[Any]:
    """The log's samples, each with the eval header it needs under ``eval`` (a non-object sample
    becomes that rollout's error)."""
    if (why := _not_a_log(row)) is not None:  # (a folder's other JSON file, read as the folder's format: said)
        raise RowReadError("", f"not an Inspect log: {why}")
    samples = row.get("samples")
    status = row.get("status")
    if not isinstance(samples, list) or not samples:
        raise RowReadError(".samples", f"this Inspect log (status {status!r}) holds no samples: it was written "
                                       "without them (log_samples=False, a header-only log) or ended before "
                                       "any sample finished")
    spec = row.get("eval") if isinstance(row.get("eval"), dict) else {}
    plan = row.get("plan") if isinstance(row.get("plan"), dict) else {}
    header = {k: spec.get(k) for k in _SPEC_FIELDS if spec.get(k) is not None}
    dataset = spec.get("dataset") if isinstance(spec.get("dataset"), dict) else {}
    header.update(dataset=dataset.get("name"), log_version=row.get("version"), log_status=status,
                  plan=[s.get("solver") for s in plan.get("steps") or [] if isinstance(s, dict)])
    out: list[Any] = []
    for k, s in enumerate(samples):
        if isinstance(s, dict):
            out.append({**s, "eval": header})
        else:
            out.append(RowReadError(f".samples[{k}]", f"not a sample object ({type(s).__name__})"))
    return out


# --------------------------------------------------------------------------- scores

def score_to_float(value: Any) -> float | None:
    """A score value as a reward (module doc); None where it has no float meaning."""
    if isinstance(value, str):
        s = value.strip()
        if s in _LETTERS:
            return _LETTERS[s]
        if s.lower() in _WORDS:
            return _WORDS[s.lower()]
    return as_float(value)  # numbers, booleans, numeric strings; None for the rest (NaN included)


def _scores(sample: dict[str, Any]) -> dict[str, Any]:
    scores = sample.get("scores")
    if not isinstance(scores, dict):
        return {}
    return {str(k): (v.get("value") if isinstance(v, dict) else v) for k, v in scores.items()}


def _reward(sample: dict[str, Any]) -> tuple[float | None, str | None, Any]:
    """(reward, the scorer it came from, that score's raw value) of the sample's first score."""
    scores = _scores(sample)
    if not scores:
        return None, None, None
    name, value = next(iter(scores.items()))
    return score_to_float(value), name, value


# --------------------------------------------------------------------------- messages

def _resolve(text: Any, attachments: dict[str, Any], missing: list[str]) -> Any:
    """``attachment://<hash>`` replaced by the sample's stored text (a missing one is noted)."""
    if isinstance(text, str) and text.startswith(_ATTACHMENT):
        key = text[len(_ATTACHMENT):]
        if isinstance(attachments.get(key), str):
            return attachments[key]
        missing.append(key)
    return text


def _content(content: Any, att: dict[str, Any], missing: list[str]) -> tuple[str, str | None, list[str]]:
    """(text, reasoning, placeholders used) of a message content: a string or Inspect content parts."""
    if content is None:
        return "", None, []
    if isinstance(content, str):
        return _resolve(content, att, missing), None, []
    if not isinstance(content, list):
        return json.dumps(content, ensure_ascii=False, default=str), None, []
    texts, thoughts, shown = [], [], []
    for p in content:
        kind = p.get("type") if isinstance(p, dict) else None
        if kind == "text":
            texts.append(str(_resolve(p.get("text") or "", att, missing)))
        elif kind == "reasoning":
            # redacted reasoning holds the provider's encrypted blob: its summary (if any) is the readable part
            r = p.get("summary") if p.get("redacted") else _resolve(p.get("reasoning"), att, missing)
            if isinstance(r, str) and r:
                thoughts.append(r)
            elif p.get("redacted"):
                shown.append("redacted reasoning")
        elif kind in _MEDIA or kind == "tool_use":
            what = f"{kind} {p.get('name')}" if kind == "tool_use" else kind
            texts.append(f"[{what}]")
            shown.append(kind)
        elif kind == "data":
            continue  # provider-internal data (e.g. encrypted state): nothing the model read as text
        else:
            texts.append(f"[{kind or type(p).__name__}]")
            shown.append(str(kind))
    return "\n".join(texts), ("\n\n".join(thoughts) or None), shown


def _tool_call(c: Any, i: int, j: int, ref: RowRef, problems: list[Problem]) -> dict[str, Any] | None:
    """An Inspect ToolCall ``{id, function: "name", arguments: {..}}`` in OpenAI shape."""
    where = ref.where(f".messages[{i}].tool_calls[{j}]")
    if not isinstance(c, dict):
        problems.append(Problem(ref.label, where, "not a tool call object; skipped"))
        return None
    fn = c.get("function")
    name, args = (fn.get("name"), fn.get("arguments")) if isinstance(fn, dict) else (fn, c.get("arguments"))
    if not isinstance(name, str) or not name:
        problems.append(Problem(ref.label, where, f"tool call without a function name ({fn!r}); shown as '?'"))
        name = "?"
    if not isinstance(args, str):
        args = json.dumps(args if args is not None else {}, ensure_ascii=False, default=str)
    if c.get("parse_error"):
        problems.append(Problem(ref.label, where, f"Inspect could not parse these arguments: {c['parse_error']}",
                                "warning"))
    return {"id": str(c.get("id") or f"call_{i}_{j}"), "type": "function",
            "function": {"name": name, "arguments": args}}


def _message(m: Any, i: int, ref: RowRef, att: dict[str, Any], problems: list[Problem]) -> dict[str, Any] | None:
    role = m.get("role") if isinstance(m, dict) else None
    if role not in ("system", "user", "assistant", "tool"):
        problems.append(Problem(ref.label, ref.where(f".messages[{i}]"),
                                f"not an Inspect chat message (role {role!r}); skipped"))
        return None
    missing: list[str] = []
    text, reasoning, shown = _content(m.get("content"), att, missing)
    if missing:
        problems.append(Problem(ref.label, ref.where(f".messages[{i}].content"),
                                f"refers to attachment(s) not in the sample: {', '.join(missing[:3])}", "warning"))
    if shown:
        problems.append(Problem(ref.label, ref.where(f".messages[{i}].content"),
                                f"{', '.join(shown)} part(s) shown as placeholders: the derived tokens hold no "
                                "media or hidden reasoning", "warning"))
    out: dict[str, Any] = {"role": role, "content": text}
    if role == "assistant":
        if reasoning:
            out["reasoning_content"] = reasoning
        calls = [_tool_call(c, i, j, ref, problems) for j, c in enumerate(m.get("tool_calls") or [])]
        if any(calls):
            out["tool_calls"] = [c for c in calls if c]
    elif role == "tool":
        err = m.get("error") if isinstance(m.get("error"), dict) else None
        if err is not None:  # what Inspect's OpenAI provider sends the model for a failed call
            out["content"] = f"Error: {err.get('message', '')}"
        out["tool_call_id"] = str(m.get("tool_call_id") or "")
    return out


# --------------------------------------------------------------------------- a sample

def _where_from(sample: dict[str, Any]) -> str:
    return f"sample {sample.get('id')!r} epoch {sample.get('epoch')}"


def read_row(row: dict[str, Any], ref: RowRef) -> Conversation:
    """One sample (a dict from :func:`expand`) as a conversation."""
    if "samples" in row and "messages" not in row:
        raise ref.error(".samples", "a whole Inspect log, not one of its samples: open the file as a dataset "
                                    "(its rows are the samples)")
    raw = row.get("messages")
    if not isinstance(raw, list):
        raise ref.error(".messages", f"expected a list of messages, got {type(raw).__name__}")
    problems: list[Problem] = []
    att = row.get("attachments") if isinstance(row.get("attachments"), dict) else {}
    msgs = [m for m in (_message(m, i, ref, att, problems) for i, m in enumerate(raw)) if m is not None]
    spec = row.get("eval") if isinstance(row.get("eval"), dict) else {}
    err = row.get("error")
    if isinstance(err, dict) and err.get("message"):
        problems.append(Problem(ref.label, ref.where(".error"), f"the sample ended in an error: {err['message']}",
                                "warning"))
    if not any(m["role"] == "assistant" for m in msgs):
        problems.append(Problem(ref.label, ref.where(".messages"),
                                f"{_where_from(row)} has no assistant message ({len(raw)} messages): nothing the "
                                "model generated to show"))
    reward, scorer, value = _reward(row)
    if scorer is not None and reward is None:
        problems.append(Problem(ref.label, ref.where(f".scores.{scorer}.value"),
                                f"score {value!r} has no float meaning; the reward is left unknown", "warning"))
    instr = row.get("input") if isinstance(row.get("input"), str) else None
    if instr is None:
        instr = next((m["content"] for m in msgs if m["role"] == "user" and m["content"].strip()), None)
    task = {**{k: v for k, v in spec.items() if v is not None},
            "sample_id": row.get("id"), "epoch": row.get("epoch"), "target": row.get("target"),
            "metadata": row.get("metadata") or None}
    summary = {"scores": _scores(row), "reward_from": scorer, "total_time": row.get("total_time"),
               "working_time": row.get("working_time"), "model_usage": row.get("model_usage") or None,
               "error": err.get("message") if isinstance(err, dict) else None}
    return Conversation(messages=msgs, tools=[], model=spec.get("model"), agent=_agent(spec), task=task,
                        instruction=instr, reward=reward,
                        summary={k: v for k, v in summary.items() if v not in (None, {})}, problems=problems)


def _agent(spec: dict[str, Any]) -> str:
    """The solver, else the plan's solvers (``system_message+generate``), else "inspect"."""
    if isinstance(spec.get("solver"), str) and spec["solver"]:
        return spec["solver"]
    steps = [s for s in spec.get("plan") or [] if isinstance(s, str)]
    return "+".join(steps) or "inspect"


def summarize(row: dict[str, Any]) -> dict[str, Any]:
    spec = row.get("eval") if isinstance(row.get("eval"), dict) else {}
    msgs = row.get("messages") if isinstance(row.get("messages"), list) else []
    reward, scorer, value = _reward(row)
    epoch = row.get("epoch")
    task = f"{spec.get('task')} #{row.get('id')}" + (f" epoch {epoch}" if epoch not in (None, 1) else "")
    err = row.get("error")
    # the raw first score ("C", "I", 0.25): what the eval itself calls the outcome
    result = str(value) if scorer is not None else "error" if isinstance(err, dict) else None
    return {"agent": _agent(spec), "model": spec.get("model"), "task": task, "reward": reward, "result": result,
            "turns": sum(1 for m in msgs if isinstance(m, dict) and m.get("role") == "assistant"),
            "length": sum(len(_content(m.get("content"), {}, [])[0]) for m in msgs if isinstance(m, dict))}


# --------------------------------------------------------------------------- the typed decode

class _Sample(TypedDict, total=False):
    """The sample fields read here; ``events`` (most of a log's bytes), ``store`` and ``output`` are skipped."""

    id: Any
    epoch: Any
    input: Any
    target: Any
    messages: Any
    scores: Any
    metadata: Any
    error: Any
    attachments: Any
    model_usage: Any
    total_time: Any
    working_time: Any


class _Names(msgspec.Struct):
    """What :func:`detect` asks of a log's ``eval`` (its other fields skipped)."""

    task: str
    model: str


class _Samples(msgspec.Struct):
    """A log's samples left unparsed: counted (:func:`_count`), each decoded when its log is read; with what
    :func:`detect` asks of the log, so a line counted here is one :func:`expand` reads as a log."""

    version: int
    eval: _Names
    samples: list[msgspec.Raw]


_samples = typed(_Samples)


def _count(raw: bytes) -> tuple[int, None] | None:
    """The rollouts :func:`expand` finds in a log's JSONL line, without decoding it: its samples (a log
    with none, a line that is not an Inspect log, or any the skip cannot vouch for, is left to the row
    layer, which says why)."""
    log = _samples(raw)
    return (len(log.samples), None) if log is not None and log.samples else None


class _Log(TypedDict, total=False):
    """The log fields :func:`expand` reads (``results``, ``stats``, ``reductions`` are skipped)."""

    version: Any
    status: Any
    eval: Any
    plan: Any
    samples: list[_Sample]


FORMAT = RowFormat("inspect", "Inspect AI eval log (.json or .eval; one rollout per sample)", detect, read_row,
                   summarize, expand=expand, fields=("version", "eval", "samples"), decode=typed(_Log),
                   lines=RawLines(_count, lambda raw, state: None),  # (counted only: decode reads the line)
                   side_files=("logs.json", "eval-set.json"))  # (eval_set's manifests, beside .json logs too)
