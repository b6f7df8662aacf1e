"""The Health tab (viewer/ui/health_tab.py): the open rollout's lint hits (docs/LINT.md) as a table,
each hit a deep link to its turn and token. Every value goes through :func:`esc`.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from .escape import esc, notice_html
from .hit_tokens import hit_tokens_html

__all__ = ["health_html", "health_empty_html"]

_LEVEL_ORDER = {"error": 0, "warning": 1, "info": 2}


def health_empty_html(message: str) -> str:
    return f'<div class="ri-drift">{notice_html(message)}</div>'


def _place(h: Mapping[str, Any]) -> tuple[str, str]:
    turn = "—" if h.get("turn") is None else str(h["turn"])
    tok = "—" if h.get("tok") is None else f"{h['tok']}" + (f" ({h['part']} {h['position']})" if h.get("part") else "")
    return turn, tok


def _runs(h: Mapping[str, Any]) -> str:
    """The hit's offending tokens, run by run, each linked (``token_runs``: viewer/ui/health_tab.py)."""
    return hit_tokens_html(h.get("token_runs") or [], int(h.get("tokens_total") or 0), int(h.get("runs_total") or 0))


def health_html(hits: Sequence[Mapping[str, Any]], rules_run: int, note: str = "") -> str:
    """``hits``: :meth:`viewer.lint.Hit.to_dict` values (``link``: the query string of the hit's place,
    "" when the rollout cannot be linked; ``token_runs`` / ``runs_total``: its tokens run by run, listed with
    :func:`viewer.render.hit_tokens.hit_tokens_html`); ``rules_run``: how many rules were checked."""
    counts = {lv: sum(1 for h in hits if h.get("level") == lv) for lv in _LEVEL_ORDER}
    head = (f"{len(hits)} hit(s) from {rules_run} rules: {counts['error']} error, {counts['warning']} warning, "
            f"{counts['info']} info. Rules and fixes: docs/LINT.md.")
    parts = [notice_html(note)] if note else []
    parts.append(notice_html(head, "error" if counts["error"] else "info"))
    if not hits:
        parts.append('<div class="ri-note">No rule fired: this rollout was recorded the way the trainer needs.</div>')
        return f'<div class="ri-drift" id="health-summary">{"".join(parts)}</div>'
    rows = []
    for h in sorted(hits, key=lambda h: (_LEVEL_ORDER.get(str(h.get("level")), 3), str(h.get("rule")))):
        turn, tok = _place(h)
        where = f"turn {turn}, token {tok}"
        link = h.get("link") or ""
        place = (f'<a class="ri-health-link" href="?{esc(link)}" target="_self">{esc(where)}</a>' if link
                 else esc(where))
        rows.append(f'<tr class="ri-{esc(h.get("level"))}"><td>{esc(h.get("level"))}</td>'
                    f'<td><code>{esc(h.get("rule"))}</code> {esc(h.get("name"))}</td>'
                    f'<td>{esc(turn)}</td><td>{esc(tok)}</td><td>{place}<br>{esc(h.get("message"))}{_runs(h)}</td>'
                    f'<td>{esc(h.get("why"))}</td><td>{esc(h.get("fix"))}</td></tr>')
    table = ('<table class="ri-problems ri-health"><thead><tr><th>level</th><th>rule</th><th>turn</th><th>token</th>'
             f'<th>where / what</th><th>why</th><th>fix</th></tr></thead><tbody>{"".join(rows)}</tbody></table>')
    return f'<div class="ri-drift" id="health-summary">{"".join(parts)}{table}</div>'
