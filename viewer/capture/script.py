"""Scripted-expert mode: a deterministic "agent" for tests and demos (docs/CAPTURE.md §7).

A :class:`Script` holds the replies a solved task needs; per call the recording proxy adds a
``structured_outputs`` regex that forces the model to write exactly the next step, while
the model's own logprobs are still recorded. :func:`kind_of` tells the agent's main calls
from its bookkeeping calls (title generator, summariser).
"""
from __future__ import annotations

from typing import Any

from viewer.turns import role_from_prompt

__all__ = ["Script", "regex_literal", "kind_of"]


def regex_literal(text: str) -> str:
    """A regex matching exactly ``text`` (only regex metacharacters escaped; newlines as ``\\n``).

    ``re.escape`` also escapes spaces and other harmless characters, which some
    grammar engines reject; this keeps the pattern minimal.
    """
    out = []
    for ch in text:
        if ch in ".^$*+?()[]{}|\\/":
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        else:
            out.append(ch)
    return "".join(out)


def kind_of(body: dict[str, Any]) -> str:
    """main | title | compaction | other, from the request's system prompt and tools."""
    msgs = body.get("messages") if isinstance(body.get("messages"), list) else []
    tools = body.get("tools") if isinstance(body.get("tools"), list) else []
    return role_from_prompt(msgs, tools)


class Script:
    """Scripted expert: a ``structured_outputs`` regex per call (docs/CAPTURE.md §8).

    ``steps`` are the exact assistant outputs of the main agent, in order; the step of a
    call is the number of assistant messages already in its request, so an opencode retry
    of the same call gets the same regex. ``title`` forces the title generator's answer.
    """

    def __init__(self, steps: list[str], title: str | None = "Solve the task",
                 logit_bias: dict[str, float] | None = None):
        self.steps = steps
        self.title = title
        # e.g. {"151657": -100}: makes the grammar spell <tool_call> as ordinary pieces, as a
        # freely sampling model does (docs/CAPTURE.md §2), so the capture shows that drift case
        self.logit_bias = logit_bias or {}

    def regex_for(self, body: dict[str, Any], kind: str) -> str | None:
        if kind == "title":
            return regex_literal(self.title) if self.title else None
        if kind != "main":
            return None
        msgs = body.get("messages") or []
        step = sum(1 for m in msgs if isinstance(m, dict) and m.get("role") == "assistant")
        if step < len(self.steps):
            return regex_literal(self.steps[step])
        return regex_literal(self.steps[-1]) if self.steps else None
