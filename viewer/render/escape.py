"""Escaping: every data string that reaches the browser goes through :func:`esc` (HTML) or
:func:`safe_json` (the token view's JSON, only ever assigned with ``textContent``)."""
from __future__ import annotations

import html
import json
from typing import Any

__all__ = ["esc", "safe_json", "kv", "fmt", "notice_html"]


def esc(value: Any) -> str:
    """HTML-escape any value for text or a quoted attribute."""
    return html.escape("" if value is None else str(value), quote=True)


def safe_json(obj: Any) -> str:
    """JSON for the browser: ``<`` escaped so no ``</script>`` or ``<script`` can appear."""
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
            .replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))

def kv(label: str, value: Any, cls: str = "") -> str:
    return (f'<span class="ri-kv {esc(cls)}"><span class="ri-k">{esc(label)}</span>'
            f'<span class="ri-v">{esc(value)}</span></span>')


def fmt(v: float | None, digits: int = 3) -> str:
    return "—" if v is None else f"{v:.{digits}f}"

def notice_html(message: str, kind: str = "info") -> str:
    return f'<div class="ri-notice ri-{esc(kind)}">{esc(message)}</div>'
