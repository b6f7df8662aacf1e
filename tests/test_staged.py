"""Two-step answers (viewer/ui/staged.py): where each step's work runs."""
from __future__ import annotations

from aio import where as _where
from viewer.memo import Memo
from viewer.ui.staged import Later, staged


def test_a_one_step_generators_plots_are_made_in_a_worker_thread():
    # The page load's deep link is a generator (its caller iterates it) also with no plot wait; its
    # plots (seconds of work on a long turn) must not be built on the event loop, where every other
    # visitor's events wait, however the tokens were made.
    import aio

    made = []

    def handler():  # the plot comes from the shared cache, as the app's plots do (made on first use)
        made.append(("tokens", _where()))
        return ["tokens", Later(lambda: memo.get_or_make("plot", lambda: made.append(("plot", _where())) or "plot"))]

    async def answers(run):
        return [a async for a in run()]

    for inline in (False, True):
        del made[:]
        memo = Memo(10**6)
        got = aio.run(answers(staged(handler, 0.0, generator=True, inline=inline)))
        assert got == [["tokens", "plot"]]
        assert ("plot", "thread") in made and ("plot", "event loop") not in made, made


def test_a_second_step_overtaken_by_a_newer_event_of_its_session_sends_nothing():
    # → then ← before the plots came: the first switch's plots, and its completion message (which repeats
    # the last value yielded), must not draw the turn left back over the newer answer.
    import asyncio

    import gradio as gr

    import aio

    def turn(n):
        return [f"tokens {n}", Later(lambda: f"plot {n}")]

    run = staged(turn, 0.05)
    visitor, other = gr.Request(session_hash="visitor"), gr.Request(session_hash="other")

    async def go():
        first = run(1, visitor)
        fast = await first.__anext__()
        newer = [a async for a in run(2, visitor)]  # started (and done) while the first waits for its plots
        elsewhere = [a async for a in run(3, other)]  # another session's event overtakes nothing of this one
        return fast, [a async for a in first], newer, elsewhere

    fast, rest, newer, elsewhere = aio.run(go())
    skip = gr.skip()
    assert fast == ["tokens 1", skip] and rest == [[skip, skip]]
    assert newer == [["tokens 2", skip], ["tokens 2", "plot 2"]]
    assert elsewhere == [["tokens 3", skip], ["tokens 3", "plot 3"]]
    assert asyncio.iscoroutinefunction(staged(turn, 0.0))  # no wait: one answer, not a generator


def test_the_wrapper_asks_gradio_for_the_request_after_the_handlers_own_parameters():
    import inspect

    import gradio as gr

    def handler(key: str, turn: int, view=None) -> list:
        return [key, turn, view]

    params = inspect.signature(staged(handler, 0.0)).parameters
    assert list(params) == ["key", "turn", "view", "_ri_request"] and params["_ri_request"].annotation is gr.Request
    assert params["view"].default is None and params["_ri_request"].default is None  # a direct call may leave both out
