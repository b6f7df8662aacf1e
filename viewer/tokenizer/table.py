"""Exact per-token display: the bytes, special flag and display text of every vocabulary entry."""
from __future__ import annotations

import functools
import operator
import re
import weakref
from typing import Any, Callable, Sequence

from .display import display_bytes

__all__ = ["TokenTable", "token_table", "byte_decoder"]

@functools.lru_cache(maxsize=1)
def byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level BPE alphabet, unicode char → byte (``Ġ`` → 0x20, ``Ċ`` → 0x0A)."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


@functools.lru_cache(maxsize=1)
def _byte_level_translate() -> dict[int, int]:
    # maps each alphabet char to the latin-1 char with the same byte value, so that
    # piece.translate(T).encode("latin-1") gives the token's bytes at C speed.
    return {ord(c): b for c, b in byte_decoder().items()}


_SPM_BYTE = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


class TokenTable:
    """Per-id bytes, special flag and display text for one tokenizer's whole vocabulary.

    Build with :func:`token_table` (cached per tokenizer). Ids
    outside the vocabulary get a visible placeholder text, empty bytes, and are listed
    by :meth:`out_of_vocab`.
    """

    def __init__(self, token_bytes: Sequence[bytes], special: Sequence[bool], name: str | None = None):
        if len(token_bytes) != len(special):
            raise ValueError("token_bytes and special differ in length")
        self.name = name
        self._bytes: list[bytes] = list(token_bytes)
        self._special: list[bool] = [bool(s) for s in special]
        texts: list[str] = []
        partial: list[bool] = []
        for b in self._bytes:
            t, p = display_bytes(b)
            texts.append(t)
            partial.append(p)
        self._texts = texts
        self._partial = partial

    # -- construction -------------------------------------------------------------------
    @classmethod
    def from_tokenizer(cls, tok, name: str | None = None) -> "TokenTable":
        """From a transformers tokenizer or a ``tokenizers.Tokenizer``."""
        backend = getattr(tok, "backend_tokenizer", None) or getattr(tok, "_tokenizer", None) or tok
        if not hasattr(backend, "get_added_tokens_decoder"):
            raise TypeError(f"not a fast tokenizer: {type(tok).__name__}")
        vocab: dict[str, int] = backend.get_vocab(with_added_tokens=False)
        added = backend.get_added_tokens_decoder()  # id -> AddedToken
        size = max([*vocab.values(), *added.keys(), -1]) + 1
        pieces: list[str | None] = [None] * size
        for piece, i in vocab.items():
            pieces[i] = piece
        from tokenizers import decoders, pre_tokenizers

        byte_level = isinstance(backend.decoder, decoders.ByteLevel) or isinstance(
            getattr(backend, "pre_tokenizer", None), pre_tokenizers.ByteLevel)
        out: list[bytes] = [b""] * size
        special = [False] * size
        if byte_level:
            table = _byte_level_translate()
            for i, p in enumerate(pieces):
                if p is None:
                    continue
                try:
                    out[i] = p.translate(table).encode("latin-1")
                except UnicodeEncodeError:  # a char outside the byte alphabet: keep it as UTF-8
                    out[i] = _mixed_bytes(p, table)
        else:  # SentencePiece-style: "▁" is a space, "<0xNN>" is one byte
            for i, p in enumerate(pieces):
                if p is None:
                    continue
                m = _SPM_BYTE.match(p)
                out[i] = bytes([int(m.group(1), 16)]) if m else p.replace("\u2581", " ").encode("utf-8")
        for i, at in added.items():
            out[i] = at.content.encode("utf-8")
            special[i] = True
        return cls(out, special, name=name)

    @property
    def vocab_size(self) -> int:
        return len(self._bytes)

    def __len__(self) -> int:
        return len(self._bytes)

    @staticmethod
    def placeholder(i: int) -> str:
        return f"⟨id {i} not in vocab⟩"

    def _in_range(self, ids: Sequence[int]) -> bool:
        return not ids or (min(ids) >= 0 and max(ids) < len(self._bytes))

    def _gather(self, arr: list, ids: Sequence[int], missing) -> list:
        ids = list(ids)
        if not ids:
            return []
        if self._in_range(ids):
            if len(ids) == 1:
                return [arr[ids[0]]]
            return list(operator.itemgetter(*ids)(arr))
        n = len(arr)
        return [arr[i] if 0 <= i < n else missing(i) for i in ids]

    def texts(self, ids: Sequence[int]) -> list[str]:
        """Display text per id (``\\xNN`` for partial UTF-8; a placeholder for unknown ids)."""
        return self._gather(self._texts, ids, self.placeholder)

    def special(self, ids: Sequence[int]) -> list[bool]:
        """True for added tokens (``<|im_start|>``, ``<think>``, ``<tool_call>``, …)."""
        return self._gather(self._special, ids, lambda i: False)

    def partial(self, ids: Sequence[int]) -> list[bool]:
        """True where a token's bytes are not complete UTF-8 on their own (or the id is unknown)."""
        return self._gather(self._partial, ids, lambda i: True)

    def bytes_of(self, i: int) -> bytes:
        """The token's exact bytes (empty for an id outside the vocabulary)."""
        return self._bytes[i] if 0 <= i < len(self._bytes) else b""

    def bytes_list(self, ids: Sequence[int]) -> list[bytes]:
        return self._gather(self._bytes, ids, lambda i: b"")

    def text_of(self, i: int) -> str:
        return self._texts[i] if 0 <= i < len(self._texts) else self.placeholder(i)

    def is_special(self, i: int) -> bool:
        return 0 <= i < len(self._special) and self._special[i]

    def out_of_vocab(self, ids: Sequence[int]) -> list[int]:
        """Positions (not ids) in ``ids`` whose id is outside the vocabulary."""
        if self._in_range(ids):
            return []
        n = len(self._bytes)
        return [pos for pos, i in enumerate(ids) if not 0 <= i < n]

    def decode_bytes(self, ids: Sequence[int]) -> bytes:
        """The concatenated bytes of ``ids`` (unknown ids contribute nothing)."""
        return b"".join(self.bytes_list(ids))


def _mixed_bytes(piece: str, table: dict[int, int]) -> bytes:
    return b"".join(bytes([table[ord(c)]]) if ord(c) in table else c.encode("utf-8") for c in piece)


def per_tokenizer(cache: dict[int, tuple[Any, Any]], tok, build: Callable[[], Any]) -> Any:
    """``build()``'s value for ``tok``, made once per tokenizer object and kept in ``cache`` while the
    tokenizer lives: the entry holds it weakly and goes with it, so whoever keeps the tokenizer (the app's
    byte-bounded cache, issue 36 finding 2) keeps its table too, and nothing here keeps a tokenizer.
    ``build()``'s value must not refer to ``tok``. An object that cannot be weakly referenced is held, and
    then only the last 8 entries stay (as before)."""
    k = id(tok)
    hit = cache.get(k)
    if hit is not None and (hit[0]() if isinstance(hit[0], weakref.ref) else hit[0]) is tok:
        return hit[1]
    value = build()
    try:
        ref: Any = weakref.ref(tok, lambda _, c=cache, k=k: c.pop(k, None))
    except TypeError:
        ref = tok
        while len(cache) >= 8:
            cache.pop(next(iter(cache)))
    cache[k] = (ref, value)
    return value


_TABLES: dict[int, tuple[Any, TokenTable]] = {}


def token_table(tok, name: str | None = None) -> TokenTable:
    """The cached :class:`TokenTable` for a tokenizer (built once per tokenizer object)."""
    return per_tokenizer(_TABLES, tok,
                         lambda: TokenTable.from_tokenizer(tok, name=name or getattr(tok, "name_or_path", None)))
