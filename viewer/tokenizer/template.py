"""Re-rendering a prompt the way vLLM does before its chat template runs (docs/CAPTURE.md §2):
tool-call ``arguments`` strings are parsed into objects, text-only content lists joined."""
from __future__ import annotations

import copy
import hashlib
import json
from typing import Any, Sequence

__all__ = ["normalize_messages", "render_prompt_text", "render_prompt_ids", "chat_template_hash"]

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
                       normalize_tool_arguments: bool = True, add_generation_prompt: bool = True) -> str:
    """The prompt string the tokenizer's chat template renders (vLLM-style normalisation first)."""
    msgs = normalize_messages(messages) if normalize_tool_arguments else [dict(m) for m in messages]
    kwargs = dict(chat_template_kwargs or {})
    for k in ("tokenize", "add_generation_prompt", "tools", "conversation", "return_dict"):
        kwargs.pop(k, None)
    return tok.apply_chat_template(msgs, tools=list(tools) if tools else None, tokenize=False,
                                   add_generation_prompt=add_generation_prompt, **kwargs)


def render_prompt_ids(tok, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None = None,
                      chat_template_kwargs: dict[str, Any] | None = None,
                      normalize_tool_arguments: bool = True, add_generation_prompt: bool = True) -> list[int]:
    """Prompt ids as vLLM renders a chat request: template to text, then encode without
    adding special tokens (special-token text such as ``<|im_start|>`` maps to its id)."""
    text = render_prompt_text(tok, messages, tools=tools, chat_template_kwargs=chat_template_kwargs,
                              normalize_tool_arguments=normalize_tool_arguments,
                              add_generation_prompt=add_generation_prompt)
    return list(tok.encode(text, add_special_tokens=False))


def chat_template_hash(tok) -> str:
    """Short sha256 (12 hex digits) of the tokenizer's chat template text ('' if none)."""
    t = getattr(tok, "chat_template", None)
    if not t:
        return ""
    if not isinstance(t, str):
        t = json.dumps(t, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(t.encode("utf-8")).hexdigest()[:12]
