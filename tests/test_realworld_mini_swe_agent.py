"""mini-swe-agent native trajectories (issue 35: they were taken for an opencode export with 0
turns), read from real mini-swe-agent outputs (tests/data/realworld/mini_swe_agent/SOURCES.md).
Expected values come from the raw JSON."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from viewer.row_browser import summarize_rows
from viewer.sources import load_source, open_dataset

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests/data/realworld/mini_swe_agent"
RUN = DATA / "deepseek_reasoner_dev"  # a run as mini-swe-agent writes it: <instance>/<instance>.traj.json, preds.json
FILES = sorted(DATA.rglob("*.traj.json"))


def _raw(path: Path) -> dict:
    return json.loads(path.read_text())


def _replies(raw: dict) -> list[dict]:
    return [m for m in raw["messages"] if m["role"] == "assistant"]


def test_the_files_are_there():
    assert len(FILES) == 7 and (RUN / "preds.json").is_file()


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_one_rollout_one_turn_per_assistant_message(path):
    raw = _raw(path)
    ro = load_source(path)
    assert ro.format == "mini-swe-agent"
    assert len(ro.turns) == len(_replies(raw))
    assert ro.summary["exit_status"] == raw["info"]["exit_status"]
    assert ro.model == raw["info"]["config"]["model"]["model_name"]
    assert ro.task["instance_id"] == raw["instance_id"]
    for t, m in zip(ro.turns, _replies(raw)):
        assert t.output_ids and t.output_source == "derived"
        assert [c["id"] for c in t.response.get("tool_calls") or []] == [c["id"] for c in m.get("tool_calls") or []]
        assert t.response.get("reasoning_content") == (m.get("reasoning_content") or None)
    # the exit message is the run's end, not something the model saw
    assert all(m["role"] != "exit" for t in ro.turns for m in t.messages)


def test_a_run_that_ended_before_the_first_reply_says_so():
    raw = _raw(DATA / "pvlib__pvlib-python-1154.traj.json")
    assert not _replies(raw) and raw["info"]["exit_status"] == "Timeout"
    ro = load_source(DATA / "pvlib__pvlib-python-1154.traj.json")
    assert ro.turns == []
    assert any(p.where.endswith(".messages") and "'Timeout'" in p.message for p in ro.problems)


def test_summary_rows_and_cli():
    src = open_dataset(DATA)
    assert src.format.name == "mini-swe-agent" and len(src.dataset) == len(FILES)
    rows = summarize_rows(src, list(range(len(FILES))))
    raws = [_raw(p) for p in FILES]
    assert sorted((r["task"], r["turns"], r["result"]) for r in rows) == sorted(
        (x["instance_id"], len(_replies(x)), x["info"]["exit_status"]) for x in raws)
    path = DATA / "sqlfluff__sqlfluff-2419.traj.json"
    cli = subprocess.run([sys.executable, "-m", "viewer", "summary", str(path), "--json"],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    assert cli.returncode == 0, cli.stderr
    out = json.loads(cli.stdout)
    assert out["format"] == "mini-swe-agent" and out["turns"] == len(_replies(_raw(path)))




def test_a_run_folder_as_mini_swe_agent_writes_it_opens_one_rollout_per_instance():
    """A run's folder holds <instance>/<instance>.traj.json and, at its top, preds.json (its patches), which
    sorts before the instances: the folder was refused ("unknown format; fields found: <instance ids>"),
    its format taken from preds.json. Now the trajectories are the rows and preds.json is named, left out."""
    instances = sorted(d.name for d in RUN.iterdir() if (d / f"{d.name}.traj.json").is_file())
    assert len(instances) == 4
    src = open_dataset(RUN)
    assert src.format.name == "mini-swe-agent" and len(src.dataset) == len(instances)
    assert "left out 1 file(s) that format does not read: preds.json" in src.note
    raws = {i: _raw(RUN / i / f"{i}.traj.json") for i in instances}
    got = []
    for r in range(len(instances)):
        ro = src.rollout(r)
        got.append((ro.task["instance_id"], len(ro.turns), ro.summary["exit_status"]))
    assert sorted(got) == sorted((i, len(_replies(x)), x["info"]["exit_status"]) for i, x in raws.items())
    assert set(instances) <= set(json.loads((RUN / "preds.json").read_text()))  # (the side file is the run's)
