"""One proxy trace record -> Turn: the parser shared by capture folders and contract rows.

A record is our recording proxy's (or the OpenEnv interception proxy's, newer TRL's, the
OpenEnv capture contract's) JSON object for one model call. Ids, logprobs and the mask are
validated (:mod:`viewer.sources.columns`) and kept packed; the top-k alternatives and the
sampled tokens' bytes are packed from the logprob entries (:mod:`viewer.packed`), so the
record itself can be dropped as soon as its Turn is built. Bad data becomes a located
Problem in the :class:`Ctx`; nothing here raises.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from viewer.rollout import Problem, Turn, TurnOrigin
from viewer.sources.columns import Checked, check_ids, check_logprobs, check_mask, ids_from_token_strings
from viewer.sources.logprob_entries import bytes_column, entry_values, topk_column
from viewer.turns import kind_from_label

__all__ = ["Ctx", "turn_from_record", "set_mask", "align", "note", "first_diff", "SharedHistory"]


@dataclass
class Ctx:
    """Reading state shared by the helpers: where problems go."""

    problems: list[Problem] = field(default_factory=list)

    def add(self, file: str, where: str, message: str, severity: str = "error") -> None:
        self.problems.append(Problem(file, where, message, severity))  # type: ignore[arg-type]


def _as_dict(x: Any) -> dict[str, Any]:
    return x if isinstance(x, dict) else {}


def _as_list(x: Any) -> list[Any]:
    return x if isinstance(x, list) else []


def note(ctx: Ctx, rf: Any, i: int, path: str, chk: Checked, severity: str = "error") -> None:
    if chk.error:
        ctx.add(rf.label, rf.where(i, path), chk.error, severity)


def turn_from_record(rec: Any, i: int, rf: Any, ctx: Ctx) -> Turn | None:
    """One proxy record -> Turn (ids, logprobs, text). Kind/mask may stay for the rule.

    The call itself first (number, conversation, reply, model, finish, times, kind, error), then
    one step per token column, each taking the first source the record has: output ids, logprobs,
    prompt ids, the mask; last, the columns are cut to one length (:func:`align`)."""
    if not isinstance(rec, dict):
        ctx.add(rf.label, rf.where(i), f"expected a JSON object, got {type(rec).__name__}; record skipped")
        return None
    request, response = _request_and_response(rec, rf, i, ctx)
    choices = response.get("choices")
    choice = _as_dict(choices[0]) if isinstance(choices, list) and choices else {}
    meta = _as_dict(rec.get("metadata"))
    t = Turn(index=i, call=_call_number(rec, i), messages=_as_list(request.get("messages")),
             tools=_as_list(request.get("tools")), request=request, response=_reply_message(choice),
             finish_reason=_text(rec.get("finish_reason") or choice.get("finish_reason")),
             latency_s=_number(rec.get("latency_s")), timestamp=_number(rec.get("timestamp")),
             origin=TurnOrigin(file=rf.label, record=i, model=_model_of(request, response, meta)))
    _kind_from_record(rec, meta, t)
    _error_from_record(rec, response, choices, t)
    entries = _logprob_entries(rec, choice, rf, i, ctx)
    _set_output_ids(t, rec, choice, entries, rf, ctx)
    _set_logprobs(t, rec, entries, rf, ctx)
    _set_prompt_ids(t, rec, response, rf, ctx)
    _set_record_mask(t, rec, rf, ctx)
    align(t, entries, f"call {t.call}", rf, i, ctx)
    return t


def _request_and_response(rec: dict[str, Any], rf: Any, i: int, ctx: Ctx) -> tuple[dict[str, Any], dict[str, Any]]:
    """The record's request and response objects ({} when absent; any other type is a problem)."""
    request, response = rec.get("request"), rec.get("response")
    for name, val in (("request", request), ("response", response)):
        if val is not None and not isinstance(val, dict):
            ctx.add(rf.label, rf.where(i, f".{name}"), f"expected an object, got {type(val).__name__}; ignored")
    return _as_dict(request), _as_dict(response)


def _call_number(rec: dict[str, Any], i: int) -> int:
    """The record's call number (``turn``, else ``call``), else its place in the file from 1."""
    for key in ("turn", "call"):
        if type(rec.get(key)) is int:
            return rec[key]
    return i + 1


def _reply_message(choice: dict[str, Any]) -> dict[str, Any]:
    """The first choice's message, older vLLM's ``reasoning_content`` also as ``reasoning``."""
    message = _as_dict(choice.get("message"))
    if "reasoning" not in message and isinstance(message.get("reasoning_content"), str):
        message = {**message, "reasoning": message["reasoning_content"]}
    return message


def _model_of(request: dict[str, Any], response: dict[str, Any], meta: dict[str, Any]) -> str | None:
    """The model named by the request, else the response, else the record's metadata."""
    return next((m for m in (request.get("model"), response.get("model"), meta.get("model"))
                 if isinstance(m, str) and m), None)


def _text(x: Any) -> str | None:
    return x if isinstance(x, str) else None


def _number(x: Any) -> float | None:
    return float(x) if type(x) in (int, float) else None


def _logprob_entries(rec: dict[str, Any], choice: dict[str, Any], rf: Any, i: int, ctx: Ctx) -> list[Any] | None:
    """The logprob entries: the record's copy (a list, or an object's ``content``), else the response's."""
    entries = rec.get("logprobs")
    if isinstance(entries, dict):
        entries = entries.get("content")
    if entries is None:
        entries = _as_dict(choice.get("logprobs")).get("content")
    if entries is None or isinstance(entries, list):
        return entries
    ctx.add(rf.label, rf.where(i, ".logprobs"), f"expected a list of logprob entries, got "
                                                f"{type(entries).__name__}; ignored")
    return None


def _set_output_ids(t: Turn, rec: dict[str, Any], choice: dict[str, Any], entries: list[Any] | None,
                    rf: Any, ctx: Ctx) -> None:
    """Output ids: the engine's first, "token_id:N" strings second; cross-checked when both."""
    engine = _engine_ids(rec, choice, rf, t.index, ctx)
    strings, str_path = _string_ids(rec, entries, rf, t.index, ctx)
    if engine and strings is not None and engine != strings:
        ctx.add(rf.label, rf.where(t.index), f"call {t.call}: output ids from token_ids ({len(engine)}) differ "
                                             f"from the 'token_id:N' strings in {str_path} ({len(strings)}) "
                                             f"{first_diff(engine, strings)}; using token_ids")
    if engine:
        t.output_ids, t.output_source = engine, "engine"
    elif strings:
        t.output_ids, t.output_source = strings, "token_id_strings"


def _engine_ids(rec: dict[str, Any], choice: dict[str, Any], rf: Any, i: int, ctx: Ctx) -> list[int] | None:
    """The first clean list of engine ids of the three places a record keeps them, else the first
    valid prefix of one."""
    prefix: list[int] | None = None
    for path, val in ((".completion_token_ids", rec.get("completion_token_ids")),
                      (".response.choices[0].token_ids", choice.get("token_ids")),
                      (".token_ids", rec.get("token_ids"))):
        chk = check_ids(val)
        note(ctx, rf, i, path, chk)
        if chk.value and not chk.error:
            return chk.value
        if chk.value and prefix is None:
            prefix = chk.value  # a later clean source may still replace it
    return prefix


def _string_ids(rec: dict[str, Any], entries: list[Any] | None, rf: Any, i: int,
                ctx: Ctx) -> tuple[list[int] | None, str]:
    """Ids from "token_id:N" strings (the record's ``completion_tokens``, else the entries' tokens),
    and where they came from."""
    if rec.get("completion_tokens") is not None:
        chk = ids_from_token_strings(rec.get("completion_tokens"))
        note(ctx, rf, i, ".completion_tokens", chk)
        if chk.value is not None:
            return chk.value, ".completion_tokens"
    if not entries:
        return None, ""
    chk = ids_from_token_strings(entry_values(entries, "token"))
    note(ctx, rf, i, ".logprobs[].token", chk)
    return chk.value, ".logprobs[].token"


def _set_logprobs(t: Turn, rec: dict[str, Any], entries: list[Any] | None, rf: Any, ctx: Ctx) -> None:
    """Logprobs: ``per_token_logps``, else the entries' values."""
    lps: list[float | None] | None = None
    if rec.get("per_token_logps") is not None:
        chk = check_logprobs(rec.get("per_token_logps"))
        note(ctx, rf, t.index, ".per_token_logps", chk)
        lps = chk.value
        t.origin = t.origin.replace(logprobs_from="per_token_logps")
    if not lps and entries:
        chk = check_logprobs(entry_values(entries, "logprob"))
        note(ctx, rf, t.index, ".logprobs[].logprob", chk)
        lps = chk.value
        t.origin = t.origin.replace(logprobs_from="logprobs")
    t.logprobs = lps or []


def _set_prompt_ids(t: Turn, rec: dict[str, Any], response: dict[str, Any], rf: Any, ctx: Ctx) -> None:
    """Prompt ids: the engine's, when the record (or its response) carries them."""
    pval, ppath = rec.get("prompt_token_ids"), ".prompt_token_ids"
    if pval is None and "prompt_token_ids" in response:
        pval, ppath = response.get("prompt_token_ids"), ".response.prompt_token_ids"
    chk = check_ids(pval)
    note(ctx, rf, t.index, ppath, chk)
    if chk.value:
        t.prompt_ids, t.prompt_source = chk.value, "engine"


def _set_record_mask(t: Turn, rec: dict[str, Any], rf: Any, ctx: Ctx) -> None:
    """The record's ``loss_mask`` (else ``mask``), and its ``trained`` flag once a mask is taken."""
    mval, mpath = (rec.get("loss_mask"), ".loss_mask") if "loss_mask" in rec else (rec.get("mask"), ".mask")
    if mval is None:
        return
    set_mask(t, mval, rf, t.index, mpath, ctx)
    if type(rec.get("trained")) is bool and t.origin.mask_source:
        t.trained = rec["trained"]


def _kind_from_record(rec: dict[str, Any], meta: dict[str, Any], t: Turn) -> None:
    label = rec.get("kind")
    if not isinstance(label, str):
        role = meta.get("role") if isinstance(meta.get("role"), str) else None
        label = {"agent": "main", "auxiliary": "other"}.get(role or "", None)
    if isinstance(label, str) and label:
        t.kind, t.role = kind_from_label(label)  # type: ignore[assignment]
        t.origin = t.origin.replace(kind_source="record", kind_label=label)


def _error_from_record(rec: dict[str, Any], response: dict[str, Any], choices: Any, t: Turn) -> None:
    status = rec.get("upstream_status", response.get("upstream_status"))
    err = rec.get("upstream_error", response.get("upstream_error"))
    if status is None and err is None:
        if isinstance(rec.get("error"), str) and rec["error"]:
            t.error = rec["error"]
        elif response and isinstance(choices, list) and not choices:
            t.error = "upstream response has no choices"
        return
    msg = err
    if isinstance(err, dict):
        inner = err.get("error", err)
        msg = inner.get("message", inner) if isinstance(inner, dict) else inner
    t.error = f"upstream HTTP {status}: {msg}" if status is not None else f"upstream error: {msg}"


class SharedHistory:
    """What the calls of one trace repeat, kept once.

    Each request carries the whole conversation so far and the same tools, so a trace of n calls
    holds call k's messages n - k times over; kept per turn as parsed, they would outweigh the
    packed token columns (peak memory over 0.3x the file on a 50-call rollout, issue 35). A message
    equal to the one at the same place in the last request that opened with the same system
    message (and a tools list equal to the last one) is replaced by that earlier object. Equal
    means the same JSON text (:func:`_json_of`): same types (``1`` is not ``1.0`` nor ``true``) and
    key order, so every value and its re-serialisation stay exactly as parsed; only the duplicate
    objects go. Each message is serialised once (the last request's are kept, not re-done)."""

    def __init__(self) -> None:
        # the first message's content -> (that conversation's last messages, their JSON texts)
        self._last: dict[Any, tuple[list[Any], list[bytes | None]]] = {}
        self._tools: tuple[list[Any], bytes | None] | None = None

    def share(self, t: Turn) -> None:
        msgs = t.messages
        if msgs:
            key = msgs[0].get("content") if isinstance(msgs[0], dict) else None
            key = key if isinstance(key, str) else None
            prev, prev_json = self._last.get(key, ((), ()))
            texts: list[bytes | None] = []
            for j in range(min(len(prev), len(msgs))):
                text = _json_of(msgs[j])
                if not _same(text, prev_json[j], msgs[j], prev[j]):
                    break  # the conversation went another way (compaction): no more of it is shared
                msgs[j] = prev[j]  # in place: the list is also the request's
                texts.append(text)
            texts += map(_json_of, msgs[len(texts):])
            self._last[key] = (msgs, texts)
        tools = t.tools
        if tools:
            text = _json_of(tools)
            if self._tools is not None and _same(text, self._tools[1], tools, self._tools[0]):
                if t.request.get("tools") is tools:
                    t.request["tools"] = self._tools[0]
                t.tools = self._tools[0]
            else:
                self._tools = (tools, text)


_encode = msgspec.json.Encoder().encode


def _json_of(value: Any) -> bytes | None:
    """The JSON text of a parsed value (None when it has none: never equal to anything)."""
    try:
        return _encode(value)
    except (TypeError, OverflowError, ValueError):
        return None


def _same(text: bytes | None, prev_text: bytes | None, value: Any, prev: Any) -> bool:
    """Whether two parsed values are the same JSON. The texts tell apart everything ``==`` confuses
    (1, 1.0, true; key order) and are equal only for equal values, except that NaN and the
    infinities are written ``null``: where the text has one, ``==`` decides too (NaN is unequal)."""
    return text is not None and text == prev_text and (b"null" not in text or value == prev)


def first_diff(a: list[int], b: list[int]) -> str:
    for j, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"(first difference at position {j}: {x} vs {y})"
    return "(one is a prefix of the other)"


def set_mask(t: Turn, value: Any, rf: Any, i: int, path: str, ctx: Ctx) -> None:
    """Accept a mask over the output, or over prompt+output; flag any other length."""
    file = rf.label
    chk = check_mask(value)
    if chk.error:
        ctx.add(file, rf.where(i, path), chk.error)
        return
    mask = chk.value or []
    n_out, n_prompt = len(t.output_ids), len(t.prompt_ids)
    if len(mask) == n_out:
        t.mask = mask
    elif n_prompt and len(mask) == n_prompt + n_out:
        t.mask = mask[n_prompt:]
        if any(mask[:n_prompt]):
            t.prompt_mask = mask[:n_prompt]
    else:
        want = f"{n_out} (output)" + (f" or {n_prompt + n_out} (prompt+output)" if n_prompt else "")
        ctx.add(file, rf.where(i, path), f"call {t.call}: mask has {len(mask)} entries, expected {want}; mask ignored")
        return
    t.trained = any(t.mask)
    t.origin = t.origin.replace(mask_source="record")


def align(t: Turn, entries: list[Any] | None, who: str, rf: Any, i: int, ctx: Ctx) -> None:
    """Make ids, logprobs (and the entry views, the mask) the same length: keep the shorter aligned."""
    file = rf.label
    n_ids, n_lp = len(t.output_ids), len(t.logprobs)
    if n_ids and n_lp and n_ids != n_lp:
        n = min(n_ids, n_lp)
        ctx.add(file, rf.where(i), f"{who}: {n_ids} output ids but {n_lp} logprobs; kept the first {n} aligned")
        t.output_ids, t.logprobs = t.output_ids[:n], t.logprobs[:n]
    if len(t.mask) > len(t.output_ids):
        t.mask = t.mask[:len(t.output_ids)]
    n = n_ids and len(t.output_ids) or len(t.logprobs)
    if entries:
        if len(entries) < n:
            ctx.add(file, rf.where(i), f"{who}: {len(entries)} logprob entries for {n} output tokens; "
                                 "top-k/bytes missing past the end", "warning")
        t.top_logprobs = topk_column(entries, n)  # type: ignore[assignment]
        t.output_bytes = bytes_column(entries, n)  # type: ignore[assignment]
