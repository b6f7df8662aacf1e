"""The parser-speed paths of the verifiers and SWE-agent readers (issue 35) read exactly what plain ``json`` reads.

* verifiers rows whose messages are all ``{role: text, content}`` (tool calls in the OpenAI shape or each saved
  as its JSON text, or null) are decoded typed (``verifiers.decode``: the messages as structs, made into dicts
  by msgspec); any other row is decoded generically. Either way
  the Conversation (messages with their keys in the same order, task, summary, reward, problems) and the
  row summary are the ones ``json.loads``'s row gives;
* SWE-agent's typed decode leaves the ``trajectory`` steps unparsed and reads only those the history lacks:
  the appended replies are json's, whatever the steps hold.

The oracle is the stdlib: each line parsed by ``json.loads`` and handed to the same reader functions, which
tests/test_realworld_verifiers.py and tests/test_realworld_swe_agent.py check against the raw files.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from viewer.sources import open_dataset, swe_agent, verifiers
from viewer.sources.formats import RowRef
from viewer.sources.rowdata import RowReadError

DATA = Path(__file__).resolve().parent / "data" / "realworld"
RUNS = sorted((DATA / "verifiers").glob("*/results.jsonl"))
WORDLE = DATA / "verifiers" / "wordle--qwen3-30b-a3b-thinking-2507" / "results.jsonl"
MATH = DATA / "verifiers" / "math-python--gpt-5-nano" / "results.jsonl"  # tool calls saved as JSON text


def _lines(path: Path) -> list[bytes]:
    return [ln for ln in path.read_bytes().split(b"\n") if ln.strip()]


def _read(fmt, row, r: int):
    """(the Conversation's fields, its messages as JSON: the keys' order) or the located error's message."""
    if isinstance(row, RowReadError):
        return ("error", row.message)
    try:
        conv = fmt.read(row, RowRef("x", r))
    except RowReadError as e:
        return ("error", e.message)
    return conv, json.dumps(conv.messages), fmt.summarize(row)


def _oracle(fmt, lines: list[bytes]) -> list:
    out = []
    for i, line in enumerate(lines):
        try:
            row = json.loads(line.decode("utf-8-sig" if i == 0 else "utf-8"))
        except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
            out.append(("error", str(e)))
            continue
        out.append(_read(fmt, {"messages": row} if isinstance(row, list) else row, i))
    return out


def _through_the_row_layer(tmp_path: Path, fmt, lines: list[bytes]) -> list:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    src = open_dataset(path, format=fmt.name)
    assert src.dataset.decode is fmt.decode  # the reader's typed decode is the one the row layer uses
    return [_read(fmt, src.dataset.read_row(r), r) for r in range(len(src.dataset))]


def _same(got: list, want: list) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if w[0] == "error":  # the row layer's message holds json's own
            assert g[0] == "error" and w[1] in g[1], (g, w)
        else:
            assert g == w


# --------------------------------------------------------------------------- verifiers

@pytest.mark.parametrize("path", RUNS, ids=lambda p: p.parent.name[:24])
def test_a_verifiers_row_decoded_typed_reads_as_its_json(path):
    for i, line in enumerate(_lines(path)):
        row = verifiers.decode(line)
        assert row is not None  # every real row takes the typed path (the bench's files among them)
        assert _read(verifiers.FORMAT, row, i) == _read(verifiers.FORMAT, json.loads(line), i)
    if path == MATH:  # the older shape is there: each call its JSON text, each tool reply without its call's id
        plain = [json.loads(ln) for ln in _lines(path)]
        assert any(isinstance(c, str) for r in plain for m in r["completion"] for c in m.get("tool_calls") or [])
        assert any(m["role"] == "tool" and "tool_call_id" not in m for r in plain for m in r["completion"])


def _first(row: dict, role: str) -> dict:
    return next(m for m in row["prompt"] + row["completion"] if m["role"] == role)


EDITS = {
    "a key beside role and content": lambda r: _first(r, "assistant").update(refusal=None),
    "null tool calls": lambda r: _first(r, "assistant").update(tool_calls=None),
    "empty tool calls": lambda r: _first(r, "assistant").update(tool_calls=[]),
    "tool calls": lambda r: _first(r, "assistant").update(tool_calls=[
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        {"function": {"name": "g", "arguments": "[]"}}]),  # (no id, no type)
    "a call of a null id": lambda r: _first(r, "assistant").update(tool_calls=[
        {"id": None, "type": "function", "function": {"name": "f", "arguments": "{}"}}]),
    "a call of another type": lambda r: _first(r, "assistant").update(tool_calls=[
        {"id": "c", "type": "code", "function": {"name": "f", "arguments": "{}"}}]),
    "a call with arguments as an object": lambda r: _first(r, "assistant").update(tool_calls=[
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]),
    "a call with another key": lambda r: _first(r, "assistant").update(tool_calls=[
        {"id": "c", "index": 0, "type": "function", "function": {"name": "f", "arguments": "{}"}}]),
    "a call saved as JSON text": lambda r: _first(r, "assistant").update(tool_calls=[
        json.dumps({"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}})]),
    "calls saved as JSON text, a reply naming none": lambda r: r["completion"].extend([
        {"role": "assistant", "content": "", "tool_calls": [
            json.dumps({"id": "c1", "function": {"arguments": '{"code": "1"}', "name": "python"}, "type": "function"}),
            ' {"function": {"name": "g", "arguments": "[]"}} ']},  # (no id, no type, spaces around)
        {"role": "tool", "content": "out", "tool_calls": None}, {"role": "tool", "content": "out 2"}]),
    "a call text of a null id": lambda r: _first(r, "assistant").update(tool_calls=[
        json.dumps({"id": None, "type": "function", "function": {"name": "f", "arguments": "{}"}})]),
    "a call text with another key": lambda r: _first(r, "assistant").update(tool_calls=[
        json.dumps({"id": "c", "index": 0, "type": "function", "function": {"name": "f", "arguments": "{}"}})]),
    "a call text with arguments as an object": lambda r: _first(r, "assistant").update(tool_calls=[
        json.dumps({"id": "c", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}})]),
    "a call text of another type": lambda r: _first(r, "assistant").update(tool_calls=[
        json.dumps({"id": "c", "type": "code", "function": {"name": "f", "arguments": "{}"}})]),
    "a call text with a key twice": lambda r: _first(r, "assistant").update(tool_calls=[
        '{"id": "a", "id": "b", "function": {"name": "f", "name": "g", "arguments": "{}"}}']),
    "a call text that is not JSON": lambda r: _first(r, "assistant").update(tool_calls=['{"id": "c", "func']),
    "a call text that is a list": lambda r: _first(r, "assistant").update(tool_calls=['[1, 2]']),
    "a call text with a lone surrogate": lambda r: _first(r, "assistant").update(tool_calls=[
        '{"id": "c\\ud800", "function": {"name": "f", "arguments": "{}"}}']),
    "a call text holding NaN": lambda r: _first(r, "assistant").update(tool_calls=[
        '{"id": "c", "n": NaN, "function": {"name": "f", "arguments": "{}"}}']),
    "call texts and call objects": lambda r: r["completion"].extend([
        {"role": "assistant", "content": "", "tool_calls": [
            json.dumps({"id": "t", "type": "function", "function": {"name": "f", "arguments": "{}"}})]},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "o", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]),
    "tool calls on a user message": lambda r: _first(r, "user").update(tool_calls=[
        {"id": "u", "type": "function", "function": {"name": "f", "arguments": "{}"}}]),
    "reasoning text": lambda r: _first(r, "assistant").update(reasoning_content="thinking"),
    "a role of no chat": lambda r: r["completion"].append({"role": "critic", "content": "x"}),
    "a role that is not text": lambda r: r["completion"].append({"role": 5, "content": "x"}),
    "no role": lambda r: r["completion"].append({"content": "x"}),
    "no content": lambda r: r["completion"].append({"role": "assistant"}),
    "content parts": lambda r: r["completion"].append({"role": "user", "content": [{"type": "text", "text": "a"}]}),
    "a message that is text": lambda r: r["completion"].append("hello"),
    "a tool reply with its call's id": lambda r: r["completion"].extend([
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "content": "out", "tool_call_id": "c1"}]),
    "a tool reply naming no call": lambda r: r["completion"].extend([
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "content": "out"}]),
    "a plain tool reply": lambda r: r["completion"].append({"role": "tool", "content": "out"}),
    "a text prompt": lambda r: r.update(prompt="Once upon"),
    "a text completion": lambda r: r.update(completion="a time"),
    "a prompt saved as JSON text": lambda r: r.update(prompt=json.dumps(r["prompt"])),
    "few-shot": lambda r: r["prompt"].append({"role": "assistant", "content": "shot"}),
    "no assistant message": lambda r: r.update(completion=[], error="boom"),
    "messages in answer": lambda r: r.update(answer=[{"role": "user", "content": "x"}]),
    "messages in another column": lambda r: r.update(extra=[{"role": "user", "content": "x"}]),
    "a trajectory with ids": lambda r: r.update(trajectory=[{"tokens": {"ids": [1]}, "prompt": [], "completion": []}]),
    "tool definitions": lambda r: r.update(tool_defs=[{"name": "f", "description": "d", "parameters": {}}]),
    "info": lambda r: r.update(info={"oai_tools": [{"type": "function", "function": {"name": "f"}}], "k": 1}),
    "metrics": lambda r: r.update(metrics={"acc": 1.0}, flag=True, note="hi", n=3, big=2 ** 70),
    "summary fields": lambda r: r.update(stop_condition="max_turns", is_completed=True, token_usage={"in": 1}),
    "a reward as text": lambda r: r.update(reward="0.5"),
}
RAW_EDITS = {  # what json.loads takes or refuses where msgspec differs: left to the row layer
    "NaN": lambda s: s.replace(b'"reward":', b'"m":NaN,"reward":', 1),
    "1e400": lambda s: s.replace(b'"reward":', b'"m":1e400,"reward":', 1),
    "a lone surrogate": lambda s: s.replace(b'"role":"user"', b'"role":"user\\ud800"', 1),
    "invalid UTF-8": lambda s: s.replace(b"<guess>", b"<gu\xffess>", 1),
    "a key twice": lambda s: s.replace(b'"role":"assistant"', b'"role":"user","role":"assistant"', 1),
}


def test_verifiers_rows_of_other_shapes_read_as_their_json(tmp_path):
    rows = [json.loads(ln) for ln in _lines(WORDLE)]
    lines = [json.dumps(rows[0]).encode()]  # (the first row picks the format)
    for edit in EDITS.values():
        r = copy.deepcopy(rows[1])
        edit(r)
        lines.append(json.dumps(r, ensure_ascii=False).encode())
    lines += [edit(_lines(WORDLE)[2]) for edit in RAW_EDITS.values()]
    assert sum(verifiers.decode(ln) is not None for ln in lines) >= 5  # both paths are exercised
    typed = {name for name, ln in zip(EDITS, lines[1:]) if verifiers.decode(ln) is not None}
    assert {"a call saved as JSON text", "calls saved as JSON text, a reply naming none",
            "a call text with a key twice", "tool calls"} <= typed  # both shapes of calls, typed
    _same(_through_the_row_layer(tmp_path, verifiers.FORMAT, lines), _oracle(verifiers.FORMAT, lines))


# --------------------------------------------------------------------------- SWE-agent's unparsed steps

def test_swe_agent_steps_missing_from_the_history_read_as_their_json(tmp_path):
    traj = json.loads((DATA / "swe_agent" / "6e44b9__sweagenttestrepo-1c2844.traj").read_bytes())
    assert len(traj["trajectory"]) >= 2
    lines = [json.dumps(traj).encode()]
    extra = [{"response": "late reply", "observation": "seen", "state": {"deep": [[[1]]]}},
             {"response": None, "observation": 5}, "not a step", {"response": "last", "query": [{"role": "user"}]}]
    for cut in (1, 2):  # older SWE-agent: the history saved before the final step(s)
        t = copy.deepcopy(traj)
        replies = [i for i, e in enumerate(t["history"]) if e.get("role") == "assistant"]
        t["history"] = t["history"][:replies[-cut]]
        lines.append(json.dumps(t).encode())
        t["trajectory"] += extra
        lines.append(json.dumps(t).encode())
    lines.append(lines[-1].replace(b'"late reply"', b"1e400"))  # over range: json.loads's inf, read as such
    assert all(swe_agent.FORMAT.decode(ln) is not None for ln in lines)  # the steps left unparsed
    got = _through_the_row_layer(tmp_path, swe_agent.FORMAT, lines)
    _same(got, _oracle(swe_agent.FORMAT, lines))
    assert any(m["content"] == "inf" for m in got[-1][0].messages)  # (the step json.loads reads as inf)


def test_rows_the_decode_refuses_in_a_row_are_read_by_json_rules_without_asking_it(tmp_path):
    """A file of rows the typed decode does not take (a message with an SDK leftover key) stops
    being offered to it after a few (each refusal cost a partial decode), then is offered one now and then:
    the rows read as json's either way, and typed rows after them are taken again."""
    other = []  # rows of a shape the typed decode does not take: a message with a key beside role and content
    for ln in _lines(MATH) * 2:
        r = json.loads(ln)
        r["completion"][0]["refusal"] = None
        other.append(json.dumps(r).encode())
    lines = [*other, *_lines(WORDLE) * 6]  # (refused rows are offered again one in 64)
    assert all(verifiers.decode(ln) is None for ln in other)
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    src = open_dataset(path, format="verifiers")
    asked: list[bool] = []

    def decode(raw: bytes):  # the reader's own decode, its calls counted
        row = verifiers.decode(raw)
        asked.append(row is not None)
        return row

    src.dataset.decode = decode
    got = [_read(verifiers.FORMAT, src.dataset.read_row(r), r) for r in range(len(src.dataset))]
    _same(got, _oracle(verifiers.FORMAT, lines))
    assert len(asked) < len(lines) - 10  # refused rows stopped being offered
    assert asked[-20:] == [True] * 20  # the typed rows after them are taken again
