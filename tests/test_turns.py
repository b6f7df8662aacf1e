"""The upstream turn rule (FORMATS §2.4 steps 1–2) and bookkeeping recognition (§2.3)."""
from __future__ import annotations

from viewer.rollout import Turn
from viewer.turns import (AGENT_PREFIX, SUMMARISER_PREFIX, TITLE_PREFIX, classify_calls, derive_training,
                          has_tool_call, kind_from_label, role_from_prompt, system_prompt)

TOOLS = [{"type": "function", "function": {"name": "bash"}}]
AGENT = AGENT_PREFIX + ", an interactive CLI tool."


def turn(call, system, tools=True, tool_calls=None, n_out=3, **kw):
    msgs = [{"role": "system", "content": system}, {"role": "user", "content": "u"}] if system is not None else []
    resp = {"role": "assistant", "tool_calls": tool_calls} if tool_calls else {"role": "assistant", "content": "x"}
    return Turn(index=call - 1, call=call, messages=msgs, tools=TOOLS if tools else [], response=resp,
                output_ids=list(range(n_out)), **kw)


def test_primary_prompt_rule_keeps_main_calls_and_tags_the_rest():
    calls = [turn(1, TITLE_PREFIX + ". Nothing else.", tools=False),
             turn(2, AGENT, tool_calls=[{"function": {"name": "bash"}}]),
             turn(3, SUMMARISER_PREFIX + ". You are given...", tools=True),
             turn(4, AGENT),
             turn(5, "Some other prompt", tools=True),
             turn(6, None, tools=False)]
    primary = classify_calls(calls)
    assert primary == AGENT
    assert [(t.kind, t.role) for t in calls] == [
        ("bookkeeping", "title"), ("agent", "main"), ("bookkeeping", "compaction"), ("agent", "main"),
        ("bookkeeping", "other"), ("bookkeeping", "other")]


def test_primary_prompt_is_the_first_tool_enabled_call_not_the_agent_prefix():
    # A non-opencode agent: its own system prompt becomes the primary one.
    calls = [turn(1, "Title bot", tools=False), turn(2, "You are Bob.", tools=True), turn(3, AGENT, tools=True)]
    classify_calls(calls)
    assert [t.kind for t in calls] == ["bookkeeping", "agent", "bookkeeping"]


def test_explicit_kind_wins_and_id_only_records_stay_agent():
    t = turn(1, AGENT)
    t.kind, t.role = "bookkeeping", "title"
    t.origin = t.origin.replace(kind_source="record")
    bare = [Turn(index=0, call=1, output_ids=[1]), Turn(index=1, call=2, output_ids=[2])]
    classify_calls([t])
    classify_calls(bare)
    assert (t.kind, t.role) == ("bookkeeping", "title")
    assert all(b.kind == "agent" for b in bare)


def test_derive_training_trains_tool_calls_only_and_respects_recorded_masks():
    a = turn(1, AGENT, tool_calls=[{"function": {"name": "edit"}}], n_out=4)
    b = turn(2, AGENT, n_out=2)
    c = turn(3, AGENT, tool_calls=[{"function": {"name": "bash"}}], n_out=2, error="upstream HTTP 500: x")
    d = turn(4, AGENT, n_out=3, mask=[0, 1, 0])
    d.origin = d.origin.replace(mask_source="record")
    e = turn(5, TITLE_PREFIX, tools=False, n_out=2, tool_calls=[{"function": {"name": "bash"}}])
    e.kind = "bookkeeping"
    derive_training([a, b, c, d, e])
    assert (a.trained, a.mask) == (True, [1, 1, 1, 1])
    assert (b.trained, b.mask) == (False, [0, 0])
    assert (c.trained, c.mask) == (False, [0, 0])
    assert d.mask == [0, 1, 0]
    assert (e.trained, e.mask) == (False, [0, 0])


def test_helpers():
    assert system_prompt([{"role": "system", "content": [{"type": "text", "text": "a"}, {"text": "b"}]}]) == "ab"
    assert system_prompt([{"role": "user", "content": "x"}]) is None
    assert role_from_prompt([{"role": "system", "content": "  " + TITLE_PREFIX}], []) == "title"
    assert role_from_prompt([], []) == "other"
    assert kind_from_label("title") == ("bookkeeping", "title")
    assert kind_from_label("MAIN") == ("agent", "main")
    assert kind_from_label("compaction") == ("bookkeeping", "compaction")
    assert kind_from_label("reranker") == ("bookkeeping", "other")
    assert has_tool_call(turn(1, AGENT, tool_calls=[{"function": {"name": "x"}}]))
    assert not has_tool_call(turn(1, AGENT))
