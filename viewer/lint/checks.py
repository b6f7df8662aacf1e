"""The rules that read a :class:`~viewer.rollout.Rollout` only (any source: a capture, a trace file, a
dataset row). Each check yields :class:`~viewer.lint.rules.Hit` values; positions are where the
problem starts (the first token), so a link opens the token view there.
"""
from __future__ import annotations

import math
from array import array
from dataclasses import replace
from typing import Any, Iterator

from viewer.rollout import Rollout, Turn
from viewer.sources.lazynumpy import np
from viewer.turns import SUMMARISER_PREFIX, TITLE_PREFIX, system_prompt

from .rules import Hit

__all__ = ["rollout_checks", "logprobs_mode", "ids_out_of_vocab"]

RAW, PROCESSED = "raw_logprobs", "processed_logprobs"


def _out(t: Turn, rule: str, j: int, message: str) -> Hit:
    return Hit(rule, message, turn=t.index, part="output", position=j, tok=len(t.prompt_ids) + j)


def _num(v: Any) -> float | None:
    return float(v) if type(v) in (int, float) else None


def logprobs_mode(summary: dict[str, Any] | None) -> str | None:
    """The server's --logprobs-mode as the capture's summary.json recorded it (server, else spec), or None."""
    if not isinstance(summary, dict):
        return None
    for part in ("server", "spec"):
        d = summary.get(part)
        v = d.get("logprobs_mode") if isinstance(d, dict) else None
        if isinstance(v, str) and v.strip():
            return v.strip()
    return None


def _no_prompt_ids(ro: Rollout) -> Iterator[Hit]:
    agent = [t for t in ro.agent_turns if t.error is None and (t.output_ids or t.prompt_ids or t.messages)]
    lacking = [t for t in agent if t.prompt_source != "engine"]
    if lacking:
        t = lacking[0]
        yield Hit("RI001", f"{len(lacking)} of {len(agent)} agent turns have no engine prompt ids (first: turn "
                           f"{t.index}, prompt ids {t.prompt_source})", turn=t.index, part="prompt", position=0, tok=0)


def _sampling(ro: Rollout) -> Iterator[Hit]:
    mode = logprobs_mode(ro.summary)
    with_lp = [t for t in ro.agent_turns if any(v is not None for v in t.logprobs)]
    if not with_lp:
        return
    if mode is None:
        yield Hit("RI004", "no logprobs mode in summary.json (server.logprobs_mode)", turn=with_lp[0].index)
        return
    for t in with_lp:
        req = t.request
        temp, top_p, top_k = _num(req.get("temperature")), _num(req.get("top_p")), _num(req.get("top_k"))
        if mode == PROCESSED and ((top_p is not None and top_p < 1) or (top_k is not None and top_k > 0)):
            yield _out(t, "RI002", 0, f"turn {t.index}: {mode} with top_p {top_p}, top_k {top_k}")
        if mode == RAW and temp is not None and temp != 1:
            yield _out(t, "RI003", 0, f"turn {t.index}: {mode} with temperature {temp}")


def _missing_logprobs(ro: Rollout) -> Iterator[Hit]:
    for t in ro.agent_turns:
        mask = t.loss_mask
        n = len(t.output_ids)
        if not n or not any(mask):
            continue
        lps = t.logprobs
        if isinstance(lps, array) and len(lps) >= n:  # packed logprobs hold no gap (None): none missing
            continue
        gaps = [j for j in range(n) if mask[j] and (j >= len(lps) or lps[j] is None)]
        if gaps:
            yield _out(t, "RI005", gaps[0], f"turn {t.index}: {len(gaps)} of {sum(mask)} trained tokens have no "
                                            f"logprob (first at output position {gaps[0]})")


def _bookkeeping(ro: Rollout) -> Iterator[Hit]:
    for t in ro.turns:
        sp = (system_prompt(t.messages) or "").lstrip()
        what = "title generator" if sp.startswith(TITLE_PREFIX) else \
            "context summariser" if sp.startswith(SUMMARISER_PREFIX) else None
        if what and (t.kind == "agent" or t.trained_tokens):
            how = "an agent turn" if t.kind == "agent" else "bookkeeping but trained"
            yield Hit("RI006", f"turn {t.index} is a {what} call (its system prompt) read as {how}"
                               f"{f' (record kind {t.origin.kind_label!r})' if t.origin.kind_label else ''}",
                      turn=t.index, part="output", position=0, tok=len(t.prompt_ids))


def _truncated(ro: Rollout) -> Iterator[Hit]:
    for t in ro.turns:
        if t.finish_reason == "length" and t.trained_tokens:
            j = max(len(t.output_ids) - 1, 0)
            yield _out(t, "RI010", j, f"turn {t.index}: finish_reason length after {len(t.output_ids)} tokens, "
                                      f"{t.trained_tokens} of them trained")


def non_finite(values: Any) -> list[int]:
    return [j for j, v in enumerate(values) if type(v) is float and not math.isfinite(v)]


def _lengths(t: Turn) -> list[str]:
    n = len(t.output_ids)
    bad = []
    if n and t.logprobs and len(t.logprobs) != n:
        bad.append(f"{n} output ids but {len(t.logprobs)} logprobs")
    if t.mask and len(t.mask) != n:
        bad.append(f"{n} output ids but a mask of {len(t.mask)}")
    return bad


def _values(ro: Rollout, skip: set[int]) -> Iterator[Hit]:
    """RI011 / RI013 on the values the reader kept (turns not checked on their raw record: ``skip``)."""
    for t in ro.turns:
        if t.index in skip:
            continue
        bad = non_finite(t.logprobs)
        if bad:
            p = len(t.prompt_ids)
            yield replace(_out(t, "RI011", bad[0], f"turn {t.index}: {len(bad)} non-finite logprob(s), first "
                                                   f"{t.logprobs[bad[0]]} at output position {bad[0]}"),
                          tokens=tuple(p + j for j in bad))
        for text in _lengths(t):
            yield _out(t, "RI013", 0, f"turn {t.index}: {text}")


def _in_range(ids: Any, vocab: int) -> bool:
    """Every id in ``[0, vocab)``. Packed ids (machine arrays) are checked by numpy over their buffer:
    ``min`` / ``max`` over an array build an int object per id, and every turn's prompt repeats the
    conversation so far, so this check was a third of linting a capture (the search index lints each one)."""
    if isinstance(ids, array) and ids.typecode in "ilq":
        if vocab <= 1 << (8 * ids.itemsize - 1):  # read unsigned, a negative id is past any vocab: one max checks both ends
            return bool(np.frombuffer(ids, dtype=f"u{ids.itemsize}").max() < vocab)
        a = np.frombuffer(ids, dtype=f"i{ids.itemsize}")
        return bool(a.min() >= 0 and a.max() < vocab)
    return min(ids) >= 0 and max(ids) < vocab


def ids_out_of_vocab(ro: Rollout, vocab: int) -> Iterator[Hit]:
    for t in ro.turns:
        for part, ids in (("prompt", t.prompt_ids), ("output", t.output_ids)):
            if not len(ids) or _in_range(ids, vocab):  # C-speed scan first: most turns pass
                continue
            bad = [j for j, i in enumerate(ids) if i < 0 or i >= vocab]
            j = bad[0]
            tok = j if part == "prompt" else len(t.prompt_ids) + j
            yield Hit("RI012", f"turn {t.index}: {len(bad)} {part} id(s) outside the vocabulary of {vocab:,} "
                               f"(first: {ids[j]} at {part} position {j})", turn=t.index, part=part,  # type: ignore[arg-type]
                      position=j, tok=tok)


def rollout_checks(ro: Rollout, raw_checked: set[int] = frozenset()) -> Iterator[Hit]:  # type: ignore[assignment]
    """Every rollout-only rule; ``raw_checked``: turn indexes whose raw record was checked for
    RI011 / RI013 already (the reader cleans NaN and cuts lengths, so the record is the truth)."""
    for check in (_no_prompt_ids, _sampling, _missing_logprobs, _bookkeeping, _truncated):
        yield from check(ro)
    yield from _values(ro, set(raw_checked))
