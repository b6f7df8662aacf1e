"""viewer.sources.jsonstream: records streamed in chunks equal the stdlib's parse; errors located."""
from __future__ import annotations

import json

import pytest

import viewer.sources.jsonstream as js
from viewer.sources.jsonio import read_records


@pytest.fixture
def tiny_chunks(monkeypatch):
    monkeypatch.setattr(js, "CHUNK_CHARS", 7)  # every record, number and string crosses chunk edges


def _records():
    return [{"a": 12345678901234567890, "s": "héllo ✓ 🎉" * 3, "x": [1.5, -2e-3, None, True]},
            [1, 2, 3], 42, "a string", {"nested": {"deep": ["é" * 20]}}, -0.125]


def test_array_streams_equal_json_loads(tmp_path, tiny_chunks):
    text = "\ufeff[\n" + ",\n".join(json.dumps(r, ensure_ascii=False) for r in _records()) + "\n]\n"
    p = tmp_path / "t.json"
    p.write_text(text, encoding="utf-8")
    rs = js.open_records(p)
    assert rs.container == "array"
    assert list(rs) == json.loads(text.lstrip("\ufeff")) and rs.problems == []
    assert [rs.line_of(i) for i in range(6)] == [2, 3, 4, 5, 6, 7]


def test_jsonl_streams_and_skips_a_bad_line(tmp_path, tiny_chunks):
    lines = [json.dumps(r, ensure_ascii=False) for r in _records()[:2]]
    p = tmp_path / "t.jsonl"
    p.write_text(lines[0] + "\n{broken\n\n" + lines[1] + "\n", encoding="utf-8")
    rs = js.open_records(p)
    assert rs.container == "jsonl"
    assert list(rs) == _records()[:2]
    assert [str(x) for x in rs.problems] == ["error: t.jsonl: line 2, column 2: invalid JSON line skipped: "
                                             "Expecting property name enclosed in double quotes"]
    assert rs.where(1) == "record 1 (line 4)"


@pytest.mark.parametrize("text, kept, where, what", [
    ('[\n {"a": 1},\n {"b": 2},\n {"c": ', 2, "line 4, column 8", "invalid or truncated JSON: Expecting value"),
    ('[{"a": 1}, {"b": 2}', 2, "line 1, column 20", "truncated: the array is not closed"),
    ('[{"a": 1} {"b": 2}]', 1, "line 1, column 11", "expected ',' or ']' between records"),
    ('[{"a": 1}]\n x', 1, "line 2, column 2", "unexpected content after the array"),
])
def test_broken_arrays_keep_the_records_before_the_break(tmp_path, tiny_chunks, text, kept, where, what):
    p = tmp_path / "t.json"
    p.write_text(text)
    rs = js.open_records(p)
    got = list(rs)
    assert len(got) == kept
    assert [str(x) for x in rs.problems] == [f"error: t.json: {where}: {what}; kept the {kept} complete record(s) "
                                             "before it"]
    whole = read_records(p)  # the whole-text reader keeps the same records
    assert whole.records == got
    if "after the array" not in what:  # (it points just past the "]", the stream at the content itself)
        assert [str(x) for x in whole.problems] == [str(x) for x in rs.problems]


def test_invalid_utf8_is_replaced_and_located(tmp_path, tiny_chunks):
    raw = b'[{"s": "ok"}, {"s": "bad \xff here"}, {"s": "\xc3\xa9"}]'
    p = tmp_path / "t.json"
    p.write_bytes(raw)
    rs = js.open_records(p)
    assert list(rs) == [{"s": "ok"}, {"s": "bad \ufffd here"}, {"s": "é"}]
    at = raw.index(b"\xff")
    assert [str(x) for x in rs.problems] == [f"error: t.json: byte {at}: not valid UTF-8; "
                                             "undecodable bytes replaced"]


def test_other_shapes_are_read_whole(tmp_path):
    p = tmp_path / "w.json"
    p.write_text('{"trace": [{"a": 1}], "reward": 1}')
    rs = js.open_records(p)
    assert rs.container == "object" and list(rs) == [{"a": 1}] and rs.wrapper["reward"] == 1
    p.write_text('{"a": 1}\n')  # one object on one line: a single record, not JSONL
    assert js.open_records(p).container == "single"
    p.write_text("")
    rs = js.open_records(p)
    assert list(rs) == [] and "file is empty" in str(rs.problems[0])
