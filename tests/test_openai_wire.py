"""The OpenAI/vLLM wire parser shared by the recording proxy and the readers (viewer/sources/openai_wire.py).

Expected values are written out by hand from the wire format (docs/CAPTURE.md §1)."""
from __future__ import annotations

import json

import pytest

from viewer.capture.proxy import StreamAssembler, build_record
from viewer.sources.agentcap import parse_sse
from viewer.sources.columns import ids_from_token_strings
from viewer.sources.openai_wire import StreamAccumulator, ids_from_entries, token_id


@pytest.mark.parametrize("text,expected", [
    ("token_id:0", 0), ("token_id:151657", 151657),
    ("token_id:-1", None), ("token_id: 5", None), ("token_id:5 ", None), ("token_id:1_000", None),
    ("token_id:", None), ("token_id:٣", None), ("Token_id:5", None), ("5", None), (5, None), (None, None),
])
def test_token_id_edge_cases(text, expected):
    assert token_id(text) == expected


def test_proxy_and_reader_agree_on_token_id_strings():
    """Before, the proxy accepted 'token_id:-1' and ' 5' (int() does) while the reader refused them."""
    good = ["token_id:10", "token_id:20"]
    bad = ["token_id:10", "token_id:-1"]
    assert ids_from_entries([{"token": t} for t in good]) == [10, 20] == ids_from_token_strings(good).value
    assert ids_from_entries([{"token": t} for t in bad]) is None
    assert ids_from_token_strings(bad).value == [10] and "entry 1" in ids_from_token_strings(bad).error
    rec = build_record(0, "main", {}, {}, [1], None, [{"token": t, "logprob": -0.1} for t in bad], "stop", 0.0, 0.0)
    assert rec["completion_token_ids"] == []  # not taken from malformed strings


def _events(*chunks: dict) -> str:
    return "".join(f"data: {json.dumps(c, ensure_ascii=False)}\n\n" for c in chunks) + "data: [DONE]\n\n"


STREAM = _events(
    {"id": "c1", "model": "m", "prompt_token_ids": [1, 2], "choices": [{"index": 0, "delta": {"role": "assistant"}}]},
    {"choices": [{"index": 0, "delta": {"content": "héllo 🦩"}, "token_ids": [7, 8],
                  "logprobs": {"content": [{"token": "token_id:7", "logprob": -0.5},
                                           {"token": "token_id:8", "logprob": -1.0}]}}]},
    {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_a", "function": {"name": "read"}}]}}]},
    {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{\"p\":"}}]}}]},
    {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]},
                  "finish_reason": "tool_calls"}]},
    {"choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": 2}},
)


def test_stream_split_inside_a_utf8_character_is_reassembled():
    raw = STREAM.encode("utf-8")
    cut = raw.index("🦩".encode()) + 2  # inside the 4-byte flamingo
    a = StreamAssembler()
    for piece in (raw[:cut], raw[cut:]):
        a.feed(piece)
    resp = a.response()
    msg = resp["choices"][0]["message"]
    assert msg["content"] == "héllo 🦩"
    assert msg["tool_calls"] == [{"id": "call_a", "type": "function", "function": {"name": "read", "arguments": "{\"p\":1}"}}]
    assert a.token_ids == [7, 8] and a.prompt_token_ids == [1, 2] and a.done
    assert resp["choices"][0]["finish_reason"] == "tool_calls" and resp["usage"]["completion_tokens"] == 2


def test_proxy_and_row_reader_read_one_stream_the_same_way():
    a = StreamAssembler()
    for i in range(0, len(STREAM), 7):  # byte-sized dribbles
        a.feed(STREAM[i:i + 7].encode())
    r = parse_sse(STREAM)
    proxy_msg = a.response()["choices"][0]["message"]
    assert r.message["content"] == proxy_msg["content"] and r.message["tool_calls"] == proxy_msg["tool_calls"]
    assert r.token_ids == a.token_ids == [7, 8] and r.finish_reason == "tool_calls" and r.problems == []


def test_truncated_and_bad_chunks_are_reported():
    acc = StreamAccumulator()
    acc.feed('data: {"choices": [{"index": 0, "delta": {"content": "a"}}]}\n\ndata: {broken\n\n')
    acc.finish()
    assert not acc.done and acc.events == 2
    assert any("invalid JSON" in p for p in acc.problems)
    r = parse_sse('data: {"choices": [{"index": 0, "delta": {"content": "a"}}]}\n')
    assert r.message["content"] == "a" and any("without 'data: [DONE]'" in p for p in r.problems)
