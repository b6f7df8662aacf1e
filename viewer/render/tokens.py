"""Token-view payloads (JSON the token view paints): a turn, a trainer row, and the row list."""
from __future__ import annotations

import functools
import math
import re
from itertools import groupby
from typing import Any, Sequence

from ..rollout import Turn
from ..tokens import TurnTokens
from .escape import safe_json
from .payload import Kind, Logprobs, TokenView, Tokens, TurnInfo, ViewOptions

__all__ = ["MODES", "token_view_payload", "token_payload", "row_view_payload", "trainer_rows"]

MODES = ("mask", "logprob")  # colour modes every token view has; a rescore adds "delta"


def _lp(v: float | None) -> float | None:
    if v is None or not math.isfinite(v):
        return None
    return round(v, 4)


# Characters outside the BMP: two UTF-16 code units each in a JS string (one in a Python str).
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def _joined_texts(texts: Sequence[str]) -> tuple[str, list[int]]:
    """All token texts as one string and each text's length in UTF-16 code units (what the JS's
    ``slice`` counts). One string instead of a list of them: a 6k-token turn's payload is read
    ≈ 10x faster by the browser and by API clients (no quotes per token, escaped again in every
    SSE message); docs/SPEED.md (room)."""
    joined = "".join(texts)
    lens = list(map(len, texts))
    if not joined.isascii() and _ASTRAL.search(joined):
        lens = [n + len(_ASTRAL.findall(t)) if n and not t.isascii() else n for n, t in zip(lens, texts)]
    return joined, lens


# Number columns (ids, text lengths) as one string: each number's 5-bit groups, lowest first, as
# base64url characters, the upper half of the alphabet saying that another group follows. A Qwen id is
# 3-4 characters instead of 6-7 as decimal JSON ("151644,"), a text length (almost always under 32) one
# instead of 2-3: a 6k-token turn's answer 20 KB smaller, for every visitor and API client (docs/SPEED.md,
# room). No character needs escaping in JSON, HTML or a URL.
_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def _varint(n: int) -> str:
    out = ""
    while n >= 32:
        out += _B64[32 + (n & 31)]
        n >>= 5
    return out + _B64[n]


@functools.cache
def _varint_table() -> tuple[str, ...]:
    return tuple(_varint(n) for n in range(1 << 15))  # every number of up to 3 characters: one lookup each


def _varints(values: Sequence[int]) -> str | None:
    """``values`` as a number column string; None when one is not a non-negative int (the caller sends
    a list then)."""
    if not len(values):
        return ""
    try:
        if min(values) < 0:
            return None
        table = _varint_table()
        return "".join([table[n] if n < 32768 else _varint(n) for n in map(int, values)])
    except (TypeError, ValueError):
        return None


def _kind_runs(kinds: Sequence[int]) -> list[int]:
    """Run-length kinds, flat: ``[kind, count, kind, count, ...]`` (a prompt is one run)."""
    out: list[int] = []
    for k, g in groupby(kinds):
        out += (k, sum(1 for _ in g))
    return out


def _lp_runs(values: Sequence[float | None]) -> list[list]:
    """Logprobs as ``[[start, [lp, ...]], ...]``: each run of positions that has one (nulls left out:
    the prompt is thousands of them)."""
    out: list[list] = []
    run: list[float] | None = None
    for i, v in enumerate(values):
        if v is None:
            run = None
        elif run is None:
            run = [v]
            out.append([i, run])
        else:
            run.append(v)
    return out


def token_view_payload(turn: Turn, tt: TurnTokens, view: ViewOptions = ViewOptions(),
                       delta: dict[str, Any] | None = None) -> str:
    """JSON string the token view draws from (see viewer/ui/assets/token_view.js): turn ``turn``
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
                top[str(p + k)] = [[a.id, _lp(a.logprob)] for a in alts]
    return token_payload(TokenView(
        Tokens(tt.ids, tt.texts, kinds, special=tt.special, oov=tt.out_of_vocab, exact=tt.exact_text),
        TurnInfo(turn.index, p, trained=turn.trained, kind=turn.kind, role=turn.role,
                 prompt_source=turn.prompt_source, output_source=turn.output_source),
        Logprobs([None] * p + list(turn.logprobs)[: n - p], top=top, alt=tt.alt_texts), view, delta))


def token_payload(tv: TokenView) -> str:
    """The token view's JSON (see viewer/ui/assets/token_view.js) from a :class:`TokenView`.

    Per-position columns are compact (``"v": 3``): ``ids`` a number column string (:func:`_varints`;
    a list when an id is negative); the texts one string ``tx`` with each text's length ``tl`` (UTF-16
    code units, a number column string); kinds run-length ``kr`` (:func:`_kind_runs`);
    logprobs ``lr`` (:func:`_lp_runs`); ``sp`` / ``oov`` positions; ``top`` by position. The JS
    expands them once (``token_payload.js``).

    ``modes`` in the payload lists the colour modes this view can show (``delta`` only with a
    rescore: ``delta`` holds per position the trainer's logprob ``tr`` and Δ = trainer − sampler
    ``dl``, and the turn's context verdict); a ``mode`` it cannot show opens as ``mask``.
    """
    toks, turn, lp, view, delta = tv.tokens, tv.turn, tv.logprobs, tv.view, tv.delta
    modes = list(MODES) + (["delta"] if delta else [])
    n = len(toks.ids)
    values = lp.values or []
    texts, lens = _joined_texts(toks.texts)
    ids = _varints(toks.ids)
    payload = {
        "v": 3, "turn": turn.index, "trained": turn.trained, "kind": turn.kind, "role": turn.role,
        "prompt_len": turn.prompt_len, "prompt_source": turn.prompt_source, "output_source": turn.output_source,
        "exact": toks.exact, "ids": list(toks.ids) if ids is None else ids, "tx": texts, "tl": _varints(lens),
        "sp": [i for i, s in enumerate(toks.special or []) if s], "kr": _kind_runs(toks.kinds),
        "lr": _lp_runs([_lp(v) for v in values[:n]]),
        "top": dict(lp.top) if lp.top else {}, "alt": {str(k): v for k, v in (lp.alt or {}).items()},
        "oov": list(toks.oov or []), "low": view.low, "tail": max(0, int(view.context_tail)),
        "page": max(1000, int(view.page_tokens)), "focus": list(view.focus) if view.focus else None,
        "mode": view.mode if view.mode in modes else "mask", "modes": modes, "note": view.note, "link": view.link,
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
