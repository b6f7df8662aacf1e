"""verifiers ``vf-eval`` results, read from files PrimeIntellect-ai/verifiers committed
(tests/data/realworld/verifiers/<env--model>/results.jsonl + metadata.json, see SOURCES.md).

Every expected figure comes from the raw lines through plain ``json``: rollouts = lines, turns of a
rollout = assistant messages in its ``completion`` (a text completion is one), reward = ``reward``,
tool calls = the file's (saved as dicts, or each as a JSON string), an empty completion = a located
error, never a silent empty rollout.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from viewer.row_browser import browse_page
from viewer.sources import open_dataset
from viewer.sources.registry import detect_formats

DIR = Path(__file__).resolve().parent / "data" / "realworld" / "verifiers"
RUNS = ["math-python--gpt-5-nano", "wordle--qwen3-30b-a3b-thinking-2507", "continuation-quality--llama-3.1-405b",
        "tool-test--gpt-4.1-mini", "tool-test--gpt-4.1-mini-empty"]


def raw_rows(run: str) -> list[dict]:
    text = (DIR / run / "results.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def raw_turns(row: dict) -> int:
    c = row["completion"]
    return 1 if isinstance(c, str) else sum(1 for m in c if m["role"] == "assistant")


def raw_calls(row: dict) -> list[list[tuple[str, str, str]]]:
    """(id, name, arguments) of each assistant message's tool calls, as the file has them."""
    if isinstance(row["completion"], str):  # a text completion: one turn, no calls
        return [[]]
    out = []
    for m in row["completion"]:
        if m["role"] == "assistant":
            calls = [json.loads(c) if isinstance(c, str) else c for c in m.get("tool_calls") or []]
            out.append([(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in calls])
    return out


@pytest.fixture(scope="module", params=RUNS)
def case(request):
    return request.param, open_dataset(DIR / request.param / "results.jsonl")


def test_detected_as_verifiers_only(case):
    run, src = case
    first = raw_rows(run)[0]
    assert src.format.name == "verifiers"
    assert [f.name for f in detect_formats(set(first), first)] == ["verifiers"]


def test_one_rollout_per_line_with_its_turns_and_reward(case):
    run, src = case
    rows = raw_rows(run)
    assert len(src.dataset) == len(rows) == 15
    for i, row in enumerate(rows):
        ro = src.rollout(i)
        assert ro.format == "verifiers"
        assert ro.reward == pytest.approx(row["reward"]), (run, i)
        assert len(ro.turns) == raw_turns(row), (run, i)


def test_tool_calls_are_the_files(case):
    run, src = case
    for i, row in enumerate(raw_rows(run)):
        ro = src.rollout(i)
        got = [[(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in t.response.get("tool_calls") or []]
               for t in ro.turns]
        assert got == raw_calls(row), (run, i)


def test_tool_replies_linked_to_their_calls():
    """math-python (2025-09) saves calls as JSON strings and replies with no tool_call_id: each reply
    is linked, in order, to the call before it, and the rollout says the link is ours."""
    src = open_dataset(DIR / "math-python--gpt-5-nano" / "results.jsonl")
    rows = raw_rows("math-python--gpt-5-nano")
    assert any(isinstance(c, str) for r in rows for m in r["completion"] for c in m.get("tool_calls") or [])
    for i, row in enumerate(rows):
        ro = src.rollout(i)
        want = [call[0] for turn in raw_calls(row) for call in turn]
        replies = [m for m in ro.turns[-1].messages if m["role"] == "tool"]
        assert [m["tool_call_id"] for m in replies] == want[:len(replies)], i
        assert any("no tool_call_id" in p.message for p in ro.problems), i


def test_text_completion_rows_say_so():
    src = open_dataset(DIR / "continuation-quality--llama-3.1-405b" / "results.jsonl")
    for i, row in enumerate(raw_rows("continuation-quality--llama-3.1-405b")):
        assert isinstance(row["prompt"], str) and isinstance(row["completion"], str)
        ro = src.rollout(i)
        assert ro.turns[0].response["content"] == row["completion"]
        assert any("text-completion" in p.message and p.where == f"row {i} .completion" for p in ro.problems)


def test_empty_completion_is_a_located_error():
    """A broken run saved every completion empty: each rollout says so where, never 0 turns silently."""
    src = open_dataset(DIR / "tool-test--gpt-4.1-mini-empty" / "results.jsonl")
    for i, row in enumerate(raw_rows("tool-test--gpt-4.1-mini-empty")):
        assert row["completion"] == []
        ro = src.rollout(i)
        assert ro.turns == []
        assert any(p.severity == "error" and p.where == f"row {i} .completion" for p in ro.problems), i


def test_row_table_sorted_by_reward(case):
    run, src = case
    rows = raw_rows(run)
    meta = json.loads((DIR / run / "metadata.json").read_text(encoding="utf-8"))
    page = browse_page(open_dataset(DIR / run / "results.jsonl"), sort="reward", page_size=50)
    assert len(page.rows) == len(rows)
    assert [r["reward"] for r in page.rows] == pytest.approx(sorted(r["reward"] for r in rows))
    for r in page.rows:
        raw = rows[r["row"]]
        assert r["reward"] == pytest.approx(raw["reward"])
        assert r["turns"] == raw_turns(raw)
        assert r["model"] in (None, meta["model"])  # the rows do not name it; metadata.json does
        assert r["task"] == f"example {raw.get('example_id', raw.get('id'))}"
