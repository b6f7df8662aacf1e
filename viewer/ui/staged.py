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
from typing import Any, Callable

import gradio as gr

__all__ = ["Later", "resolve", "staged"]


class Later:
    """An output value computed only after the first answer went out."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], Any]):
        self.fn = fn


def resolve(values: list) -> list:
    """The values with every :class:`Later` computed (for callers that want one answer)."""
    return [v.fn() if isinstance(v, Later) else v for v in values]


def staged(fn: Callable[..., list]) -> Callable[..., Any]:
    """``fn`` as a two-step generator (one step when it returned no :class:`Later`)."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        values = fn(*args, **kwargs)
        if any(isinstance(v, Later) for v in values):
            yield [gr.skip() if isinstance(v, Later) else v for v in values]
        yield resolve(values)

    return run
