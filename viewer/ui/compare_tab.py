"""The Compare tab (``#compare-view``): the open rollout (A) against a second one (B).

B is named like a deep link's ``source=`` (``sample:NAME``, a path inside the data root,
``hf://...``; a row for datasets). :func:`viewer.comparison.compare` pairs the turns; the
table lists each pair's common prefix and first divergence, and the two token views show the
chosen pair side by side, each opened on the divergence (two tokenizers: each side on its token
covering the first differing byte, :mod:`viewer.text_align`). The B picker lists the bundled
samples and takes a typed source. ``?source=A&compare=B`` (with
``compare_row=N`` for a dataset row) opens here directly.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any

import gradio as gr

from .. import render
from ..comparison import Comparison, TurnPair, compare
from ..config import Settings
from ..sources import SourceError
from ..sources.shown import shown_path, shown_text
from ..tokens import turn_tokens
from .browse import Browse
from .fair import Busy, slot
from .token_view import token_view
from .opening import list_samples, open_spec, sample_label
from .store import RolloutStore

__all__ = ["build", "CompareTab"]

_CACHE: OrderedDict[tuple, Comparison] = OrderedDict()
_LOCK = threading.Lock()


@dataclass
class CompareTab:
    outputs: list[gr.components.Component]
    run: Any  # (key_a, spec, row) -> values for outputs


def _comparison(store: RolloutStore, ka: str, kb: str) -> tuple[Comparison, Any, Any] | None:
    a, b = store.get(ka), store.get(kb)
    if a is None or b is None:
        return None
    with _LOCK:
        hit = _CACHE.get((ka, kb, id(a.rollout), id(b.rollout)))
    if hit is None:
        hit = compare(a.rollout, b.rollout, tok_a=a.choice.tokenizer, tok_b=b.choice.tokenizer,
                      table_a=a.table, table_b=b.table)
        with _LOCK:
            _CACHE[(ka, kb, id(a.rollout), id(b.rollout))] = hit
            while len(_CACHE) > 8:
                _CACHE.popitem(last=False)
    return hit, a, b


def _shown(res: Comparison, settings: Settings) -> Comparison:
    """The comparison as a visitor sees it named: sources, tokenizers and notes without server paths."""
    if not settings.public_mode():
        return res
    return replace(res, a_source=shown_path(res.a_source, settings), b_source=shown_path(res.b_source, settings),
                   tokenizers=tuple(shown_path(t, settings) if t else t for t in res.tokenizers),
                   notes=[shown_text(n, settings) for n in res.notes])


def _side(pair: TurnPair, which: str, op, settings: Settings) -> str:
    turn = pair.a if which == "a" else pair.b
    if turn is None:
        return ""
    tt = turn_tokens(turn, op.table)
    fd = pair.first_divergence
    n = len(tt.ids)
    pos = pair.position(which)  # a text-aligned pair: this side's token at the first differing byte
    focus = (pos, pos) if pos is not None and pos < n else None
    note = f"{'A' if which == 'a' else 'B'}: {shown_path(op.rollout.source, settings)}"
    if pair.text is not None and pair.text.divergence_byte is not None:
        note += f" · aligned by text: first differing byte {pair.text.divergence_byte:,}"
    if fd is not None and focus is None:
        note += f" · this side ends at {n:,}, where the other goes on"
    return render.token_view_payload(turn, tt, render.ViewOptions.from_settings(settings, focus=focus, mode="mask",
                                                                               note=note))


def build(settings: Settings, store: RolloutStore, b: Browse) -> CompareTab:
    keys = gr.State(None)  # (store key of A, store key of B)
    with gr.Column(elem_id="compare-view"):
        with gr.Row(equal_height=True):
            # the bundled samples to pick, or any source typed (a path, hf://...): the same check either way
            spec = gr.Dropdown([(f"sample:{name} — {label}" if label else f"sample:{name}", f"sample:{name}")
                                for label, name in ((sample_label(n), n) for n in list_samples())],
                               value=None, allow_custom_value=True, label="Compare the open rollout (A) with B",
                               info="a bundled sample, or type sample:NAME, a path inside the data root, or "
                                    "hf://datasets/OWNER/NAME", elem_id="compare-source", scale=5)
            row = gr.Number(label="row of B (datasets)", precision=0, elem_id="compare-row", scale=1, min_width=100)
            btn = gr.Button("Compare", elem_id="compare-run", scale=1, min_width=90)
        summary = gr.HTML(render.notice_html("Open a rollout (A), pick or name a second one (B) and press "
                                             "Compare. Turns are paired (k-th agent turn with k-th agent turn) and "
                                             "each pair's first differing token id is shown; when the two "
                                             "tokenizers differ, the first differing byte of their texts."), elem_id="compare-summary")
        pair = gr.Dropdown([], label="turn pair", elem_id="compare-pair", interactive=True)
        with gr.Row(equal_height=False):
            view_a, view_b = token_view("compare-a"), token_view("compare-b")
    outputs = [keys, summary, pair, view_a, view_b]

    def failure(msg: str) -> list:
        return [gr.skip(), render.notice_html(shown_text(msg, settings), "error")] + [gr.skip()] * 3

    def show(ka: str, kb: str, label: str | None) -> list:
        got = _comparison(store, ka, kb)
        if got is None:
            return failure("A rollout of this comparison can no longer be read; open it again.")
        res, a, bo = got
        labels = [render.pair_label(p) for p in res.pairs]
        if label not in labels:
            first = res.first_diverging or (res.pairs[0] if res.pairs else None)
            label = render.pair_label(first) if first is not None else None
        p = res.pairs[labels.index(label)] if label is not None else None
        return [(ka, kb), render.compare_html(_shown(res, settings), current=label),
                gr.Dropdown(choices=labels, value=label),
                _side(p, "a", a, settings) if p else "", _side(p, "b", bo, settings) if p else ""]

    def run(ka: str | None, text: str, n) -> list:
        if store.get(ka) is None:
            return failure("Open a rollout first: it is A.")
        try:
            ob = open_spec(store, settings, text, int(n) if n not in (None, "") else None)
        except (SourceError, ValueError) as e:
            return failure(str(e))
        except Exception as e:  # a reader bug must not take the app down
            return failure(f"Could not open {text}: {type(e).__name__}: {e}")
        return show(ka, ob.key, None)

    def on_pair(ks, label: str | None) -> list:
        if not ks:
            return [gr.skip()] * len(outputs)
        return show(ks[0], ks[1], label)

    share = int(settings.limits().session_events)

    def fair_run(ka: str | None, text: str, n, request: gr.Request = None) -> list:
        """``run`` as one of the visitor's few heavy events (viewer/ui/fair.py): opening B is an open like any other."""
        try:
            with slot(request, share):
                return run(ka, text, n)
        except Busy as e:
            return failure(str(e))

    btn.click(fair_run, [b.key, spec, row], outputs, api_name="compare")
    pair.input(on_pair, [keys, pair], outputs, api_visibility="private")
    return CompareTab(outputs + [spec, row], lambda ka, text, n: run(ka, text, n) + [text, n])
