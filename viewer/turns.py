"""Which model calls are agent turns, which are trained, and their loss masks.

Pure functions over :class:`~viewer.rollout.Turn` values (no I/O). They implement the
upstream rule (docs/FORMATS.md §2.4 steps 1–2, the TRL/OpenEnv opencode example):

1. the *primary* system prompt is that of the first call with non-empty messages and
   tools; a call is an agent turn iff it has messages, tools, and that system prompt;
2. an agent turn is trained iff its response has tool calls; its mask is 1 on every
   output token then, else 0.

Calls the rule drops are not removed: they become ``kind="bookkeeping"`` with a ``role``
recognised from the system prompt (docs/FORMATS.md §2.3) so the UI can list them. A kind or
mask recorded by the source (``origin.kind_source == "record"``, ``origin.mask_source``
set) always wins over the rule.
"""
from __future__ import annotations

from typing import Any

from viewer.rollout import Turn

__all__ = ["TITLE_PREFIX", "SUMMARISER_PREFIX", "AGENT_PREFIX", "system_prompt", "role_from_prompt",
           "kind_from_label", "has_tool_call", "classify_calls", "derive_training"]

# Opening words of opencode's system prompts (opencode 1.18.33, docs/FORMATS.md §2.3).
TITLE_PREFIX = "You are a title generator"
SUMMARISER_PREFIX = "You are a context summarization agent"
AGENT_PREFIX = "You are opencode"


def system_prompt(messages: list[dict[str, Any]]) -> str | None:
    """Content of the first system message (text parts joined), or None."""
    for m in messages:
        if isinstance(m, dict) and m.get("role") == "system":
            content = m.get("content")
            if isinstance(content, list):  # OpenAI content parts
                return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            return content if isinstance(content, str) else None
    return None


def role_from_prompt(messages: list[dict[str, Any]], tools: list[Any]) -> str:
    """title | compaction | main | other, from the system prompt and the tools offered."""
    sp = (system_prompt(messages) or "").lstrip()
    if sp.startswith(TITLE_PREFIX):
        return "title"
    if sp.startswith(SUMMARISER_PREFIX):
        return "compaction"
    if tools or sp.startswith(AGENT_PREFIX):
        return "main"
    return "other"


def kind_from_label(label: str) -> tuple[str, str]:
    """Map an explicit record label ("main", "title", "auxiliary", ...) to (kind, role)."""
    lab = label.strip().lower()
    if lab in ("main", "agent", "build", "primary"):
        return "agent", "main"
    if lab in ("title", "title_generator", "title-generator"):
        return "bookkeeping", "title"
    if lab in ("compaction", "compact", "summary", "summarizer", "summariser", "summarization"):
        return "bookkeeping", "compaction"
    return "bookkeeping", "other"


def has_tool_call(turn: Turn) -> bool:
    """The example's ``train_turn_fn``: the response carries at least one tool call."""
    return bool(turn.response.get("tool_calls"))


def classify_calls(turns: list[Turn]) -> str | None:
    """Set ``kind``/``role`` on turns whose source did not label them; return the primary prompt.

    When no call has both messages and tools (e.g. id-only records), the rule cannot
    apply and unlabelled calls stay agent turns.
    """
    primary: str | None = None
    found = False
    for t in turns:
        if t.messages and t.tools:
            primary, found = system_prompt(t.messages), True
            break
    for t in turns:
        if t.origin.kind_source == "record":
            continue
        t.origin = t.origin.replace(kind_source="rule")
        if not found:
            t.kind, t.role = "agent", "main"
            continue
        if t.messages and t.tools and system_prompt(t.messages) == primary:
            t.kind, t.role = "agent", "main"
        else:
            role = role_from_prompt(t.messages, t.tools)
            t.kind, t.role = "bookkeeping", ("other" if role == "main" else role)
    return primary


def derive_training(turns: list[Turn]) -> None:
    """Fill ``trained`` and ``mask`` where the source recorded no mask (upstream step 2).

    Agent turns: trained iff the response has tool calls, mask 1 on all output tokens.
    Bookkeeping calls: never trained, mask all 0.
    """
    for t in turns:
        if t.origin.mask_source:
            continue
        t.origin = t.origin.replace(mask_source="rule")
        t.trained = t.kind == "agent" and has_tool_call(t) and t.error is None
        t.mask = [1 if t.trained else 0] * len(t.output_ids)
