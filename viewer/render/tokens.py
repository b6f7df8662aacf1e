"""Token-view payloads (JSON the token view paints): a turn, a trainer row, and the row list."""
from __future__ import annotations

import math
from typing import Any

from ..rollout import Turn
from ..tokens import TurnTokens
from .escape import safe_json
from ..config import LOW_LOGPROB

__all__ = ["MODES", "token_view_payload", "token_payload", "row_view_payload", "trainer_rows"]

MODES = ("mask", "logprob")  # colour modes every token view has; a rescore adds "delta"


def _lp(v: float | None) -> float | None:
    if v is None or not math.isfinite(v):
        return None
    return round(v, 4)


def token_view_payload(turn: Turn, tt: TurnTokens, *, low: float, context_tail: int,
                       focus: tuple[int, int] | None = None, mode: str = "mask",
                       page_tokens: int = 50000, note: str = "", link: str = "",
                       delta: dict[str, Any] | None = None) -> str:
    """JSON string the token view draws from (see viewer/ui/assets/token_view.js).

    ``link`` is the query string (without ``tok=``) that reopens this turn, or "" when the
    source cannot be linked (an upload).

    Arrays are parallel over prompt+output positions. ``k`` is the kind per position:
    0 context, 1 trained output, 2 untrained output. ``lp`` is null on the prompt.
    ``delta``: a rescore of this turn (:func:`viewer.render.delta.turn_delta`), which adds the
    ``delta`` colour mode.
    """
    p = tt.prompt_len
    n = len(tt.ids)
    mask = turn.loss_mask
    kinds = [0] * p + [(1 if k < len(mask) and mask[k] else 2) for k in range(n - p)]
    if turn.prompt_mask:
        for i, m in enumerate(turn.prompt_mask[:p]):
            if m:
                kinds[i] = 1
    top: dict[str, list] = {}
    if turn.top_logprobs:
        for k, alts in enumerate(turn.top_logprobs):
            if alts:
                top[str(p + k)] = [[a.id, _lp(a.logprob)] for a in alts]
    return token_payload(tt.ids, tt.texts, kinds, special=tt.special,
                         logprobs=[None] * p + list(turn.logprobs)[: n - p], prompt_len=p, turn=turn.index,
                         trained=turn.trained, kind=turn.kind, role=turn.role, prompt_source=turn.prompt_source,
                         output_source=turn.output_source, exact=tt.exact_text, oov=tt.out_of_vocab, low=low,
                         context_tail=context_tail, page_tokens=page_tokens, note=note, top=top,
                         alt=tt.alt_texts, focus=focus, mode=mode, link=link, delta=delta)


def token_payload(ids: list[int], texts: list[str], kinds: list[int], *, special: list[bool] | None = None,
                  logprobs: list[float | None] | None = None, prompt_len: int = 0, turn: int = 0,
                  trained: bool = True, kind: str = "agent", role: str = "main", prompt_source: str = "",
                  output_source: str = "", exact: bool = True, oov: list[int] | None = None, low: float = LOW_LOGPROB,
                  context_tail: int = 512, page_tokens: int = 50000, note: str = "",
                  top: dict[str, list] | None = None, alt: dict[int, str] | None = None,
                  focus: tuple[int, int] | None = None, mode: str = "mask", link: str = "",
                  delta: dict[str, Any] | None = None) -> str:
    """The token view's JSON (see viewer/ui/assets/token_view.js) from plain parallel arrays.

    ``kinds`` per position: 0 context, 1 trained (mask 1), 2 output without gradient.
    ``top`` maps a position (as a string) to ``[[id, logprob], ...]``; ``alt`` gives the
    texts of those alternative ids. ``modes`` in the payload lists the colour modes this view
    can show (``delta`` only with a rescore: ``delta`` holds per position the trainer's logprob
    ``tr`` and Δ = trainer − sampler ``dl``, and the turn's context verdict).
    """
    modes = list(MODES) + (["delta"] if delta else [])
    n = len(ids)
    lps = [_lp(v) for v in (logprobs or [])] + [None] * max(0, n - len(logprobs or []))
    payload = {
        "v": 1, "turn": turn, "trained": trained, "kind": kind, "role": role, "prompt_len": prompt_len,
        "prompt_source": prompt_source, "output_source": output_source, "exact": exact,
        "ids": list(ids), "t": list(texts), "sp": [i for i, s in enumerate(special or []) if s],
        "k": list(kinds), "lp": lps[:n], "top": top or {}, "alt": {str(k): v for k, v in (alt or {}).items()},
        "oov": list(oov or []), "low": low, "tail": max(0, int(context_tail)), "page": max(1000, int(page_tokens)),
        "focus": list(focus) if focus else None, "mode": mode if mode in modes else "mask", "modes": modes,
        "note": note, "link": link,
    }
    if delta:
        payload["delta"] = delta
    return safe_json(payload)


def trainer_rows(rows: Any) -> list[tuple[str, Any]]:
    """(label, TrainingRow) for every row the stitcher built (a :class:`viewer.drift.Rows`, or
    None when the trainer could not run): kept rows, then dropped ones."""
    out: list[tuple[str, Any]] = []
    if rows is None:
        return out
    for n, r in enumerate(rows.rows):
        out.append((f"row {n} · turns {', '.join(str(t) for t in r.turns)} · {len(r.input_ids):,} tokens · "
                    f"{r.trained_tokens:,} trained", r))
    for n, r in enumerate(getattr(rows, "dropped", []) or []):
        out.append((f"dropped row {n} · turns {', '.join(str(t) for t in r.turns)} · {len(r.input_ids):,} tokens · "
                    "no trained token left", r))
    return out


def row_view_payload(row: Any, table: Any = None, *, turn: int | None = None, label: str = "", low: float = LOW_LOGPROB,
                     context_tail: int = 512, page_tokens: int = 50000) -> str:
    """One trainer row (a :class:`viewer.drift.TrainingRow`) as a token view: mask 1 = trained.

    Prompt tails are context (0); outputs with mask 1 are trained (1), outputs with mask 0
    are output without gradient (2). ``prompt_len`` is where ``turn``'s output starts (else the
    first output), so the view opens on it. Logprobs are the row's old_log_probs on mask-1 tokens.
    """
    kinds = [0] * len(row.input_ids)
    for s in row.spans:
        if s.part == "output":
            for i in range(s.start, s.end):
                kinds[i] = 1 if row.completion_mask[i] else 2
    outs = [s for s in row.spans if s.part == "output"]
    mark = next((s for s in outs if s.turn == turn), outs[0] if outs else None)
    p = mark.start if mark is not None else len(row.input_ids)
    if table is not None:
        texts, special, oov, exact = (table.texts(row.input_ids), table.special(row.input_ids),
                                      table.out_of_vocab(row.input_ids), True)
    else:
        texts, special, oov, exact = [f"⟨{i}⟩" for i in row.input_ids], None, [], False
    lps = [lp if m else None for lp, m in zip(row.old_log_probs, row.completion_mask)]
    return token_payload(row.input_ids, texts, kinds, special=special, logprobs=lps, prompt_len=p,
                         turn=mark.turn if mark is not None else (turn or 0), trained=row.trained_tokens > 0,
                         prompt_source="trainer row", output_source=label or "trainer row", exact=exact,
                         oov=oov, low=low, context_tail=context_tail, page_tokens=page_tokens)
