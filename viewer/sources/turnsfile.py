"""A ``turns.json`` file (per-turn ids + mask) applied to a trace's turns, or read on its own.

Entries are matched to trace calls by an explicit ``call``/``turn`` field, else output-id
equality, else order among agent calls (docs/FORMATS.md §2). The entries are read as a stream
(:mod:`viewer.sources.jsonstream`), one at a time.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Literal

from viewer.origin import MatchedBy
from viewer.packed import TopKColumn
from viewer.rollout import Turn, TurnOrigin
from viewer.sources.columns import check_ids, check_logprobs
from viewer.sources.proxyrecord import Ctx, align, first_diff, note, set_mask

__all__ = ["merge_turns_file"]


@dataclass
class _Entry:
    """One turns.json entry, validated."""

    index: int
    call: int | None
    key: Literal["call", "turn"] | None
    prompt_ids: list[int] | None
    prompt_source: str
    output_ids: list[int] | None
    logprobs: list[float | None] | None
    mask: Any
    trained: bool | None
    raw: dict[str, Any]


def _parse_entry(rec: Any, j: int, rf: Any, ctx: Ctx) -> _Entry | None:
    if not isinstance(rec, dict):
        ctx.add(rf.label, rf.where(j), f"expected a JSON object, got {type(rec).__name__}; entry skipped")
        return None
    call, key = None, None
    for k in ("call", "turn"):
        if type(rec.get(k)) is int:
            call, key = rec[k], k
            break
    pchk = check_ids(rec.get("prompt_ids"))
    note(ctx, rf, j, ".prompt_ids", pchk)
    ochk = check_ids(rec.get("output_ids"))
    note(ctx, rf, j, ".output_ids", ochk)
    lval, lpath = rec.get("per_token_logps"), ".per_token_logps"
    if lval is None and isinstance(rec.get("logprobs"), list):
        lval, lpath = rec.get("logprobs"), ".logprobs"
    lchk = check_logprobs(lval)
    note(ctx, rf, j, lpath, lchk)
    src = rec.get("prompt_ids_source")
    psrc = src if src in ("engine", "rerender", "stored") else "stored"
    mask = rec.get("mask", rec.get("loss_mask"))
    trained = rec.get("trained") if type(rec.get("trained")) is bool else None
    return _Entry(j, call, key, pchk.value, psrc, ochk.value, lchk.value, mask, trained, rec)


def merge_turns_file(turns: list[Turn], records: Iterable[Any], rf: Any, ctx: Ctx, has_trace: bool) -> list[Turn]:
    """Apply turns.json entries to the trace's turns (or build turns from them alone).

    Matching: an explicit ``call``/``turn`` field, else output-id equality, else order
    among agent calls. Unmatched entries become extra agent turns (nothing is dropped);
    agent calls the file does not list are untrained (the upstream filter dropped them).
    """
    by_call = {t.call: t for t in turns}
    agents = [t for t in turns if t.kind == "agent"]
    by_ids: dict[tuple[int, ...], Turn] | None = None
    used: set[int] = set()
    extra: list[Turn] = []
    for j, rec in enumerate(records):
        e = _parse_entry(rec, j, rf, ctx)
        if e is None:
            continue
        target: Turn | None = None
        by: MatchedBy | None = None
        if has_trace:
            if e.call is not None:
                target, by = by_call.get(e.call), e.key
                if target is None:
                    ctx.add(rf.label, rf.where(j), f"{e.key} {e.call} has no trace record; kept as its own turn")
            else:
                if by_ids is None:
                    by_ids = {tuple(t.output_ids): t for t in reversed(turns) if t.output_ids}
                if e.output_ids:
                    target, by = by_ids.get(tuple(e.output_ids)), "output ids"
                if target is None and j < len(agents):
                    target, by = agents[j], "order"
        how = f"{by} {e.call}" if by in ("call", "turn") else (by or "")
        if target is not None and id(target) in used:
            ctx.add(rf.label, rf.where(j), f"matches trace call {target.call} ({how}) which an earlier entry "
                                           "already matched; kept as its own turn")
            target = None
        if target is None:
            call = e.call if e.call is not None else j + 1
            target = Turn(index=0, call=call, origin=TurnOrigin(kind_source="turns_file", file=rf.label))
            extra.append(target)
        else:
            used.add(id(target))
            target.origin = target.origin.replace(matched_by=by)
        _apply_entry(target, e, rf, ctx, how)
    for t in turns:
        if id(t) not in used and t.kind == "agent" and not t.origin.mask_source:
            t.trained, t.mask = False, [0] * len(t.output_ids)
            t.origin = t.origin.replace(mask_source="absent_from_turns_file")
    return turns + extra


def _apply_entry(t: Turn, e: _Entry, rf: Any, ctx: Ctx, how: str) -> None:
    t.origin = t.origin.replace(turns_entry=e.index)
    if e.output_ids is not None:
        if t.output_ids and e.output_ids != t.output_ids:
            ctx.add(rf.label, rf.where(e.index), f"output ids disagree with trace call {t.call} (matched by {how}): "
                                     f"{len(e.output_ids)} vs {len(t.output_ids)} ids "
                                     f"{first_diff(e.output_ids, t.output_ids)}; using {rf.label}'s")
            t.top_logprobs = t.output_bytes = None  # they describe the trace's tokens
            t.logprobs = []
        if not t.output_ids or e.output_ids != t.output_ids:
            t.output_ids, t.output_source = e.output_ids, "stored"
    if e.prompt_ids is not None:
        t.prompt_ids, t.prompt_source = e.prompt_ids, e.prompt_source  # type: ignore[assignment]
    if e.logprobs is not None:
        t.logprobs = e.logprobs
    elif t.logprobs and len(t.logprobs) != len(t.output_ids):
        t.logprobs = []
    if e.mask is not None:
        set_mask(t, e.mask, rf, e.index, ".mask", ctx)
        if t.origin.mask_source == "record":
            t.origin = t.origin.replace(mask_source="turns_file")
    if e.trained is not None:
        t.trained = e.trained
        if not t.origin.mask_source:  # trained flag without a mask: mask follows it
            t.mask = [1 if e.trained else 0] * len(t.output_ids)
            t.origin = t.origin.replace(mask_source="turns_file")
    align(t, None, f"call {t.call}", rf, e.index, ctx)  # (align also trims the mask to the kept ids)
    if isinstance(t.top_logprobs, TopKColumn) and len(t.top_logprobs) != len(t.output_ids):
        t.top_logprobs = t.output_bytes = None
