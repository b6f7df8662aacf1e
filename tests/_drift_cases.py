"""Hand-built drift cases on the real Qwen3 tokenizer + template (shared by test_drift / test_rows).

Every case is built from text and the template, never from hard-coded id lists, so the
expected offsets follow from the construction.
"""
from __future__ import annotations

import json

from viewer.rollout import Turn
from viewer.tokenizer import render_prompt_ids

IM_END, ENDOFTEXT, TOOL_CALL = 151645, 151643, 151657

TOOLS = [{"type": "function", "function": {
    "name": "bash", "description": "Run a shell command",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}]
SYSTEM = {"role": "system", "content": "You are a careful coding agent."}
USER = {"role": "user", "content": "List the files, then read main.py."}


def enc(tok, text: str) -> list[int]:
    return list(tok(text, add_special_tokens=False)["input_ids"])


def noncanonical(tok, word: str) -> list[int]:
    """Two single tokens whose concatenation spells ``word`` but re-encodes differently."""
    whole = enc(tok, word)
    for cut in range(1, len(word)):
        a, b = enc(tok, word[:cut]), enc(tok, word[cut:])
        if len(a) == 1 and len(b) == 1 and a + b != whole:
            return a + b
    raise AssertionError(f"no non-canonical split for {word!r}")


def call(command: str, args_text: str | None = None, cid: str = "c1") -> dict:
    args = args_text if args_text is not None else json.dumps({"command": command}, separators=(",", ":"))
    return {"id": cid, "type": "function", "function": {"name": "bash", "arguments": args}}


def tool_call_text(command: str, compact: bool = False) -> str:
    """What a model emits for a call (spaced JSON = what the template's tojson renders)."""
    sep = (",", ":") if compact else (", ", ": ")
    body = json.dumps({"name": "bash", "arguments": {"command": command}}, separators=sep)
    return f"<tool_call>\n{body}\n</tool_call>"


def turn(index: int, prompt: list[int], output: list[int], messages=None, tools=None, trained=True,
         request=None, prompt_source="engine", logprobs=None) -> Turn:
    return Turn(index=index, call=index, prompt_ids=list(prompt), prompt_source=prompt_source,
                output_ids=list(output), output_source="engine",
                logprobs=list(logprobs) if logprobs is not None else [-0.25] * len(output),
                mask=[1 if trained else 0] * len(output), trained=trained, messages=messages or [],
                tools=tools or [], request=request or {})


def clean_conversation(tok) -> list[Turn]:
    """Three agent turns rendered canonically: call ls, call cat, final answer.

    Each prompt is vLLM's render of the messages so far; each output is the canonical
    encoding of what the next prompt renders for that assistant turn, + ``<|im_end|>``.
    """
    msgs = [SYSTEM, USER]
    turns = []
    steps = [("ls", "main.py\nREADME.md"), ("cat main.py", "print('hi')\n"), (None, None)]
    for i, (cmd, result) in enumerate(steps):
        prompt = render_prompt_ids(tok, msgs, tools=TOOLS)
        if cmd is None:
            out_text = "main.py prints hi."
        else:
            out_text = tool_call_text(cmd)
        output = enc(tok, out_text) + [IM_END]
        turns.append(turn(i, prompt, output, messages=list(msgs), tools=TOOLS))
        if cmd is not None:
            msgs = msgs + [{"role": "assistant", "content": "", "tool_calls": [call(cmd, cid=f"c{i}")]},
                           {"role": "tool", "tool_call_id": f"c{i}", "content": result}]
    return turns
