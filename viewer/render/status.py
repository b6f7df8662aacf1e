"""Status lines: the Datasets tab's source line and a capture's live progress."""
from __future__ import annotations

from typing import Iterable

from .escape import esc, kv, notice_html

__all__ = ["dataset_status_html", "capture_progress_html"]


def dataset_status_html(source: str, fmt: str | None, *, alternatives: Iterable[str] = (), total: int | None = None,
                        page: int | None = None, pages: int | None = None, note: str = "",
                        bytes_read: int | None = None, kind: str = "info") -> str:
    """What is open in the Datasets tab: source, format (and the other formats it matches), page, notes."""
    parts = [kv("source", source), kv("format", fmt or "unknown")]
    alts = [a for a in alternatives if a]
    if alts:
        parts.append(kv("also matches", ", ".join(alts)))
    if total is not None:
        parts.append(kv("rows", f"{total:,}"))
    if page is not None:
        parts.append(kv("page", f"{page + 1} / {pages if pages is not None else '?'}"))
    if bytes_read is not None:
        parts.append(kv("read", f"{bytes_read / 1048576:.2f} MB"))
    extra = f'<div class="ri-note">{esc(note)}</div>' if note else ""
    return f'<div class="ri-ds ri-{esc(kind)}"><div class="ri-kvs">{"".join(parts)}</div>{extra}</div>'

def capture_progress_html(snap: dict | None, job_id: str | None) -> str:
    """Live progress as HTML (every value escaped)."""
    if not snap:
        return notice_html("No capture running. Pick a backend, model and task, then Start.")
    status = snap.get("status", "?")
    kind = {"ok": "info", "running": "info", "queued": "info"}.get(status, "error")
    head = (f"<div class='ri-capture-status ri-{esc(kind)}'><b>{esc(status)}</b> · phase <b>{esc(snap.get('phase'))}</b>"
            f" · {esc(snap.get('calls', 0))} calls recorded · {esc(snap.get('tokens', 0))} tokens"
            f" · {esc(snap.get('elapsed_s', 0))} s · job <code>{esc(job_id)}</code>"
            f" (<a href='?job={esc(job_id)}'>link</a>)</div>")
    if snap.get("error"):
        head += f"<div class='ri-notice ri-error'>{esc(snap['error'])}</div>"
    summ = snap.get("summary") or {}
    if summ.get("reward") is not None or summ.get("tests_total"):
        head += (f"<div>reward <b>{esc(summ.get('reward'))}</b> ({esc(summ.get('tests_passed'))}/"
                 f"{esc(summ.get('tests_total'))} held-out tests) · output folder <code>{esc(snap.get('out'))}</code></div>")
    lines = "\n".join(f"[{ev.get('t', 0):7.1f}s {ev.get('phase', '')}] {ev.get('message', '')}"
                      for ev in snap.get("events") or [])
    return head + f"<pre class='ri-capture-log'>{esc(lines)}</pre>"
