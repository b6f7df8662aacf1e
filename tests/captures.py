"""Build small capture folders with the real Qwen3 tokenizer, for app and browser tests.

Ids come from really tokenising the texts given; logprobs are test values chosen here
(a fixed ramp), so tests can predict every number they assert.
"""
from __future__ import annotations

import json
from pathlib import Path

from viewer.tokenizer import load_qwen3, render_prompt_ids

TOOLS = [{"type": "function", "function": {"name": "bash", "description": "Run a shell command.",
                                           "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                                                          "required": ["command"]}}}]


def ramp(n: int) -> list[float]:
    """Logprobs -0.05, -0.55, ... cycling through -4.55: every colour bucket appears."""
    return [-(0.05 + 0.5 * (i % 10)) for i in range(n)]


def write_capture(folder: Path, user_text: str, answer_text: str, *, tool_command: str | None = "ls") -> Path:
    """One agent call whose output is ``answer_text`` (+ a tool call) tokenised canonically."""
    tok = load_qwen3()
    folder.mkdir(parents=True, exist_ok=True)
    messages = [{"role": "system", "content": "You are opencode, an interactive CLI tool."},
                {"role": "user", "content": user_text}]
    prompt = render_prompt_ids(tok, messages, tools=TOOLS)
    text = answer_text
    tool_calls = []
    if tool_command is not None:
        args = json.dumps({"command": tool_command})
        text += f'\n<tool_call>\n{{"name": "bash", "arguments": {args}}}\n</tool_call>'
        tool_calls = [{"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": args}}]
    out = tok.encode(text, add_special_tokens=False) + [tok.convert_tokens_to_ids("<|im_end|>")]
    lps = ramp(len(out))
    entries = [{"token": f"token_id:{i}", "logprob": lp, "bytes": None,
                "top_logprobs": [{"token": f"token_id:{i}", "logprob": lp}, {"token": "token_id:15", "logprob": -6.0}]}
               for i, lp in zip(out, lps)]
    record = {"turn": 1, "kind": "main",
              "request": {"model": "Qwen/Qwen3-4B-Instruct-2507", "messages": messages, "tools": TOOLS},
              "response": {"object": "chat.completion", "model": "Qwen/Qwen3-4B-Instruct-2507",
                           "choices": [{"index": 0, "finish_reason": "tool_calls" if tool_calls else "stop",
                                        "message": {"role": "assistant", "content": answer_text,
                                                    **({"tool_calls": tool_calls} if tool_calls else {})}}]},
              "prompt_token_ids": prompt, "completion_token_ids": out,
              "completion_tokens": [f"token_id:{i}" for i in out], "logprobs": entries, "per_token_logps": lps,
              "finish_reason": "tool_calls" if tool_calls else "stop", "latency_s": 0.1, "timestamp": 1.0}
    (folder / "trace.json").write_text(json.dumps([record]))
    (folder / "summary.json").write_text(json.dumps({"reward": 0.5}))
    return folder


# Payloads that would run code if any of them reached the DOM as markup: each one calls
# alert() or sets the title to PWNED, so the browser guard (tests/test_hostile_browser.py)
# sees a dialog, an injected element or a changed title.
XSS = ["<img src=x onerror=alert('img')>", "<svg/onload=alert('svg')>", "\"><script>alert('s')</script>",
       "' onmouseover='document.title=\"PWNED\"' x='", "<a href=\"javascript:alert('a')\">click</a>",
       "<iframe srcdoc=\"<script>parent.alert('f')</script>\"></iframe>", "</textarea><b onclick=alert(1)>b</b>"]


def write_hostile_everywhere(folder: Path) -> Path:
    """A capture whose every user-visible string is hostile: model, tool names and descriptions,
    tool-call arguments, output text, top-k alternatives (as token strings), task, visible and
    held-out tests, summary fields. ``folder``'s own name may be hostile too."""
    tok = load_qwen3()
    folder.mkdir(parents=True, exist_ok=True)
    x = " ".join(XSS)
    model = "Qwen3 " + XSS[0]
    tools = [{"type": "function", "function": {"name": XSS[i], "description": XSS[(i + 1) % len(XSS)],
                                               "parameters": {"type": "object", "properties": {
                                                   XSS[2]: {"type": "string", "description": XSS[3]}}}}}
             for i in range(3)]
    messages = [{"role": "system", "content": "You are opencode, " + XSS[4]}, {"role": "user", "content": x}]
    prompt = render_prompt_ids(tok, messages, tools=tools)
    args = json.dumps({XSS[2]: x})
    text = x + f'\n<tool_call>\n{{"name": {json.dumps(XSS[0])}, "arguments": {args}}}\n</tool_call>'
    out = tok.encode(text, add_special_tokens=False) + [tok.convert_tokens_to_ids("<|im_end|>")]
    lps = ramp(len(out))
    entries = [{"token": f"token_id:{i}", "logprob": lp, "bytes": None,
                "top_logprobs": [{"token": f"token_id:{i}", "logprob": lp},
                                 {"token": XSS[k % len(XSS)], "logprob": -6.0}]}
               for k, (i, lp) in enumerate(zip(out, lps))]
    calls = [{"id": "call_1", "type": "function", "function": {"name": XSS[0], "arguments": args}}]
    record = {"turn": 1, "kind": "main", "request": {"model": model, "messages": messages, "tools": tools},
              "response": {"object": "chat.completion", "model": model, "choices": [{
                  "index": 0, "finish_reason": "tool_calls",
                  "message": {"role": "assistant", "content": x, "tool_calls": calls}}]},
              "prompt_token_ids": prompt, "completion_token_ids": out,
              "completion_tokens": [f"token_id:{i}" for i in out], "logprobs": entries, "per_token_logps": lps,
              "finish_reason": "tool_calls", "latency_s": 0.1, "timestamp": 1.0}
    (folder / "trace.json").write_text(json.dumps([record]))
    (folder / "task.json").write_text(json.dumps({"task_id": XSS[1], "instruction": x, "source": XSS[2]}))
    (folder / "visible_tests.txt").write_text(x)
    (folder / "held_out_tests.json").write_text(json.dumps([{"input": XSS[3], "output": XSS[4]}]))
    (folder / "summary.json").write_text(json.dumps({"reward": 0.25, "status": XSS[5], "error": XSS[6],
                                                     "model": model, "tool_counts": {XSS[0]: 1}}))
    return folder
