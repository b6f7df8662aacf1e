"""What each real file format's reader records as typed provenance (viewer/origin.py).

Every expected value below was worked out by hand from the file itself (its records' ``kind``
fields, turns.json's ``call`` fields and masks, the rows' ``agent`` / ``model`` / message roles),
not from the reader: e.g. qwen3-tiny's trace labels call 1 ``title`` and calls 2-4 ``main``, and
its turns.json lists calls 2, 3, 4 with masks, so call 1's mask comes from the rule and calls 2-4's
from the turns file (matched by their ``call`` field, entries 0-2).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from _row_fixtures import HARBOR, harbor_rows, opencode_rows, opencode_session, write_jsonl, write_parquet
from viewer.sources import load_source, open_dataset

REPO = Path(__file__).resolve().parent.parent
SIX = ("trace.json", "turns.json", "task.json", "visible_tests.txt", "held_out_tests.json", "summary.json")


def turn_origins(ro, *names):
    return [tuple(getattr(t.origin, n) for n in names) for t in ro.turns]


@pytest.mark.parametrize("folder,model", [("qwen3-tiny", "tiny-qwen3"), ("smollm2", "smollm2")])
def test_sample_captures(folder, model):
    ro = load_source(REPO / "sample_data" / folder)
    assert (ro.format, ro.model, ro.origin.files) == ("capture", model, SIX)
    assert (ro.origin.token_view, ro.origin.tokenizer, ro.origin.dataset, ro.origin.row) == (None, None, None, None)
    assert [t.kind for t in ro.turns] == ["bookkeeping", "agent", "agent", "agent"]
    assert turn_origins(ro, "file", "record", "model", "kind_source", "kind_label") == [
        ("trace.json", i, model, "record", label) for i, label in enumerate(["title", "main", "main", "main"])]
    assert turn_origins(ro, "mask_source", "matched_by", "turns_entry", "logprobs_from") == [
        ("rule", None, None, "per_token_logps"), ("turns_file", "call", 0, "per_token_logps"),
        ("turns_file", "call", 1, "per_token_logps"), ("turns_file", "call", 2, "per_token_logps")]


def test_our_capture_with_a_call_the_turns_file_leaves_out():
    # trace: calls 1-6 labelled title, main x4, compaction; turns.json: calls 2, 3, 5
    ro = load_source(REPO / "tests" / "data" / "capture_ours")
    assert (ro.format, ro.model, ro.origin.files) == ("capture", "Qwen/Qwen3-4B-Instruct-2507", SIX)
    assert turn_origins(ro, "kind_label", "mask_source", "matched_by", "turns_entry") == [
        ("title", "rule", None, None), ("main", "turns_file", "call", 0), ("main", "turns_file", "call", 1),
        ("main", "absent_from_turns_file", None, None), ("main", "turns_file", "call", 2),
        ("compaction", "rule", None, None)]
    # record 4 has no response model: the request's is taken
    assert {t.origin.model for t in ro.turns} == {"Qwen/Qwen3-4B-Instruct-2507"}


def test_openenv_trace_without_labels_is_classified_by_the_rule():
    # six unlabelled records: title generator (no tools), opencode x2, summariser, opencode x2
    for src, files, fmt in (("capture_openenv", ("trace.json", "summary.json"), "capture"),
                            ("capture_openenv/trace.json", ("trace.json",), "trace")):
        ro = load_source(REPO / "tests" / "data" / src)
        assert (ro.origin.files, ro.format) == (files, fmt)
        assert [t.kind for t in ro.turns] == ["bookkeeping", "agent", "agent", "bookkeeping", "agent", "agent"]
        assert turn_origins(ro, "kind_source", "kind_label", "mask_source", "record") == [
            ("rule", None, "rule", i) for i in range(6)]
        assert {t.origin.logprobs_from for t in ro.turns} == {"per_token_logps"}


def test_harbor_traces_rows(realdata, qwen3):
    p = HARBOR / "terminus_2__hello-world-invalid-json.traces.json"  # 4 rows, one per episode
    ro = load_source(p)
    o = ro.origin
    assert (ro.format, ro.model, o.agent, o.row, o.token_view, o.tokenizer) == (
        "harbor", "openai/gpt-4o", "terminus-2", 0, "derived", "qwen3")
    assert o.dataset == str(p) and o.alternatives == () and o.files == ()
    assert o.row_note == "row 0 of a dataset of many rows (choose one with --row)"
    assert o.tokenizer_note.startswith("No tokenizer for model 'openai/gpt-4o'")
    # row 3's conversation: user, assistant x4 alternating -> replies at messages 1, 3, 5, 7
    ro3 = open_dataset(p).rollout(3)
    assert ro3.origin.row == 3 and ro3.origin.row_note is None
    assert turn_origins(ro3, "mask_source", "kind_source", "message_index", "literal_step", "step") == [
        ("derived", "record", i, None, None) for i in (1, 3, 5, 7)]
    oh = open_dataset(HARBOR / "openhands__hello-world.traces.json").rollout(1)  # 4 user turns, then a, u, a
    assert (oh.model, oh.origin.agent) == ("gpt-4o", "openhands")
    assert [t.origin.message_index for t in oh.turns] == [4, 6]


def test_harbor_literal_token_columns_name_their_step(realdata, tmp_path):
    row = dict(harbor_rows("openhands__hello-world")[1])  # replies at messages 4 and 6
    row.update(prompt_token_ids=[[1, 2], [1, 3]], completion_token_ids=[[5, 6], [7, 8]],
               logprobs=[[-0.5, -0.25], [-1.0, -2.0]])
    ro = open_dataset(write_parquet([row], tmp_path / "lit.parquet")).rollout(0)
    assert (ro.origin.token_view, ro.origin.tokenizer) == ("exact", None)
    assert turn_origins(ro, "mask_source", "message_index", "literal_step") == [("derived", 4, 0), ("derived", 6, 1)]


def test_atif_trajectories(realdata, qwen3, tmp_path):
    # terminus-2: steps user, agent x4 (one observation each) -> replies at messages 1, 3, 5, 7
    p = HARBOR / "terminus_2__hello-world-invalid-json.trajectory.json"
    ro = load_source(p)
    assert (ro.format, ro.model, ro.origin.agent, ro.origin.token_view, ro.origin.tokenizer) == (
        "atif", "openai/gpt-4o", "terminus-2", "derived", "qwen3")
    assert (ro.origin.row, ro.origin.row_note) == (0, None)  # a one-row dataset: no note
    assert [t.origin.message_index for t in ro.turns] == [1, 3, 5, 7]
    assert {(t.origin.mask_source, t.origin.step) for t in ro.turns} == {("derived", None)}
    # with the engine's ids in each agent step's metrics the turns are exact and name their step
    traj = json.loads(p.read_text())
    for s in traj["steps"]:
        if s["source"] == "agent":
            s["metrics"].update(prompt_token_ids=[1, 2], completion_token_ids=[5, 6], logprobs=[-1.0, -2.0])
    (tmp_path / "trajectory.json").write_text(json.dumps(traj))
    ex = load_source(tmp_path / "trajectory.json")
    assert (ex.origin.token_view, ex.origin.tokenizer) == ("exact", None)
    assert turn_origins(ex, "step", "message_index", "mask_source") == [
        (1, 1, "derived"), (2, 3, "derived"), (3, 5, "derived"), (4, 7, "derived")]
    # openhands: system, user, system, system, agent (+1 observation), agent; no model named anywhere
    oh = load_source(HARBOR / "openhands__hello-world.trajectory.json")
    assert (oh.model, oh.origin.agent, oh.origin.token_view) == (None, "openhands", "derived")
    assert [t.origin.message_index for t in oh.turns] == [4, 6]


def test_opencode_server_messages_and_export_rows(realdata, qwen3, tmp_path):
    # messages: user, assistant, user, assistant (a bash tool part -> + a tool message), assistant
    ro = load_source(realdata / "opencode-native-api" / "messages-after-2.json")
    o = ro.origin
    assert (ro.format, ro.model, o.agent, o.token_view, o.tokenizer) == (
        "opencode", "anthropic/claude-haiku-4-5", "opencode", "derived", "qwen3")
    assert (o.session_id, o.batch_id, o.exported_at) == (None, None, None)
    assert [t.origin.message_index for t in ro.turns] == [1, 3, 5]
    sid = opencode_session()["info"]["id"]
    assert sid == "ses_3ce42bdb9ffeEIUUu08AuKTJms"
    src = open_dataset(write_jsonl(opencode_rows(), tmp_path / "train.jsonl"))
    assert [(r.origin.session_id, r.origin.batch_id, r.origin.exported_at) for r in map(src.rollout, (0, 1, 2))] == [
        (sid, 1, "2026-03-31T20:16:15.046Z"), ("ses_other", 1, "2026-03-31T20:16:15.046Z"),
        (sid, 2, "2026-03-31T20:16:15.046Z")]


def test_a_row_value_of_the_wrong_type_is_a_warning_not_a_crash(realdata, tmp_path):
    # the typed fields refuse these values; the readers must keep them out and say so
    row = dict(opencode_rows()[2], batch_id="2", exported_at=1774959570, session_id=17)
    ro = open_dataset(write_jsonl([row], tmp_path / "odd.jsonl")).rollout(0)
    assert (ro.origin.session_id, ro.origin.batch_id, ro.origin.exported_at) == (None, None, None)
    assert len(ro.turns) == 3
    said = [(p.where, p.message) for p in ro.problems if "not kept" in p.message]
    assert said == [("row 0 .session_id", "expected str, got int; not kept"),
                    ("row 0 .batch_id", "expected int, got str; not kept"),
                    ("row 0 .exported_at", "expected str, got int; not kept")], said
    h = dict(harbor_rows()[0], agent={"name": "terminus-2"})
    ro = open_dataset(write_jsonl([h], tmp_path / "h.jsonl")).rollout(0)
    assert ro.origin.agent is None and len(ro.turns) == 1
    assert any(p.where == "agent" and "expected the agent's name, got dict" in p.message for p in ro.problems)


def test_a_row_key_of_a_list_type_lists_its_row_alone(realdata, tmp_path):
    # the newest-row-per-session scan keyed a dict by session_id: a list there crashed the whole listing
    rows = opencode_rows()
    odd = dict(rows[2], session_id=["ses_a", "ses_b"])
    src = open_dataset(write_jsonl([rows[0], rows[1], odd], tmp_path / "odd.jsonl"))
    assert src.visible_rows() in (None, [0, 1, 2])
    ro = src.rollout(2)
    assert len(ro.turns) == 3 and ro.origin.session_id is None
