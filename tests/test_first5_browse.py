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
    return BrowseHandlers(settings, RolloutStore(settings), Slots(*comps, outputs=[None] * 16, turn_outputs=[None] * 5))


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
    assert len(vals) == 16 and "ri-error" in vals[2]
    assert all(isinstance(v, type(gr.skip())) for i, v in enumerate(vals) if i != 2)
