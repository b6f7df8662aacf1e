"""The chat-template render cache's key (viewer.tokenizer.render_worker): two requests share a
cached render only when they would be sent as the same JSON, and what a key holds counts
against the cache's bound. The oracle is transformers' own apply_chat_template."""
from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from viewer.config import SAMPLE_DIR
from viewer.tokenizer import render_worker
from viewer.tokenizer.template import render_prompt_text


@pytest.fixture(autouse=True)
def _fresh_renders():
    render_worker.shutdown(clear_cache=True)
    yield
    render_worker.shutdown(clear_cache=True)


def _tok(template: str):
    tok = AutoTokenizer.from_pretrained(str(SAMPLE_DIR / "smollm2" / "tokenizer"))
    tok.chat_template = template
    return tok


def test_values_python_equates_but_json_does_not_render_apart():
    """``True == 1 == 1.0`` and ``0.0 == -0.0`` in Python (equal dict keys); a template sees them apart."""
    tok = _tok("{% for m in messages %}[{{ m.content }}|{{ m.n | tojson }}]{% endfor %}")
    for values in ((True, 1, 1.0), (0.0, -0.0), ("1", 1)):
        got, want = [], []
        for v in values:
            msgs = [{"role": "user", "content": v, "n": v}]
            got.append(render_prompt_text(tok, msgs, add_generation_prompt=False))
            want.append(tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=False))
        assert got == want
        assert len(set(got)) == len(values), got


def test_a_cached_render_is_reused_and_what_its_key_holds_is_bounded(monkeypatch):
    """A template that ignores the messages renders 'x' for each; their 1M-character contents are
    held by the keys, so an 8M-character cache keeps at most seven of them."""
    tok = _tok("x")
    monkeypatch.setattr(render_worker, "_CACHE_CHARS", 8 << 20)
    msgs = [[{"role": "user", "content": chr(65 + i) * (1 << 20)}] for i in range(12)]
    for m in msgs:
        assert render_prompt_text(tok, m, add_generation_prompt=False) == "x"
    assert 0 < len(render_worker._cache) <= 7
    assert render_worker._cache_size <= 8 << 20
    renders = render_worker.stats()["renders"]
    assert render_prompt_text(tok, msgs[-1], add_generation_prompt=False) == "x"
    assert render_worker.stats()["renders"] == renders  # served from the cache
