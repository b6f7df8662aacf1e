"""The OpenAI/vLLM wire format, parsed in one place (docs/CAPTURE.md §1).

* :func:`token_id`: vLLM's ``"token_id:N"`` logprob strings (``--return-tokens-as-token-ids``);
* :class:`StreamAccumulator`: a ``chat.completion`` re-assembled from server-sent events
  (``data: {...}`` lines, ``data: [DONE]``), fed incrementally (the recording proxy, as
  bytes arrive) or at once (a dataset row that stored the raw stream).

The recording proxy and the readers both use these, so a stream is understood the same
way when it is recorded and when it is read back.
"""
from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["TOKEN_ID_PREFIX", "token_id", "ids_from_entries", "StreamAccumulator"]

TOKEN_ID_PREFIX = "token_id:"
_TOKEN_ID = re.compile(r"token_id:([0-9]+)", re.ASCII)


def token_id(s: Any) -> int | None:
    """N for exactly ``"token_id:N"`` (N ASCII digits), else None: no sign, spaces or ``_``."""
    if not isinstance(s, str):
        return None
    m = _TOKEN_ID.fullmatch(s)
    return int(m.group(1)) if m else None


def ids_from_entries(entries: list[Any]) -> list[int] | None:
    """Ids of logprob entries whose ``token`` is a ``"token_id:N"`` string; None unless all are."""
    out = []
    for e in entries:
        n = token_id(e.get("token") if isinstance(e, dict) else None)
        if n is None:
            return None
        out.append(n)
    return out


class StreamAccumulator:
    """Re-assembles choice 0 of a chat completion from SSE chunks.

    :meth:`feed` takes bytes or text in any pieces; :meth:`finish` flushes a last line
    without a newline. ``problems`` lists what a reader should be told (a bad JSON chunk,
    an error event, a stream without ``[DONE]``)."""

    def __init__(self) -> None:
        self._buf = b""  # bytes until a line is whole: a UTF-8 character may span two chunks
        self._line_no = 0
        self.head: dict[str, Any] = {}  # id / object / created / model of the first chunk having them
        self.prompt_token_ids: list[int] | None = None
        self.role = "assistant"
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.tool_calls: dict[int, dict[str, Any]] = {}
        self.logprobs: list[Any] = []
        self.token_ids: list[int] = []
        self.finish_reason: str | None = None
        self.usage: Any = None
        self.done = False
        self.events = 0  # data: events seen (0 after a whole body = the answer was not SSE)
        self.error: Any = None  # an error object sent inside the stream
        self.problems: list[str] = []

    def feed(self, chunk: bytes | str) -> None:
        self._buf += chunk.encode("utf-8") if isinstance(chunk, str) else bytes(chunk)
        while b"\n" in self._buf:
            line, self._buf = self._buf.split(b"\n", 1)
            self._line(line.decode("utf-8", "replace").strip())

    def finish(self) -> "StreamAccumulator":
        if self._buf.strip():
            self._line(self._buf.decode("utf-8", "replace").strip())
        self._buf = b""
        return self

    def _line(self, line: str) -> None:
        self._line_no += 1
        if not line.startswith("data:") or self.done:
            return  # event:/id:/retry: lines and ": keep-alive" comments
        payload = line[5:].strip()
        if payload == "[DONE]":
            self.done = True
            return
        self.events += 1
        try:
            ev = json.loads(payload)
        except ValueError as e:
            self.problems.append(f"SSE line {self._line_no}: invalid JSON chunk ({getattr(e, 'msg', e)}); skipped")
            return
        if not isinstance(ev, dict):
            return
        if "error" in ev:
            self.problems.append(f"SSE line {self._line_no}: upstream error: {json.dumps(ev['error'])[:300]}")
            if "choices" not in ev:
                self.error = ev["error"]
                return
        for k in ("id", "object", "created", "model"):
            if k in ev and k not in self.head:
                self.head[k] = ev[k]
        if isinstance(ev.get("prompt_token_ids"), list) and self.prompt_token_ids is None:
            self.prompt_token_ids = ev["prompt_token_ids"]
        if ev.get("usage"):
            self.usage = ev["usage"]
        for ch in ev.get("choices") or []:
            if isinstance(ch, dict) and ch.get("index", 0) == 0:
                self._choice(ch)

    def _choice(self, ch: dict[str, Any]) -> None:
        delta = ch.get("delta") if isinstance(ch.get("delta"), dict) else {}
        if isinstance(delta.get("role"), str) and delta["role"]:
            self.role = delta["role"]
        if isinstance(delta.get("content"), str):
            self.content.append(delta["content"])
        for rk in ("reasoning_content", "reasoning"):
            if isinstance(delta.get(rk), str):
                self.reasoning.append(delta[rk])
        for tc in delta.get("tool_calls") or []:
            if not isinstance(tc, dict):
                continue
            try:
                idx = int(tc.get("index", len(self.tool_calls)))
            except (TypeError, ValueError):
                idx = len(self.tool_calls)
            slot = self.tool_calls.setdefault(idx, {"id": None, "type": "function",
                                                    "function": {"name": "", "arguments": ""}})
            if tc.get("id"):
                slot["id"] = tc["id"]
            if tc.get("type"):
                slot["type"] = tc["type"]
            fn = tc.get("function") if isinstance(tc.get("function"), dict) else {}
            if isinstance(fn.get("name"), str):
                slot["function"]["name"] += fn["name"]
            if isinstance(fn.get("arguments"), str):
                slot["function"]["arguments"] += fn["arguments"]
        lp = ch.get("logprobs") if isinstance(ch.get("logprobs"), dict) else {}
        if isinstance(lp.get("content"), list):
            self.logprobs.extend(lp["content"])
        if isinstance(ch.get("token_ids"), list):
            self.token_ids.extend(ch["token_ids"])
        if ch.get("finish_reason"):
            self.finish_reason = ch["finish_reason"]

    def message(self, reasoning_key: str = "reasoning", fill_ids: bool = False) -> dict[str, Any]:
        """The assistant message so far (``fill_ids``: tool calls without an id get ``call_N``)."""
        msg: dict[str, Any] = {"role": self.role}
        if self.content:
            msg["content"] = "".join(self.content)
        if self.reasoning:
            msg[reasoning_key] = "".join(self.reasoning)
        if self.tool_calls:
            msg["tool_calls"] = [dict(c, id=c["id"] or f"call_{i}") if fill_ids else c
                                 for i, c in sorted(self.tool_calls.items())]
        return msg

    def response(self) -> dict[str, Any]:
        """A non-streamed ``chat.completion`` body equivalent to the stream."""
        self.finish()
        return {"id": self.head.get("id"), "object": "chat.completion", "created": self.head.get("created"),
                "model": self.head.get("model"),
                "choices": [{"index": 0, "message": self.message(), "finish_reason": self.finish_reason}],
                "usage": self.usage}
