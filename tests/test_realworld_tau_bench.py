"""tau-bench results (``tau_bench/run.py`` output), read from files a tau-bench fork committed
(tests/data/realworld/tau_bench, see SOURCES.md; sierra-research's own historical_trajectories are 4 MB+).

Every expected figure comes from the raw JSON list through plain ``json``: rollouts = results, turns
of a rollout = assistant messages in its ``traj``, reward = ``reward``, tool calls = the file's; a
result whose run failed (empty ``traj``, ``info.error``) is a located error, never a silent empty rollout.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from viewer.row_browser import browse_page
from viewer.sources import open_dataset
from viewer.sources.jsonio import rows_of_json
from viewer.sources.registry import detect_formats

DIR = Path(__file__).resolve().parent / "data" / "realworld" / "tau_bench"
QWEN = "tool-calling-Qwen2.5-7B-Instruct-0.1_range_0--1_user-Qwen2.5-7B-Instruct-llm_1201184624.json"
FAILED = "tool-calling-deepseek-coder-1.3b-instruct-0.1_range_0--1_user-deepseek-coder-1.3b-instruct-llm_1207070821.json"
SERVER = "tool-calling-dev-retail-server-final.json"
FILES = [QWEN, SERVER, "train_results_3-3.json", FAILED]
IDS = ["qwen2.5-7b", "dev-retail-server", "train-3", "deepseek-failed"]


def raw_results(name: str) -> list[dict]:
    return json.loads((DIR / name).read_text(encoding="utf-8"))


def raw_turns(result: dict) -> int:
    return sum(1 for m in result["traj"] if m["role"] == "assistant")


def raw_calls(result: dict) -> list[list[tuple[str, str, str]]]:
    return [[(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in m.get("tool_calls") or []]
            for m in result["traj"] if m["role"] == "assistant"]


@pytest.fixture(scope="module", params=FILES, ids=IDS)
def case(request):
    return request.param, open_dataset(DIR / request.param, format="tau-bench")


def test_a_list_of_results_is_read_as_rows():
    """``rows_of_json`` keeps a JSON list of results as rows (a list of chat *messages* is one row)."""
    for name in FILES:
        results = raw_results(name)
        assert rows_of_json(results) == results


def test_detected_as_tau_bench_only(case):
    name, _ = case
    first = raw_results(name)[0]
    assert [f.name for f in detect_formats(set(first), first)] == ["tau-bench"]


@pytest.mark.parametrize("name", FILES, ids=IDS)
def test_opens_without_naming_the_format(name):
    # These fork files carry an extra "records": {} per result; a capture wrapper is a *list*.
    assert open_dataset(DIR / name).format.name == "tau-bench"


def test_one_rollout_per_result_with_its_turns_and_reward(case):
    name, src = case
    results = raw_results(name)
    assert len(src.dataset) == len(results)
    for i, res in enumerate(results):
        ro = src.rollout(i)
        assert ro.format == "tau-bench"
        assert ro.reward == pytest.approx(res["reward"]), (name, i)
        assert len(ro.turns) == raw_turns(res), (name, i)
        got = [[(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in t.response.get("tool_calls") or []]
               for t in ro.turns]
        assert got == raw_calls(res), (name, i)
        if res["traj"]:
            assert ro.instruction == res["info"]["task"]["instruction"]
            assert ro.task["task_id"] == res["task_id"]


def test_tool_replies_keep_their_ids():
    """Each tool reply stays linked to the call it answers (the file's own tool_call_id)."""
    src = open_dataset(DIR / SERVER, format="tau-bench")
    results = raw_results(SERVER)
    assert sum(len(c) for r in results for c in raw_calls(r)) > 50
    for i, res in enumerate(results):
        want = [m["tool_call_id"] for m in res["traj"] if m["role"] == "tool"]
        if not want:
            continue
        ro = src.rollout(i)
        got = [m["tool_call_id"] for m in ro.turns[-1].messages if m["role"] == "tool"]
        assert got == want[:len(got)] and len(got) >= len(want) - 1, i


def test_failed_results_next_to_good_ones():
    """A run whose connection dropped: its result is an error row, the others read normally."""
    results = raw_results(SERVER)
    failed = [i for i, r in enumerate(results) if r["info"].get("error")]
    assert failed and len(failed) < len(results)
    src = open_dataset(DIR / SERVER, format="tau-bench")
    for i in failed:
        assert any(p.severity == "error" and p.where == f"row {i} .traj" for p in src.rollout(i).problems)


def test_failed_runs_are_located_errors():
    src = open_dataset(DIR / FAILED, format="tau-bench")
    for i, res in enumerate(raw_results(FAILED)):
        assert res["traj"] == [] and res["info"]["error"]
        ro = src.rollout(i)
        assert ro.turns == []
        assert any(p.severity == "error" and p.where == f"row {i} .traj" and res["info"]["error"][:40] in p.message
                   for p in ro.problems), i


def test_row_table_sorted_by_reward(case):
    name, src = case
    results = raw_results(name)
    page = browse_page(src, sort="reward", page_size=50)
    assert len(page.rows) == len(results)
    assert [r["reward"] for r in page.rows] == pytest.approx(sorted(r["reward"] for r in results))
    for r in page.rows:
        raw = results[r["row"]]
        assert r["reward"] == pytest.approx(raw["reward"])
        assert r["turns"] == raw_turns(raw)
        assert r["task"] == f"task {raw['task_id']} trial {raw['trial']}"
        assert r["model"] is None  # the model is only in the file's name
        assert (r["result"] == "error") == bool(raw["info"].get("error"))
