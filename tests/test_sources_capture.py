"""Capture folders and trace/turns files -> Rollout: every FORMATS §0–§2 variant and bad input.

Expectations come from the fixture construction in tests/data/make_fixtures.py
(OURS_CALLS / OPENENV_CALLS tables, out_ids / logprob formulas), never from reader output.
"""
from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path

import pytest

from viewer.config import Settings
from viewer.sources import SourceError, SourceNotFound, load_source

DATA = Path(__file__).resolve().parent / "data"
_spec = importlib.util.spec_from_file_location("make_fixtures", DATA / "make_fixtures.py")
fx = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fx)


def write_trace(folder: Path, records, jsonl: bool = False, name: str = "trace.json") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / name
    p.write_text("\n".join(json.dumps(r) for r in records) + "\n" if jsonl else json.dumps(records, indent=1))
    return p


def problems_text(ro) -> str:
    return "\n".join(str(p) for p in ro.problems)


def by_call(ro):
    return {t.call: t for t in ro.turns}


# ------------------------------------------------------------------ our format, whole folder

def test_ours_folder_kinds_roles_and_counts():
    ro = load_source(DATA / "capture_ours")
    assert ro.format == "capture"
    assert [t.call for t in ro.turns] == list(fx.OURS_CALLS)
    calls = by_call(ro)
    assert (calls[1].kind, calls[1].role) == ("bookkeeping", "title")
    assert (calls[6].kind, calls[6].role) == ("bookkeeping", "compaction")
    assert all(calls[c].kind == "agent" for c in (2, 3, 4, 5))
    assert [t.index for t in ro.turns] == list(range(len(fx.OURS_CALLS)))
    stats = ro.stats()
    agent = [c for c, spec in fx.OURS_CALLS.items() if spec[0] in ("main", "error")]
    assert stats["turns"] == len(agent)
    assert stats["filtered_calls"] == 2
    trained = [c for c in agent if fx.OURS_CALLS[c][3]]
    assert stats["trained_turns"] == len(trained)
    assert stats["trained_tokens"] == sum(fx.OURS_CALLS[c][1] for c in trained)
    assert stats["output_tokens"] == sum(fx.OURS_CALLS[c][1] for c in agent)
    # turns.json gives prompt ids for 2, 3, 5; the error call has none
    assert stats["prompt_tokens"] == sum(fx.OURS_CALLS[c][2] for c in (2, 3, 5))
    assert ro.reward == fx.SUMMARY["reward"]
    assert ro.model == fx.MODEL
    assert not [p for p in ro.problems if p.severity == "error"], problems_text(ro)


def test_ours_folder_ids_logprobs_topk_bytes():
    ro = load_source(DATA / "capture_ours")
    t = by_call(ro)[2]
    n = fx.OURS_CALLS[2][1]
    assert t.output_ids == fx.out_ids(2, n)
    assert t.output_source == "engine"  # trace's completion_token_ids agree with turns.json
    assert t.prompt_ids == fx.prompt_ids(2, fx.OURS_CALLS[2][2])
    assert t.prompt_source == "engine"  # turns.json says prompt_ids_source: engine
    assert by_call(ro)[3].prompt_source == "rerender"
    assert t.logprobs == [fx.logprob(2, k) for k in range(n)]
    assert len(t.top_logprobs) == n
    top = t.top_logprobs[4]
    assert [a.id for a in top] == [t.output_ids[4], t.output_ids[4] + 1]
    assert top[1].logprob == fx.logprob(2, 4) - 1.0
    assert top[0].token is None  # "token_id:N" carries no text
    # sampled bytes are the text's, not the "token_id:N" string's (vLLM quirk)
    assert t.output_bytes[4] == f"<{t.output_ids[4]}>".encode()
    assert list(t.output_bytes)[-1] == f"<{t.output_ids[-1]}>".encode()
    assert t.mask == [1] * n and t.trained
    assert t.tool_names == ["write"]
    assert t.response["reasoning"] == "thinking in call 2"
    assert t.finish_reason == "tool_calls" and t.latency_s == 2.5


def test_ours_folder_text_turn_error_turn_and_side_files():
    ro = load_source(DATA / "capture_ours")
    calls = by_call(ro)
    final = calls[5]
    assert not final.trained and final.mask == [0] * fx.OURS_CALLS[5][1]
    err = calls[4]
    assert "500" in err.error and "engine overloaded" in err.error
    assert err.output_ids == [] and not err.trained
    for c in (1, 6):  # bookkeeping: kept, never trained
        assert calls[c].mask == [0] * fx.OURS_CALLS[c][1] and not calls[c].trained
        assert calls[c].output_ids == fx.out_ids(c, fx.OURS_CALLS[c][1])
    assert ro.instruction == fx.INSTRUCTION
    assert ro.task["task_index"] == 3
    assert ro.held_out_tests == fx.HELD_OUT
    assert ro.visible_tests.startswith("input: 1 2")
    assert ro.summary["tool_calls"] == 2


def test_single_trace_file_and_single_turns_file():
    ro = load_source(DATA / "capture_ours" / "trace.json")
    assert ro.format == "trace"
    assert len(ro.turns) == len(fx.OURS_CALLS)
    # no turns.json: the rule (tool calls) decides training
    assert by_call(ro)[2].trained and not by_call(ro)[5].trained
    assert by_call(ro)[2].prompt_source == "engine"  # record's prompt_token_ids
    tr = load_source(DATA / "capture_ours" / "turns.json")
    assert tr.format == "turns"
    assert [t.call for t in tr.turns] == [2, 3, 5]
    assert all(t.output_source == "stored" and t.kind == "agent" for t in tr.turns)
    assert [t.trained for t in tr.turns] == [True, True, False]


# ------------------------------------------------------------------ OpenEnv proxy shape

def test_openenv_jsonl_rule_derived_kinds_and_masks():
    ro = load_source(DATA / "capture_openenv")
    calls = by_call(ro)
    assert (calls[1].kind, calls[1].role) == ("bookkeeping", "title")
    # the summariser has tools but a different system prompt: filtered by the rule
    assert (calls[4].kind, calls[4].role) == ("bookkeeping", "compaction")
    for c, (role, n_out, tcs) in fx.OPENENV_CALLS.items():
        t = calls[c]
        assert t.output_ids == fx.out_ids(c, n_out)
        assert t.output_source == "token_id_strings"  # completion_token_ids is empty
        assert t.prompt_source == "none" and t.prompt_ids == []
        if role == "main":
            assert t.kind == "agent"  # including call 5, after compaction
            assert t.trained == bool(tcs)
            assert t.mask == [1 if tcs else 0] * n_out
        assert t.response["reasoning"] == f"thinking in call {c}"  # from reasoning_content
    assert ro.reward == 0.5  # summary.json verifier_fraction
    assert ro.problems == []


def test_array_and_jsonl_give_the_same_turns(tmp_path):
    recs = fx.openenv_records()
    a = load_source(write_trace(tmp_path / "a", recs))
    b = load_source(write_trace(tmp_path / "b", recs, jsonl=True))
    key = [(t.call, t.kind, t.output_ids, t.logprobs, t.mask) for t in a.turns]
    assert key == [(t.call, t.kind, t.output_ids, t.logprobs, t.mask) for t in b.turns]


def test_ids_from_logprob_entries_when_only_entries_exist(tmp_path):
    rec = fx.record(2, kind=None, system=fx.AGENT_SYSTEM, tools=True, n_out=5, n_prompt=None,
                    tool_calls=[fx.tool_call("bash", {}, "x")], engine_ids=False)
    del rec["completion_tokens"], rec["per_token_logps"], rec["completion_token_ids"]
    ro = load_source(write_trace(tmp_path, [rec]))
    t = ro.turns[0]
    assert t.output_ids == fx.out_ids(2, 5) and t.output_source == "token_id_strings"
    assert t.logprobs == [fx.logprob(2, k) for k in range(5)]


def test_vllm_return_token_ids_in_response(tmp_path):
    rec = fx.record(2, kind=None, system=fx.AGENT_SYSTEM, tools=True, n_out=5, n_prompt=None,
                    tool_calls=[fx.tool_call("bash", {}, "x")], engine_ids=False)
    for k in ("completion_tokens", "completion_token_ids", "logprobs"):
        del rec[k]
    rec["response"]["choices"][0]["token_ids"] = fx.out_ids(2, 5)
    rec["response"]["prompt_token_ids"] = [1, 2, 3]
    ro = load_source(write_trace(tmp_path, [rec]))
    t = ro.turns[0]
    assert t.output_ids == fx.out_ids(2, 5) and t.output_source == "engine"
    assert t.prompt_ids == [1, 2, 3] and t.prompt_source == "engine"


def test_token_ids_and_token_id_strings_disagree(tmp_path):
    rec = fx.record(2, kind="main", system=fx.AGENT_SYSTEM, tools=True, n_out=5, n_prompt=10)
    rec["completion_token_ids"] = fx.out_ids(2, 5)[:4] + [7]
    ro = load_source(write_trace(tmp_path, [rec]))
    assert ro.turns[0].output_ids[-1] == 7  # engine ids win
    msg = problems_text(ro)
    assert "trace.json: record 0 (line 2)" in msg and "differ" in msg and "position 4" in msg


def test_openenv_capture_contract_loss_mask_over_prompt_and_completion(tmp_path):
    n_p, n_o = 6, 4
    rec = {"request": {"messages": fx.messages(fx.AGENT_SYSTEM, "hi"), "tools": fx.TOOLS},
           "response": {"choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]},
           "prompt_token_ids": list(range(n_p)), "completion_token_ids": list(range(100, 100 + n_o)),
           "per_token_logps": [-0.5] * n_o, "loss_mask": [0] * n_p + [1, 1, 0, 1],
           "metadata": {"node_id": "n1", "index": 0, "model": "Qwen/Qwen3.5-4B", "n_tools": 4}}
    ro = load_source(write_trace(tmp_path, [rec]))
    t = ro.turns[0]
    # the recorded mask wins over the rule (no tool call here, yet trained)
    assert t.mask == [1, 1, 0, 1] and t.trained and t.prompt_mask is None
    assert t.prompt_source == "engine" and t.call == 1
    assert ro.model == "Qwen/Qwen3.5-4B"


@pytest.mark.parametrize("mask,expect,prompt_mask,problem", [
    ([1, 0, 1], [1, 0, 1], None, False),                   # over the output
    ([0, 0, 0, 1, 0, 1], [1, 0, 1], None, False),          # over prompt + output, prompt zeros
    ([1, 0, 0, 1, 0, 1], [1, 0, 1], [1, 0, 0], False),     # prompt part non-zero: kept as prompt_mask
    ([1, 1], None, None, True),                            # neither length
])
def test_mask_lengths(tmp_path, mask, expect, prompt_mask, problem):
    rec = {"request": {"messages": fx.messages(fx.AGENT_SYSTEM, "x"), "tools": fx.TOOLS}, "response": {},
           "prompt_token_ids": [5, 6, 7], "completion_token_ids": [8, 9, 10], "loss_mask": mask}
    ro = load_source(write_trace(tmp_path, [rec]))
    t = ro.turns[0]
    if problem:
        assert "mask has 2 entries, expected 3 (output) or 6 (prompt+output)" in problems_text(ro)
        assert t.mask == [0, 0, 0]  # fell back to the rule: no tool call -> untrained
    else:
        assert t.mask == expect and t.trained and not ro.problems
        assert t.prompt_mask == prompt_mask


def test_openenv_rollout_result_proxy_turns(tmp_path):
    doc = {"task_id": "t1", "reward": 1.0, "proxy_turns": [
        {"turn": 1, "finish_reason": "stop", "completion_tokens": ["token_id:5", "token_id:6"],
         "completion_token_ids": [], "per_token_logps": [-0.25, -0.5], "latency_s": 1.0, "timestamp": 1.0}]}
    p = tmp_path / "result.json"
    p.write_text(json.dumps(doc))
    ro = load_source(p)
    assert ro.format == "openenv-rollout-result" and ro.reward == 1.0
    assert ro.turns[0].output_ids == [5, 6] and ro.summary["task_id"] == "t1"


# ------------------------------------------------------------------ turns.json matching

def _folder_with_turns(tmp_path, entries, records=None):
    folder = tmp_path / "cap"
    write_trace(folder, records if records is not None else fx.ours_records())
    (folder / "turns.json").write_text(json.dumps(entries))
    return folder


def test_turns_matched_by_output_ids_when_no_call_field(tmp_path):
    entries = fx.ours_turns()
    for e in entries:
        del e["call"]
    entries.reverse()  # order would be wrong; ids must decide
    ro = load_source(_folder_with_turns(tmp_path, entries))
    calls = by_call(ro)
    assert calls[3].origin.matched_by == "output ids"
    assert calls[3].prompt_source == "rerender" and calls[2].prompt_source == "engine"
    assert not [p for p in ro.problems if p.severity == "error"], problems_text(ro)


def test_turns_matched_by_order_among_agent_calls(tmp_path):
    entries = fx.ours_turns()
    for e in entries:
        del e["call"], e["output_ids"]
    ro = load_source(_folder_with_turns(tmp_path, entries))
    agents = [t for t in ro.turns if t.kind == "agent"]
    # entry j -> j-th agent call (2, 3, 4): entry 2 was built for call 5, so call 4 gets its prompt
    assert [t.origin.matched_by for t in agents[:3]] == ["order"] * 3
    assert agents[0].prompt_ids == fx.prompt_ids(2, fx.OURS_CALLS[2][2])


def test_turns_call_field_disagreeing_with_trace_ids(tmp_path):
    entries = fx.ours_turns()
    entries[1]["output_ids"] = [1, 2, 3]
    entries[1]["per_token_logps"] = [-1.0, -1.0, -1.0]
    entries[1]["mask"] = [1, 1, 1]
    ro = load_source(_folder_with_turns(tmp_path, entries))
    msg = problems_text(ro)
    assert "turns.json: record 1" in msg and "disagree with trace call 3" in msg
    t = by_call(ro)[3]
    assert t.output_ids == [1, 2, 3] and t.output_source == "stored" and t.top_logprobs is None


def test_turns_entry_for_missing_call_is_kept(tmp_path):
    entries = fx.ours_turns() + [{"call": 99, "output_ids": [4, 5], "mask": [1, 1], "trained": True}]
    ro = load_source(_folder_with_turns(tmp_path, entries))
    assert "call 99 has no trace record" in problems_text(ro)
    assert ro.turns[-1].call == 99 and ro.turns[-1].mask == [1, 1]


def test_turns_mask_over_prompt_plus_output(tmp_path):
    entries = fx.ours_turns()
    e = entries[0]
    e["mask"] = [0] * len(e["prompt_ids"]) + e["mask"]
    ro = load_source(_folder_with_turns(tmp_path, entries))
    assert by_call(ro)[2].mask == [1] * fx.OURS_CALLS[2][1]


# ------------------------------------------------------------------ bad input

def test_truncated_json_array_salvages_complete_records(tmp_path):
    recs = fx.ours_records()
    text = json.dumps(recs, indent=1)
    cut = text.index('"turn": 4')  # inside record 3
    p = tmp_path / "trace.json"
    p.write_text(text[:cut + 12])
    ro = load_source(p)
    assert [t.call for t in ro.turns] == [1, 2, 3]
    msg = problems_text(ro)
    line = text[:cut + 12].count("\n") + 1
    assert f"trace.json: line {line}, column" in msg and "kept the 3 complete record(s)" in msg


def test_jsonl_bad_line_is_named_and_others_kept(tmp_path):
    lines = [json.dumps(r) for r in fx.openenv_records()]
    lines[2] = lines[2][: len(lines[2]) // 2]
    p = tmp_path / "trace.jsonl"
    p.write_text("\n".join(lines) + "\n")
    ro = load_source(p)
    assert [t.call for t in ro.turns] == [1, 2, 4, 5, 6]
    assert "trace.jsonl: line 3, column" in problems_text(ro)


def test_wrong_types_negative_ids_and_missing_fields(tmp_path):
    good = fx.record(1, kind="main", system=fx.AGENT_SYSTEM, tools=True, n_out=4, n_prompt=None,
                     tool_calls=[fx.tool_call("bash", {}, "b")])
    bad_ids = copy.deepcopy(good)
    bad_ids["turn"] = 2
    bad_ids["completion_token_ids"] = ["a", "b", "c", "d"]
    bad_ids["completion_tokens"] = None
    del bad_ids["logprobs"]
    neg = copy.deepcopy(good)
    neg["turn"] = 3
    neg["completion_token_ids"] = [1, -2, 3, 4]
    neg["completion_tokens"] = None
    del neg["logprobs"]
    bad_lp = copy.deepcopy(good)
    bad_lp["turn"] = 4
    bad_lp["per_token_logps"] = [-0.5, "x", None, -1.0]
    bare = {"turn": 5}  # missing everything
    ro = load_source(write_trace(tmp_path, [good, bad_ids, neg, bad_lp, bare, "junk"], jsonl=True))
    msg = problems_text(ro)
    calls = by_call(ro)
    assert "trace.json: record 1 (line 2) .completion_token_ids: entry 0 is 'a' (str)" in msg
    assert calls[2].output_ids == []
    assert "record 2 (line 3) .completion_token_ids: entry 1 is -2" in msg
    assert calls[3].output_ids == [1]  # prefix before the bad id; logprobs cut to align
    assert "call 3: 1 output ids but 4 logprobs; kept the first 1 aligned" in msg
    assert calls[4].logprobs == [-0.5, None, None, -1.0]
    assert "record 3 (line 4) .per_token_logps: 2 logprob(s) are not numbers" in msg
    assert calls[5].output_ids == [] and calls[5].messages == []
    assert "record 5 (line 6): expected a JSON object, got str" in msg
    assert len(ro.turns) == 5


def test_logprob_and_id_lengths_differ(tmp_path):
    rec = fx.record(7, kind="main", system=fx.AGENT_SYSTEM, tools=True, n_out=6, n_prompt=None,
                    tool_calls=[fx.tool_call("bash", {}, "b")])
    rec["per_token_logps"] = rec["per_token_logps"][:4]
    ro = load_source(write_trace(tmp_path, [rec]))
    t = ro.turns[0]
    assert len(t.output_ids) == len(t.logprobs) == len(t.mask) == len(t.top_logprobs) == 4
    assert "record 0 (line 2): call 7: 6 output ids but 4 logprobs; kept the first 4 aligned" in problems_text(ro)


def test_empty_trace(tmp_path):
    ro = load_source(write_trace(tmp_path, []))
    assert ro.turns == [] and "trace has no records" in problems_text(ro)
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "trace.json").write_text("")
    ro = load_source(tmp_path / "e")
    assert ro.turns == [] and "file is empty" in problems_text(ro)


def test_file_over_max_file_mb_is_refused_without_reading(tmp_path, monkeypatch):
    folder = tmp_path / "cap"
    folder.mkdir()
    with open(folder / "trace.json", "wb") as f:  # sparse 3 MB file
        f.truncate(3 * 1024 * 1024)
    (folder / "turns.json").write_text(json.dumps(fx.ours_turns()))
    read_bytes = Path.read_bytes

    def guarded(self):
        assert self.name != "trace.json", "oversized file was read"
        return read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", guarded)
    ro = load_source(folder, Settings(max_file_mb=1))
    assert "trace.json: file is 3.0 MB, over the 1 MB limit" in problems_text(ro)
    assert [t.call for t in ro.turns] == [2, 3, 5]  # turns.json still read
    with pytest.raises(SourceError, match="over the 1 MB limit"):
        load_source(folder / "trace.json", Settings(max_file_mb=1))


def test_unreadable_and_missing_sources(tmp_path):
    with pytest.raises(SourceNotFound):
        load_source(tmp_path / "nope")
    with pytest.raises(SourceError, match="no trace.json or turns.json"):
        load_source(tmp_path)
    p = tmp_path / "x.json"
    p.write_text("this is not json")
    with pytest.raises(SourceError, match=r"x.json: line 1, column 1: invalid JSON"):
        load_source(p)


def test_realdata_truncated_export_line_is_unreadable_with_location(realdata):
    p = realdata / "13point5-opencode-rollouts-test" / "train.jsonl.line1-head.TRUNCATED.txt"
    n = len(p.read_text(encoding="utf-8").rstrip("\n"))
    with pytest.raises(SourceError, match=rf"line 1, column {n + 1}: invalid JSON"):
        load_source(p)


def test_realdata_other_formats_are_not_mistaken_for_traces(realdata):
    # Since issue 5 these are read by their own readers (Harbor rows, ATIF), never as proxy traces.
    for p in (realdata / "harbor-golden-traces").glob("*.json"):
        assert load_source(p).format in ("harbor", "atif")


def test_200mb_trace_is_refused_clearly_with_default_settings(tmp_path):
    """The issue's huge-file case: default limits refuse it without reading it (a sparse file)."""

    from viewer.sources import SourceError

    folder = tmp_path / "big"
    folder.mkdir()
    with open(folder / "trace.json", "wb") as f:
        f.truncate(200 * 1024 * 1024)
    (folder / "task.json").write_text('{"instruction": "still shown"}')
    try:
        ro = load_source(folder)
    except SourceError as e:
        msg = str(e)
    else:
        msg = " ".join(str(p) for p in ro.problems)
        assert ro.instruction == "still shown"
    assert "trace.json" in msg and "200" in msg and "MB" in msg
