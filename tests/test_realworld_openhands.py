"""OpenHands evaluation ``output.jsonl`` rows and trajectory event lists (issue 35), read from real
files OpenHands committed (tests/data/realworld/openhands/SOURCES.md). Expected values come from
the raw JSON: one turn per distinct model response, text turns for agent actions without one."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from viewer.row_browser import summarize_rows
from viewer.sources import load_source, open_dataset
from viewer.sources.jsonio import rows_of_json

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests/data/realworld/openhands"
EVAL_FILES = sorted(DATA.glob("*.output.jsonl"))
EVENT_FILES = sorted(DATA.glob("*.json"))


def _rows(path: Path) -> list[dict]:
    """The rollouts of a file, read plainly: JSONL rows, or one event list."""
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [{"history": json.loads(path.read_text())}]


def _events(row: dict) -> list[dict]:
    out = []
    for h in row["history"]:  # 2024 rows hold [action, observation] pairs
        out.extend(h if isinstance(h, list) else [h])
    return out


def _expected_turns(row: dict) -> int:
    events = _events(row)
    responses = {e["tool_call_metadata"]["model_response"]["id"] for e in events if e.get("tool_call_metadata")}
    bare = [e for e in events if e.get("source") == "agent" and "action" in e and not e.get("tool_call_metadata")
            and e["action"] != "system"]
    return len(responses) + len(bare)


def _expected_result(row: dict) -> str | None:
    if row.get("error"):
        return row["error"].splitlines()[0][:200]
    return "finish" if any(e.get("action") == "finish" for e in _events(row)) else None


def test_the_files_are_there():
    assert len(EVAL_FILES) == 2 and len(EVENT_FILES) == 3


@pytest.mark.parametrize("path", EVAL_FILES + EVENT_FILES, ids=lambda p: p.name)
def test_rollouts_turns_and_results(path):
    raws = _rows(path)
    src = open_dataset(path)
    assert src.format.name == "openhands" and len(src.dataset) == len(raws)
    rows = summarize_rows(src, list(range(len(raws))))
    for k, (raw, summary) in enumerate(zip(raws, rows)):
        ro = src.rollout(k)
        assert ro.format == "openhands"
        assert len(ro.turns) == summary["turns"] == _expected_turns(raw) > 0
        assert all(t.output_ids and t.output_source == "derived" for t in ro.turns)
        assert summary["result"] == _expected_result(raw)
        assert summary["task"] == (raw.get("instance_id") or raw.get("id"))
        test_result = raw.get("test_result") or {}
        want = float(test_result["result"]) if isinstance(test_result.get("result"), bool) else None
        assert ro.reward == summary["reward"] == want


def test_parallel_calls_share_one_turn_and_tool_replies_answer_their_calls():
    raw = _rows(DATA / "multi_swe_bench.output.jsonl")[0]
    events = _events(raw)
    ro = load_source(DATA / "multi_swe_bench.output.jsonl", row=0)
    system = next(e for e in events if e.get("action") == "system")
    assert ro.turns[0].messages[0] == {"role": "system", "content": system["args"]["content"]}
    assert ro.turns[0].tools == system["args"]["tools"]
    calls = [e["tool_call_metadata"]["tool_call_id"] for e in events if "action" in e and e.get("tool_call_metadata")]
    assert [c["id"] for t in ro.turns for c in t.response.get("tool_calls") or []] == calls
    asked = {c["id"] for t in ro.turns for c in t.response.get("tool_calls") or []}
    replies = [m["tool_call_id"] for m in ro.turns[-1].messages if m["role"] == "tool"]
    assert replies and set(replies) <= asked
    assert ro.model == raw["metadata"]["llm_config"]["model"]


def test_opendevin_rows_rebuild_text_actions_and_say_so():
    raw = _rows(DATA / "prontoqa.output.jsonl")[0]
    code = next(e["args"]["code"] for e in _events(raw) if e.get("action") == "run_ipython")
    ro = load_source(DATA / "prontoqa.output.jsonl", row=0)
    assert f"<execute_ipython>\n{code}\n</execute_ipython>" in ro.turns[0].response["content"]
    assert any("rebuilt from the thought and the action" in p.message for p in ro.problems)
    assert ro.model == raw["metadata"]["model_name"]


def test_an_event_list_is_one_rollout_and_the_rule_is_strict():
    events = json.loads((DATA / "basic_gui_mode.json").read_text())
    assert rows_of_json(events) == [{"history": events}]
    plain = [{"id": i, "source": "agent", "text": "no action"} for i in range(3)]
    assert rows_of_json(plain) == plain


def test_cli_summary_of_an_event_list():
    path = DATA / "basic_interactions.json"
    cli = subprocess.run([sys.executable, "-m", "viewer", "summary", str(path), "--json"],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    assert cli.returncode == 0, cli.stderr
    out = json.loads(cli.stdout)
    assert out["format"] == "openhands" and out["turns"] == _expected_turns(_rows(path)[0])


