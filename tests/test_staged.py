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


def test_a_key_press_whose_request_arrives_after_a_newer_ones_answers_nothing():
    # n n in presenter mode: two requests, which may reach the server in either order. Numbered as they
    # arrived, the first press arriving last overtook the second, and the tokens stayed on the older note
    # while the callout showed the newer one. The page numbers its presses; an older one answers nothing.
    import gradio as gr

    import aio

    ran = []

    def note(k, press):
        ran.append(k)
        return [f"tokens of note {k}", Later(lambda: f"plot {k}")]

    visitor, other = gr.Request(session_hash="presses"), gr.Request(session_hash="presses-elsewhere")
    skip = gr.skip()
    for base, defer in ((0, 0.05), (10, 0.0)):  # (the presses go on numbering on the same page)
        run = staged(note, defer, turn_only=True, press=(lambda inputs: inputs[-1], 2))

        async def answers(*args):
            got = run(*args)
            return [a async for a in got] if defer else [await got]

        async def go():
            newer = await answers(3, base + 2, visitor)  # the second press, arrived first
            older = await answers(2, base + 1, visitor)  # the first press, arrived last
            unnumbered = await answers(4, None, visitor)  # (an API call: no press number; arrival decides)
            elsewhere = await answers(5, base + 1, other)  # another page's presses are its own
            return newer, older, unnumbered, elsewhere

        del ran[:]
        newer, older, unnumbered, elsewhere = aio.run(go())
        assert newer[-1] == ["tokens of note 3", "plot 3"] and older == [[skip, skip]]
        assert unnumbered[-1] == ["tokens of note 4", "plot 4"] and elsewhere[-1] == ["tokens of note 5", "plot 5"]
        assert ran == [3, 4, 5]  # the stale press's handler never ran
