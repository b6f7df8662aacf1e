"""The fast paths of the chat-message readers (issue 35) give what the message-by-message rules give.

* tau-bench rows decoded typed (``tau_bench.decode``: ``traj`` as viewer/sources/chat_typed.py's
  structs, made into dicts by msgspec) read exactly as the same rows decoded by ``json.loads``: the same
  Conversation, the messages' keys in the same order, the same row summary;
* a message the types do not describe exactly makes the row decode generically (None), so the rules of
  ``chat_messages`` apply to it;
* ``chat_messages``' all-at-once path (every message ``{role, content}``) and its loop give what
  ``chat_message`` gives one message at a time.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path

import msgspec
import pytest

from viewer.sources import tau_bench
from viewer.sources.chat_messages import chat_message, chat_messages
from viewer.sources.formats import RowRef

REAL = Path(__file__).resolve().parent / "data" / "realworld"
TAU = sorted((REAL / "tau_bench").glob("*.json"))
VERIFIERS = sorted((REAL / "verifiers").glob("*/results.jsonl"))


def elements(path: Path) -> list[bytes]:
    return [bytes(r) for r in msgspec.json.decode(path.read_bytes(), type=list[msgspec.Raw])]


@pytest.mark.parametrize("path", TAU, ids=lambda p: p.name[:30])
def test_a_typed_tau_bench_row_reads_as_its_json(path):
    typed = 0
    for i, raw in enumerate(elements(path)):
        row = tau_bench.decode(raw)
        if row is None:
            continue
        typed += 1
        plain = json.loads(raw)
        a, b = tau_bench.read_row(plain, RowRef("t", i)), tau_bench.read_row(row, RowRef("t", i))
        assert a == b
        assert json.dumps(a.messages) == json.dumps(b.messages)  # the keys in the same order
        assert tau_bench.summarize(plain) == tau_bench.summarize(row)
    if path.name == "tool-calling-dev-retail-server-final.json":
        assert typed == len(elements(path))  # the fast path is taken on the bench's file


def _server_row() -> dict:
    return json.loads(elements(REAL / "tau_bench" / "tool-calling-dev-retail-server-final.json")[0])


def _with(change) -> bytes:
    row = _server_row()
    change(row)
    return json.dumps(row).encode()


def _first(row: dict, role: str, key: str | None = None) -> dict:
    return next(m for m in row["traj"] if m["role"] == role and (key is None or key in m))


def _call(row: dict) -> dict:
    return _first(row, "assistant", "tool_calls")["tool_calls"][0]


ODD = {
    "reasoning text": lambda r: _first(r, "assistant").update(reasoning_content="thinking"),
    "empty reasoning": lambda r: _first(r, "assistant").update(reasoning=""),
    "provider fields": lambda r: _first(r, "assistant").update(provider_specific_fields={"reasoning": None}),
    "empty tool_calls": lambda r: _first(r, "assistant").update(tool_calls=[]),
    "a call saved as text": lambda r: _first(r, "assistant", "tool_calls").update(
        tool_calls=[json.dumps(_call(r))]),
    "arguments as an object": lambda r: _call(r)["function"].update(arguments={"a": 1}),
    "a null call id": lambda r: _call(r).update(id=None),
    "another call type": lambda r: _call(r).update(type="code"),
    "a key on the call": lambda r: _call(r).update(index=0),
    "a user's name": lambda r: _first(r, "user").update(name="bob"),
    "a numeric tool_call_id": lambda r: _first(r, "tool").update(tool_call_id=7),
    "no content": lambda r: _first(r, "user").pop("content"),
    "an unknown role": lambda r: r["traj"].append({"role": "observer", "content": "x"}),
    "a message not an object": lambda r: r["traj"].append("text"),
    "annotations": lambda r: _first(r, "assistant").update(annotations=[{"type": "url"}]),
    "an unknown key": lambda r: _first(r, "user").update(extra=1),
    "a fork's column": lambda r: r.update(extra={"a": 1}),
    "traj as text": lambda r: r.update(traj=json.dumps(r["traj"])),
}


@pytest.mark.parametrize("name", ODD)
def test_a_row_the_types_do_not_describe_is_decoded_generically(name):
    raw = _with(ODD[name])
    assert tau_bench.decode(raw) is None
    ref = RowRef("t", 0)
    try:
        conv = tau_bench.read_row(json.loads(raw), ref)  # the rules apply: read, or refused with a place
    except Exception as e:  # noqa: BLE001 - the reader's own refusal of the odd row
        assert ".traj" in str(e)
    else:
        assert conv.messages


def test_leftovers_at_their_empty_values_stay_typed():
    def empty(r):
        for m in r["traj"]:
            m.update(refusal=None, function_call=None, audio=None, reasoning=None, reasoning_content=None,
                     provider_specific_fields=None, annotations=[])
        _first(r, "tool").update(tool_call_id=None, name=None)
    raw = _with(empty)
    row = tau_bench.decode(raw)
    assert row is not None
    plain = json.loads(raw)
    a, b = tau_bench.read_row(plain, RowRef("t", 0)), tau_bench.read_row(row, RowRef("t", 0))
    assert a == b and json.dumps(a.messages) == json.dumps(b.messages)


def _one_by_one(msgs, ref, path):
    problems: list = []
    out = [m for i, x in enumerate(msgs) if (m := chat_message(x, ref, f"{path}[{i}]", problems)) is not None]
    return out, problems


def _cases() -> list[list]:
    lists = [json.loads(line)[k] for p in VERIFIERS for line in p.read_text().splitlines() if line.strip()
             for k in ("prompt", "completion") if isinstance(json.loads(line)[k], list)]
    lists += [json.loads(raw)["traj"] for p in TAU for raw in elements(p)]
    odd = copy.deepcopy(lists[0]) + [{"role": "user"}, {"role": "tool", "content": "r", "tool_call_id": "c1"},
                                     {"role": "x", "content": 1}, "text", {"role": ["user"], "content": ""},
                                     {"role": "assistant", "content": None, "reasoning": "r",
                                      "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}, "{bad"]}]
    return lists + [odd]


def test_chat_messages_fast_paths_make_what_the_rules_make():
    ref = RowRef("t", 0)
    for msgs in _cases():
        problems: list = []
        got = chat_messages(copy.deepcopy(msgs), ref, ".m", problems)
        want, want_problems = _one_by_one(copy.deepcopy(msgs), ref, ".m")
        assert json.dumps(got) == json.dumps(want)
        assert problems == want_problems
