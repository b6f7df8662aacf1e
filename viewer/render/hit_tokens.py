"""The Health tab's token lists: every run of tokens a lint hit names (integrity rules RI011, RI014–RI018 name
each offending token), each run a link that opens the token view on it with the run selected, and its text.
Every value goes through :func:`esc`; the caller (viewer/ui/health_tab.py) builds the links and texts.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from .escape import esc

__all__ = ["hit_tokens_html", "MAX_RUNS_SHOWN"]

MAX_RUNS_SHOWN = 60  # runs listed per hit; the rest are counted (a hit may name thousands of tokens)


def hit_tokens_html(runs: Sequence[Mapping[str, Any]], total_tokens: int, total_runs: int) -> str:
    """``runs``: ``{"a", "b", "link", "text", "logprobs"}`` per run of consecutive offending tokens (``link`` the
    query string, "" when the rollout cannot be linked; ``text`` the run's token texts, possibly cut;
    ``logprobs`` the recorded values of its first tokens, as strings); ``total_*``
    all the hit names. A ``<details>`` list, open when short."""
    if not runs:
        return ""
    items = []
    for r in runs:
        where = f"tok {r['a']}" if r["a"] == r["b"] else f"tok {r['a']}–{r['b']}"
        label = (f'<a class="ri-health-tok" href="?{esc(r["link"])}" target="_self">{esc(where)}</a>' if r.get("link")
                 else esc(where))
        text, lps = r.get("text"), r.get("logprobs")
        items.append(f"<li>{label}" + (f' <code class="ri-tok-text">{esc(text)}</code>' if text else "")
                     + (f' <span class="ri-tok-lp">logprob {esc(", ".join(map(str, lps)))}</span>' if lps else "")
                     + "</li>")
    more = total_runs - len(runs)
    tail = f'<li class="ri-note">… and {more:,} more run(s)</li>' if more > 0 else ""
    summary = f"{total_tokens:,} token(s) in {total_runs:,} run(s)"
    return (f'<details class="ri-hit-toks"{" open" if total_runs <= 8 else ""}><summary>{esc(summary)}</summary>'
            f'<ul>{"".join(items)}{tail}</ul></details>')
