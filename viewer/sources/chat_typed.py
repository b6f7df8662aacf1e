"""OpenAI chat messages decoded by msgspec straight into the shape :mod:`viewer.sources.chat_messages` makes.

A reader whose rows hold a list of chat messages (tau-bench's ``traj``) decodes that list typed,
:data:`MESSAGES`, and turns it into the messages it hands on with :func:`made` (``msgspec.to_builtins``,
in C): the same dicts, keys in the same order, as :func:`~viewer.sources.chat_messages.chat_messages`
makes from the generic decode, without a Python step per message (issue 35: at 24 messages a row, that
Python was most of tau-bench's reading time).

The types accept only messages that need no choice: a chat role (the tag), ``content`` present, tool
calls ``{id, type: "function", function: {name, arguments: text}}``, a tool reply's ``tool_call_id`` and
``name`` text or null, and the SDK leftovers ``chat_message`` drops only at their empty values (null,
``[]``) so they are left out as defaults. Every other key is refused (``forbid_unknown_fields``: nothing is
skipped unchecked, so what msgspec accepts here json.loads accepts too, with the same values). A row
with any other message (reasoning text, a call saved as JSON text, an empty ``tool_calls``, an unknown
key) fails to decode typed and is decoded generically: ``chat_messages`` then applies its rules.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal, Union

import msgspec
from msgspec import Meta, Struct

__all__ = ["MESSAGES", "made", "is_typed"]


class _Function(Struct, forbid_unknown_fields=True, gc=False):
    name: str
    arguments: str  # an object would be dumped to text by chat_messages: not here


class _Call(Struct, kw_only=True, forbid_unknown_fields=True, gc=False):
    id: str = ""  # chat_messages: str(id or ""); a null id is left to it
    type: Literal["function"] = "function"
    function: _Function


# gc=False: a decoded message holds no reference cycle (JSON values cannot), so the collector need not
# track it. omit_defaults: a leftover at its empty value, a missing tool_calls, is left out.
class _Message(Struct, tag_field="role", omit_defaults=True, forbid_unknown_fields=True, gc=False):
    content: Any  # required: a message without it gets "content": None from chat_messages
    reasoning_content: None = None  # reasoning text is chat_messages' (it picks one of three)
    reasoning: None = None
    provider_specific_fields: None = None
    tool_calls: Annotated[list[_Call], Meta(min_length=1)] | None = None
    annotations: Annotated[list[Any], Meta(max_length=0)] = []
    refusal: None = None
    function_call: None = None
    audio: None = None


class _NotTool(_Message):  # chat_messages keeps a reply's id and name only on a tool message
    tool_call_id: None = None
    name: None = None


class _System(_NotTool, tag="system"):
    pass


class _Developer(_NotTool, tag="developer"):
    pass


class _User(_NotTool, tag="user"):
    pass


class _Assistant(_NotTool, tag="assistant"):
    pass


class _Tool(_Message, tag="tool"):
    tool_call_id: str | None = None
    name: str | None = None


MESSAGES = list[Union[_System, _Developer, _User, _Assistant, _Tool]]


def is_typed(msgs: Any) -> bool:
    """Whether ``msgs`` was decoded as :data:`MESSAGES` (an empty list either way: both make [])."""
    return bool(msgs) and isinstance(msgs, list) and isinstance(msgs[0], _Message)


def made(msgs: list[_Message]) -> list[dict[str, Any]]:
    """The messages as ``chat_messages`` makes them (see the module doc)."""
    return msgspec.to_builtins(msgs)
