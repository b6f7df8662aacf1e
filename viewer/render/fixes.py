"""Correction methods per token for the token view: the ``fix`` block of a rescore's Δ arrays.

With trainer logprobs (a rescore, or a file that recorded them), the token view gets one colour mode per
correction method (:data:`FIX_MODES`: TRL, verl, prime-rl's IcePop-style and DPPO masks, and ``disagree``),
colouring each trained token by what the method does to it (kept / clipped / masked), as
:mod:`viewer.rescore.corrections` computes it. The block carries the whole trainer row(s) of the turn
(sampler and trainer logprob of every trained token, as the float32 values the methods compute with), so
``viewer/ui/assets/fix_view.js`` recomputes every method in the browser when a threshold slider moves:
sequence-level tests (verl's sequence IS, IcePop's geometric mask) need the row, not just the turn's
tokens. ``st`` holds this module's verdicts at the block's parameters, which the view paints first.

The block's format (docs/ARCHITECTURE.md, "The token view's payload"):
``{"s": [...], "t": [...], "at": [...], "p": {mode: params}, "st": {mode: "..."}}``: ``s`` / ``t`` the row's
trained tokens' logprobs (numbers, or the strings ``NaN`` / ``Infinity`` / ``-Infinity``), ``at`` each one's
position in this turn's view (−1: another turn of the row), ``st`` one character per view position
(``.`` not a trained token of the row, else the state code 0 kept / 1 clipped / 2 masked).
"""
from __future__ import annotations

import json
import math
import weakref
from typing import Any, Mapping

import numpy as np

__all__ = ["FIX_MODES", "VIEW_METHODS", "VIEW_PARAMS", "turn_fixes", "fix_rows"]

# the token view's mode names → viewer.rescore.corrections' method names
VIEW_METHODS = {"trl": "trl", "verl": "verl", "icepop": "prime_rl_icepop", "dppo": "prime_rl_dppo"}
FIX_MODES = (*VIEW_METHODS, "disagree")


def _defaults() -> dict[str, dict[str, Any]]:
    from viewer.rescore.corrections import DEFAULTS

    out = {m: dict(DEFAULTS[name]) for m, name in VIEW_METHODS.items()}
    # a rescore has no advantages: DPPO's test depends on their sign, so the view asks for one (+ first)
    out["dppo"]["advantage"] = 1.0
    return out


VIEW_PARAMS: dict[str, dict[str, Any]] = _defaults()


def _num(v: float) -> float | str:
    """A float32 value as JSON: its shortest decimal (reads back to the same float32 with Math.fround)."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return float(str(np.float32(v)))


def fix_rows(result: Any, turn: int) -> tuple[list[float], list[float], list[tuple[int, int]]] | None:
    """The trainer row holding ``turn``'s trained tokens: its sampler and trainer logprobs (row order)
    and each token's (turn, output index); None when the turn has no scored token."""
    from viewer.rescore.importance import scored_rows

    td = result.turn(turn) if result is not None else None
    if td is None or not td.positions:
        return None
    row = next((toks for r, toks in scored_rows(result) if r == td.row), None)
    if not row:
        return None
    out_index: dict[tuple[int, int], int] = {}
    for t in result.turns:
        if t.row == td.row:
            out_index.update({(t.turn, p): k for k, p in zip(t.output_index, t.positions)})
    s = [math.nan if x[3] is None else float(x[3]) for x in row]
    t = [math.nan if x[4] is None else float(x[4]) for x in row]
    return s, t, [(x[1], out_index.get((x[1], x[0]), -1)) for x in row]


# id(result) → (a weak reference to it, {(row, parameters): what every turn of that row shares}): a rollout's
# turns usually share one trainer row (a recorded file: always), so selecting turn after turn computes the
# methods and writes the row's values once (50k tokens: ~0.25 s each time otherwise)
_CACHE: dict[int, tuple[Any, dict]] = {}
_PER_RESULT = 8  # parameter sets kept per result (the view's own defaults, and any a caller asks for)


def _shared(result: Any, got: tuple, row: int, p: dict) -> dict[str, Any]:
    from viewer.rescore import corrections as C

    key = (row, json.dumps(p, sort_keys=True, default=str))
    ref, rows = _CACHE.get(id(result), (None, None))
    if ref is None or ref() is not result:
        rows = {}
        try:
            ref = weakref.ref(result, lambda _, k=id(result): _CACHE.pop(k, None))
        except TypeError:  # an object without weak references: not cached
            ref = None
        if ref is not None:
            _CACHE[id(result)] = (ref, rows)
    if key in rows:
        return rows[key]
    s, t, where = got
    batch = [(s, t, [1] * len(s))]
    states: dict[str, list[int]] = {}
    err: dict[str, str] = {}
    for mode, method in VIEW_METHODS.items():
        try:
            states[mode] = C.correct(batch, method, **p[mode]).state[0].tolist()
        except ValueError as e:
            err[mode] = str(e)
    out = {"s": [_num(x) for x in np.asarray(s, np.float32).tolist()],
           "t": [_num(x) for x in np.asarray(t, np.float32).tolist()], "where": where, "states": states, "err": err}
    if len(rows) >= _PER_RESULT:
        rows.pop(next(iter(rows)))
    rows[key] = out
    return out


def turn_fixes(result: Any, turn: int, prompt_len: int, n: int,
               params: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any] | None:
    """The ``fix`` block for turn ``turn`` (``n`` view positions, output from ``prompt_len``); ``params``
    per view mode override :data:`VIEW_PARAMS`. None without a scored row; a method whose parameters are
    refused (its project's own check) is left out of ``st`` and named in ``err``."""
    got = fix_rows(result, turn)
    if got is None:
        return None
    p = {m: {**VIEW_PARAMS[m], **dict((params or {}).get(m, {}))} for m in VIEW_METHODS}
    row = _shared(result, got, result.turn(turn).row, p)
    at = [prompt_len + k if tt == turn and k >= 0 and 0 <= prompt_len + k < n else -1 for tt, k in row["where"]]
    st: dict[str, str] = {}
    for mode, codes in row["states"].items():
        chars = ["."] * n
        for i, code in zip(at, codes):
            if i >= 0 and code >= 0:
                chars[i] = "012"[code]
        st[mode] = "".join(chars)
    out: dict[str, Any] = {"s": row["s"], "t": row["t"], "at": at, "p": p, "st": st}
    if row["err"]:
        out["err"] = dict(row["err"])
    return out
