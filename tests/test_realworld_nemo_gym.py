"""NeMo Gym rollout JSONL, read from files NVIDIA-NeMo/Gym committed (tests/data/realworld/nemo_gym).

Every expected figure comes from the raw lines through plain ``json``: rollouts = lines, turns = model
calls (runs of the model's own items in ``response.output``: assistant ``message``, ``reasoning``,
``function_call``; anything else between them ends a call), each exact turn's ids and logprobs = the
token-bearing item's ``prompt_token_ids`` / ``generation_token_ids`` / ``generation_log_probs``, reward =
the row's ``reward``. Before this reader these rows went to the capture reader: one "trace" of 5 turns
with 0 tokens and no problem (issue 35).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from viewer import cli
from viewer.row_browser import browse_page
from viewer.sources import SourceError, load_source, open_dataset
from viewer.sources.nemo_gym import FORMAT, detect
from viewer.sources.registry import detect_formats

DIR = Path(__file__).resolve().parent / "data" / "realworld" / "nemo_gym"
IDS = "competitive_coding_challenges.example_rollouts.jsonl"
FILES = [IDS, "example_session_state_mgmt.example_rollouts.jsonl", "openenv.example_rollouts.jsonl",
         "example_multi_turn_gymnasium.example_rollouts.jsonl", "hermes_agent.example_math_rollouts.jsonl"]
INPUTS = "example_multi_turn_gymnasium.example_rollouts_materialized_inputs.jsonl"
TOKENS = ("prompt_token_ids", "generation_token_ids", "generation_log_probs")


def raw_rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (DIR / name).read_text(encoding="utf-8").splitlines() if line.strip()]


def raw_calls(row: dict) -> list[list[dict]]:
    """The model calls of a raw row, worked out from the item types alone."""
    calls, run = [], []
    for it in row["response"]["output"]:
        if it["type"] in ("reasoning", "function_call") or (it["type"] == "message" and it["role"] == "assistant"):
            run.append(it)
        elif run:
            calls.append(run)
            run = []
    return calls + ([run] if run else [])


def token_item(call: list[dict]) -> dict | None:
    return next((it for it in call if it.get("generation_token_ids")), None)


@pytest.fixture(scope="module", params=FILES)
def case(request):
    return request.param, open_dataset(DIR / request.param)


def test_detected_as_nemo_gym(case):
    name, src = case
    first = raw_rows(name)[0]
    assert src.format.name == "nemo-gym"
    assert detect_formats(set(first), first)[0].name == "nemo-gym"


def test_one_rollout_per_line_with_its_calls_and_reward(case):
    name, src = case
    rows = raw_rows(name)
    assert len(src.dataset) == len(rows) == 5
    for i, row in enumerate(rows):
        ro = src.rollout(i)
        calls = raw_calls(row)
        assert len(ro.turns) == len(calls) >= 1, (name, i)
        assert ro.reward == row["reward"], (name, i)
        assert ro.summary["reward"] == row["reward"]
        assert ro.format == "nemo-gym"
        assert not [p for p in ro.problems if p.severity == "error"], ro.problems
        # one assistant message per call, in order: its function calls and its text
        for t, call in zip(ro.turns, calls):
            want_ids = [it["call_id"] for it in call if it["type"] == "function_call"]
            assert [c["id"] for c in t.response.get("tool_calls", [])] == want_ids
            want_text = "".join(p["text"] for it in call if it["type"] == "message" for p in it["content"])
            assert t.response["content"] == want_text


def test_exact_ids_and_logprobs_equal_the_file():
    src = open_dataset(DIR / IDS)
    for i, row in enumerate(raw_rows(IDS)):
        ro = src.rollout(i)
        assert ro.origin.token_view == "exact"
        (call,) = raw_calls(row)
        item = token_item(call)
        t = ro.turns[0]
        assert list(t.prompt_ids) == item["prompt_token_ids"] and len(t.prompt_ids) == 109
        assert list(t.output_ids) == item["generation_token_ids"]
        assert list(t.logprobs) == item["generation_log_probs"]
        assert t.output_ids[0] == item["generation_token_ids"][0] == 151667  # <think>: Qwen3 ids
        assert t.logprobs[0] == item["generation_log_probs"][0]
        assert t.prompt_source == t.output_source == "engine"
        assert t.loss_mask == [1] * len(item["generation_token_ids"]) and t.trained
        assert t.response["reasoning_content"] == "".join(s["text"] for s in call[0]["summary"])
        assert ro.problems == []


def test_text_only_rows_are_derived_with_the_conversation():
    """No ids: the app renders the text; tool results answer their calls, developer → system."""
    ro = load_source(DIR / "openenv.example_rollouts.jsonl", row=0)
    row = raw_rows("openenv.example_rollouts.jsonl")[0]
    assert ro.origin.token_view == "derived"
    assert all(t.prompt_source == "rerender" and t.output_source == "derived" for t in ro.turns)
    msgs = ro.turns[-1].messages
    assert [m["role"] for m in msgs[:2]] == ["system", "user"]
    assert msgs[0]["content"] == row["responses_create_params"]["input"][0]["content"]
    outs = [it for it in row["response"]["output"] if it["type"] == "function_call_output"]
    assert [(m["tool_call_id"], m["content"]) for m in msgs if m["role"] == "tool"] == \
        [(o["call_id"], o["output"]) for o in outs]
    assert [t["function"]["name"] for t in ro.turns[0].tools] == \
        [t["name"] for t in row["responses_create_params"]["tools"]]


def test_parallel_calls_are_one_turn():
    row = raw_rows("example_session_state_mgmt.example_rollouts.jsonl")[0]
    ro = load_source(DIR / "example_session_state_mgmt.example_rollouts.jsonl", row=0)
    types = [it["type"] for it in row["response"]["output"]]
    assert types[:4] == ["function_call", "function_call", "function_call_output", "function_call_output"]
    assert len(ro.turns[0].response["tool_calls"]) == 2
    assert [m["role"] for m in ro.turns[1].messages] == ["user", "assistant", "tool", "tool"]


def test_user_messages_inside_the_output_end_a_call():
    name = "example_multi_turn_gymnasium.example_rollouts.jsonl"
    for i, row in enumerate(raw_rows(name)):
        ro = load_source(DIR / name, row=i)
        users = [it for it in row["response"]["output"] if it["type"] == "message" and it["role"] == "user"]
        assert len(ro.turns) == len(users) + 1
        if users:
            assert isinstance(users[-1]["content"], str)  # an easy input message: plain string content
            assert ro.turns[-1].messages[-1] == {"role": "user", "content": users[-1]["content"]}


def test_empty_token_fields_are_text_only_with_a_warning():
    name = "hermes_agent.example_math_rollouts.jsonl"
    for i, row in enumerate(raw_rows(name)):
        calls = raw_calls(row)
        assert all(any(k in it for it in c for k in TOKENS) and token_item(c) is None for c in calls)
        ro = load_source(DIR / name, row=i)
        assert ro.origin.token_view == "derived"
        warn = [p for p in ro.problems if "token fields with no generated ids" in p.message]
        assert len(warn) == 1 and warn[0].severity == "warning" and f"{len(calls)} of {len(calls)}" in warn[0].message


def test_row_table(case):
    name, src = case
    rows = raw_rows(name)
    page = browse_page(src, 0, 20, sort="reward", descending=True)
    assert page.total == len(rows)
    assert sorted(r["reward"] for r in page.rows) == sorted(row["reward"] for row in rows)
    by_row = {r["row"]: r for r in page.rows}
    for i, row in enumerate(rows):
        assert by_row[i]["turns"] == len(raw_calls(row)) and not by_row[i]["error"]
        assert by_row[i]["model"] == row["response"]["model"]


def test_per_step_snapshots_read_from_the_last():
    """Gym's aviary agent stores ``output`` as one item list per step, each extending the one before."""
    name = "aviary.example_rollouts.jsonl"
    for i, row in enumerate(raw_rows(name)):
        snaps = row["response"]["output"]
        assert all(isinstance(s, list) for s in snaps) and all(a == b[:len(a)] for a, b in zip(snaps, snaps[1:]))
        ro = load_source(DIR / name, row=i)
        calls = raw_calls({"response": {"output": snaps[-1]}})
        assert len(ro.turns) == len(calls) >= 1 and ro.reward == row["reward"]
        assert [p.message for p in ro.problems if "snapshots" in p.message] == \
            [f"a list of {len(snaps)} conversation snapshots, not items: the last one is read"]


def test_history_in_the_request_is_prompt_not_turns():
    """verifif sends earlier user/assistant exchanges in ``input``: the rollout made one call."""
    name = "verifif.example_rollouts.jsonl"
    for i, row in enumerate(raw_rows(name)):
        given = [m for m in row["responses_create_params"]["input"] if m["role"] == "assistant"]
        assert len(raw_calls(row)) == 1 and len(given) == 2
        ro = load_source(DIR / name, row=i)
        t = ro.turns[-1]
        assert [m["role"] for m in t.messages] == [m["role"] for m in row["responses_create_params"]["input"]]
        assert t.response["content"] == row["response"]["output"][0]["content"][0]["text"]
        assert len(ro.turns) == 1


def test_materialized_inputs_are_refused_by_name():
    """Gym's task inputs (no ``response``) are not rollouts: refused, naming what is missing."""
    first = raw_rows(INPUTS)[0]
    assert not detect(set(first), first)
    with pytest.raises(SourceError, match=r"closest known format: nemo-gym.*lacks 'response'"):
        open_dataset(DIR / INPUTS)


def _first_record(path: Path):
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        return json.loads(text.splitlines()[0])
    doc = json.loads(text)
    return doc[0] if isinstance(doc, list) and doc else doc


def test_detector_refuses_every_other_real_file():
    roots = [DIR.parent, *(DIR.parents[k] / "shared" / "realdata" for k in (3, 4))]  # the checkout's, or beside it
    seen = 0
    for path in sorted(p for r in roots if r.is_dir() for p in r.rglob("*") if p.suffix in (".json", ".jsonl")
                       or p.name.endswith((".traj", ".traj.json"))):
        if path.parent == DIR:
            continue
        try:
            first = _first_record(path)
        except (UnicodeDecodeError, json.JSONDecodeError, IndexError):
            continue
        if isinstance(first, dict):
            seen += 1
            assert not FORMAT.detect(set(first), first), path
    assert seen >= 10


def test_cli_summary_drift_lint_show_the_turns(capsys):
    path = str(DIR / IDS)
    row = raw_rows(IDS)[0]
    item = token_item(raw_calls(row)[0])
    assert cli.main(["summary", path, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["format"] == "nemo-gym" and doc["turns"] == 1 and doc["reward"] == row["reward"]
    assert doc["prompt_tokens"] == len(item["prompt_token_ids"])
    assert doc["output_tokens"] == doc["trained_tokens"] == len(item["generation_token_ids"])
    assert cli.main(["drift", path, "--json", "--quiet", "--tokenizer", "qwen3"]) == 0
    drift = json.loads(capsys.readouterr().out)
    assert drift["errors"] == [] and drift["totals"]["rollouts"] == 5 and len(drift["turns"]) == 5
    # the engine's prompt is what Qwen3's template renders from the conversation read here
    assert all(t["template"]["equal"] and t["retokenize"]["equal"] for t in drift["turns"])
    assert cli.main(["lint", path, "--json", "--quiet"]) == 0
    lint = json.loads(capsys.readouterr().out)
    assert lint["errors"] == [] and lint["totals"]["rollouts"] == 5 and lint["totals"]["error"] == 0
    assert lint["rules"]["RI001"]["hits"] == lint["rules"]["RI005"]["hits"] == 0  # engine prompt ids, logprobs


def test_cli_drift_on_a_text_only_file_checks_every_turn(capsys):
    name = "example_session_state_mgmt.example_rollouts.jsonl"
    assert cli.main(["drift", str(DIR / name), "--json", "--quiet"]) == 0
    drift = json.loads(capsys.readouterr().out)
    assert drift["errors"] == []
    assert len(drift["turns"]) == sum(len(raw_calls(r)) for r in raw_rows(name))
    assert all(t["unchecked"] != "empty output" for t in drift["turns"])
