"""Token-view payloads (JSON the token view paints): a turn, a trainer row, and the row list. The
payload's format and its codec live in ``payload.py``."""
from __future__ import annotations

from typing import Any

from ..rollout import Turn
from ..tokens import TurnTokens
from .payload import Kind, Logprobs, TokenView, Tokens, TurnInfo, ViewOptions, token_payload

__all__ = ["token_view_payload", "row_view_payload", "trainer_rows"]


def token_view_payload(turn: Turn, tt: TurnTokens, view: ViewOptions = ViewOptions(),
                       delta: dict[str, Any] | None = None) -> str:
    """JSON string the token view draws from (:func:`viewer.render.payload.token_payload`): turn ``turn``
    with its tokens ``tt``, opened as ``view`` says.

    Prompt positions are :attr:`Kind.CONTEXT` (or trained where the turn's prompt mask says so),
    outputs :attr:`Kind.TRAINED` under mask 1, else :attr:`Kind.UNTRAINED`; ``lp`` is null on the
    prompt. ``delta``: a rescore of this turn (:func:`viewer.render.delta.turn_delta`), which adds
    the ``delta`` colour mode.
    """
    p = tt.prompt_len
    n = len(tt.ids)
    mask = turn.loss_mask
    context, trained, untrained = Kind.CONTEXT.value, Kind.TRAINED.value, Kind.UNTRAINED.value
    kinds = [context] * p + [(trained if k < len(mask) and mask[k] else untrained) for k in range(n - p)]
    if turn.prompt_mask:
        for i, m in enumerate(turn.prompt_mask[:p]):
            if m:
                kinds[i] = trained
    top: dict[str, list] = {}
    if turn.top_logprobs:
        for k, alts in enumerate(turn.top_logprobs):
            if alts:
                top[str(p + k)] = [[a.id, a.logprob] for a in alts]
    return token_payload(TokenView(
        Tokens(tt.ids, tt.texts, kinds, special=tt.special, oov=tt.out_of_vocab, exact=tt.exact_text),
        TurnInfo(turn.index, p, trained=turn.trained, kind=turn.kind, role=turn.role,
                 prompt_source=turn.prompt_source, output_source=turn.output_source),
        Logprobs([None] * p + list(turn.logprobs)[: n - p], top=top, alt=tt.alt_texts), view, delta))


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


def row_view_payload(row: Any, table: Any = None, *, turn: int | None = None, label: str = "",
                     view: ViewOptions = ViewOptions()) -> str:
    """One trainer row (a :class:`viewer.drift.TrainingRow`) as a token view: mask 1 = trained.

    Prompt tails are context; outputs with mask 1 are trained, outputs with mask 0 are output
    without gradient (:class:`Kind`). ``prompt_len`` is where ``turn``'s output starts (else the
    first output), so the view opens on it. Logprobs are the row's old_log_probs on mask-1 tokens.
    """
    kinds = [Kind.CONTEXT.value] * len(row.input_ids)
    for s in row.spans:
        if s.part == "output":
            for i in range(s.start, s.end):
                kinds[i] = Kind.TRAINED.value if row.completion_mask[i] else Kind.UNTRAINED.value
    outs = [s for s in row.spans if s.part == "output"]
    mark = next((s for s in outs if s.turn == turn), outs[0] if outs else None)
    p = mark.start if mark is not None else len(row.input_ids)
    if table is not None:
        texts, special, oov, exact = (table.texts(row.input_ids), table.special(row.input_ids),
                                      table.out_of_vocab(row.input_ids), True)
    else:
        texts, special, oov, exact = [f"⟨{i}⟩" for i in row.input_ids], None, [], False
    lps = [lp if m else None for lp, m in zip(row.old_log_probs, row.completion_mask)]
    return token_payload(TokenView(
        Tokens(row.input_ids, texts, kinds, special=special, oov=oov, exact=exact),
        TurnInfo(mark.turn if mark is not None else (turn or 0), p, trained=row.trained_tokens > 0,
                 prompt_source="trainer row", output_source=label or "trainer row"),
        Logprobs(lps), view))
