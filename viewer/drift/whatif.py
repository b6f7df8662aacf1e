"""Measured what-ifs: the exact trainer code (:func:`viewer.drift.rows.stitch`) re-run on a modified
copy of the same rollout's trainer inputs, reporting the trained tokens each change recovers.

Each what-if changes one thing a cause points at and keeps the rest (turns in the chain, their
order, the fork threshold):

* ``engine_prompt_ids`` — message mode fed the engine's recorded prompt ids instead of re-renders;
* ``contract_mode`` — the trainer TRL ≥ 1.15 runs on the capture contract (engine prompt ids,
  per-token masks, ``lossless_capture``'s fork threshold 0);
* ``replay_template_kwargs`` — the re-render given the request's ``chat_template_kwargs``
  (cause ``template_kwargs``);
* ``normalize_tool_arguments`` — the re-render with vLLM's tool-call ``arguments`` normalisation
  (cause ``tool_args_reformatted``);
* ``keep_reasoning_kwarg`` — a template kwarg that keeps earlier reasoning (cause ``think_dropped``):
  measured only where an allowed kwarg does that; none of the bundled templates has one;
* ``special_token_spelling`` — every special token's text sampled as plain pieces spelled as
  the special token (``<tool_call>`` as one id; cause ``special_token``);
* ``canonical_output`` — every output re-encoded as the tokenizer would (``encode(decode(ids))``:
  causes ``special_token`` and ``retokenized`` together).

Outputs that change length carry their mask / logprob entry from the original token holding the
new token's first byte; the logprobs are placeholders (only counts are reported). ``recovered``
is baseline minus what-if tokens losing gradient, in each side's own tokens.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from viewer.drift.rows import Rows, TrainerTurn, stitch
from viewer.drift.trainer import CONTRACT, DEFAULT_FORK_THRESHOLD, MESSAGE, PER_TOKEN_MASK, TrainerRows, TrainerSpec
from viewer.drift.trainer import request_messages, trainer_inputs

__all__ = ["WHATIFS", "measure_whatifs", "spell_special_tokens"]

WHATIFS = {
    "engine_prompt_ids": "the trainer fed the engine's prompt ids (no re-render)",
    "contract_mode": "trl-contract: engine prompt ids, per-token masks, fork threshold 0 (TRL ≥ 1.15)",
    "replay_template_kwargs": "the re-render given the request's chat_template_kwargs",
    "normalize_tool_arguments": "the re-render with vLLM's tool-call arguments normalisation",
    "keep_reasoning_kwarg": "a template kwarg that keeps earlier reasoning",
    "special_token_spelling": "special-token text sampled as pieces spelled as the special token",
    "canonical_output": "every output re-encoded canonically (encode(decode(ids)))",
}


def _result(name: str, base: Rows, got: Rows | None = None, reason: str | None = None) -> dict[str, Any]:
    lost = got.tokens_losing_gradient if got is not None else 0
    return {"name": name, "what": WHATIFS[name], "measured": got is not None, "reason": reason,
            "baseline_tokens_losing_gradient": base.tokens_losing_gradient if got is not None else 0,
            "tokens_losing_gradient": lost,
            "recovered": base.tokens_losing_gradient - lost if got is not None else 0,
            "rows": len(got.rows) if got is not None else 0, "baseline_rows": len(base.rows) if got is not None else 0,
            "trained_tokens": got.trained_tokens if got is not None else 0}


def _carry(old: list[int], new: list[int], table, values: list[Any] | None, fill: Any) -> list[Any] | None:
    """Per-token ``values`` of ``old`` carried to ``new`` (same text): each new token takes the
    value of the old token holding its first byte."""
    if values is None:
        return None
    if not values:
        return []
    starts, pos = [], 0
    for i in old:
        starts.append(pos)
        pos += len(table.bytes_of(i))
    out, k, pos = [], 0, 0
    for j in new:
        while k + 1 < len(starts) and starts[k + 1] <= pos:
            k += 1
        out.append(values[k] if k < len(values) else fill)
        pos += len(table.bytes_of(j))
    return out


def spell_special_tokens(ids: list[int], tok, table) -> list[int]:
    """``ids`` with each run of plain pieces spelling a special token's text (``<`` ``tool`` ``_call``
    ``>``) replaced by that token; text a last piece carries past it is encoded as the tokenizer would."""
    specials = sorted(((t.encode("utf-8"), i) for t, i in tok.get_added_vocab().items()
                       if len(t) > 1 and table.is_special(i)), key=lambda x: -len(x[0]))
    out: list[int] = []
    i = 0
    while i < len(ids):
        b0 = table.bytes_of(ids[i])
        hit = None
        if not table.is_special(ids[i]) and b0:
            for s, sid in specials:
                if not s.startswith(b0) and not b0.startswith(s):
                    continue
                acc, j = b"", i
                while j < len(ids) and len(acc) < len(s) and not table.is_special(ids[j]):
                    acc += table.bytes_of(ids[j])
                    j += 1
                if acc.startswith(s):
                    try:
                        over = acc[len(s):].decode("utf-8")
                    except UnicodeDecodeError:
                        continue
                    hit = ([sid] + (list(tok.encode(over, add_special_tokens=False)) if over else []), j)
                    break
        if hit is None:
            out.append(ids[i])
            i += 1
        else:
            out.extend(hit[0])
            i = hit[1]
    return out


def _with_outputs(turns: list[TrainerTurn], fn, table) -> tuple[list[TrainerTurn], bool]:
    out, changed = [], False
    for t in turns:
        new = fn(list(t.output_ids))
        if new == list(t.output_ids):
            out.append(t)
            continue
        changed = True
        out.append(replace(t, output_ids=new, output_log_probs=_carry(t.output_ids, new, table, t.output_log_probs, 0.0),
                           output_mask=_carry(t.output_ids, new, table, t.output_mask, 0)))
    return out, changed


def _rerender(rollout, turns: list[TrainerTurn], tok, *, kwargs: bool, normalize: bool) -> list[TrainerTurn]:
    from viewer.drift.checks import chat_kwargs
    from viewer.tokenizer import render_prompt_ids

    out = []
    for t in turns:
        turn = rollout.turn(t.turn)
        msgs, tools = request_messages(turn)
        ids = render_prompt_ids(tok, msgs, tools=tools, chat_template_kwargs=chat_kwargs(turn) if kwargs else None,
                                normalize_tool_arguments=normalize, add_generation_prompt=True)
        out.append(replace(t, prompt_ids=[int(x) for x in ids]))
    return out


def _message_whatifs(rollout, tr: TrainerRows, tok, run) -> list[dict[str, Any]]:
    from viewer.drift.checks import chat_kwargs

    base, turns, res = tr.rows, tr.inputs, []
    agent = [rollout.turn(t.turn) for t in turns]
    if all(a.prompt_source == "engine" and a.prompt_ids for a in agent):
        res.append(run("engine_prompt_ids", [replace(t, prompt_ids=list(a.prompt_ids)) for t, a in zip(turns, agent)]))
    else:
        res.append(_result("engine_prompt_ids", base, reason="no engine prompt ids recorded (e.g. an interception "
                                                             "proxy without vLLM's return_token_ids)"))
    if any(chat_kwargs(a) for a in agent):
        res.append(run("replay_template_kwargs", lambda: _rerender(rollout, turns, tok, kwargs=True, normalize=False)))
    else:
        res.append(_result("replay_template_kwargs", base, reason="the requests carry no chat_template_kwargs"))
    if any(m.get("tool_calls") for a in agent for m in request_messages(a)[0] if isinstance(m, dict)):
        res.append(run("normalize_tool_arguments",
                       lambda: _rerender(rollout, turns, tok, kwargs=False, normalize=True)))
    else:
        res.append(_result("normalize_tool_arguments", base, reason="no tool call in the re-rendered histories"))
    return res


def _keep_reasoning_reason(tok) -> str:
    """Why the keep-reasoning what-if is not measured: no allowed template kwarg keeps earlier
    reasoning (viewer.tokenizer.TEMPLATE_KWARGS lists what a render may pass)."""
    from viewer.tokenizer.template import TEMPLATE_KWARGS

    template = str(getattr(tok, "chat_template", "") or "") if tok is not None else ""
    if tok is None:
        return "no tokenizer"
    if "reasoning_content" not in template and "<think>" not in template:
        return "the chat template renders no reasoning, so none is dropped"
    return (f"the chat template has no allowed kwarg ({', '.join(TEMPLATE_KWARGS)}) that keeps earlier reasoning: "
            "Qwen3-style templates drop it before the last user turn whatever the kwargs")


def measure_whatifs(rollout, tr: TrainerRows, tok) -> list[dict[str, Any]]:
    """Every what-if of :data:`WHATIFS` for ``tr`` (the rows one trainer built from ``rollout``): measured,
    or ``measured: false`` with the reason it could not be."""
    base, spec = tr.rows, tr.spec
    if base is None:
        return []
    validate = spec.mode == CONTRACT

    def run(name: str, inputs, *, threshold=None, check: bool = validate) -> dict[str, Any]:
        try:
            turns = inputs() if callable(inputs) else inputs
            got = stitch(turns, fork_threshold=spec.fork_threshold if threshold is None else threshold, validate=check)
        except ValueError as e:  # a template error or a length check: TRL would fail the same way
            return _result(name, base, reason=f"could not run: {e}")
        return _result(name, base, got)

    res: list[dict[str, Any]] = []
    if spec.mode == MESSAGE:
        res += _message_whatifs(rollout, tr, tok, run)
    else:
        for name in ("engine_prompt_ids", "replay_template_kwargs", "normalize_tool_arguments"):
            res.append(_result(name, base, reason="the trainer already uses the engine's prompt ids"))
    lossless = TrainerSpec(CONTRACT, PER_TOKEN_MASK, DEFAULT_FORK_THRESHOLD[CONTRACT])
    if spec.mode == CONTRACT and spec.fork_threshold == lossless.fork_threshold:
        res.append(_result("contract_mode", base, reason="already the trainer (trl-contract, fork threshold 0)"))
    else:
        try:
            cturns, _, _ = trainer_inputs(rollout, lossless, tok)
            res.append(run("contract_mode", cturns, threshold=lossless.fork_threshold, check=True))
        except ValueError as e:
            res.append(_result("contract_mode", base, reason=str(e)))
    res.append(_result("keep_reasoning_kwarg", base, reason=_keep_reasoning_reason(tok)))
    if tok is None:
        for name in ("special_token_spelling", "canonical_output"):
            res.append(_result(name, base, reason="no tokenizer"))
        return res
    from viewer.tokenizer import token_table

    table = token_table(tok)
    n = len(table)
    if any(i < 0 or i >= n for t in tr.inputs for i in t.output_ids):
        for name in ("special_token_spelling", "canonical_output"):
            res.append(_result(name, base, reason="output ids outside the tokenizer's vocabulary"))
        return res
    spelled, changed = _with_outputs(tr.inputs, lambda ids: spell_special_tokens(ids, tok, table), table)
    res.append(run("special_token_spelling", spelled) if changed else
               _result("special_token_spelling", base, reason="no special-token text sampled as plain pieces"))

    def canon(ids: list[int]) -> list[int]:
        return list(tok.encode(tok.decode(ids, skip_special_tokens=False), add_special_tokens=False))

    canonical, changed = _with_outputs(tr.inputs, canon, table)
    res.append(run("canonical_output", canonical) if changed else
               _result("canonical_output", base, reason="every output is already the canonical encoding"))
    return res
