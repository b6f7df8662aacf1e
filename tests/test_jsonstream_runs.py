"""viewer.sources.jsonstream decodes runs of whole records as one array (recordends.batch_end): the
records, their lines and the problems equal the one-by-one reading's, whatever is in the run."""
from __future__ import annotations

import json

import pytest

import viewer.sources.jsonstream as js
from viewer.config import Settings
from viewer.sources.capture import read_capture


def _rec(i: int, **extra) -> dict:
    return {"turn": i, "kind": "main", "completion_token_ids": [i, i + 1],
            "logprobs": [{"token": f"token_id:{i}", "logprob": -0.5, "bytes": [104], "top_logprobs": []},
                         {"token": f"token_id:{i + 1}", "logprob": -1, "bytes": [105], "top_logprobs": []}],
            **extra}


def _text(sep: str) -> str:
    recs = [json.dumps(_rec(i)) for i in range(1, 13)]
    recs[3] = json.dumps(_rec(4, note='a string that looks like a record: , {"turn": 99, "kind": "x"}'))
    recs[5] = json.dumps(_rec(6)).replace("-0.5", "NaN")  # msgspec refuses it: Python's parser decides
    recs[7] = json.dumps(_rec(8, logprobs=[{"token": "token_id:8", "logprob": True}]))  # not the typed shape
    recs[9] = json.dumps({"kind": "main", "turn": 10})  # opens with another key
    return "[" + sep.join(recs) + "]"


@pytest.mark.parametrize("chunk", [7, 300, 1 << 20])
@pytest.mark.parametrize("sep", [",", ", ", ",\n"])
@pytest.mark.parametrize("trace", [True, False])
def test_runs_equal_json_loads_and_lines(tmp_path, monkeypatch, chunk, sep, trace):
    monkeypatch.setattr(js, "CHUNK_CHARS", chunk)
    text = _text(sep)
    p = tmp_path / "trace.json"
    p.write_text(text)
    rs = js.open_records(p, trace=trace)
    got = list(rs)
    want = json.loads(text)
    assert len(got) == len(want) and rs.problems == []
    if not trace:  # the typed decode keeps only the keys readers use; the generic one is json.loads
        assert got == want
    assert [got[i]["turn"] for i in range(12)] == [r["turn"] for r in want]
    assert [rs.line_of(i) for i in range(12)] == ([i + 1 for i in range(12)] if "\n" in sep else [1] * 12)


def test_a_clean_trace_is_decoded_in_runs(tmp_path, monkeypatch):
    """One decode for the records before the last one in the buffer, not one per record: the last
    record (no opening after it) is the only one decoded alone."""
    p = tmp_path / "trace.json"
    p.write_text(json.dumps([_rec(i) for i in range(1, 41)]))
    ones, manys = [], []
    one, many = js.decode_one, js.decode_many
    monkeypatch.setattr(js, "decode_one", lambda *a: ones.append(1) or one(*a))
    monkeypatch.setattr(js, "decode_many", lambda *a: manys.append(1) or many(*a))
    ro = read_capture(p, Settings())
    assert len(ro.turns) == 40 and ro.problems == []
    assert (len(manys), len(ones)) == (1, 1)


def test_a_broken_record_in_a_run_is_reported_as_before(tmp_path, monkeypatch):
    """A run with a broken record fails as a whole and is read record by record: the records before
    the broken one are kept and the message names the line and column, as before."""
    monkeypatch.setattr(js, "CHUNK_CHARS", 1 << 20)
    recs = [json.dumps(_rec(i)) for i in range(1, 6)]
    recs[2] = recs[2].replace('"kind": "main"', '"kind": "main" "x": 1')
    p = tmp_path / "trace.json"
    p.write_text("[" + ", ".join(recs) + "]")
    rs = js.open_records(p, trace=True)
    assert [r["turn"] for r in rs] == [1, 2]
    col = len("[" + ", ".join(recs[:2]) + ", ") + recs[2].index('"x"') + 1
    assert [str(x) for x in rs.problems] == [
        f"error: trace.json: line 1, column {col}: invalid or truncated JSON: Expecting ',' delimiter; "
        "kept the 2 complete record(s) before it"]
