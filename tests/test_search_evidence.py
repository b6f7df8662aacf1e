"""Token evidence for agents (viewer/search/evidence.py): stateless functions over a rollout, checked against
the bundled capture's raw files read with plain json."""
from __future__ import annotations

import json
import shutil

import pytest

from viewer.config import SAMPLE_DIR, Settings
from viewer.search import QueryError, SearchError
from viewer.search.evidence import rollout_drift, rollout_lint, rollout_summary, search_dataset, turn_tokens

RAW = json.loads((SAMPLE_DIR / "qwen3-tiny" / "trace.json").read_text())


def test_summary_names_every_call_as_the_trace_records_it():
    doc = rollout_summary("sample:qwen3-tiny", settings=Settings())
    assert [t["output_tokens"] for t in doc["turns"]] == [len(r["completion_token_ids"]) for r in RAW]
    assert [t["kind"] for t in doc["turns"]] == ["bookkeeping" if r["kind"] != "main" else "agent" for r in RAW]
    assert doc["model"] == RAW[1]["request"]["model"]
    assert [t["tools"] for t in doc["turns"]] == [[c["function"]["name"] for c in r["response"]["choices"][0]["message"]
                                                   .get("tool_calls") or []] for r in RAW]
    json.dumps(doc)  # JSON as it is


def test_turn_tokens_for_a_range_are_the_recorded_ones():
    rec = RAW[2]
    doc = turn_tokens("sample:qwen3-tiny", 2, 5, 25, settings=Settings())
    assert doc["ids"] == rec["completion_token_ids"][5:25]
    assert doc["logprobs"] == [e["logprob"] for e in rec["logprobs"][5:25]]
    assert doc["texts"] == [bytes(e["bytes"]).decode("utf-8", "replace") for e in rec["logprobs"][5:25]]
    assert doc["tok"] == len(rec["prompt_token_ids"]) + 5 and doc["output_tokens"] == len(rec["completion_token_ids"])
    with pytest.raises(QueryError, match="outside turn 2"):
        turn_tokens("sample:qwen3-tiny", 2, 0, 10_000, settings=Settings())
    with pytest.raises(QueryError, match="no turn 9"):
        turn_tokens("sample:qwen3-tiny", 9, settings=Settings())


def test_drift_and_lint_of_one_rollout():
    drift = rollout_drift("sample:qwen3-tiny", settings=Settings())
    assert [t["turn"] for t in drift["turns"]] == [i for i, r in enumerate(RAW) if r["kind"] == "main"]
    lint = rollout_lint("sample:qwen3-tiny", settings=Settings())
    assert not (SAMPLE_DIR / "qwen3-tiny" / "tokenizer").exists() and "RI008" in lint["rules"]  # no tokenizer/ shipped
    json.dumps(drift), json.dumps(lint)


def test_search_dataset_and_the_public_check_of_a_source(tmp_path):
    root = tmp_path / "data"
    shutil.copytree(SAMPLE_DIR / "smollm2", root / "runs" / "a")
    doc = search_dataset(str(root / "runs"), "tool:bash", settings=Settings())
    assert doc["total"] == sum(1 for r in json.loads((root / "runs" / "a" / "trace.json").read_text())
                               if r["kind"] == "main" and any(c["function"]["name"] == "bash" for c in
                                                             r["response"]["choices"][0]["message"].get("tool_calls") or []))
    public = Settings(public=True, data_root=str(root))
    with pytest.raises(SearchError):
        rollout_summary("/etc", settings=public)  # outside the data root
    with pytest.raises(SearchError, match="no bundled sample"):
        rollout_summary("sample:../etc", settings=public)
    assert rollout_summary("runs/a", settings=public)["model"] == "smollm2"
    shown = search_dataset("runs", "tool:bash", settings=public)
    assert shown["total"] == doc["total"] and {h["source"] for h in shown["hits"]} == {"runs/a"}
    assert str(tmp_path) not in json.dumps(shown)  # no server path reaches a public caller
