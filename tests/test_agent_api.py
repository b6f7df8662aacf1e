"""Token evidence for agents (issue 38, point 5): the app's stateless API endpoints (viewer/ui/agent_api.py),
called with gradio_client on an app launched in this process in public mode, as any visitor reaches it.
Expected values come from the captures' raw files read here with json; the attacks send server paths and huge
ranges and must get a clear refusal, never a file."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

from viewer.config import SAMPLE_DIR, Settings
from viewer.ui.agent_api import MAX_HITS, TOOLS
from viewer.ui.fair import FAIR

REPO = Path(__file__).resolve().parent.parent
RAW = json.loads((SAMPLE_DIR / "qwen3-tiny" / "trace.json").read_text())
MAIN = [i for i, r in enumerate(RAW) if r["kind"] == "main"]
LONG = 13  # the long capture's first agent turn: the sample's, its tokens 13 times over (> 2,000)


def _tools_of(rec) -> list[str]:
    return [c["function"]["name"] for c in rec["response"]["choices"][0]["message"].get("tool_calls") or []]


def _long_capture(dest: Path) -> Path:
    """The qwen3-tiny capture with its first agent turn's output repeated LONG times (trace and turns files)."""
    shutil.copytree(SAMPLE_DIR / "qwen3-tiny", dest)
    trace = json.loads((dest / "trace.json").read_text())
    rec = trace[MAIN[0]]
    for key in ("completion_token_ids", "logprobs", "per_token_logps", "sampler_logps"):
        if isinstance(rec.get(key), list):
            rec[key] = rec[key] * LONG
    (dest / "trace.json").write_text(json.dumps(trace))
    turns = json.loads((dest / "turns.json").read_text())
    for t in turns:
        if t["call"] == rec["turn"]:
            for key in ("output_ids", "per_token_logps", "mask"):
                t[key] = t[key] * LONG
    (dest / "turns.json").write_text(json.dumps(turns))
    return dest


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    from attack_kit import launch_in_process

    os.environ.setdefault("GRADIO_TEMP_DIR", str(tmp_path_factory.mktemp("gradio")))
    root = tmp_path_factory.mktemp("agent-root")
    shutil.copytree(SAMPLE_DIR / "smollm2", root / "runs" / "a")
    _long_capture(root / "long")
    (root / "etc-link").symlink_to("/etc")  # inside the data root by name, outside it once resolved
    settings = Settings(public=True, data_root=str(root), capture_out_root=str(tmp_path_factory.mktemp("caps")))
    demo, server = launch_in_process(settings)
    client = Client(server.url + "/", verbose=False, httpx_kwargs={"timeout": 300})
    yield SimpleNamespace(root=root, client=client, url=server.url)
    client.close()
    demo.close()


def call(app, tool: str, **kw) -> dict:
    return json.loads(app.client.predict(api_name=f"/{tool}", **kw))


def refused(app, tool: str, **kw) -> str:
    with pytest.raises(AppError) as e:
        app.client.predict(api_name=f"/{tool}", **kw)
    return str(e.value)


def test_the_endpoints_are_on_the_api_page_with_their_parameters(app):
    named = app.client.view_api(print_info=False, return_format="dict")["named_endpoints"]
    assert {f"/{t}" for t in TOOLS} <= set(named)
    assert [p["parameter_name"] for p in named["/turn_tokens"]["parameters"]] == ["source", "turn", "start", "end", "row"]
    assert [p["parameter_name"] for p in named["/search_dataset"]["parameters"]] == ["source", "query", "limit"]


def test_summary_tokens_drift_and_lint_of_a_bundled_sample(app):
    rec = RAW[MAIN[0]]
    summary = call(app, "rollout_summary", source="sample:qwen3-tiny")
    assert summary["model"] == RAW[MAIN[0]]["request"]["model"]
    assert [t["output_tokens"] for t in summary["turns"]] == [len(r["completion_token_ids"]) for r in RAW]
    assert [t["tools"] for t in summary["turns"]] == [_tools_of(r) for r in RAW]
    tokens = call(app, "turn_tokens", source="sample:qwen3-tiny", turn=MAIN[0], start=10, end=40)
    assert tokens["ids"] == rec["completion_token_ids"][10:40]
    assert tokens["logprobs"] == [e["logprob"] for e in rec["logprobs"][10:40]]
    assert tokens["tok"] == len(rec["prompt_token_ids"]) + 10 and tokens["output_tokens"] == len(rec["completion_token_ids"])
    drift = call(app, "rollout_drift", source="sample:qwen3-tiny")
    assert [t["turn"] for t in drift["turns"]] == MAIN
    lint = call(app, "rollout_lint", source="sample:qwen3-tiny")
    assert lint["hits"] and lint["rules"] == sorted({h["rule"] for h in lint["hits"]})
    assert all(h["link"].startswith("source=sample%3Aqwen3-tiny") for h in lint["hits"] if h["link"])
    for doc in (summary, tokens, drift, lint):  # a public app names no server folder (the repository's, here)
        assert str(REPO) not in json.dumps(doc, ensure_ascii=False)


def test_a_folder_in_the_data_root_is_searched_and_named_as_the_visitor_names_it(app):
    raw = json.loads((app.root / "runs" / "a" / "trace.json").read_text())
    want = sum(1 for r in raw if r["kind"] == "main" and "bash" in _tools_of(r))
    assert want
    text = app.client.predict(source="runs", query="tool:bash", limit=5, api_name="/search_dataset")
    doc = json.loads(text)
    assert doc["total"] == want and {h["source"] for h in doc["hits"]} == {"runs/a"}
    assert str(app.root) not in text and "index" not in doc  # the server's folders are not a visitor's business
    one = call(app, "rollout_summary", source=doc["hits"][0]["source"], row=doc["hits"][0]["row"])
    assert one["source"] == "runs/a" and one["model"] == raw[MAIN[0]]["request"]["model"]


@pytest.mark.parametrize("path", ["/etc/passwd", "../../../../etc/passwd", "etc-link/passwd", str(REPO),
                                  str(REPO / "sample_data" / "qwen3-tiny")])
def test_a_server_path_is_refused_by_every_endpoint(app, path):
    for tool, kw in (("rollout_summary", {}), ("turn_tokens", {"turn": 1}), ("rollout_drift", {}),
                     ("rollout_lint", {}), ("search_dataset", {"query": ""})):
        msg = refused(app, tool, source=path, **kw)
        assert "outside the allowed data folder" in msg, (tool, msg)
        assert "root:" not in msg and str(app.root) not in msg  # nothing read, no server folder named


def test_a_huge_range_is_bounded(app):
    n = len(RAW[MAIN[0]]["completion_token_ids"]) * LONG
    assert "at most 2000 tokens a call" in refused(app, "turn_tokens", source="long", turn=MAIN[0])
    assert "outside turn" in refused(app, "turn_tokens", source="long", turn=MAIN[0], start=0, end=10**9)
    assert "out of range" in refused(app, "turn_tokens", source="long", turn=MAIN[0], start=0, end=10**15)
    assert "limit" in refused(app, "search_dataset", source="runs", query="", limit=MAX_HITS + 1)
    assert "too long" in refused(app, "search_dataset", source="runs", query="x" * 5000)
    last = call(app, "turn_tokens", source="long", turn=MAIN[0], start=n - 2000)  # a page at the end: served
    assert len(last["ids"]) == 2000 and last["end"] == n


def test_each_call_takes_one_of_its_visitors_slots(app):
    """A visitor who has their share of heavy events running is told busy, not queued behind it (ui/fair.py)."""
    keys = ["s:" + app.client.session_hash]
    for _ in range(2):  # the public session_events budget: 2
        FAIR.enter(keys, 2)
    try:
        assert "Busy" in refused(app, "rollout_summary", source="sample:qwen3-tiny")
    finally:
        FAIR.leave(keys)
        FAIR.leave(keys)
    assert call(app, "rollout_summary", source="sample:qwen3-tiny")["turns"]
