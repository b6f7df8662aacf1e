"""Re-rendering a prompt the way vLLM does before its chat template runs (docs/CAPTURE.md §2):
tool-call ``arguments`` strings are parsed into objects, text-only content lists joined.

The template and its inputs are the visitor's data (a capture's own ``chat_template.jinja``, a
row's or a request's ``chat_template_kwargs``), so (issue 26):

* ``chat_template_kwargs`` from data pass only through a typed allow-list
  (:data:`TEMPLATE_KWARGS`: what real templates read, e.g. Qwen3's ``enable_thinking``); a
  ``chat_template`` key, or anything else, never reaches the renderer;
* every render runs in a worker process within the ``template_s`` / ``template_mb`` budgets
  (:mod:`viewer.tokenizer.render_worker`), and its result (text, template error or budget
  stop) is kept, so the Drift tab, the presenter and every visitor reuse one render.
"""
from __future__ import annotations

import copy
import hashlib
import json
from typing import Any, Sequence

__all__ = ["normalize_messages", "render_prompt_text", "render_prompt_ids", "chat_template_hash",
           "TEMPLATE_KWARGS", "template_kwargs"]

# chat_template_kwargs a conversation may carry, with the values each accepts. Read from the
# templates in use: Qwen3 ``enable_thinking``; DeepSeek-V3.1 ``thinking``; gpt-oss
# ``reasoning_effort``. Anything else in the data is dropped.
TEMPLATE_KWARGS: dict[str, tuple] = {
    "enable_thinking": (True, False),
    "thinking": (True, False),
    "reasoning_effort": ("low", "medium", "high"),
}


def template_kwargs(raw: Any) -> dict[str, Any]:
    """The allowed, well-typed part of a conversation's ``chat_template_kwargs``."""
    if not isinstance(raw, dict):
        return {}
    out = {}
    for k, ok in TEMPLATE_KWARGS.items():
        v = raw.get(k)
        if any(v is x or (type(v) is type(x) and v == x) for x in ok):
            out[k] = v
    return out


def _parse_arguments(args: Any) -> dict:
    if not args:  # None, "" → {}
        return {}
    if isinstance(args, dict):
        return args
    parsed = args
    if isinstance(args, str):
        try:
            parsed = json.loads(args)
        except json.JSONDecodeError:
            return {}
    return parsed if isinstance(parsed, dict) else {}


def normalize_messages(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy of ``messages`` as vLLM's chat parser leaves them before templating.

    * assistant ``tool_calls[].function.arguments`` JSON strings → dicts (invalid JSON,
      empty or a non-object → ``{}``); an empty ``tool_calls`` list is dropped
      (vLLM ``_postprocess_messages``);
    * a content list made only of text parts → the texts joined with ``"\\n"`` (vLLM's
      "string" content format).
    The input is not modified.
    """
    out: list[dict[str, Any]] = []
    for msg in messages:
        m = dict(msg)
        content = m.get("content")
        if isinstance(content, list) and content and all(
                isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
                for p in content):
            m["content"] = "\n".join(p["text"] for p in content)
        if m.get("role") == "assistant" and "tool_calls" in m:
            calls = m.get("tool_calls")
            if isinstance(calls, list):
                if not calls:
                    m.pop("tool_calls")
                else:
                    new_calls = []
                    for c in calls:
                        if isinstance(c, dict) and isinstance(c.get("function"), dict):
                            c = dict(c)
                            fn = dict(c["function"])
                            fn["arguments"] = copy.deepcopy(_parse_arguments(fn.get("arguments")))
                            c["function"] = fn
                        new_calls.append(c)
                    m["tool_calls"] = new_calls
        out.append(m)
    return out


def render_prompt_text(tok, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None = None,
                       chat_template_kwargs: dict[str, Any] | None = None,
                       normalize_tool_arguments: bool = True, add_generation_prompt: bool = True,
                       limits=None) -> str:
    """The prompt string the tokenizer's chat template renders (vLLM-style normalisation first),
    as ``tok.apply_chat_template(..., tokenize=False)`` would, but rendered in a worker within the
    ``template_s`` / ``template_mb`` budgets of ``limits`` (default: the settings'). Only the
    allowed ``chat_template_kwargs`` (:data:`TEMPLATE_KWARGS`) are passed. Raises BudgetExceeded
    past a budget, ValueError for a template error (or a tokenizer without a template)."""
    from viewer.tokenizer.render_worker import RenderFailed, render

    msgs = normalize_messages(messages) if normalize_tool_arguments else [dict(m) for m in messages]
    if not msgs:
        raise ValueError("Cannot apply chat template to an empty conversation.")
    template = tok.get_chat_template(None, list(tools) if tools else None)
    # as apply_chat_template does: keys whose value is None are dropped
    msgs = [{k: v for k, v in m.items() if v is not None} for m in msgs]
    kwargs = {**getattr(tok, "special_tokens_map", {}), **template_kwargs(chat_template_kwargs)}
    if limits is None:
        from viewer.config import Settings

        limits = Settings.from_env().limits()
    try:
        return render(template, msgs, list(tools) if tools else None, add_generation_prompt, kwargs, limits)
    except RenderFailed as e:
        raise ValueError(f"chat template error: {e}") from None


def render_prompt_ids(tok, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None = None,
                      chat_template_kwargs: dict[str, Any] | None = None,
                      normalize_tool_arguments: bool = True, add_generation_prompt: bool = True,
                      limits=None) -> list[int]:
    """Prompt ids as vLLM renders a chat request: template to text, then encode without
    adding special tokens (special-token text such as ``<|im_start|>`` maps to its id)."""
    text = render_prompt_text(tok, messages, tools=tools, chat_template_kwargs=chat_template_kwargs,
                              normalize_tool_arguments=normalize_tool_arguments,
                              add_generation_prompt=add_generation_prompt, limits=limits)
    # tokenizing costs ~2 s of CPU a million characters whatever the text: bounded before it starts
    if limits is None:
        from viewer.config import Settings

        limits = Settings.from_env().limits()
    limits.check_bytes("tokenize_mb", len(text), "rendered prompt")
    return list(tok.encode(text, add_special_tokens=False))


def chat_template_hash(tok) -> str:
    """Short sha256 (12 hex digits) of the tokenizer's chat template text ('' if none)."""
    t = getattr(tok, "chat_template", None)
    if not t:
        return ""
    if not isinstance(t, str):
        t = json.dumps(t, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(t.encode("utf-8")).hexdigest()[:12]
