"""The Health screen: the open rollout's lint hits (docs/LINT.md), each a link to its turn and token.

Follows the browse screen's open rollout (``browse.key``) like the Drift tab; the lint runs only
while this tab is on screen, once per rollout for every visitor (the store's shared cache).
:func:`viewer.lint.lint_rollout` does the work, :mod:`viewer.render.health` builds the HTML.
"""
from __future__ import annotations

from urllib.parse import urlencode

import gradio as gr

from .. import render
from ..config import Settings
from ..lint import RULES, lint_rollout
from ..lint.rules import token_runs
from ..render.hit_tokens import MAX_RUNS_SHOWN
from ..sources.shown import shown_text
from ..views import turn_view
from .browse import link_spec

__all__ = ["build", "health_for"]

EMPTY = "Open a rollout to see how it was recorded: the lint rules of docs/LINT.md, run on it."


def _base(op, settings: Settings) -> str:
    """The query string that reopens this rollout (a dataset row's own, else its path), "" if none."""
    if op.link:
        return op.link
    spec = link_spec(op.path, settings)
    return urlencode({"source": spec}) if spec else ""


def _lp(v) -> str:
    """A logprob as the list shows it: its value as read, "none" where the reader kept none (a NaN: no value)."""
    if v is None:
        return "none"
    return repr(float(v)) if isinstance(v, (int, float)) else str(v)


def _token_runs(h, base: str, texts_of, settings: Settings) -> dict:
    """A hit's offending tokens as runs (``token_runs``: first and last position, a link selecting the run,
    its text as the token view shows it), the first :data:`MAX_RUNS_SHOWN`; {} when it names no token."""
    if not h.tokens:
        return {}
    runs = token_runs(h.tokens)
    texts, lps = texts_of(h.turn) if h.turn is not None else (None, None)
    out = []
    for a, b in runs[:MAX_RUNS_SHOWN]:
        q = urlencode({**({"turn": h.turn} if h.turn is not None else {}), "tok": str(a) if a == b else f"{a}-{b}"})
        text = "".join(texts[a:b + 1]) if texts else ""
        text = shown_text(text[:80] + ("…" if len(text) > 80 else ""), settings) if text else ""
        # the sampler's recorded logprobs there (what most integrity rules are about), the first few
        vals = [lps[i] if lps and 0 <= i < len(lps) else None for i in range(a, min(b, a + 5) + 1)] if lps else []
        out.append({"a": a, "b": b, "link": f"{base}&{q}" if base else "", "text": text,
                    "logprobs": [_lp(v) for v in vals] + (["…"] if b > a + 5 else [])})
    return {"token_runs": out, "runs_total": len(runs), "tokens_total": len(h.tokens)}


def health_for(store, settings: Settings, key: str | None) -> str:
    """The Health HTML of the rollout under ``key`` (made once per rollout, shared)."""
    op = store.get(key)
    if op is None:
        return render.health_empty_html(EMPTY)

    def make() -> str:
        tok = op.choice.tokenizer  # the tokenizer the app shows this rollout with: no second load
        hits = lint_rollout(op.rollout, settings, vocab=lambda ro, folder: len(tok) if tok is not None else None)
        base = _base(op, settings)
        texts: dict[int, tuple] = {}

        def texts_of(turn: int) -> tuple:  # the turn's token texts and logprobs, by position as the view counts
            if turn not in texts:
                try:
                    tv = turn_view(op.rollout, turn, tok, op.table)
                    texts[turn] = (list(tv.tokens.texts), [None] * tv.tokens.prompt_len + list(tv.turn.logprobs))
                except (KeyError, IndexError, ValueError):  # a turn the view cannot build: runs without text
                    texts[turn] = (None, None)
            return texts[turn]

        rows = []
        for h in hits:
            d = {k: shown_text(v, settings) if isinstance(v, str) else v for k, v in h.to_dict().items()}  # public
            place = {k: v for k, v in h.place().items() if k in ("turn", "tok")}  # tok: its first run of tokens
            d["link"] = "&".join(p for p in (base, urlencode(place)) if p) if base else ""
            d.update(_token_runs(h, base, texts_of, settings))
            rows.append(d)
        note = "" if tok is not None else "No tokenizer: ids were not checked against a vocabulary (RI012)."
        return render.health_html(rows, len(RULES), note)

    try:
        return store.derived(op.key, ("health",), make)
    except Exception as e:  # a rule bug on odd data: say so, keep the app alive
        return render.health_empty_html(f"Lint failed: {type(e).__name__}: {e}")


def build(settings: Settings, store, browse) -> None:
    """Create this screen's components inside the current gr.Tab and wire its events."""
    view = gr.HTML(render.health_empty_html(EMPTY), elem_id="health-view")
    visible = gr.State(False)

    def on_tab(key, evt: gr.SelectData):
        on = evt is not None and str(evt.value) == "Health"
        return [on, health_for(store, settings, key) if on else gr.skip()]

    def follow(on: bool, key):
        return health_for(store, settings, key) if on else gr.skip()

    # "multiple": a tab picked while the last pick's answer is pending runs with its own tab name (see drift_tab)
    browse.tabs.select(on_tab, [browse.key], [visible, view], api_name="health_tab", api_visibility="private",
                       show_progress="hidden", trigger_mode="multiple", **browse.fast)
    browse.key.change(follow, [visible, browse.key], view, api_name="health_follow", api_visibility="private",
                      show_progress="hidden", **browse.fast)
