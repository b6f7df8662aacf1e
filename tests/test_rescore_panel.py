"""viewer/ui/rescore_panel.py through Gradio's own process_api: a second Rescore of the same rollout with the
same model and trainer shows the first result instead of loading the model and scoring every row again. And its
handlers called alone (RescoreHandlers, the app's own instance)."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

import aio
from test_rescore import _build

REPO = Path(__file__).resolve().parent.parent



@pytest.mark.slow  # torch: a trainer-side forward pass
def test_same_rescore_again_reuses_the_result_and_another_choice_runs_anew(tmp_path, monkeypatch):
    from viewer.rescore import torch_available

    if not torch_available():
        from requires import need

        need("torch", "requirements-rescore.txt, installed by scripts/setup.sh")
    _build("tiny-qwen3")
    # its own copy of the sample: rescores are kept per rollout for the whole process
    shutil.copytree(REPO / "sample_data" / "qwen3-tiny", tmp_path / "own-qwen3-tiny")
    monkeypatch.setenv("VIEWER_DATA_ROOT", str(tmp_path))
    monkeypatch.setenv("VIEWER_PLOT_DEFER_S", "0")
    from gradio.state_holder import SessionState

    import viewer.rescore.model as model
    from viewer.config import Settings
    from viewer.drift import MODES
    from viewer.ui import create_app
    from viewer.ui.rescore_panel import AUTO

    loads = []
    real_load = model.load_model

    def counting_load(*a, **k):
        loads.append(a[0])
        return real_load(*a, **k)

    monkeypatch.setattr(model, "load_model", counting_load)
    demo = create_app(Settings.from_env())
    fns = {f.api_name: f for f in demo.fns.values()}
    run = fns["rescore"]
    summary_at = next(i for i, c in enumerate(run.outputs) if c.elem_id == "rescore-summary")

    def rescore(state, trainer=AUTO) -> str:
        ins = [None] * len(run.inputs)  # States (run id, key, turn) come from the session
        ins[3], ins[4] = "tiny-qwen3", trainer
        got = aio.run(demo.process_api(run, ins, state=state))
        return str(got["data"][summary_at])

    a, b = SessionState(demo), SessionState(demo)
    for st in (a, b):
        aio.run(demo.process_api(fns["open_path"], ["own-qwen3-tiny", "", None], state=st))
    first = rescore(a)
    assert "mean |Δ|" in first and loads == [loads[0]]
    values = re.findall(r'class="ri-v">([^<]*)<', first)  # mean |Δ|, max |Δ|, ratios, tokens, seconds, …
    assert len(values) >= 4
    again = rescore(a)
    assert loads == [loads[0]], "the same rescore again loaded the model again"
    assert again == first  # the runner's own result, not "another visitor's"
    by_b = rescore(b)
    assert len(loads) == 1 and re.findall(r'class="ri-v">([^<]*)<', by_b) == values
    assert "A cached result" in by_b and "same numbers" in by_b
    other = next(m for m in MODES if f"{m}" not in first)  # whose rows: the mode auto did not pick
    rescore(b, other)
    assert len(loads) == 2, "another trainer must run a new rescore"


def test_the_handlers_alone_answer_without_a_rollout_and_cancel_only_a_running_rescore():
    from viewer.config import Settings
    from viewer.rescore import importance as IS
    from viewer.ui import create_app
    from viewer.ui.rescore_panel import AUTO, on_cancel
    from viewer.ui.session import Run

    demo = create_app(Settings.from_env())
    fns = {f.api_name: f for f in demo.fns.values()}
    h = fns["rescore"].fn.__self__  # the instance the app's events call
    n_out = len(fns["rescore"].outputs)
    assert n_out == len(h.outs) + len(h.browse.turn_outputs) + 1  # the panel, the turn, the view settings

    skip = {"__type__": "update"}
    said = h.on_run(None, None, None, "tiny-qwen3", AUTO, IS.DEFAULT_MODE, "none", "none")
    assert len(said) == n_out and "Open a rollout first." in said[0] and said[1:] == [skip] * (n_out - 1)
    assert h.follow(False, None, None, IS.DEFAULT_MODE, "none", "none") == [skip] * len(h.outs)
    panel = h.panel(None, None, IS.DEFAULT_MODE, "none", "two")  # a bound that is not a number: said, by name
    assert len(panel) == len(h.outs) and "clip max must be a number or none" in panel[4]

    assert "No rescore running." in on_cancel(None)
    run = Run()
    assert "Cancelling" in on_cancel(run) and run.cancel.is_set()
    run.finish()
    assert "No rescore running." in on_cancel(run)
