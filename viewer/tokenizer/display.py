"""Token text for people: exact bytes shown as text, invisible characters made visible, and the
texts of a turn's tokens when there is no tokenizer (the bytes the server recorded, else ids)."""
from __future__ import annotations

import re
import unicodedata
from typing import Sequence

__all__ = ["display_bytes", "texts_from_output_bytes", "texts_without_tokenizer", "visible"]

def display_bytes(b: bytes) -> tuple[str, bool]:
    """Display text for a token's bytes and whether some bytes are not complete UTF-8.

    Valid UTF-8 is shown as text; bytes that do not form complete characters on their
    own (a token holding part of a multi-byte character) are shown as ``\\xNN``.
    """
    try:
        return b.decode("utf-8"), False
    except UnicodeDecodeError:
        return b.decode("utf-8", errors="backslashreplace"), True


def texts_from_output_bytes(output_bytes: Sequence[bytes | None] | None,
                            output_ids: Sequence[int] | None = None) -> list[str]:
    """Display text per output token from the bytes the server recorded (no tokenizer).

    A missing entry shows as ``⟨id N⟩`` when the id is known, else ``⟨?⟩``.
    """
    out: list[str] = []
    n = len(output_bytes or []) if output_ids is None else len(output_ids)
    ob = list(output_bytes or [])
    for pos in range(n):
        b = ob[pos] if pos < len(ob) else None
        if b is None:
            i = output_ids[pos] if output_ids is not None else None
            out.append(f"⟨id {i}⟩" if i is not None else "⟨?⟩")
        else:
            out.append(display_bytes(bytes(b))[0])
    return out


def texts_without_tokenizer(prompt_ids: Sequence[int], output_ids: Sequence[int],
                            output_bytes: Sequence[bytes | None] | None) -> list[str]:
    """Texts for prompt + output tokens without a tokenizer: prompt tokens as ``⟨id⟩`` (a server
    records no bytes for them), output tokens from the recorded bytes."""
    return [f"⟨{i}⟩" for i in prompt_ids] + texts_from_output_bytes(output_bytes, output_ids)


_VISIBLE_MAP = {" ": "␣", "\n": "↵", "\t": "→", "\r": "\\r"}
_NEEDS_CHECK = re.compile(r"[^\x21-\x7e]")
_ESCAPE_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp"}


def _visible_char(m: re.Match) -> str:
    c = m.group(0)
    mapped = _VISIBLE_MAP.get(c)
    if mapped is not None:
        return mapped
    if unicodedata.category(c) in _ESCAPE_CATEGORIES:
        o = ord(c)
        return f"\\u{o:04x}" if o <= 0xFFFF else f"\\U{o:08x}"
    return c


def visible(text: str) -> str:
    """Whitespace and invisible characters made visible (for tooltips).

    space → ``␣``, ``\\n`` → ``↵``, ``\\t`` → ``→``, ``\\r`` → ``\\r``; other control,
    format (zero-width, bidi), unassigned / private-use characters and non-ASCII spaces
    (NBSP, em space, …) → ``\\uXXXX`` (``\\UXXXXXXXX`` beyond the BMP).
    """
    return _NEEDS_CHECK.sub(_visible_char, text)
