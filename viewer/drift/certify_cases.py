"""The battery ``certify`` runs: small agent-shaped conversations, each probing one thing a chat
template or tokenizer can do to a multi-turn rollout (issue 21, docs/DRIFT-DOCTOR.md).

Each :class:`Case` is a conversation as an agent harness records it (assistant messages with
``tool_calls`` whose ``arguments`` are the JSON *string* the model wrote, as OpenAI-style clients
send them back). ``pieces`` = the model sampled ``<tool_call>`` / ``</tool_call>`` as ordinary
pieces rather than the special token (docs/DRIFT.md §2.2). Tool-call turns carry a short
``reasoning_content`` so that a hybrid-thinking template's handling of reasoning (its own cases)
does not hide what a tool case probes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Case", "battery", "TOOLS"]

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "read_file", "description": "Read a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}},
    {"type": "function", "function": {
        "name": "run", "description": "Run a shell command",
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"},
                                                        "timeout": {"type": "number"},
                                                        "env": {"type": "object"}}, "required": ["cmd"]}}},
]
_SYSTEM = "You are a coding agent. Use the tools to inspect and change the repository."
_THINK = "I should look at the file first."


@dataclass(frozen=True)
class Case:
    """One named conversation of the battery (or one read from ``--conversations``)."""

    name: str
    what: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    pieces: bool = False
    source: str = "battery"


def _call(name: str, arguments: str, i: int = 0) -> dict[str, Any]:
    return {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": arguments}}


def _asst(content: str = "", calls: list[dict[str, Any]] | None = None, think: str | None = _THINK) -> dict[str, Any]:
    m: dict[str, Any] = {"role": "assistant", "content": content}
    if think is not None:
        m["reasoning_content"] = think
    if calls:
        m["tool_calls"] = calls
    return m


def _tool(content: str, i: int = 0) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": f"call_{i}", "content": content}


def _tool_case(name: str, what: str, arguments: str, fn: str = "run") -> Case:
    msgs = [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": "Fix the failing test."},
            _asst("", [_call(fn, arguments)]), _tool("ok"), _asst("Done.")]
    return Case(name, what, msgs, TOOLS)


def battery() -> list[Case]:
    """The built-in cases, in a stable order (their names are stable keys of the JSON)."""
    user = {"role": "user", "content": "Fix the failing test."}
    sys_msg = {"role": "system", "content": _SYSTEM}
    cases = [
        Case("plain_chat", "two plain user/assistant exchanges, no tools, no reasoning",
             [{"role": "user", "content": "Hi"}, _asst("Hello! How can I help?", think=None),
              {"role": "user", "content": "Say bye."}, _asst("Bye.", think=None)]),
        Case("think_earlier_turn", "reasoning in an earlier turn, then a new user message",
             [{"role": "user", "content": "What is 2+2?"}, _asst("4", think="2 plus 2 is 4."),
              {"role": "user", "content": "And 3+3?"}, _asst("6", think="3 plus 3 is 6.")]),
        Case("think_in_tool_loop", "reasoning before a tool call, within one user query",
             [sys_msg, user, _asst("", [_call("read_file", '{"path": "a.py"}')]), _tool("x = 1"),
              _asst("Done.")], TOOLS),
        Case("no_reasoning_tool_turn", "a tool-call turn without reasoning (the template's `loop.last` branch)",
             [sys_msg, user, _asst("", [_call("read_file", '{"path": "a.py"}')], think=None), _tool("x = 1"),
              _asst("Done.", think=None)], TOOLS),
        _tool_case("tool_args_canonical", "tool arguments already as `tojson` writes them", '{"cmd": "ls -la"}'),
        _tool_case("tool_args_compact", "tool arguments without spaces (as many models write them)",
                   '{"cmd":"ls","timeout":5}'),
        _tool_case("tool_args_key_order", "tool arguments with keys out of alphabetical order",
                   '{"timeout": 5, "cmd": "ls"}'),
        _tool_case("tool_args_non_ascii", "non-ASCII text in tool arguments", '{"cmd": "echo héllo 日本"}'),
        _tool_case("tool_args_unicode_escape", "non-ASCII written as \\u escapes", '{"cmd": "echo h\\u00e9llo"}'),
        _tool_case("tool_args_escaped_quotes", "escaped quotes and backslashes in arguments",
                   '{"cmd": "grep \\"a\\\\b\\" x.py"}'),
        _tool_case("tool_args_whitespace", "newlines and indentation inside the arguments JSON",
                   '{\n  "cmd": "ls"\n}'),
        _tool_case("tool_args_nested", "nested objects and arrays", '{"cmd": "env", "env": {"A": ["1", {"b": null}]}}'),
        _tool_case("tool_args_float", "a float written as 1.0 and an exponent", '{"cmd": "sleep", "timeout": 1.0}'),
        _tool_case("tool_args_exponent", "a number in exponent notation", '{"cmd": "sleep", "timeout": 1e3}'),
        _tool_case("tool_args_empty_object", "an empty object as arguments", "{}", fn="read_file"),
        Case("parallel_tool_calls", "two tool calls in one assistant turn, two tool results",
             [sys_msg, user, _asst("", [_call("read_file", '{"path": "a.py"}', 0), _call("run", '{"cmd": "ls"}', 1)]),
              _tool("x = 1", 0), _tool("a.py", 1), _asst("Done.")], TOOLS),
        Case("tool_result_multiline", "a tool result with newlines, tabs and trailing whitespace",
             [sys_msg, user, _asst("", [_call("run", '{"cmd": "cat a.py"}')]), _tool("def f():\n\treturn 1  \n\n"),
              _asst("Done.")], TOOLS),
        Case("content_and_tool_call", "text before a tool call in the same turn",
             [sys_msg, user, _asst("Let me look.", [_call("read_file", '{"path": "a.py"}')]), _tool("x = 1"),
              _asst("Done.")], TOOLS),
        Case("empty_assistant_content", "an assistant turn with empty content (tool call only, no reasoning)",
             [sys_msg, user, _asst("", [_call("run", '{"cmd": "ls"}')], think=None), _tool("a.py"),
              _asst("", think=None)], TOOLS),
        Case("system_with_tools", "a system prompt together with tool definitions, plain answer",
             [sys_msg, {"role": "user", "content": "Hello"}, _asst("Hi.", think=None),
              {"role": "user", "content": "Thanks"}, _asst("You're welcome.", think=None)], TOOLS),
        Case("special_token_text", "text that looks like special tokens in user and assistant content",
             [{"role": "user", "content": "What does <|im_end|> mean?"},
              _asst("It ends a turn, like <|endoftext|> ends a text.", think=None),
              {"role": "user", "content": "And <tool_call>?"}, _asst("It opens a tool call.", think=None)]),
        Case("tool_call_as_pieces", "the model sampled <tool_call> as ordinary pieces, not the special token",
             [sys_msg, user, _asst("", [_call("read_file", '{"path": "a.py"}')]), _tool("x = 1"),
              _asst("Done.")], TOOLS, pieces=True),
        Case("trailing_newlines", "assistant content ending in newlines (end-of-turn / newline handling)",
             [{"role": "user", "content": "Write a line."}, _asst("line\n\n", think=None),
              {"role": "user", "content": "Again."}, _asst("line\n", think=None)]),
        Case("leading_newlines", "assistant content starting with newlines",
             [{"role": "user", "content": "Write."}, _asst("\n\nstart", think=None),
              {"role": "user", "content": "Again."}, _asst("ok", think=None)]),
    ]
    long: list[dict[str, Any]] = [sys_msg, user]
    for i in range(8):
        long += [_asst(f"Step {i}.", [_call("run", f'{{"cmd": "pytest -k t{i}"}}', i)], think=f"Try test {i}."),
                 _tool(f"{i} passed", i)]
    long.append(_asst("All tests pass."))
    cases.append(Case("long_rollout", "a long multi-turn tool loop (8 tool calls, then an answer)", long, TOOLS))
    return cases
