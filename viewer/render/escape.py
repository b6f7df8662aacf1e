"""Escaping: every data string that reaches the browser goes through :func:`esc` (HTML) or
:func:`safe_json` (the token view's JSON, only ever assigned with ``textContent``)."""
from __future__ import annotations

import html
import json
from typing import Any

from .glossary import explain

__all__ = ["esc", "safe_json", "kv", "fmt", "notice_html"]


def esc(value: Any) -> str:
    """HTML-escape any value for text or a quoted attribute."""
    return html.escape("" if value is None else str(value), quote=True)


def safe_json(obj: Any) -> str:
    """JSON for the browser: ``<`` escaped so no ``</script>`` or ``<script`` can appear."""
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
            .replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))

def kv(label: str, value: Any, cls: str = "") -> str:
    """A labelled value (a pill). A label, or a value, that is a term of the trade carries its one-line
    explanation as a tooltip (viewer/render/glossary.py; issue 41, point 9)."""
    why = explain(label) or (explain(value) if isinstance(value, str) else None)
    title = f' title="{esc(why)}"' if why else ""
    term = " ri-term" if why else ""
    return (f'<span class="ri-kv {esc(cls)}{term}"{title}><span class="ri-k">{esc(label)}</span>'
            f'<span class="ri-v">{esc(value)}</span></span>')


def fmt(v: float | None, digits: int = 3) -> str:
    return "—" if v is None else f"{v:.{digits}f}"

def notice_html(message: str, kind: str = "info") -> str:
    return f'<div class="ri-notice ri-{esc(kind)}">{esc(message)}</div>'
