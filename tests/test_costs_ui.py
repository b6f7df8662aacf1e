"""The Drift tab's gradient-cost panel without a browser: the handlers (viewer/ui/drift_handlers.py),
the per-cause HTML (viewer/render/costs.py) and the sweep figure (viewer/plots/costs.py). Expected
numbers are the sample's, proven against TRL 1.14 in tests/test_trainer_oracle.py (docs/TRAINER.md:
165 of 242 trained tokens lost in message mode, 0 in contract mode)."""
from __future__ import annotations

import gradio as gr

from viewer import plots, render
from viewer.config import SAMPLE_DIR, Settings
from viewer.ui import drift_handlers as dh
from viewer.ui.store import RolloutStore

SAMPLE = SAMPLE_DIR / "qwen3-tiny"


def test_turn_panel_costs_of_the_open_rollout():
    store = RolloutStore(Settings(data_root=str(SAMPLE_DIR)))
    key = store.open(SAMPLE).key
    tp = dh.TurnPanel(Settings(data_root=str(SAMPLE_DIR)), store)
    html, fig = tp.costs(key, "trl-message", "tool-calls")
    assert 'data-gradient-lost="165"' in html and 'data-table="by-cause"' in html and "special_token" in html
    assert 'data-table="what-if"' in html and "contract_mode" in html and "not measured" in html
    line = next(t for t in fig.data if t.type == "scatter")
    # TRL 1.14 on the sample: the 165-token drift forks under thresholds 0 and 64, realigns from 256 on
    assert list(line.x) == ["0", "64", "256", "1024", "inf"] and list(line.y) == [0, 0, 165, 165, 165]
    html, _ = tp.costs(key, "trl-contract", None)
    assert 'data-gradient-lost="0"' in html and "No trained token loses its gradient" in html
    assert tp.costs_follow(False, key, dh.AUTO, "tool-calls") == [gr.skip(), gr.skip()]
    html, fig = tp.costs(None)
    assert "Open a rollout" in html and not fig.data


def test_cost_html_escapes_data():
    g = {"tokens_losing_gradient": 2, "by_cause": {"<b>x</b>": 2},
         "by_turn": [{"rollout": "<img src=x onerror=alert(1)>", "turn": 1, "at_turn": 2, "tokens": 2,
                      "cause": "<b>x</b>", "evidence": "</script><script>alert(1)</script>"}],
         "what_if": [{"name": "n", "what": "<i>w</i>", "measured_rollouts": 0, "not_measured": {"<u>r</u>": 1},
                      "baseline_tokens_losing_gradient": 0, "tokens_losing_gradient": 0, "recovered": 0, "rows": 0,
                      "baseline_rows": 0}], "sweep": None}
    html = render.gradient_cost_html(g, "<s>what</s>")
    for raw in ("<img", "<script", "<b>x", "<i>w", "<u>r", "<s>what"):
        assert raw not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert not plots.gradient_sweep_figure(g).data  # no sweep: the empty figure, no exception
