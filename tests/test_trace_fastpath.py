"""The upstream OpenEnv proxy trace (docs/FORMATS.md §2.2: ids only as "token_id:N" strings, top-5
entries whose ``bytes`` spell "token_id:N", one record a line) read through the fast path
(msgspec, logprob entries typed, JSONL lines decoded in place) gives exactly the Rollout of the
generic path: every record parsed by the stdlib's ``json`` (the oracle), and the values worked out
by hand from ``json.loads`` of the file."""
from __future__ import annotations

import dataclasses
import json
import random
import sys
from pathlib import Path

import pytest

import viewer.sources.jsonstream as js
from viewer.config import Settings
from viewer.sources import load_source
from viewer.sources.capture import read_capture
from viewer.sources.recordtypes import LogprobEntry, ValidationError, decode_trace_record

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

import bench_formats  # noqa: E402  (the bench's record builder: the upstream shape, top-5)


def _write(path: Path, records: list, form: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if form == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
    else:
        path.write_text(json.dumps(records))
    return path


def _records(n: int = 5, n_out: int = 30, seed: int = 4) -> list:
    rng = random.Random(seed)
    return [bench_formats.openenv_record(rng, c, n_out) for c in range(1, n + 1)]


def _norm(x):
    """A value made comparable by repr: packed columns as lists, dataclasses field by field (NaN equals
    NaN through repr; ints and floats stay apart; dict key order counts)."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return (type(x).__name__, [(f.name, _norm(getattr(x, f.name))) for f in dataclasses.fields(x)])
    if isinstance(x, dict):
        return [(k, _norm(v)) for k, v in x.items()]
    if isinstance(x, (list, tuple)) or type(x).__name__ in ("Packed", "TopKColumn", "BytesColumn"):
        return [_norm(v) for v in x]
    return x


def _rollout(path: Path):
    ro = read_capture(path, Settings())
    return repr(_norm(ro))


def _generic(monkeypatch) -> None:
    """The oracle: msgspec declines every record, so each is parsed by the stdlib (``json.loads`` a
    line, ``raw_decode`` an array element), as the reader did before the fast path."""
    monkeypatch.setattr(js, "_decode", lambda view, typed: js._NO)


@pytest.mark.parametrize("form", ["jsonl", "array"])
def test_openenv_trace_reads_the_same_rollout_fast_and_generic(tmp_path, monkeypatch, form):
    p = _write(tmp_path / "trace.json", _records(), form)
    fast = _rollout(p)
    _generic(monkeypatch)
    assert fast == _rollout(p)


@pytest.mark.parametrize("form", ["jsonl", "array"])
def test_openenv_trace_columns_are_the_files_values(tmp_path, form):
    """Ids, logprobs, top-k (ids, logprobs, offsets) and token bytes, worked out from json.loads."""
    recs = _records(n=4, n_out=25, seed=9)
    p = _write(tmp_path / form / "trace.json", recs, form)
    ro = load_source(p.parent, Settings())
    assert ro.problems == []
    turns = sorted(ro.turns, key=lambda t: t.origin.record)
    assert len(turns) == len(recs)
    for rec, t in zip(recs, turns):
        assert t.output_source == "token_id_strings"
        assert list(t.output_ids) == [int(s[len("token_id:"):]) for s in rec["completion_tokens"]]
        assert list(t.logprobs) == rec["per_token_logps"]
        assert [[(a.id, a.token, a.logprob) for a in alts] for alts in t.top_logprobs] == [
            [(int(a["token"][len("token_id:"):]), None, a["logprob"]) for a in e["top_logprobs"]]
            for e in rec["logprobs"]]
        assert list(t.output_bytes) == [bytes(e["bytes"]) for e in rec["logprobs"]]
    assert bench_formats.rollout_digest(ro) == bench_formats.records_digest(recs)


def test_openenv_jsonl_lines_are_typed_and_never_parsed_by_the_stdlib(tmp_path, monkeypatch):
    """A clean upstream trace takes the fast path: every line decoded typed by msgspec, json never called."""
    p = _write(tmp_path / "trace.json", _records(), "jsonl")
    typed = []

    def spy(buf):
        rec = decode_trace_record(buf)
        typed.append(type(rec["logprobs"][0]))
        return rec

    def no_stdlib(*a, **k):
        raise AssertionError("the stdlib parsed a line")

    monkeypatch.setattr(js, "decode_trace_record", spy)
    monkeypatch.setattr(js, "jsonl_record", no_stdlib)
    monkeypatch.setattr(js, "_decoder", None)
    ro = read_capture(p, Settings())
    assert len(ro.turns) == 5 and ro.problems == []
    assert typed == [LogprobEntry] * 5


def test_fixture_capture_openenv_same_both_ways(monkeypatch):
    folder = REPO / "tests" / "data" / "capture_openenv"
    fast = repr(_norm(load_source(folder, Settings())))
    _generic(monkeypatch)
    assert fast == repr(_norm(load_source(folder, Settings())))


def _jsonl_variants() -> list[tuple[str, bytes]]:
    """JSONL texts where the fast path could differ from the stdlib's: Python's extensions, broken and
    blank lines, line endings, encodings, non-objects, records that do not fit the types."""
    recs = [json.dumps(r) for r in _records(n=3, n_out=4, seed=2)]
    a, b, c = recs
    nan = json.dumps({**json.loads(b), "per_token_logps": [float("nan"), float("inf"), -1.0, 0.5]})
    plain_top = json.loads(c)
    plain_top["logprobs"][1]["top_logprobs"][2] = {"token": "he", "logprob": -1.0, "token_id": 9}
    no_bytes = json.loads(a)
    del no_bytes["logprobs"][0]["bytes"]
    bad_tok = json.loads(b)
    bad_tok["completion_tokens"][2] = "token_id:٣"
    return [
        ("clean", f"{a}\n{b}\n{c}\n".encode()),
        ("no final newline", f"{a}\n{b}\n{c}".encode()),
        ("CRLF", f"{a}\r\n{b}\r\n{c}\r\n".encode()),
        ("blank and space lines", f"\n{a}\n\n   \n{b}\n\t\n{c}\n\n".encode()),
        ("a no-break-space line", f"{a}\n\u00a0\n{b}\n".encode()),
        ("BOM", b"\xef\xbb\xbf" + f"{a}\n{b}\n".encode()),
        ("broken line", f"{a}\n{{broken\n{b}\n{c[:-30]}\n{c}\n".encode()),
        ("NaN and Infinity", f"{a}\n{nan}\n{c}\n".encode()),
        ("1e400", f"{a}\n{b[:-1]}, \"zz\": 1e400}}\n{c}\n".encode()),
        ("huge int, skipped key", f"{a}\n{b[:-1]}, \"zz\": {'7' * 4400}}}\n{c}\n".encode()),
        ("lone surrogate", f"{a}\n{b[:-1]}, \"s\": \"\\ud800\"}}\n{c}\n".encode()),
        ("duplicate key", f"{a[:-1]}, \"completion_tokens\": [\"token_id:1\"]}}\n{b}\n".encode()),
        ("plain-text top token", f"{json.dumps(plain_top)}\n{a}\n".encode()),
        ("entry without bytes", f"{json.dumps(no_bytes)}\n{b}\n".encode()),
        ("bad token string", f"{json.dumps(bad_tok)}\n{c}\n".encode()),
        ("not objects", f"{a}\n5\n\"x\"\n[1, 2]\n{b}\n".encode()),
        ("non-ASCII and invalid UTF-8", (a[:-1] + ', "s": "héllo ✓"}\n').encode() + b'{"s": "bad \xff"}\n'
         + f"{b}\n".encode()),
        ("too deep", f"{a}\n".encode() + b"[" * 100_000 + b"]" * 100_000 + f"\n{b}\n".encode()),
    ]


@pytest.mark.parametrize("chunk", [7, 1 << 20])
@pytest.mark.parametrize("name, raw", _jsonl_variants(), ids=[v[0] for v in _jsonl_variants()])
def test_jsonl_fast_path_equals_the_stdlib_path(tmp_path, monkeypatch, chunk, name, raw):
    """Rollout, problems and budget errors of the fast path equal the stdlib path's on every variant
    (and equal msgspec's generic decode with the types refused)."""
    p = tmp_path / "trace.json"
    p.write_bytes(raw)
    monkeypatch.setattr(js, "CHUNK_CHARS", chunk)

    def read():
        try:
            return _rollout(p)
        except Exception as e:  # a budget error (nesting) or CaptureUnreadable: the same either way
            return f"{type(e).__name__}: {e}"

    fast = read()

    def refuse(_buf):
        raise ValidationError("generic")

    monkeypatch.setattr(js, "decode_trace_record", refuse)
    assert read() == fast
    _generic(monkeypatch)
    assert read() == fast


def test_jsonl_line_longer_than_many_chunks(tmp_path, monkeypatch):
    """A record far longer than a chunk is read whole (the read grows with the pending line)."""
    recs = _records(n=3, n_out=200, seed=5)
    p = _write(tmp_path / "trace.json", recs, "jsonl")
    monkeypatch.setattr(js, "CHUNK_CHARS", 64)
    rs = js.open_records(p, trace=True)
    got = list(rs)
    assert rs.problems == [] and [r["turn"] for r in got] == [1, 2, 3]
    assert [rs.line_of(i) for i in range(3)] == [1, 2, 3]


def _history_records(n: int = 6) -> list:
    """Calls that repeat the conversation so far, as an agent's requests do (and the same tools)."""
    recs = _records(n=n, n_out=5, seed=11)
    history = [{"role": "system", "content": "You are opencode."}, {"role": "user", "content": "fix it"}]
    for k, rec in enumerate(recs):
        rec["request"]["messages"] = [dict(m) for m in history]
        history += [{"role": "assistant", "content": None, "tool_calls": [
                     {"id": f"c{k}", "type": "function", "function": {"name": "bash", "arguments": '{"a": 1}'}}]},
                    {"role": "tool", "tool_call_id": f"c{k}", "content": f"out {k}", "n": 1}]
    return recs


@pytest.mark.parametrize("form", ["jsonl", "array"])
def test_repeated_history_is_kept_once_with_the_same_values(tmp_path, monkeypatch, form):
    """Each request's messages are the earlier calls' objects where equal (memory: the history once),
    and the Rollout is the generic path's, value for value."""
    p = _write(tmp_path / "trace.json", _history_records(), form)
    ro = read_capture(p, Settings())
    msgs = [t.messages for t in sorted(ro.turns, key=lambda t: t.origin.record)]
    for a, b in zip(msgs, msgs[1:]):
        assert len(b) == len(a) + 2 and all(x is y for x, y in zip(a, b))
        assert b is not a
    tools = {id(t.tools) for t in ro.turns}
    assert len(tools) == 1 and all(t.request["tools"] is t.tools and t.request["messages"] is t.messages
                                   for t in ro.turns)
    fast = repr(_norm(ro))
    _generic(monkeypatch)
    assert fast == _rollout(p)


def test_history_shared_only_where_the_json_is_the_same(tmp_path):
    """1 / 1.0 / true, key order, and NaN against null are never merged: each turn keeps its own."""
    recs = _history_records(n=3)[1:]  # the second request repeats the first's 4 messages

    def changed(j: int, edit) -> dict:
        rec = json.loads(json.dumps(recs[1]))
        msgs = rec["request"]["messages"]
        msgs[j] = edit(msgs[j])
        return rec

    cases = [(changed(3, lambda m: {**m, "n": 1.0}), 3), (changed(3, lambda m: {**m, "n": True}), 3),
             (changed(1, lambda m: {"content": m["content"], "role": m["role"]}), 1)]  # keys in another order
    for rec, j in cases:
        p = _write(tmp_path / "t.json", [recs[0], rec], "jsonl")
        t0, t1 = sorted(read_capture(p, Settings()).turns, key=lambda t: t.origin.record)
        raw = json.loads(p.read_text().splitlines()[1])["request"]["messages"]
        assert repr(t1.messages) == repr(raw)  # every value as in the file: types, key order
        assert all(t1.messages[i] is t0.messages[i] for i in range(j))  # the messages before the change: shared
        assert all(t1.messages[i] is not t0.messages[i] for i in range(j, 4))  # from it on: the turn's own
    first, nan = json.loads(json.dumps(recs[0])), json.loads(json.dumps(recs[1]))
    first["request"]["messages"][1]["x"] = None  # written "null", as msgspec writes NaN: still not the same
    nan["request"]["messages"][1]["x"] = float("nan")
    p = _write(tmp_path / "n.json", [first, nan], "jsonl")
    t0, t1 = sorted(read_capture(p, Settings()).turns, key=lambda t: t.origin.record)
    assert t1.messages[1] is not t0.messages[1] and t0.messages[1]["x"] is None
    assert repr(t1.messages[1]["x"]) == "nan" and t1.messages[0] is t0.messages[0]
