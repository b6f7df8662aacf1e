"""SWE-agent ``.traj`` files (issue 35), read from real files SWE-agent committed
(tests/data/realworld/swe_agent/SOURCES.md). Expected values come from the raw JSON."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from viewer.row_browser import summarize_rows
from viewer.sources import load_source, open_dataset

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests/data/realworld/swe_agent"
RUN = DATA / "gpt4__swe-bench-dev-easy_first_only__default__t-0.00__p-0.95__c-3.00__install-1"  # a run's folder
FILES = sorted(DATA.rglob("*.traj"))


def _raw(path: Path) -> dict:
    return json.loads(path.read_text())


def _expected_turns(raw: dict) -> int:
    """Each model call is a turn: the history's assistant messages, or the trajectory's steps when
    older SWE-agent left the final step out of the history."""
    replies = sum(1 for m in raw["history"] if m["role"] == "assistant")
    return max(replies, len(raw.get("trajectory", [])))


def test_the_files_are_there():
    assert len(FILES) == 4 and (RUN / "all_preds.jsonl").is_file()


def test_a_run_folder_as_swe_agent_wrote_it_opens_its_trajectories_and_names_its_side_files():
    """The run's all_preds.jsonl (a line an instance, patches only) is JSONL: a reader's data file by its
    extension, named and left out; args.yaml and patches/ are not data files."""
    trajs = sorted(RUN.rglob("*.traj"))
    preds = [json.loads(x) for x in (RUN / "all_preds.jsonl").read_text().splitlines() if x.strip()]
    src = open_dataset(RUN)
    assert src.format.name == "swe-agent" and len(src.dataset) == len(trajs) == 1
    assert "left out 1 file(s) that format does not read: all_preds.jsonl" in src.note
    ro = src.rollout(0)
    raw = _raw(trajs[0])
    assert len(ro.turns) == _expected_turns(raw) and ro.summary.get("exit_status") == raw["info"]["exit_status"]
    assert [p["instance_id"] for p in preds] == [trajs[0].stem]  # (the side file is this run's)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_one_rollout_with_every_model_call_as_a_turn(path):
    raw = _raw(path)
    ro = load_source(path)
    assert ro.format == "swe-agent"
    assert len(ro.turns) == _expected_turns(raw)
    assert all(t.output_ids and t.output_source == "derived" for t in ro.turns)
    status = raw.get("info", {}).get("exit_status")
    assert (ro.summary or {}).get("exit_status") == status
    # the tool calls are the file's own, ids and all, and each tool reply answers its call
    calls = [c["id"] for m in raw["history"] if m["role"] == "assistant" for c in (m.get("tool_calls") or [])]
    assert [c["id"] for t in ro.turns for c in (t.response.get("tool_calls") or [])] == calls
    replies = [m["tool_call_ids"][0] for m in raw["history"] if m["role"] == "tool"]
    seen = [m["tool_call_id"] for m in ro.turns[-1].messages if m["role"] == "tool"]
    assert seen == replies[:len(seen)] and len(replies) - len(seen) <= 1  # a last reply may follow the last turn


def test_a_final_step_missing_from_the_history_is_appended_and_said():
    path = DATA / "6e44b9__sweagenttestrepo-1c2844.traj"
    raw = _raw(path)
    assert sum(1 for m in raw["history"] if m["role"] == "assistant") == len(raw["trajectory"]) - 1
    ro = load_source(path)
    assert ro.turns[-1].response["content"] == raw["trajectory"][-1]["response"]
    assert any(".trajectory[4]" in p.where and "missing from .history" in p.message for p in ro.problems)
    assert ro.model == raw["replay_config"]["agent"]["model"]["name"]


def test_a_folder_of_traj_files_is_a_dataset_of_one_row_per_file():
    src = open_dataset(DATA)
    assert src.format.name == "swe-agent"
    assert len(src.dataset) == len(FILES)
    rows = summarize_rows(src, list(range(len(FILES))))
    got = sorted(((r["turns"], r["result"]) for r in rows), key=str)
    raws = [_raw(p) for p in FILES]
    assert got == sorted(((_expected_turns(r), r.get("info", {}).get("exit_status")) for r in raws), key=str)
    assert all(r["agent"] == "swe-agent" and not r["error"] for r in rows)


@pytest.mark.parametrize("extra", [[], ["--format", "swe-agent"]])
def test_cli_summary_of_a_traj_file(extra):
    path = DATA / "swe-agent__test-repo-i1.traj"
    cli = subprocess.run([sys.executable, "-m", "viewer", "summary", str(path), "--json", *extra],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    assert cli.returncode == 0, cli.stderr
    out = json.loads(cli.stdout)
    assert out["format"] == "swe-agent" and out["turns"] == _expected_turns(_raw(path))




def test_drift_and_lint_take_a_folder_of_traj_files_one_cut_short(tmp_path):
    """What SWE-agent writes is a folder of trajectories (``<run>/<instance>/<instance>.traj``), and a run
    killed while writing leaves one cut short. `drift` and `lint` refused the folder ("no capture folders"),
    and the Datasets tab refused all of it for the one bad file. Each good file is one rollout of its own
    model calls (counted from the raw JSON); the cut one is listed as unreadable with json's own message."""
    run = tmp_path / "run"
    for path in FILES:
        (run / path.stem).mkdir(parents=True)
        (run / path.stem / path.name).write_bytes(path.read_bytes())
    cut = run / "killed" / "killed.traj"
    cut.parent.mkdir()
    cut.write_bytes(FILES[0].read_bytes()[:5000])
    try:
        json.loads(cut.read_text())
    except json.JSONDecodeError as e:
        why = str(e)
    want_turns = sum(_expected_turns(_raw(p)) for p in FILES)
    docs = {}
    for cmd in ("drift", "lint"):
        cli = subprocess.run([sys.executable, "-m", "viewer", cmd, str(run), "--json", "--quiet"],
                             capture_output=True, text=True, cwd=REPO, timeout=600)
        assert cli.returncode in (0, 1), cli.stderr  # (lint: 1 when an error-level rule fired)
        docs[cmd] = json.loads(cli.stdout)
    assert docs["drift"]["totals"]["rollouts"] == len(FILES)
    assert docs["drift"]["totals"]["turns"] == want_turns
    for doc in docs.values():
        unread = [e for e in doc["errors"] if why in e["error"]]
        assert len(unread) == 1 and "killed.traj" in unread[0]["error"], doc["errors"]
    src = open_dataset(run)
    assert len(src.dataset) == len(FILES) + 1
    rows = summarize_rows(src, list(range(len(FILES) + 1)))
    assert sum(1 for r in rows if r["error"]) == 1
