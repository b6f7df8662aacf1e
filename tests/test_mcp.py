"""Token evidence for agents (issue 38, point 5) through a real MCP client: the app launched in this process on
loopback with Gradio's MCP server on (the ``mcp`` setting, VIEWER_MCP), the ``mcp`` package's own client over
streamable HTTP and over SSE. Expected values come from the bundled capture's raw files, read here with json."""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from aio import run
from viewer.config import SAMPLE_DIR, Settings
from viewer.ui.agent_api import TOOLS, mcp_url

SEAM_OFF = os.environ.get("RI_TEST_SEAM") == "off" or os.environ.get("VIEWER_GRADIO_SEAM") == "0"

REPO = Path(__file__).resolve().parent.parent

mcp = pytest.importorskip("mcp")  # requirements.txt pins it: a missing one is an install step missed (CI fails)
from mcp import ClientSession  # noqa: E402
from mcp.client.sse import sse_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

# Gradio warns about every public event with a gr.State input as its MCP server starts; the app takes those
# off the MCP list at start (agent_api.lifespan), which test_the_tools_are_the_agent_endpoints checks.
pytestmark = pytest.mark.filterwarnings("ignore:This MCP server includes a tool that has a gr.State input")

RAW = json.loads((SAMPLE_DIR / "qwen3-tiny" / "trace.json").read_text())
MAIN = [i for i, r in enumerate(RAW) if r["kind"] == "main"]


def _tools_of(rec) -> list[str]:
    return [c["function"]["name"] for c in rec["response"]["choices"][0]["message"].get("tool_calls") or []]


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    from attack_kit import launch_in_process

    os.environ.setdefault("GRADIO_TEMP_DIR", str(tmp_path_factory.mktemp("gradio")))
    settings = Settings(mcp=True, capture_out_root=str(tmp_path_factory.mktemp("caps")))
    demo, server = launch_in_process(settings)
    yield server
    demo.close()


async def _session(url: str, transport: str, work):
    """``work(session)`` on an initialised MCP client session to the app at ``url``."""
    async with httpx.AsyncClient(trust_env=False, timeout=httpx.Timeout(120, read=300)) as http:
        if transport == "http":
            async with streamable_http_client(mcp_url(url), http_client=http) as (read, write, _):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await work(session)
    async with sse_client(mcp_url(url) + "sse", timeout=30, sse_read_timeout=300,
                          httpx_client_factory=_no_env_client) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            return await work(session)


def _no_env_client(headers=None, timeout=None, auth=None):
    return httpx.AsyncClient(headers=headers, timeout=timeout, auth=auth, trust_env=False, follow_redirects=True)


def _doc(result) -> dict:
    """A tool's answer: JSON text (agent_api returns it so: Gradio's MCP server sends str(value))."""
    assert not result.isError, result.content
    return json.loads(result.content[0].text)


def test_the_tools_are_the_agent_endpoints_with_their_documented_parameters(app):
    async def work(session):
        return (await session.list_tools()).tools

    tools = {t.name: t for t in run(_session(app.url, "http", work))}
    if SEAM_OFF:  # Gradio's own way (docs/GRADIO.md §7 mcp_tools): every public endpoint a tool, the five among them
        assert set(TOOLS) <= set(tools)
    else:
        assert sorted(tools) == sorted(TOOLS)  # the screens' events (gr.State inputs) are not tools
    tt = tools["turn_tokens"]
    assert set(tt.inputSchema["properties"]) == {"source", "turn", "start", "end", "row"}
    assert set(tt.inputSchema["required"]) == {"source", "turn"}
    assert tt.inputSchema["properties"]["turn"]["type"] == "integer"
    assert "At most 2,000 tokens a call" in tt.description  # the docstring is the tool's description
    assert "sample:NAME" in tools["rollout_summary"].inputSchema["properties"]["source"]["description"]
    assert "tool:bash" in tools["search_dataset"].description


@pytest.mark.parametrize("transport", ["http", "sse"])
def test_summary_and_turn_tokens_of_the_bundled_sample(app, transport):
    turn = MAIN[1]
    rec = RAW[turn]

    async def work(session):
        summary = await session.call_tool("rollout_summary", {"source": "sample:qwen3-tiny"})
        tokens = await session.call_tool("turn_tokens", {"source": "sample:qwen3-tiny", "turn": turn, "start": 3,
                                                         "end": 19})
        return _doc(summary), _doc(tokens)

    summary, tokens = run(_session(app.url, transport, work))
    assert summary["source"] == "sample:qwen3-tiny"
    assert summary["model"] == rec["request"]["model"]
    assert [t["output_tokens"] for t in summary["turns"]] == [len(r["completion_token_ids"]) for r in RAW]
    assert [t["tools"] for t in summary["turns"]] == [_tools_of(r) for r in RAW]
    assert tokens["ids"] == rec["completion_token_ids"][3:19]
    assert tokens["logprobs"] == [e["logprob"] for e in rec["logprobs"][3:19]]
    assert tokens["texts"] == [bytes(e["bytes"]).decode("utf-8", "replace") for e in rec["logprobs"][3:19]]
    assert tokens["tok"] == len(rec["prompt_token_ids"]) + 3


def test_search_finds_the_turns_that_called_a_tool(app):
    want = sorted((i, t) for i, r in enumerate(RAW) if r["kind"] == "main" for t in _tools_of(r) if t == "bash")
    assert want  # the sample runs bash once: a search that found nothing would prove nothing

    async def work(session):
        return _doc(await session.call_tool("search_dataset", {"source": "sample:qwen3-tiny", "query": "tool:bash"}))

    doc = run(_session(app.url, "http", work))
    assert doc["level"] == "turn" and doc["total"] == len(want)
    assert sorted((h["turn"], "bash") for h in doc["hits"]) == want
    hit = doc["hits"][0]
    assert hit["source"] == "sample:qwen3-tiny"  # what the other tools take back
    assert hit["link"].startswith("source=sample%3Aqwen3-tiny")


def test_a_refusal_is_a_tool_error_with_its_reason(app):
    async def work(session):
        return (await session.call_tool("turn_tokens", {"source": "sample:qwen3-tiny", "turn": MAIN[0], "start": 0,
                                                        "end": 10**9}),
                await session.call_tool("rollout_summary", {"source": "/etc/passwd"}))

    far, outside = run(_session(app.url, "http", work))
    assert far.isError and "outside turn" in far.content[0].text
    assert outside.isError and "outside the allowed data folder" in outside.content[0].text


@pytest.mark.slow  # a fresh app process (the command line's own launch path)
def test_view_mcp_serves_the_tools_and_says_where(tmp_path):
    """``rollout-inspector view --mcp``: the URL it prints for agents answers an MCP client with the five tools."""
    from conftest import free_port

    env = {**os.environ, "GRADIO_TEMP_DIR": str(tmp_path / "gradio"), "HF_HUB_OFFLINE": "1",
           "CAPTURE_OUT_ROOT": str(tmp_path / "caps"), "PYTHONPATH": str(REPO)}
    env.pop("VIEWER_MCP", None)
    proc = subprocess.Popen([sys.executable, "-m", "viewer", "view", "--mcp", "--port", str(free_port())], env=env,
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout] + [lines.put(None)], daemon=True).start()
    seen = []
    try:
        while not any("MCP tools for agents:" in x for x in seen):
            line = lines.get(timeout=240)  # the app's start: the condition is the line, not a time
            assert line is not None, f"view ended (exit {proc.wait()}): {seen}"
            seen.append(line)
        url = next(x for x in seen if "MCP tools for agents:" in x).split(": ", 1)[1].strip()
        assert url.endswith("/gradio_api/mcp/")

        async def work(session):
            return (await session.list_tools()).tools

        tools = run(_session(url.removesuffix("/gradio_api/mcp/"), "http", work))
        names = sorted(t.name for t in tools)
        assert set(TOOLS) <= set(names) if SEAM_OFF else names == sorted(TOOLS)
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
