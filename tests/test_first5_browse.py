"""The browse screen's handlers as plain methods (no page), and its modules free of markup."""
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def test_browse_modules_build_no_markup():
    """HTML is built only in viewer/render/: the browse screen's modules hold no tags."""
    offenders = []
    for p in sorted((REPO / "viewer" / "ui").glob("browse*.py")):
        text = p.read_text()
        offenders += [f"{p.name}: {tag}" for tag in ("<div", "<span", "<table", "<pre", "<p>", "<b>", "<a ")
                      if tag in text]
    assert offenders == []


@pytest.fixture(scope="module")
def handlers(tmp_path_factory):
    import gradio as gr

    from viewer.config import Settings
    from viewer.ui.browse import BrowseHandlers
    from viewer.ui.browse_handlers import Slots
    from viewer.ui.store import RolloutStore

    settings = Settings.from_env()
    comps = [gr.Dataframe(), gr.Dataframe(), gr.Plot(), gr.Plot(), gr.Plot()]
    return BrowseHandlers(settings, RolloutStore(settings), Slots(*comps, outputs=[None] * 19, turn_outputs=[None] * 5))


def test_step_handlers_move_and_stop_at_the_ends(handlers):
    import gradio as gr

    from viewer.ui.staged import resolve

    vals = resolve(handlers.on_sample("qwen3-tiny", ""))
    key, first = vals[0], vals[-5]
    order = [t.index for t in handlers.store.get(key).rollout.turns]
    assert first in order
    nxt = handlers.on_next(key, first)
    assert nxt[0] == order[order.index(first) + 1]
    assert handlers.on_prev(key, float(order[1]))[0] == order[0]  # the number box sends a float
    skip = type(gr.skip())
    # at either end the turn stays (nothing sent; a message says so)
    assert all(isinstance(v, skip) for v in handlers.on_prev(key, float(order[0])))
    assert all(isinstance(v, skip) for v in handlers.on_next(key, order[-1]))
    # with "trained turns only", the steps land on trained turns only
    trained = [t.index for t in handlers.store.get(key).rollout.turns if t.trained]
    assert handlers.on_next(key, trained[0], True)[0] == trained[1]
    assert all(isinstance(v, skip) for v in handlers.on_next(key, trained[-1], True))


def test_open_failure_changes_only_the_status_line(handlers):
    import gradio as gr

    vals = handlers.on_path("../../etc/passwd", "")
    assert len(vals) == 19 and "ri-error" in vals[2]
    assert all(isinstance(v, type(gr.skip())) for i, v in enumerate(vals) if i != 2)


def _raw_min_logprobs(sample: str) -> dict[int, float]:
    """Each call's lowest output logprob, from the capture's own trace.json (plain JSON): call number -> min."""
    import json

    calls = json.loads((REPO / "sample_data" / sample / "trace.json").read_text())
    return {c["turn"]: min(c["per_token_logps"]) for c in calls}


def test_filters_take_the_typed_threshold_and_say_what_they_leave(handlers):
    """Issue 41, point 6: the threshold is the user's, a filter that leaves nothing says so (and how to
    clear it), a shown turn the filters hide is replaced by the first listed, and an open clears them."""
    import gradio as gr

    from viewer.config import LOW_LOGPROB
    from viewer.ui.browse_handlers import FILTERS
    from viewer.ui.staged import resolve

    vals = resolve(handlers.on_sample("qwen3-tiny", ""))
    key = vals[0]
    assert vals[FILTERS:FILTERS + 3] == [False, False, ""]  # an open starts unfiltered
    mins = _raw_min_logprobs("qwen3-tiny")
    skip = type(gr.skip())
    # the default threshold (the one constant) lists every call of this random-weight capture
    assert all(m < LOW_LOGPROB for m in mins.values())
    assert len(handlers.on_filter(key, False, True, None, "(any)", 1)[0]["data"]) == len(mins)
    # a threshold under every token leaves none: said, with the way out, the turn on screen kept
    below = min(mins.values()) - 5
    table, note, *turn = handlers.on_filter(key, False, True, below, "(any)", 1)
    assert table["data"] == [] or table["data"] == [[""] * len(table["headers"])]
    assert f"No turns match a token below {below:g}" in note and "clear filters" in note
    assert "still shows turn 1" in note and all(isinstance(v, skip) for v in turn)
    # a typed threshold: the calls whose lowest logprob is under it
    at = sorted(mins.values())[1] + 1e-6
    table, note, *turn = handlers.on_filter(key, False, True, at, "(any)", 1)
    calls = [row[1] for row in table["data"]]
    assert calls == [c for c, m in mins.items() if m < at] and f"{len(calls)} of {len(mins)} turns match" in note
    # turn 0 (the title call) is hidden by "trained only": the first listed trained turn replaces it
    table, note, *turn = handlers.on_filter(key, True, False, None, "(any)", 0.0)
    first = table["data"][0][0]
    assert turn[0] == first and "Turn 0 is hidden" in note
    # not a number (an emptied box, an API client's text): the setting's threshold
    assert handlers.low_at(None) == handlers.low_at("x") == handlers.low_at(float("nan")) == LOW_LOGPROB
    # the threshold alone changes nothing while its box is unticked
    assert all(isinstance(v, skip) for v in handlers.on_threshold(key, False, False, -1.0, "(any)", 1))
    cleared = handlers.on_clear(key)
    assert cleared[:3] == [False, False, "(any)"] and len(cleared[3]["data"]) == len(mins) and cleared[4] == ""
