"""The Drift tab's re-render badge says what both renders below it say (issue 25.10)."""
from __future__ import annotations

from viewer.drift.values import Classification, RenderComparison, TemplateCheck
from viewer.render.drift import _rerender_badge


def _check(vllm: bool, plain: bool | None) -> TemplateCheck:
    why = Classification(cause="think_dropped", al_class="x", evidence="e")
    v = RenderComparison("vllm", vllm, classification=None if vllm else why)
    p = None if plain is None else RenderComparison("plain", plain, classification=None if plain else why)
    return TemplateCheck("engine", vllm, cause=None if vllm else "think_dropped", vllm=v, plain=p)


def test_badge_names_both_renders_when_they_disagree():
    html = _rerender_badge(_check(True, False))
    assert "re-render: vLLM-style equal, TRL-style differs (think_dropped)" in html and "ri-d-bad" in html
    assert "vLLM-style differs (think_dropped), TRL-style equal" in _rerender_badge(_check(False, True))


def test_badge_stays_short_when_they_agree():
    assert "re-render: equal<" in _rerender_badge(_check(True, True))
    assert "re-render: equal<" in _rerender_badge(_check(True, None))  # the presenter's checks run no plain render
    assert "re-render: think_dropped<" in _rerender_badge(_check(False, False))
