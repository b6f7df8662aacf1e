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
