"""What one screen shows, as plain values: the turn table and a turn's token view.

Glue between a loaded Rollout, a tokenizer choice and the renderers, kept free of gradio
so the CLI, tests and benchmarks can build exactly what the app shows.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from .rollout import Rollout, Turn
from .tokens import TurnTokens, turn_tokens
from .config import LOW_LOGPROB

__all__ = ["TURN_COLUMNS", "turn_table", "with_prompt_ids", "TurnView", "turn_view"]

TURN_COLUMNS = ["turn", "call", "kind", "trained", "prompt", "output", "tools", "finish", "mean lp", "min lp"]


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def turn_table(r: Rollout, *, trained_only: bool = False, tool: str | None = None,
               low_only: bool = False, low: float = LOW_LOGPROB) -> pd.DataFrame:
    """One row per call (bookkeeping calls included and labelled), filtered as asked."""
    rows: list[dict[str, Any]] = []
    for t in r.turns:
        mean, mn = t.logprob_stats()
        if trained_only and not t.trained:
            continue
        if tool and tool not in t.tool_names:
            continue
        if low_only and (mn is None or mn >= low):
            continue
        kind = t.kind if t.kind == "agent" else f"{t.kind}: {t.role}"
        if t.error:
            kind += " (error)"
        rows.append({"turn": t.index, "call": t.call, "kind": kind, "trained": "yes" if t.trained else "no",
                     "prompt": len(t.prompt_ids), "output": len(t.output_ids),
                     "tools": ", ".join(t.tool_names), "finish": t.finish_reason or "",
                     "mean lp": _r(mean), "min lp": _r(mn)})
    return pd.DataFrame(rows, columns=TURN_COLUMNS)


def with_prompt_ids(turn: Turn, tokenizer: Any) -> Turn:
    """The turn, with prompt ids re-rendered locally when none were recorded.

    Labelled ``rerender``: a reconstruction through the chat template, not what the
    engine saw. Returns the turn unchanged when ids exist or rendering is impossible.
    """
    if turn.prompt_ids or tokenizer is None or not turn.messages:
        return turn
    from .tokenizer import render_prompt_ids

    kwargs = (turn.request or {}).get("chat_template_kwargs") or None
    try:
        ids = render_prompt_ids(tokenizer, turn.messages, tools=turn.tools or None, chat_template_kwargs=kwargs)
    except Exception as exc:  # a template that fails on this data is reported, not fatal
        return dataclasses.replace(turn, origin=turn.origin.replace(rerender_error=f"{type(exc).__name__}: {exc}"))
    return dataclasses.replace(turn, prompt_ids=list(ids), prompt_source="rerender")


@dataclass
class TurnView:
    turn: Turn
    tokens: TurnTokens
    note: str


def turn_view(r: Rollout, index: int, tokenizer: Any, table: Any) -> TurnView:
    """Everything the token view and plots need for one turn."""
    turn = with_prompt_ids(r.turn(index), tokenizer)
    tt = turn_tokens(turn, table)
    notes = []
    if turn.prompt_source == "rerender":
        notes.append("Prompt ids were re-rendered locally through the chat template (no engine ids recorded).")
    if turn.origin.rerender_error:
        notes.append(f"Chat template failed: {turn.origin.rerender_error}")
    if tt.out_of_vocab:
        notes.append(f"{len(tt.out_of_vocab)} id(s) are outside the tokenizer's vocabulary (hatched).")
    if turn.logprobs and any(v is None or not math.isfinite(v) for v in turn.logprobs):
        notes.append("Some positions have no logprob recorded.")
    return TurnView(turn, tt, " ".join(notes))
