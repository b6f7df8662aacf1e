"""The token view's payload as values: what :func:`viewer.render.tokens.token_payload` turns into
the JSON that ``viewer/ui/assets/token_view.js`` paints.

:class:`Kind` names the per-position codes the two sides share (the JS reads the same numbers
from its ``KIND`` block, checked by ``tests/test_render_payload.py``). The rest groups what used
to be 24 keyword arguments: the token columns, the sampler's logprobs, the turn they belong to,
and how the view opens; a rescore's Δ arrays ride beside them (:func:`viewer.render.delta.turn_delta`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Mapping, Sequence

from ..config import LOW_LOGPROB

__all__ = ["Kind", "Tokens", "Logprobs", "TurnInfo", "ViewOptions", "TokenView"]


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
