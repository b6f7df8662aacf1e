"""The Template tab (``#template-view``): certify a tokenizer + chat template for agent RL (issue 21).

Pick a tokenizer (the bundled Qwen3, the SmolLM2 sample's, or the open rollout's own), run the
battery (:mod:`viewer.drift.certify`) and see the report card; pick a case to open its first
divergence in two token views (held prompt + sampled vs the next prompt, or sampled vs re-encoded).
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any

import gradio as gr

from .. import render
from ..config import SAMPLE_DIR, Settings
from ..layout import TOKENIZER_DIR
from ..drift.certify import CaseResult, certify_results, divergence_sequences, report
from ..sources.shown import shown_path
from ..tokenizer import load_local, load_qwen3, token_table
from ..tokenizer.render_worker import own_lane
from .fair import Busy, slot
from .browse import Browse
from .token_view import token_view
from .store import RolloutStore

__all__ = ["build", "CHOICES"]

QWEN3, SMOL, OPEN = "qwen3 (bundled)", "SmolLM2 (sample)", "the open rollout's tokenizer"
CHOICES = (QWEN3, SMOL, OPEN)
_CACHE: OrderedDict[int, tuple[dict[str, Any], list[CaseResult]]] = OrderedDict()
_LOCK = threading.Lock()


def _tokenizer(choice: str, store: RolloutStore, key: str | None) -> tuple[Any, str]:
    """(tokenizer, name); ValueError saying why there is none."""
    if choice == QWEN3:
        return load_qwen3(), "qwen3"
    if choice == SMOL:
        d = SAMPLE_DIR / "smollm2" / TOKENIZER_DIR
        return load_local(str(d)), f"sample_data/smollm2/{TOKENIZER_DIR}"
    op = store.get(key)
    if op is None or op.choice.tokenizer is None:
        raise ValueError("The open rollout has no tokenizer: open one with a tokenizer, or pick a bundled one.")
    return op.choice.tokenizer, str(op.choice.name)


def _certified(tok, name: str, seconds: float = 0.0) -> tuple[dict[str, Any], list[CaseResult]]:
    """The battery's report for ``tok``; its renders in Certify's own worker, all within ``seconds`` (the
    certify_s budget; 0: none), so another visitor's renders never wait behind an uploaded slow template
    (issue 36, finding 7). A report cut by that deadline is shown but not kept (the next click tries again)."""
    with _LOCK:
        hit = _CACHE.get(id(tok))
    if hit is None or hit[0]["tokenizer"] != name:
        end = time.monotonic() + seconds
        with own_lane(seconds):
            results = certify_results(tok)
        hit = (report(results, name, tok), results)
        if seconds and time.monotonic() >= end:  # cut by certify_s: not this template's answer
            return hit
        with _LOCK:
            _CACHE[id(tok)] = hit
            while len(_CACHE) > 4:
                _CACHE.popitem(last=False)
    return hit


def build(settings: Settings, store: RolloutStore, b: Browse) -> None:
    state = gr.State(None)  # (choice, store key) of the card shown
    with gr.Column(elem_id="template-view"):
        with gr.Row(equal_height=True):
            pick = gr.Dropdown(list(CHOICES), value=QWEN3, label="tokenizer + chat template", elem_id="template-pick",
                               scale=4)
            btn = gr.Button("Certify", elem_id="template-run", scale=1, min_width=90)
        card = gr.HTML(render.notice_html("Pick a tokenizer and press Certify: agent-shaped conversations are sampled "
                                          "turn by turn through its chat template, and each case says whether the "
                                          "trainer's prompts stay prefixes of what was sampled."),
                       elem_id="template-card")
        case = gr.Dropdown([], label="case (opens its first divergence)", elem_id="template-case", interactive=True)
        with gr.Row(equal_height=False):
            view_a, view_b = token_view("template-a"), token_view("template-b")
    outputs = [state, card, case, view_a, view_b]
    seconds = float(settings.limits().certify_s)

    def show(choice: str, key: str | None, name: str | None) -> list:
        try:
            tok, tname = _tokenizer(choice, store, key)
            doc, results = _certified(tok, tname, seconds)
        except ValueError as e:
            return [gr.skip(), render.notice_html(str(e), "error")] + [gr.skip()] * 3
        labels = [render.certify_case_label(c) for c in doc["cases"]]
        names = [c["name"] for c in doc["cases"]]
        if name not in names:
            name = next((c["name"] for c in doc["cases"] if c["status"] == "fail"), names[0] if names else None)
        res = results[names.index(name)] if name is not None else None
        a, bv = render.certify_views(divergence_sequences(res) if res else None, token_table(tok, tname), settings)
        value = labels[names.index(name)] if name is not None else None
        shown = dict(doc, tokenizer=shown_path(doc.get("tokenizer"), settings))  # public: no server path
        return [(choice, key), render.certify_card_html(shown, current=name), gr.Dropdown(choices=labels, value=value),
                a, bv]

    def run(choice: str, key: str | None) -> list:
        return show(choice, key, None)

    def on_case(st, label: str | None) -> list:
        if not st or not label:
            return [gr.skip()] * len(outputs)
        return show(st[0], st[1], label.split(" · ", 1)[0])

    share = int(settings.limits().session_events)  # one of the visitor's few heavy events (viewer/ui/fair.py)

    def fair_run(choice: str, key: str | None, request: gr.Request = None) -> list:
        try:
            with slot(request, share):
                return run(choice, key)
        except Busy as e:
            return [gr.skip(), render.notice_html(str(e), "error")] + [gr.skip()] * 3

    def fair_case(st, label: str | None, request: gr.Request = None) -> list:
        try:
            with slot(request, share):
                return on_case(st, label)
        except Busy as e:
            return [gr.skip(), render.notice_html(str(e), "error")] + [gr.skip()] * 3

    btn.click(fair_run, [pick, b.key], outputs, api_name="certify")
    case.input(fair_case, [state, case], outputs, api_name="on_case", api_visibility="private")
