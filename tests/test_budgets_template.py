"""Chat templates from the visitor's data render within ``template_s`` / ``template_mb`` (issue 26 §1).

Two vectors, both built here: a row's ``chat_template_kwargs`` carrying its own
``chat_template`` (transformers honours that key), and a capture folder whose own
``tokenizer/chat_template.jinja`` is a time or memory bomb. Expected prompts come from
transformers' ``apply_chat_template`` itself (the real upstream renderer).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from budget_bombs import bounded, mem_margin_mb, message_of, public, rss_mb
from viewer.config import SAMPLE_DIR
from viewer.tokenizer import load_qwen3, normalize_messages
from viewer.tokenizer import render_worker
from viewer.tokenizer.template import render_prompt_text, template_kwargs
from viewer.ui.opening import open_spec
from viewer.ui.store import RolloutStore
from viewer.views import turn_view

MSGS = [{"role": "user", "content": "Write hello world."}, {"role": "assistant", "content": "print('hello')"}]
BOMBS = {
    "time": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "memory": "{{ 'x' * 3000000000 }}",
    "doubling": "{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}"
                "{% endfor %}{{ ns.s|length }}",
}


@pytest.fixture(autouse=True)
def _fresh_renders():
    render_worker.shutdown(clear_cache=True)
    yield
    render_worker.shutdown(clear_cache=True)


def test_only_known_typed_kwargs_pass():
    assert template_kwargs({"enable_thinking": False, "chat_template": "{{ 1 }}", "tokenize": True}) == \
        {"enable_thinking": False}
    assert template_kwargs({"enable_thinking": "false", "reasoning_effort": "high", "thinking": 1}) == \
        {"reasoning_effort": "high"}
    assert template_kwargs(["enable_thinking"]) == {}


def test_a_rows_own_chat_template_is_never_rendered(tmp_path, monkeypatch):
    """A messages row whose chat_template_kwargs carry ``chat_template``. Before: the server
    rendered the visitor's template (here a marker; in the issue, 1.1 GB of 'x')."""
    settings = public(monkeypatch, tmp_path)
    row = {"messages": MSGS, "chat_template_kwargs": {"chat_template": "PWNED{{ messages|length }}",
                                                      "enable_thinking": False}}
    (tmp_path / "rows.jsonl").write_text(json.dumps(row) + "\n")
    op = open_spec(RolloutStore(settings), settings, "rows.jsonl", row=0)
    tok = load_qwen3()
    want = tok.apply_chat_template(MSGS[:1], tokenize=False, add_generation_prompt=True, enable_thinking=False)
    turn = op.rollout.turns[0]
    assert "PWNED" not in tok.decode(list(turn.prompt_ids))
    assert list(turn.prompt_ids) == tok.encode(want, add_special_tokens=False)


def test_renders_equal_transformers_apply_chat_template():
    """The worker renders what apply_chat_template renders (Qwen3 with tools and thinking off,
    SmolLM2's own template), and a second render of the same prompt is served from the cache."""
    from transformers import AutoTokenizer

    from viewer.sources import load_source

    tok = load_qwen3()
    ro = load_source(SAMPLE_DIR / "qwen3-tiny")
    for t in ro.turns:
        if t.messages:
            for kw in (None, {"enable_thinking": False}):
                want = tok.apply_chat_template(normalize_messages(t.messages), tools=t.tools or None, tokenize=False,
                                               add_generation_prompt=True, **(kw or {}))
                assert render_prompt_text(tok, t.messages, tools=t.tools or None, chat_template_kwargs=kw) == want
    smol = AutoTokenizer.from_pretrained(str(SAMPLE_DIR / "smollm2" / "tokenizer"))
    want = smol.apply_chat_template(MSGS, tokenize=False, add_generation_prompt=False)
    assert render_prompt_text(smol, MSGS, add_generation_prompt=False) == want
    hits = render_worker.stats()["cache_hits"]
    assert render_prompt_text(smol, MSGS, add_generation_prompt=False) == want
    assert render_worker.stats()["cache_hits"] == hits + 1


def _bomb_capture(root: Path, template: str) -> Path:
    """A capture folder (one model call, no recorded ids: its prompt is re-rendered) whose own
    tokenizer carries ``template`` as its chat_template.jinja."""
    cap = root / "cap"
    shutil.copytree(SAMPLE_DIR / "smollm2" / "tokenizer", cap / "tokenizer")
    (cap / "tokenizer" / "chat_template.jinja").write_text(template)
    rec = {"request": {"model": "x", "messages": MSGS[:1]},
           "response": {"choices": [{"message": MSGS[1], "finish_reason": "stop"}]}}
    (cap / "trace.json").write_text(json.dumps([rec]))
    return cap


@pytest.mark.parametrize("bomb", sorted(BOMBS))
def test_a_captures_own_template_bomb_stops_at_its_budget(tmp_path, monkeypatch, bomb):
    """Opening the capture and showing its turn (what every visitor of the link does) ends within
    ``template_s`` with the budget named, the server's memory unchanged (the render ran in the
    worker), and a second visitor gets the same answer from the cache without a render.
    Before: the template ran in the server process, unbounded."""
    settings = public(monkeypatch, tmp_path, template_s=1)  # the time bomb burns a core for all of it
    cap = _bomb_capture(tmp_path, BOMBS[bomb])
    store = RolloutStore(settings)
    op = store.open(cap)
    assert op.choice.source == "capture-folder"
    before = rss_mb()
    tv, err, elapsed = bounded(lambda: turn_view(op.rollout, 0, op.choice.tokenizer, op.table), 30)
    assert err is None, repr(err)
    why = tv.turn.origin.rerender_error or ""
    budget = "1 s budget" if bomb == "time" else "256 MB budget"
    assert "BudgetExceeded: chat template render" in why and budget in why, why
    assert elapsed < 1 + 5 + 15  # the budget, the kill grace, a fresh worker's start
    assert rss_mb() - before < mem_margin_mb()
    again, err, elapsed = bounded(lambda: turn_view(op.rollout, 0, op.choice.tokenizer, op.table), 30)
    assert err is None and again.turn.origin.rerender_error == why
    assert elapsed < 1.0, f"{elapsed:.2f} s: rendered again"


def test_the_trainer_view_renders_within_the_budget(tmp_path, monkeypatch):
    """trl-message prompts (drift/trainer.py) rendered the template in the server too."""
    from viewer.budgets import BudgetExceeded
    from viewer.drift.trainer import message_prompt_ids

    public(monkeypatch, tmp_path, template_s=1)
    op = RolloutStore(public(monkeypatch, tmp_path, template_s=1)).open(_bomb_capture(tmp_path, BOMBS["time"]))
    _, err, elapsed = bounded(lambda: message_prompt_ids(op.choice.tokenizer, op.rollout.turns[0]), 30)
    assert isinstance(err, BudgetExceeded) and err.name == "template_s", repr(err)
    assert "over the 1 s budget" in message_of(err)


def test_no_worker_outlives_its_use(monkeypatch):
    """Workers are ended by shutdown (and exit on their own when the app's pipe closes); their
    environment is built from scratch (no token of the app next to the visitor's template)."""
    monkeypatch.setenv("HF_TOKEN", "hf_secret_budget_test")
    tok = load_qwen3()
    render_prompt_text(tok, MSGS[:1])
    procs = [w.proc for w in render_worker._idle]
    assert procs and all(p.poll() is None for p in procs)
    for p in procs:
        assert b"hf_secret_budget_test" not in Path(f"/proc/{p.pid}/environ").read_bytes()
    render_worker.shutdown()
    assert all(p.poll() is not None for p in procs)
