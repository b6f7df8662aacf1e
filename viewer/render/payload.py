"""The token view's payload: the values it is made from and its one codec (the format:
docs/ARCHITECTURE.md, "The token view's payload").

:func:`token_payload` writes the JSON that ``viewer/ui/assets/token_view.js`` paints (the browser
reads it back with ``token_payload.js``); :func:`decode_payload` reads it back in Python, as a
``gradio_client`` script gets it from the app's token views (``/select_turn``'s ``view``). Both
decoders refuse the same broken payloads (``tests/test_token_payload_browser.py``).

:class:`Kind` names the per-position codes the two sides share (the JS reads the same numbers
from its ``KIND`` block, checked by ``tests/test_render_payload.py``). The rest groups what used
to be 24 keyword arguments: the token columns, the sampler's logprobs, the turn they belong to,
and how the view opens; a rescore's Δ arrays ride beside them (:func:`viewer.render.delta.turn_delta`).
"""
from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass, field
from enum import IntEnum
from itertools import groupby
from typing import Any, Mapping, Sequence

from ..config import LOW_LOGPROB
from .escape import safe_json
from .fixes import FIX_MODES

__all__ = ["Kind", "Tokens", "Logprobs", "TurnInfo", "ViewOptions", "TokenView", "MODES", "VERSION",
           "token_payload", "decode_payload", "encode_numbers", "decode_numbers", "round_logprob"]

VERSION = 3  # the payload's "v"; a reader refuses any other
MODES = ("mask", "logprob")  # colour modes every token view has; a rescore adds "delta"


class Kind(IntEnum):
    """What one position is to the trainer (the payload's ``k``; CSS classes ``k0``/``k1``/``k2``)."""
    CONTEXT = 0    # prompt / context: no loss
    TRAINED = 1    # mask 1: gets a gradient
    UNTRAINED = 2  # sampled output with mask 0: no gradient


@dataclass(frozen=True)
class Tokens:
    """Parallel per-position columns: ids, their texts and :class:`Kind` codes (plain ints), which
    positions are special tokens, which ids are outside the vocabulary; ``exact`` is False when the
    texts come from recorded bytes instead of a tokenizer."""
    ids: Sequence[int]
    texts: Sequence[str]
    kinds: Sequence[int]
    special: Sequence[bool] | None = None
    oov: Sequence[int] = ()
    exact: bool = True


@dataclass(frozen=True)
class Logprobs:
    """The sampler's logprob per position (None where there is none: the prompt) and its top-k
    alternatives: ``top`` maps a position (as a string) to ``[[id, logprob], ...]``, ``alt`` gives
    those ids' texts."""
    values: Sequence[float | None] = ()
    top: Mapping[str, list] = field(default_factory=dict)
    alt: Mapping[int, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TurnInfo:
    """Which turn the tokens are, whether it is trained, and where its prompt and output ids came from."""
    index: int = 0
    prompt_len: int = 0
    trained: bool = True
    kind: str = "agent"
    role: str = "main"
    prompt_source: str = ""
    output_source: str = ""


@dataclass(frozen=True)
class ViewOptions:
    """How the view opens: the low-logprob threshold, context tokens shown before the output
    (``context_tail``), tokens per page, a selected span (``focus``), the colour ``mode``, a note,
    and ``link``, the query string (without ``tok=``) that reopens it ("" when it cannot be linked)."""
    low: float = LOW_LOGPROB
    context_tail: int = 512
    page_tokens: int = 50000
    focus: tuple[int, int] | None = None
    mode: str = "mask"
    note: str = ""
    link: str = ""

    @classmethod
    def from_settings(cls, settings: Any, **kw: Any) -> "ViewOptions":
        """The app's threshold, tail and page size (``viewer.config.Settings``) plus ``kw``."""
        return cls(low=settings.low_logprob, context_tail=settings.context_tail, page_tokens=settings.page_tokens,
                   **kw)


@dataclass(frozen=True)
class TokenView:
    """Everything one token view shows; ``delta`` is a rescore of it (adds the ``delta`` colour mode)."""
    tokens: Tokens
    turn: TurnInfo = field(default_factory=TurnInfo)
    logprobs: Logprobs = field(default_factory=Logprobs)
    view: ViewOptions = field(default_factory=ViewOptions)
    delta: Mapping[str, Any] | None = None


# ---------------------------------------------------------------- encoding

def round_logprob(v: float | None) -> float | None:
    """A logprob as the payload carries it: 4 decimals, None when missing, NaN or infinite."""
    if v is None or not math.isfinite(v):
        return None
    return round(v, 4)


# Number columns (ids, text lengths): each number's 5-bit groups, lowest first, as base64url
# characters, the upper half of the alphabet saying that another group follows. A Qwen id is 3-4
# characters instead of 6-7 as decimal JSON ("151644,"), a text length (almost always under 32) one
# instead of 2-3: -20 % of a 50k-token turn's payload, -26 % of qwen3-tiny's 6k-token turn 3, on a
# transport Gradio does not compress (its SSE stream), for the same browser CPU (figures in
# docs/ARCHITECTURE.md, "The token view's payload").
_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_DIGIT = {c: i for i, c in enumerate(_B64)}
MAX_NUMBER = 2**53 - 1  # the largest integer a browser reads exactly (Number.MAX_SAFE_INTEGER)


def _number(n: int) -> str:
    out = ""
    while n >= 32:
        out += _B64[32 + (n & 31)]
        n >>= 5
    return out + _B64[n]


@functools.cache
def _number_table() -> tuple[str, ...]:
    return tuple(_number(n) for n in range(1 << 15))  # every number of up to 3 characters: one lookup each


def encode_numbers(values: Sequence[int]) -> str | list[int]:
    """``values`` as a number column string, or as a plain list when one is outside 0..2**53-1 (a
    broken file's id: a browser reads the list as it reads any JSON number)."""
    ints = list(map(int, values))
    if ints and (min(ints) < 0 or max(ints) > MAX_NUMBER):
        return ints
    table = _number_table()
    return "".join([table[n] if n < 32768 else _number(n) for n in ints])


def _kind_runs(kinds: Sequence[int]) -> list[int]:
    """Run-length kinds, flat: ``[kind, count, kind, count, ...]`` (a prompt is one run)."""
    out: list[int] = []
    for k, g in groupby(kinds):
        out += (int(k), sum(1 for _ in g))
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


def token_payload(tv: TokenView) -> str:
    """The token view's JSON (format: docs/ARCHITECTURE.md, "The token view's payload") from a
    :class:`TokenView`; :func:`decode_payload` reads it back.

    ``modes`` in the payload lists the colour modes this view can show (``delta`` only with a
    rescore: ``delta`` holds per position the trainer's logprob ``tr`` and Δ = trainer − sampler
    ``dl``, and the turn's context verdict); a ``mode`` it cannot show opens as ``mask``.
    """
    toks, turn, lp, view, delta = tv.tokens, tv.turn, tv.logprobs, tv.view, tv.delta
    modes = list(MODES) + (["delta"] if delta else []) + (list(FIX_MODES) if delta and delta.get("fix") else [])
    n = len(toks.ids)
    if len(toks.texts) != n or len(toks.kinds) != n:
        raise ValueError(f"a token view needs a text and a kind per id: {n} ids, {len(toks.texts)} texts, "
                         f"{len(toks.kinds)} kinds")
    texts, lens = _joined_texts(toks.texts)
    top = {str(k): [[i, round_logprob(v)] for i, v in alts] for k, alts in (lp.top or {}).items()}
    payload = {
        "v": VERSION, "turn": turn.index, "trained": turn.trained, "kind": turn.kind, "role": turn.role,
        "prompt_len": turn.prompt_len, "prompt_source": turn.prompt_source, "output_source": turn.output_source,
        "exact": toks.exact, "ids": encode_numbers(toks.ids), "tx": texts, "tl": encode_numbers(lens),
        "sp": [i for i, s in enumerate(toks.special or []) if s], "kr": _kind_runs(toks.kinds),
        "lr": _lp_runs([round_logprob(v) for v in list(lp.values or [])[:n]]),
        "top": top, "alt": {str(k): v for k, v in (lp.alt or {}).items()},
        "oov": list(toks.oov or []), "low": view.low, "tail": max(0, int(view.context_tail)),
        "page": max(1000, int(view.page_tokens)), "focus": list(view.focus) if view.focus else None,
        "mode": view.mode if view.mode in modes else "mask", "modes": modes, "note": view.note, "link": view.link,
    }
    if delta:
        payload["delta"] = delta
    return safe_json(payload)


# ---------------------------------------------------------------- decoding
# The same checks as token_payload.js's riExpandTokens: a payload one side refuses, the other does too.

def _int(v: Any) -> int | None:
    """``v`` if it is an integer as a browser sees one (``2.0`` is; ``true`` is not), else None."""
    if type(v) is int:
        return v
    return int(v) if type(v) is float and v.is_integer() else None


def decode_numbers(column: str | list) -> list[int]:
    """A number column read back (a list of integers is one already)."""
    if isinstance(column, list):
        ints = list(map(_int, column))
        if None in ints:
            raise ValueError("a number column list holds something that is not an integer")
        return ints
    if not isinstance(column, str):
        raise ValueError("a number column is neither a string nor a list")
    out: list[int] = []
    value = shift = 0
    for ch in column:
        d = _DIGIT.get(ch)
        if d is None:
            raise ValueError(f"a number column holds {ch!r}, not one of its digits")
        if d < 32 and not shift:
            out.append(d)  # most text lengths: one character
            continue
        value |= (d & 31) << shift
        if value > MAX_NUMBER:
            raise ValueError("a number column holds a number over 2**53 - 1")
        if d < 32:
            out.append(value)
            value = shift = 0
        elif (shift := shift + 5) > 50:  # a 12th group: over 2**53 whatever its digits
            raise ValueError("a number column holds a number over 2**53 - 1")
    if shift:
        raise ValueError("a number column ends inside a number")
    return out


def _texts(joined: Any, lens: list[int]) -> list[str]:
    if not isinstance(joined, str):
        raise ValueError("tx is not a string")
    if joined.isascii():
        units, width = joined, 1  # one UTF-16 code unit per character: cut the string itself
    else:
        units, width = joined.encode("utf-16-le", "surrogatepass"), 2
    if sum(lens) * width != len(units):
        raise ValueError("the text lengths tl do not add up to tx")
    out, at = [], 0
    for n in lens:
        piece = units[at:at + width * n]
        out.append(piece if width == 1 else piece.decode("utf-16-le", "surrogatepass"))
        at += width * n
    return out


def _kinds(runs: Any, n: int) -> list[int]:
    if not isinstance(runs, list) or len(runs) % 2:
        raise ValueError("kr is not [kind, count, ...]")
    out: list[int] = []
    for kind, count in zip(runs[::2], runs[1::2]):
        k, c = _int(kind), _int(count)
        if k not in _KINDS or c is None or c <= 0:
            raise ValueError(f"kr holds a run ({kind!r}, {count!r}) that is not a known kind and a positive count")
        out += [k] * c
    if len(out) != n:
        raise ValueError(f"the kinds cover {len(out)} positions, the payload has {n}")
    return out


_KINDS = frozenset(k.value for k in Kind)


def _logprobs(runs: Any, n: int) -> list[float | None]:
    if not isinstance(runs, list):
        raise ValueError("lr is not a list of runs")
    out: list[float | None] = [None] * n
    end = 0
    for run in runs:
        ok = isinstance(run, list) and len(run) == 2 and _int(run[0]) is not None and isinstance(run[1], list)
        start, values = (_int(run[0]), run[1]) if ok else (-1, [])
        if not (ok and values and end <= start and start + len(values) <= n
                and all(type(v) in (int, float) for v in values)):
            raise ValueError(f"lr holds a run that is not [start, [logprob, ...]] in order inside {n} positions")
        out[start:start + len(values)] = values
        end = start + len(values)
    return out


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON (a browser refuses it)")


def decode_payload(payload: str | bytes | Mapping[str, Any]) -> dict[str, Any]:
    """A token view's payload (its JSON or the parsed dict) with the per-position columns written out:
    ``ids`` (ints), ``t`` (texts), ``k`` (:class:`Kind` codes) and ``lp`` (logprob or None) in place of
    ``ids``, ``tx``/``tl``, ``kr`` and ``lr``; every other key as it is, in its order. Raises
    ValueError, naming what is wrong, for a payload of another version or one that does not add up."""
    d = json.loads(payload, parse_constant=_no_constant) if isinstance(payload, (str, bytes)) else payload
    if not isinstance(d, Mapping):
        raise ValueError("not a token view payload: not a JSON object")
    if d.get("v") != VERSION:
        raise ValueError(f"unknown token payload version {d.get('v')!r} (this reader knows {VERSION})")
    missing = [k for k in ("ids", "tx", "tl", "kr", "lr") if k not in d]
    if missing:
        raise ValueError(f"not a token view payload: no {', '.join(missing)}")
    ids = decode_numbers(d["ids"])
    n = len(ids)
    lens = decode_numbers(d["tl"])
    if len(lens) != n:
        raise ValueError(f"tl has {len(lens)} text lengths for {n} ids")
    if lens and min(lens) < 0:
        raise ValueError("tl holds a negative text length")
    out: dict[str, Any] = {}
    for key, value in d.items():
        if key == "ids":
            out["ids"] = ids
        elif key == "tx":
            out["t"] = _texts(value, lens)
        elif key == "kr":
            out["k"] = _kinds(value, n)
        elif key == "lr":
            out["lp"] = _logprobs(value, n)
        elif key != "tl":
            out[key] = value
    return out
