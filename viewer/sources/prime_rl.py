"""prime-rl trainer token exports (``token_exports/step_N/rank_R.jsonl``, docs/FORMATS.md).

prime-rl's trainer, with ``enable_token_export``, writes one JSON line per training sample
it trained on (``src/prime_rl/trainer/rl/token_export.py`` in PrimeIntellect-ai/prime-rl,
``TokenExporter.export``): a packed micro batch is cut back into its samples by
``sequence_lengths``, padding trimmed, and a sample with no trained token is not written.
A sample is one branch of a rollout as a flat token sequence (``TrainingSample`` in
``src/prime_rl/transports/rollouts/types.py``): context and model-sampled spans interleave,
and the loss mask marks the sampled tokens it trains. One line is therefore one rollout here.

A line (``schema_version`` 1)::

    {schema_version, step, rank, micro_step, micro_sequence_idx, export_sequence_idx, env_name,
     [export_step, run_id, training_mode: older writers],
     token_ids, position_ids, loss_mask, advantages, [rewards: older writers],
     inference_logprobs, trainer_logprobs, entropy, mismatch_kl, log_importance_ratio,
     importance_ratio, prob_delta, is_masked, is_masked_high, is_masked_low,
     rl_weights, ce_weights, ref_kl_weights}

Every list has one entry per token, aligned with ``token_ids``: ``trainer_logprobs[i]`` is
the trainer's ``log p(token_ids[i] | token_ids[:i])`` (shifted right, ``log(1/vocab)`` at 0),
``inference_logprobs[i]`` the sampler's (0.0 on context tokens), ``importance_ratio`` =
exp(trainer − inference). Ratio columns are all null where the batch has no rl token; the
``is_masked*`` columns (DPPO's trust-region masks) are null unless the loss is prime-rl's
default one. Non-finite numbers are written as null.

Turns: every maximal run of trained tokens is one model call: its output is that run (mask
1, the sampler's logprobs, the trainer's as ``Turn.trainer_logprobs``) and its prompt every
token before it, exactly as the trainer saw them. The file names no model and holds no text:
the ids are shown through the tokenizer the app picks (or the one the user names). The
trainer logprobs reach the mismatch views without a model run (viewer.rescore.recorded).
"""
from __future__ import annotations

import math
from itertools import compress
from typing import Any

import msgspec

from viewer.rollout import Problem, Turn, TurnOrigin
from viewer.sources.columns import check_ids, check_logprobs, check_mask
from viewer.sources.derive import Conversation
from viewer.sources.formats import RowFormat, RowRef

__all__ = ["FORMAT", "read_row", "summarize", "trained_spans"]

# The columns every writer version has (token_export.py since its first commit, e971d905a).
_REQUIRED = ("token_ids", "loss_mask", "inference_logprobs", "trainer_logprobs")
_MARKS = {"schema_version", "micro_step", "export_sequence_idx", "importance_ratio"}
# Per-token columns shown as counts / ranges in the summary (never as turn data).
_FLAGS = ("is_masked", "is_masked_high", "is_masked_low")


def detect(cols: set[str], first: dict[str, Any] | None) -> bool:
    return set(_REQUIRED) <= cols and _MARKS <= cols


def trained_spans(mask: Any) -> list[tuple[int, int]]:
    """[start, end) of every maximal run of trained tokens, in order (``mask``: 0/1 or bools; found with
    ``bytes.find``, at C speed on a long sequence)."""
    b = bytes(1 if m else 0 for m in mask) if not isinstance(mask, (bytes, bytearray)) else mask
    spans: list[tuple[int, int]] = []
    start = b.find(1)
    while start >= 0:
        end = b.find(0, start)
        end = len(b) if end < 0 else end
        spans.append((start, end))
        start = b.find(1, end)
    return spans


def _mask_bytes(value: Any) -> bytes | None:
    """The raw loss mask as 0/1 bytes when it is a plain list of bools (what the writer writes), else None."""
    if not isinstance(value, list):
        return None
    try:
        msgspec.convert(value, list[bool])  # only bools (checked at C speed)
    except msgspec.ValidationError:
        return None
    return bytes(value)


def _column(row: dict[str, Any], name: str, n: int, ref: RowRef, problems: list[Problem], check) -> list | None:
    """A per-token column, checked (``check``: a viewer.sources.columns checker) and of the ids' length;
    None (with a located problem) when it is not usable."""
    got = check(row.get(name))
    if got.error:
        problems.append(Problem(ref.label, ref.where(f".{name}"), got.error, "warning"))
    if got.value is None:
        return None
    if len(got.value) != n:
        problems.append(Problem(ref.label, ref.where(f".{name}"),
                                f"{len(got.value)} entries for {n} token ids; not used"))
        return None
    return got.value


def _one_value(values: Any, mask: bytes) -> float | None:
    """The value a column holds on every trained token (a rollout's reward or advantage broadcast over
    its tokens), or None when they differ or are missing."""
    if not isinstance(values, list) or len(values) != len(mask):
        return None
    seen = set(compress(values, mask))
    if len(seen) != 1:
        return None
    v = next(iter(seen))
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _trained_numbers(row: dict[str, Any], name: str, mask: bytes) -> list[float]:
    """A per-token column's numbers on the trained tokens (nulls left out); [] when absent or misaligned."""
    col = row.get(name)
    if not isinstance(col, list) or len(col) != len(mask):
        return []
    vals = list(compress(col, mask))
    return vals if None not in vals else [v for v in vals if isinstance(v, (int, float))]


def _stats(row: dict[str, Any], mask: bytes) -> dict[str, Any]:
    """What the trainer computed for this sample, over its trained tokens: ratio range, mismatch KL,
    how many tokens DPPO's masks took out (null columns: not computed by this run)."""
    out: dict[str, Any] = {}
    ratios = _trained_numbers(row, "importance_ratio", mask)
    if ratios:
        out["importance_ratio_min"], out["importance_ratio_max"] = min(ratios), max(ratios)
    kl = _trained_numbers(row, "mismatch_kl", mask)
    if kl:
        out["mismatch_kl_mean"] = sum(kl) / len(kl)
    for name in _FLAGS:
        col = row.get(name)
        if isinstance(col, list) and len(col) == len(mask) and col.count(None) < len(col):
            out[f"{name}_tokens"] = col.count(True)
    return out


def read_row(row: dict[str, Any], ref: RowRef) -> Conversation:
    problems: list[Problem] = []
    ids = check_ids(row.get("token_ids"))
    if ids.error or not ids.value:
        raise ref.error(".token_ids", ids.error or "no token ids")
    n = len(ids.value)
    token_ids = ids.value
    mask = _mask_bytes(row.get("loss_mask"))
    if mask is None or len(mask) != n:
        checked = _column(row, "loss_mask", n, ref, problems, check_mask)
        if checked is None:
            raise ref.error(".loss_mask", "no usable loss mask: the trained tokens (the model's outputs) are unknown")
        mask = bytes(checked)
    sampler = _column(row, "inference_logprobs", n, ref, problems, check_logprobs)
    trainer = _column(row, "trainer_logprobs", n, ref, problems, check_logprobs)
    spans = trained_spans(mask)
    if not spans:
        raise ref.error(".loss_mask", "no trained token: prime-rl exports only samples it trains on")
    turns = [_turn(k, token_ids, s, e, sampler, trainer) for k, (s, e) in enumerate(spans)]
    tail = n - spans[-1][1]
    if tail:
        problems.append(Problem(ref.label, ref.where(".loss_mask"),
                                f"the last {tail} token(s) are context after the last trained token: no turn "
                                "shows them", "warning"))
    task = {k: row[k] for k in ("env_name", "step", "export_step", "rank", "micro_step", "micro_sequence_idx",
                                "export_sequence_idx", "run_id", "training_mode") if row.get(k) is not None}
    summary = {"schema_version": row.get("schema_version"), "tokens": n, "trained_tokens": mask.count(1),
               "advantage": _one_value(row.get("advantages"), mask), **_stats(row, mask)}
    return Conversation(messages=[], model=None, agent="prime-rl", task=task or None,
                        reward=_one_value(row.get("rewards"), mask), summary=summary, exact_turns=turns,
                        problems=problems)


def _turn(k: int, token_ids: Any, start: int, end: int, sampler: list | None, trainer: list | None) -> Turn:
    """One run of trained tokens: the output, and every token before it as its prompt."""
    # The prompt is labelled "engine": prime-rl's samples are the engine's own token ids (a renderer's
    # token-in/token-out branch, never re-tokenised), and the trainer trains on exactly these; so the
    # trainer views take them as the capture contract does (one row, each turn CLEAN on the last).
    # The output is "stored": read back from the trainer's file, not from the engine's response.
    t = Turn(index=k, call=k + 1, kind="agent", role="main", trained=True,
             prompt_ids=token_ids[:start], prompt_source="engine",
             output_ids=token_ids[start:end], output_source="stored", mask=[1] * (end - start),
             origin=TurnOrigin(mask_source="record", kind_source="record"))
    if sampler is not None:
        t.logprobs = sampler[start:end]
    if trainer is not None:
        t.trainer_logprobs = trainer[start:end]
    return t


def summarize(row: dict[str, Any]) -> dict[str, Any]:
    raw, ids = row.get("loss_mask"), row.get("token_ids")
    mask = _mask_bytes(raw) if isinstance(raw, list) else None
    if mask is None and isinstance(raw, list) and set(map(type, raw)) <= {bool, int, float}:
        mask = bytes(1 if m else 0 for m in raw)
    return {"agent": "prime-rl", "model": None, "task": row.get("env_name"),
            "reward": _one_value(row.get("rewards"), mask) if mask is not None else None, "result": None,
            "turns": len(trained_spans(mask)) if mask is not None else None,
            "length": len(ids) if isinstance(ids, list) else None}


FORMAT = RowFormat("prime-rl-tokens", "prime-rl trainer token export (token_exports/step_N/rank_R.jsonl)", detect,
                   read_row, summarize, light=("env_name", "step", "rank"),
                   light_fields=frozenset({"agent", "model", "task"}),
                   fields=("token_ids", "loss_mask", "inference_logprobs", "trainer_logprobs", "importance_ratio"))
