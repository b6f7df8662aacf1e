"""What the search index holds: its two Parquet tables' columns, and one rollout's rows of them.

``rollouts``: one row per rollout (where it opens, who made it, its reward and group, its size, the drift
causes and lint rules it has). ``turns``: one row per agent turn (tools, finish, causes, logprob statistics,
the turn's new text, and its output tokens: ids and token texts as separator-joined strings, so that a token
sequence is one substring test in DuckDB, and logprobs as a list for the snippet). Prompt tokens are not kept:
a prompt repeats the history, the output is what was sampled. Bookkeeping calls (a title generator) are not
indexed: the drift scan checks agent turns only, and the search finds what the scan saw.
"""
from __future__ import annotations

import hashlib
import math
from array import array
from typing import Any

import numpy as np
import pyarrow as pa

from viewer.groups import GROUP_KEYS  # the fields that name a GRPO group: the Groups tab's own list
from viewer.packed import BytesColumn
from viewer.rollout import Rollout, Turn

__all__ = ["ROLLOUTS", "TURNS", "SEP", "rollout_key", "rollout_row", "turn_rows", "message_text", "token_pieces",
           "PLACEHOLDER_AT_MOST", "PLACEHOLDER_REPEATS"]

SEP = "\x1f"  # between token texts / ids in the joined columns (the ASCII unit separator: never in a token text
#              we keep: one inside a token's text is replaced by U+FFFD)

# A placeholder logprob: one exact value at or below this, repeated at least this often in a turn. A sampler's
# real logprobs of distinct low-probability tokens (below -1) practically never coincide to the last bit.
PLACEHOLDER_AT_MOST = -1.0
PLACEHOLDER_REPEATS = 3

_STR = pa.string()
_STRS = pa.list_(pa.string())
ROLLOUTS = pa.schema([
    ("rid", pa.int64()), ("spec", _STR), ("stamp", _STR), ("source", _STR), ("row", pa.int64()),
    ("label", _STR), ("format", _STR), ("model", _STR), ("agent", _STR), ("task", _STR), ("reward", pa.float64()),
    ("grp", _STR), ("step", pa.int64()), ("turns", pa.int64()), ("tokens", pa.int64()), ("trained", pa.int64()),
    ("drifted", pa.int64()), ("lost", pa.int64()), ("causes", _STRS), ("lint", _STRS), ("tools", _STRS),
    ("tokenizer", _STR), ("min_lp", pa.float64()), ("max_delta", pa.float64()), ("max_ratio", pa.float64()),
])
TURNS = pa.schema([
    ("rid", pa.int64()), ("turn", pa.int64()), ("call", pa.int64()), ("n_prompt", pa.int64()), ("tools", _STRS), ("finish", _STR),
    ("causes", _STRS), ("drifted", pa.bool_()), ("lint", _STRS), ("n_tok", pa.int64()), ("trained", pa.int64()),
    ("min_lp", pa.float64()), ("min_at", pa.int64()), ("max_lp", pa.float64()), ("max_at", pa.int64()),
    ("mean_lp", pa.float64()), ("nan_lps", pa.int64()), ("zero_lps", pa.int64()), ("placeholder_lps", pa.int64()),
    ("max_delta", pa.float64()), ("max_delta_at", pa.int64()), ("max_ratio", pa.float64()),
    ("max_ratio_at", pa.int64()), ("min_ratio", pa.float64()), ("min_ratio_at", pa.int64()),
    ("text", _STR), ("ids", _STR), ("pieces", _STR), ("lps", pa.list_(pa.float32())), ("mask", _STR),
])

_STEP_KEYS = ("step", "global_step", "training_step", "iteration")


def rollout_key(spec: str, row: int | None, n: int) -> int:
    """A rollout's id in the index: stable across builds (so rows copied from an older index keep it),
    63 bits of a digest of where it came from and its place among the spec's rollouts."""
    d = hashlib.blake2b(f"{spec}\x00{row}\x00{n}".encode(), digest_size=8).digest()
    return int.from_bytes(d, "big") >> 1


def message_text(content: Any) -> str:
    """A message's ``content`` as text: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text") or p.get("content") or "") if isinstance(p, dict) else str(p)
                         for p in content)
    return "" if content is None else str(content)


def _calls_text(calls: Any) -> str:
    out = []
    for c in calls or []:
        if isinstance(c, dict):
            f = c.get("function") or {}
            args = f.get("arguments")
            out.append(f"{f.get('name', '')} {args if isinstance(args, str) else str(args or '')}")
    return "\n".join(out)


def turn_text(t: Turn, seen: int) -> str:
    """The text new in this turn: the request's messages from ``seen`` on that the model did not write (the
    user's, the tools' outputs; the replies come back as history; the system prompt, the same in every rollout
    of a run and often the longest text, is left out), then the reply and its tool calls."""
    parts = [message_text(m.get("content")) for m in t.messages[seen:]
             if isinstance(m, dict) and m.get("role") not in ("assistant", "system")]
    parts.append(message_text(t.response.get("content")))
    parts.append(_calls_text(t.response.get("tool_calls")))
    return "\n".join(p for p in parts if p)


def token_pieces(t: Turn, table: Any = None) -> list[str]:
    """Each output token's text: the bytes the server reported, else the tokenizer's table, else ""."""
    raw = t.output_bytes
    if raw is None or len(raw) != len(t.output_ids):
        raw = table.bytes_list(list(t.output_ids)) if table is not None else [None] * len(t.output_ids)
    elif isinstance(raw, BytesColumn):
        raw = raw.to_list()
    return [b.decode("utf-8", "replace").replace(SEP, "\ufffd") if b else "" for b in raw]


def _finite(v: Any) -> bool:
    return v is not None and not math.isnan(v) and not math.isinf(v)


def _lp_stats(lps: list[Any]) -> dict[str, Any]:
    """Lowest, highest and mean finite logprob (first position of each extreme), and the counts the ``nan>``,
    ``zero>`` and ``placeholder>`` conditions read, in numpy passes (a Python pass per token was most of an index
    build's own work)."""
    nones = lps.count(None)  # (a gap: neither NaN nor finite)
    a = np.array([math.nan if v is None else v for v in lps] if nones else lps, dtype=np.float64)
    nan = int(np.count_nonzero(np.isnan(a))) - nones
    fin = np.isfinite(a)
    if not fin.any():
        return {"min_lp": None, "min_at": None, "max_lp": None, "max_at": None, "mean_lp": None,
                "nan_lps": nan, "zero_lps": 0, "placeholder_lps": 0}
    at = np.flatnonzero(fin)
    vals = a[at]
    lo, hi = int(vals.argmin()), int(vals.argmax())  # (the first position of the extreme, as min() gives)
    _, counts = np.unique(vals[vals <= PLACEHOLDER_AT_MOST], return_counts=True)
    return {"min_lp": float(vals[lo]), "min_at": int(at[lo]), "max_lp": float(vals[hi]), "max_at": int(at[hi]),
            "mean_lp": sum(vals.tolist()) / len(vals),  # (summed in order, as before: not numpy's pairwise sum)
            "nan_lps": nan, "zero_lps": int(np.count_nonzero(vals == 0.0)),
            "placeholder_lps": int(counts[counts >= PLACEHOLDER_REPEATS].sum())}


def _trainer_stats(lps: list[Any], tlps: list[Any] | None) -> dict[str, Any]:
    """|sampler − trainer| and exp(trainer − sampler) per token, where the trainer's logprobs were recorded."""
    none = {"max_delta": None, "max_delta_at": None, "max_ratio": None, "max_ratio_at": None, "min_ratio": None,
            "min_ratio_at": None}
    if not tlps:
        return none
    pairs = [(i, a, b) for i, (a, b) in enumerate(zip(lps, tlps)) if _finite(a) and _finite(b)]
    if not pairs:
        return none
    d = max(pairs, key=lambda x: abs(x[1] - x[2]))
    hi = max(pairs, key=lambda x: x[2] - x[1])
    lo = min(pairs, key=lambda x: x[2] - x[1])
    return {"max_delta": abs(d[1] - d[2]), "max_delta_at": d[0], "max_ratio": math.exp(min(hi[2] - hi[1], 700.0)),
            "max_ratio_at": hi[0], "min_ratio": math.exp(max(lo[2] - lo[1], -700.0)), "min_ratio_at": lo[0]}


def turn_rows(rid: int, r: Rollout, table: Any = None) -> list[dict[str, Any]]:
    """The ``turns`` rows of ``r`` (agent turns; causes, drift and lint are added from the scan later)."""
    rows = []
    seen = 0
    for t in r.agent_turns:
        lps = t.logprobs.tolist() if isinstance(t.logprobs, array) else [None if v is None else float(v)
                                                                          for v in t.logprobs]
        mask = t.loss_mask
        ids = list(t.output_ids)
        tl = list(t.trainer_logprobs) if t.trainer_logprobs is not None else None
        rows.append({"rid": rid, "turn": t.index, "call": t.call, "n_prompt": len(t.prompt_ids),
                     "tools": t.tool_names, "finish": t.finish_reason,
                     "causes": [], "drifted": False, "lint": [], "n_tok": len(ids), "trained": sum(mask),
                     **_lp_stats(lps), **_trainer_stats(lps, tl), "text": turn_text(t, seen),
                     "ids": SEP + SEP.join(map(str, ids)) + SEP if ids else "",
                     "pieces": SEP + SEP.join(token_pieces(t, table)) + SEP if ids else "",
                     "lps": lps, "mask": "".join("1" if m else "0" for m in mask)})
        seen = len(t.messages)
    return rows


def _first(dicts: tuple[Any, ...], keys: tuple[str, ...]) -> Any:
    for d in dicts:
        if isinstance(d, dict):
            for k in keys:
                if d.get(k) is not None and not isinstance(d.get(k), (dict, list)):
                    return d[k]
    return None


def _int(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _task(r: Rollout) -> str | None:
    t = r.task if isinstance(r.task, dict) else {}
    got = t.get("task_id") or t.get("id") or t.get("name")
    if got:
        return str(got)
    return (r.instruction or "").strip().split("\n", 1)[0][:120] or None


def rollout_row(rid: int, spec: str, stamp: str, r: Rollout, turns: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``rollouts`` row of ``r`` from its turn rows (drift, causes and lint filled in from the scan later)."""
    summary = r.summary if isinstance(r.summary, dict) else {}
    agent = r.origin.agent or (summary.get("agent") if isinstance(summary.get("agent"), str) else None) or \
        ((summary.get("agent") or {}).get("name") if isinstance(summary.get("agent"), dict) else None)
    row = r.origin.row
    label = r.source.rstrip("/").rsplit("/", 1)[-1]  # a dataset row's source names its row already
    mins = [x["min_lp"] for x in turns if x["min_lp"] is not None]
    deltas = [x["max_delta"] for x in turns if x["max_delta"] is not None]
    ratios = [x["max_ratio"] for x in turns if x["max_ratio"] is not None]
    reward = r.reward if r.reward is None or _finite(r.reward) else None
    return {"rid": rid, "spec": spec, "stamp": stamp, "source": r.source if row is None else spec, "row": row, "label": label,
            "format": r.format, "model": r.model, "agent": agent, "task": _task(r), "reward": reward,
            "grp": _as_str(_first((summary, r.task), GROUP_KEYS)), "step": _int(_first((summary, r.task), _STEP_KEYS)),
            "turns": len(turns), "tokens": sum(x["n_tok"] for x in turns), "trained": sum(x["trained"] for x in turns),
            "drifted": 0, "lost": 0, "causes": [], "lint": [],
            "tools": sorted({n for x in turns for n in x["tools"]}), "tokenizer": None,
            "min_lp": min(mins) if mins else None, "max_delta": max(deltas) if deltas else None,
            "max_ratio": max(ratios) if ratios else None}


def _as_str(v: Any) -> str | None:
    return None if v is None else str(v)
