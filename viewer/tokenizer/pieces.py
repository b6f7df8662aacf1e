"""Encoding many texts that share pieces, each piece once: the drift scan's prompts.

An agent's prompt at turn n holds the whole conversation so far, so a rollout's prompts repeat
its history once per turn and a scan that re-renders and re-encodes every prompt tokenises the
same messages over and over. A fast tokenizer first cuts its input at every *added token*
(``<|im_start|>``, ``<|im_end|>``, ``<tool_call>``, ...; leftmost-longest matching on the raw
text, tokenizers' ``AddedVocabulary::extract_and_normalize``) and then normalises, pre-tokenises
and encodes each piece between them **on its own**. So ``encode(text)`` is the concatenation of
the added tokens' ids and ``encode(piece)`` for the pieces between them, and a piece seen before
(the same message in the next turn's prompt) need not be encoded again.

That identity holds only for tokenizers whose pieces really are independent; :func:`piece_encoder`
returns None for any other (then the caller encodes whole texts as before):

* no added token matched on the raw text strips spaces around itself or must be a single word
  (``lstrip`` / ``rstrip`` / ``single_word`` move the cut), and special tokens are split out
  (``encode_special_tokens`` off);
* every pre-tokenizer step is one that works per piece (a ``Metaspace`` that prepends ``▁`` only to
  the first piece, or a ``ByteLevel`` adding a prefix space, is not accepted);
* the model is deterministic (no BPE dropout).

Normalisers need no check: the library normalises each piece after the added-token cut anyway.
tests/test_tokenizer_pieces.py compares the result with the real tokenizer's whole-text
encoding on prompts, outputs and added-token edge cases.
"""
from __future__ import annotations

import json
import re
from typing import Any, Sequence

from .table import per_tokenizer

__all__ = ["PieceEncoder", "piece_encoder"]

# pre-tokenizers that split each piece without looking at where the piece sits in the text
_PER_PIECE = {"Split", "Digits", "Punctuation", "Whitespace", "WhitespaceSplit", "BertPreTokenizer",
              "CharDelimiterSplit", "UnicodeScripts"}
_MODELS = {"BPE", "WordPiece", "WordLevel", "Unigram"}


def _pre_tokenizer_ok(cfg: Any) -> bool:
    if cfg is None:
        return True
    kind = cfg.get("type")
    if kind == "Sequence":
        return all(_pre_tokenizer_ok(c) for c in cfg.get("pretokenizers", []))
    if kind == "ByteLevel":
        return not cfg.get("add_prefix_space", False)
    return kind in _PER_PIECE


def _state(component: Any) -> Any:
    """A tokenizers component's own JSON (``__getstate__``), None when absent."""
    return None if component is None else json.loads(component.__getstate__())


class PieceEncoder:
    """``encode_batch(texts)`` = the backend's ``[e.ids for e in encode_batch(texts, add_special_tokens=False)]``,
    each distinct piece between added tokens encoded once per call."""

    def __init__(self, backend, added: dict[str, int]):
        self._backend = backend
        self._ids = added
        # longest first: at one position Python's alternation takes the first that matches, which
        # is then the longest, as the library's leftmost-longest matcher does
        alts = sorted(added, key=len, reverse=True)
        self._split = re.compile("(" + "|".join(map(re.escape, alts)) + ")").split if alts else None

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        if self._split is None:
            return [e.ids for e in self._backend.encode_batch(list(texts), add_special_tokens=False)]
        split, ids_of = self._split, self._ids
        parts_of = [split(t) for t in texts]  # [piece, added token, piece, ..., piece]
        known: dict[str, list[int]] = {}
        todo: list[str] = []
        for parts in parts_of:
            for p in parts[::2]:
                if p and p not in known:
                    known[p] = []
                    todo.append(p)
        if todo:
            for p, e in zip(todo, self._backend.encode_batch(todo, add_special_tokens=False)):
                known[p] = e.ids
        out: list[list[int]] = []
        for parts in parts_of:
            if len(parts) == 1:
                out.append(list(known[parts[0]]) if parts[0] else [])
                continue
            ids: list[int] = []
            for i, p in enumerate(parts):
                if i & 1:
                    ids.append(ids_of[p])
                elif p:
                    ids.extend(known[p])
            out.append(ids)
        return out


_ENCODERS: dict[int, tuple[Any, PieceEncoder | None]] = {}


def piece_encoder(tok) -> PieceEncoder | None:
    """The cached :class:`PieceEncoder` of ``tok``'s fast backend, or None when the piece identity
    cannot be relied on for it (see the module doc) or it truncates or pads."""
    return per_tokenizer(_ENCODERS, tok, lambda: _build(tok))


def _build(tok) -> PieceEncoder | None:
    backend = getattr(tok, "_tokenizer", None)
    if backend is None or not hasattr(backend, "encode_batch") or not hasattr(backend, "get_added_tokens_decoder"):
        return None
    try:
        if backend.truncation is not None or backend.padding is not None or backend.encode_special_tokens:
            return None
        model = backend.model  # its name and dropout, not its state (the whole vocabulary as JSON)
        if type(model).__name__ not in _MODELS or getattr(model, "dropout", None) not in (None, 0, 0.0):
            return None
        if not _pre_tokenizer_ok(_state(backend.pre_tokenizer)):
            return None
        added: dict[str, int] = {}
        for i, t in backend.get_added_tokens_decoder().items():
            if t.normalized:  # matched inside the normalised pieces by the library itself: no cut here
                continue
            if t.lstrip or t.rstrip or t.single_word or not t.content or t.content in added:
                return None
            added[t.content] = int(i)
    except (AttributeError, TypeError, ValueError):  # another backend's shape: encode whole texts
        return None
    return PieceEncoder(backend, added)
