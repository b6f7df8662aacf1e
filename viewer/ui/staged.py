"""Handlers that answer in two steps: everything but the plots first, then the plots.

A 50k-token turn's token view is hoverable as soon as its payload is in the page, but the
plots (three plotly figures) take seconds to build and draw. A handler puts
:class:`Later` values in the slots of slow outputs; wrapped with :func:`staged` it becomes
a generator that yields the fast values first (slow slots skipped) and then everything,
so the browser paints the tokens before the plots arrive. API clients see the final yield:
the same outputs as before.
"""
from __future__ import annotations

import functools
import time
from typing import Any, Callable

import gradio as gr

__all__ = ["Later", "resolve", "staged", "DEFER_S"]

# Drawing the first plotly figure blocks the browser's main thread for ~2 s on a small machine (the
# library is compiled on first use). The plots are held back this long after the token view is sent,
# so the page paints the tokens and answers a hover before that block starts. The default of the
# VIEWER_PLOT_DEFER_S setting (an API client waits this long longer for its final answer).
DEFER_S = 0.4


class Later:
    """An output value computed only after the first answer went out."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], Any]):
        self.fn = fn


def resolve(values: list) -> list:
    """The values with every :class:`Later` computed (for callers that want one answer)."""
    return [v.fn() if isinstance(v, Later) else v for v in values]


def staged(fn: Callable[..., list], defer_s: float = DEFER_S) -> Callable[..., Any]:
    """``fn`` as a two-step generator (one step when it returned no :class:`Later`, or when
    ``defer_s`` is 0: then the plots come in the one answer)."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        values = fn(*args, **kwargs)
        if defer_s > 0 and any(isinstance(v, Later) for v in values):
            yield [gr.skip() if isinstance(v, Later) else v for v in values]
            t0 = time.monotonic()
            values = resolve(values)  # built meanwhile; only the rest of the wait is slept
            time.sleep(max(0.0, defer_s - (time.monotonic() - t0)))
        yield resolve(values)

    return run
