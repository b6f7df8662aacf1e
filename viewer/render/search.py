"""The Search tab's HTML (issue 38, point 3): its status line and its hits, each a rollout · turn · token with a
token-coloured snippet, and a link that opens the token view at that token (the app's deep link).

Plain values in (:class:`viewer.search.Hit` and its ``Snippet``: token texts, logprobs, the loss mask, the
matched range), escaped strings out. Token colours are the token view's own classes (``ui/assets/app.css``):
``k1`` trained / ``k2`` output without gradient, ``b0``–``b7`` the logprob buckets of ``token_view.js``
(the same cuts), ``hit`` the matched tokens.
"""
from __future__ import annotations

from typing import Any, Iterable

from .escape import esc, fmt, kv, notice_html

__all__ = ["LP_CUTS", "lp_bucket", "snippet_html", "search_hits_html", "search_status_html"]

LP_CUTS = (-0.1, -0.5, -1, -2, -3, -5, -8)  # token_view.js's CUTS: b0 confident ... b7 below -8


def lp_bucket(lp: float | None) -> int | None:
    """The token view's logprob bucket of ``lp`` (None: no logprob)."""
    if lp is None or lp != lp:
        return None
    b = 0
    while b < len(LP_CUTS) and lp < LP_CUTS[b]:
        b += 1
    return b


def snippet_html(snip: Any) -> str:
    """A hit's few tokens around the match, coloured by logprob bucket and kind, the matched ones outlined;
    or the text around a text match. Empty when the hit carries neither."""
    if snip is None:
        return ""
    if snip.pieces:
        a, b = snip.hit or (-1, -1)
        out = []
        for i, piece in enumerate(snip.pieces):
            pos = snip.start + i
            lp = snip.logprobs[i] if i < len(snip.logprobs) else None
            kind = (snip.mask[i] if i < len(snip.mask) else 0) and 1 or 2
            bk = lp_bucket(lp)
            cls = f"tk k{kind}" + (f" b{bk}" if bk is not None else "") + (" hit" if a <= pos < b else "")
            tip = f"pos {pos} · id {snip.ids[i] if i < len(snip.ids) else '?'} · logprob {fmt(lp, 3)}"
            out.append(f'<span class="{cls}" title="{esc(tip)}">{esc(piece) if piece else "·"}</span>')
        return f'<div class="ri-snip">{"".join(out)}</div>'
    if snip.text:
        return f'<div class="ri-snip">{esc(snip.text)}</div>'
    return ""


def _where(h: Any) -> str:
    parts = [h.label or h.source]
    if h.turn is not None:
        parts.append(f"turn {h.turn}")
    if h.tok is not None:
        parts.append(f"tok {h.tok}")
    return " · ".join(parts)


def search_hits_html(hits: Iterable[Any], links: list[str], total: int, shown_query: str) -> str:
    """The hits in rank order, each a link (``links[i]``: the deep link's query string, "" when the hit's
    rollout cannot be linked, e.g. outside the data root) with its place, why it matched and its snippet."""
    hits = list(hits)
    if not hits:
        return notice_html(f"No hits for {shown_query!r}." if shown_query else "No rollouts in this index.")
    items = []
    for h, link in zip(hits, links):
        head = (f'<div class="ri-hit-head"><span class="ri-hit-where">{esc(_where(h))}</span>'
                f'<span class="ri-hit-why">{esc(h.why)}</span>'
                f'{kv("reward", fmt(h.reward, 3), "ri-reward")}{kv("model", h.model or "—")}</div>')
        body = head + snippet_html(h.snippet)
        data = f' data-turn="{esc(h.turn)}" data-tok="{esc(h.tok)}"'
        if link:
            items.append(f'<a class="ri-hit" href="?{esc(link)}"{data}>{body}</a>')
        else:
            items.append(f'<div class="ri-hit"{data}>{body}</div>')
    more = (f'<div class="ri-note">showing {len(hits)} of {total:,} hits, worst first</div>'
            if total > len(hits) else "")
    return f'<div class="ri-hits">{more}{"".join(items)}</div>'


def search_status_html(source: str, query: str, total: int, rollouts: int, level: str, seconds: float,
                       index_note: str = "") -> str:
    """What ran: the source, the query, how many hits in how many rollouts, how long."""
    parts = [kv("source", source), kv("query", query or "(every rollout)"), kv("hits", f"{total:,}"),
             kv("rollouts", f"{rollouts:,}"), kv("level", level), kv("took", f"{seconds * 1000:.0f} ms")]
    note = f'<div class="ri-note">{esc(index_note)}</div>' if index_note else ""
    return f'<div class="ri-ds"><div class="ri-kvs">{"".join(parts)}</div>{note}</div>'
