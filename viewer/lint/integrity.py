"""Integrity rules on a rollout's per-token values that name the offending tokens (issue 40, part 2):
constant or zero-filled logprobs on trained tokens (RI014), reasoning / tool-call blocks masked unlike
their reply or cut by the mask (RI015), placeholder logprobs on masked positions (RI016), an incomplete
mark a side request caused (RI018). Each hit carries every offending token (``Hit.tokens``), so its link selects them in the token
view.

The thresholds are where a genuine reply stops explaining the values: a token the model is sure of
rounds to exactly 0.0 (float32 log-softmax with a top-logit lead of ~17 nats), and real vLLM replies
carry runs of such zeros (NeMo Gym's competitive-coding rollout: 8 in a row, 22% of 959 tokens), but
not a run of 32, nor 90% of a reply.
"""
from __future__ import annotations

import math
from array import array
from collections import Counter
from typing import Any, Iterator

from viewer.rollout import Rollout, Turn

from .rules import Hit, runs_text

__all__ = ["integrity_checks", "incomplete_marks", "RUN_MIN", "SHARE_MIN", "SHARE_N", "PLACEHOLDER_MAX",
           "MASKED_N", "BLOCKS"]

RUN_MIN = 32  # one value on this many consecutive trained tokens
SHARE_MIN, SHARE_N = 0.9, 32  # one value on this share of a turn's trained tokens, when it has this many
PLACEHOLDER_MAX = -1000.0  # no sampled token is this unlikely: vLLM's -9999 floor, a sentinel
MASKED_N = 8  # masked positions needed before one shared value counts as a placeholder
# (what, opening marker, closing marker): the blocks a chat template wraps reasoning and tool calls in
BLOCKS: tuple[tuple[str, str, str], ...] = (("reasoning", "<think>", "</think>"),
                                            ("tool-call", "<tool_call>", "</tool_call>"))


def _hit(t: Turn, rule: str, js: list[int], message: str) -> Hit:
    p = len(t.prompt_ids)
    toks = tuple(p + j for j in sorted(js))
    return Hit(rule, f"{message} ({runs_text(toks)})", turn=t.index, part="output", position=min(js), tok=toks[0],
               tokens=toks)


def _finite(lps: Any, js: Any) -> list[tuple[int, float]]:
    if isinstance(lps, array):  # packed logprobs: one C copy to a list, not a Python __getitem__ per index
        lps = lps.tolist()
    n = len(lps)
    return [(j, lps[j]) for j in js if j < n and type(lps[j]) is float and math.isfinite(lps[j])]


def _runs(vals: list[tuple[int, float]], least: int) -> list[list[int]]:
    """Runs of one value over consecutive positions, ``least`` long or longer."""
    out: list[list[int]] = []
    cur: list[int] = []
    prev: tuple[int, float] | None = None
    for j, v in vals:
        if prev is not None and j == prev[0] + 1 and v == prev[1]:
            cur.append(j)
        else:
            if len(cur) >= least:
                out.append(cur)
            cur = [j]
        prev = (j, v)
    if len(cur) >= least:
        out.append(cur)
    return out


def _value(v: float) -> str:
    return "exactly 0.0" if v == 0 else f"the one value {v!r}"


def _split(t: Turn) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    """A turn's finite logprobs on its trained and on its masked positions (its mask and packed logprobs
    copied once for the three rules that read them)."""
    mask = t.loss_mask
    lps = t.logprobs.tolist() if isinstance(t.logprobs, array) else t.logprobs
    return _finite(lps, [j for j, m in enumerate(mask) if m]), _finite(lps, [j for j, m in enumerate(mask) if not m])


def _constant(t: Turn, vals: list[tuple[int, float]]) -> Iterator[Hit]:
    """RI014 on one turn's trained values (``vals``: :func:`_split`)."""
    if not vals:
        return
    v, k = Counter(v for _, v in vals).most_common(1)[0]
    if len(vals) >= SHARE_N and k >= SHARE_MIN * len(vals):
        js = [j for j, x in vals if x == v]
        yield _hit(t, "RI014", js, f"turn {t.index}: {k} of {len(vals)} trained tokens have logprob {_value(v)}")
    else:
        for run in _runs(vals, RUN_MIN):
            lp = t.logprobs[run[0]]
            yield _hit(t, "RI014", run, f"turn {t.index}: {len(run)} trained tokens in a row have logprob "
                                        f"{_value(lp)}")


def _constant_over_turns(per_turn: list[tuple[Turn, list[tuple[int, float]]]]) -> Iterator[Hit]:
    """RI014 on the rollout's trained tokens together (``per_turn``: each turn's trained values), for replies
    too short to judge one by one (a tool-calling agent's turns are often under 32 tokens): one value on
    >= 90% of >= 32 of them. A hit per turn that holds the value, naming its tokens there."""
    counts = Counter(v for _, vals in per_turn for _, v in vals)
    total = sum(counts.values())
    if total < SHARE_N:
        return
    v, k = counts.most_common(1)[0]
    if k < SHARE_MIN * total:
        return
    for t, vals in per_turn:
        js = [j for j, x in vals if x == v]
        if js:
            yield _hit(t, "RI014", js, f"turn {t.index}: {len(js)} trained tokens at logprob {_value(v)}, with "
                                       f"{k} of the rollout's {total} trained tokens")


def _placeholders(t: Turn, vals: list[tuple[int, float]]) -> Iterator[Hit]:
    """RI016 on one turn's masked values (:func:`_split`)."""
    if not vals:
        return
    floor = [j for j, v in vals if v <= PLACEHOLDER_MAX]
    v, k = Counter(v for _, v in vals).most_common(1)[0]
    if len(vals) >= MASKED_N and k >= SHARE_MIN * len(vals):
        js = sorted(set(floor) | {j for j, x in vals if x == v})
        yield _hit(t, "RI016", js, f"turn {t.index}: {k} of {len(vals)} masked tokens carry logprob {_value(v)}")
    elif floor:
        yield _hit(t, "RI016", floor, f"turn {t.index}: {len(floor)} masked token(s) carry a logprob <= "
                                      f"{PLACEHOLDER_MAX:g} (first {t.logprobs[floor[0]]!r})")


def output_texts(t: Turn) -> list[str] | None:
    """Each output token's text from the bytes the server recorded (None without them, and RI015 does not
    check the turn: ids-only data such as prime-rl's token exports is split into turns at its mask by
    the reader, so a reply there never holds two mask values)."""
    ob = t.output_bytes
    n = len(t.output_ids)
    if ob is None or len(ob) < n:
        return None
    out = []
    for j in range(n):
        b = ob[j]
        if b is None:
            return None
        out.append(b.decode("utf-8", errors="replace"))
    return out


def blocks(texts: list[str]) -> list[tuple[str, list[int]]]:
    """The reasoning and tool-call blocks of one reply as (what, output positions), markers included; a
    block left open runs to the end, a ``</think>`` with no opening one starts at the reply's start (the
    chat template opened it in the prompt)."""
    starts, pos = [], 0
    for s in texts:
        starts.append(pos)
        pos += len(s)
    text = "".join(texts)
    out: list[tuple[str, list[int]]] = []
    for what, open_, close in BLOCKS:
        at = 0
        first_close, first_open = text.find(close), text.find(open_)
        if what == "reasoning" and first_close >= 0 and (first_open < 0 or first_close < first_open):
            spans = [(0, first_close + len(close))]
            at = spans[0][1]
        else:
            spans = []
        while True:
            a = text.find(open_, at)
            if a < 0:
                break
            b = text.find(close, a + len(open_))
            end = len(text) if b < 0 else b + len(close)
            spans.append((a, end))
            at = end
        for a, b in spans:
            js = [j for j, s0 in enumerate(starts) if s0 < b and s0 + len(texts[j]) > a]
            if js:
                out.append((what, js))
    return out


def _block_mask(t: Turn) -> Iterator[Hit]:
    """A block left as context whole in a reply the mask trains everywhere else, or a block whose tokens
    hold both mask values: the mask was cut through it (text spans re-found on a re-render, an off-by-one).
    There the minority side is named: the trained tokens of a block otherwise left as context, or the
    context tokens of a block otherwise trained (a tie names the context ones)."""
    mask = t.loss_mask
    if len(set(mask)) < 2:  # one mask value for the whole reply: nothing can be cut
        return
    texts = output_texts(t)
    if texts is None:
        return
    found = blocks(texts)
    inside = {j for _, js in found for j in js}
    for what, js in found:
        on = [j for j in js if mask[j]]
        near = [j for j in (js[0] - 1, js[-1] + 1) if 0 <= j < len(mask) and j not in inside]
        if not on and any(mask[j] for j in near):
            # a whole block masked beside trained tokens of its reply: a mask built from the message's content
            # text, which the server's parsers stripped of reasoning and tool calls
            yield _hit(t, "RI015", js, f"turn {t.index}: the {len(js)} tokens of a {what} block left as context "
                                       f"beside trained tokens of its reply")
        if not on or len(on) == len(js):
            continue
        if 2 * len(on) < len(js):
            yield _hit(t, "RI015", on, f"turn {t.index}: {len(on)} of the {len(js)} tokens of a {what} block "
                                       f"trained where the mask leaves the rest of the block as context")
        else:
            off = [j for j in js if not mask[j]]
            yield _hit(t, "RI015", off, f"turn {t.index}: {len(off)} of the {len(js)} tokens of a {what} block "
                                        f"left as context where the mask trains the rest of the block")


def incomplete_marks(summary: dict[str, Any] | None) -> list[str]:
    """What in a capture's summary.json marks it incomplete: ``complete`` false, a ``status`` other than
    ok, upstream errors counted."""
    if not isinstance(summary, dict):
        return []
    marks = []
    if summary.get("complete") is False:
        marks.append("complete false")
    if isinstance(summary.get("status"), str) and summary["status"] != "ok":
        marks.append(f"status {summary['status']}")
    if type(summary.get("upstream_errors")) is int and summary["upstream_errors"] > 0:
        marks.append(f"upstream_errors {summary['upstream_errors']}")
    return marks


def _side_incomplete(ro: Rollout) -> Iterator[Hit]:
    """RI018: the capture is marked incomplete, every call that failed (an error, or cut at the output
    limit) is a bookkeeping one, and the agent's own calls all finished: a filter on the mark drops an
    episode the trainer could use, for a call it never trains."""
    marks = incomplete_marks(ro.summary)
    failed = [t for t in ro.turns if t.error is not None or t.finish_reason == "length"]
    agent = ro.agent_turns
    if not marks or not failed or not agent or any(t.kind == "agent" for t in failed):
        return
    for t in failed:
        what = t.origin.kind_label or t.role
        why = t.error if t.error is not None else "finish_reason length"
        n, p = len(t.output_ids), len(t.prompt_ids)
        msg = (f"summary.json marks the capture incomplete ({', '.join(marks)}) and the only failed call(s) are "
               f"side requests: turn {t.index} ({what}): {why}; the {len(agent)} agent turns finished")
        if n:  # its tokens: the reply it did write, so a reader sees what was cut
            toks = tuple(range(p, p + n))
            yield Hit("RI018", f"{msg} ({runs_text(toks)})", turn=t.index, part="output", position=0, tok=p,
                      tokens=toks)
        else:
            yield Hit("RI018", msg, turn=t.index)


def integrity_checks(ro: Rollout) -> Iterator[Hit]:
    """RI014, RI015 and RI016 over every turn, each hit naming its tokens; RI018 on the rollout."""
    split = [(t, _split(t)) for t in ro.turns]
    constant = [h for t, (trained, _) in split if t.output_ids for h in _constant(t, trained)]
    yield from constant or _constant_over_turns([(t, trained) for t, (trained, _) in split])
    for t in ro.turns:
        if t.output_ids:
            yield from _block_mask(t)
    for t, (_, masked) in split:
        if t.output_ids:
            yield from _placeholders(t, masked)
    yield from _side_incomplete(ro)
