"""Trace and record files decoded by msgspec (viewer.sources.recordtypes, jsonstream): the values
are json.load's, on real files and on every value where the two parsers differ; the typed fast
path gives the same Turns and the same problems as the generic one."""
from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path

import pytest

import viewer.sources.jsonstream as js
from viewer.config import Settings
from viewer.sources import load_source
from viewer.sources.capture import read_capture
from viewer.sources.recordtypes import ValidationError

REPO = Path(__file__).resolve().parent.parent
REAL = REPO.parent / "shared" / "realdata"
if not REAL.is_dir():
    REAL = Path("/work/shared/realdata")
sys.path.insert(0, str(REPO / "bench"))


def _same(a, b) -> bool:
    """Equal as JSON values, NaN equal to NaN, and ints and floats not confused."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _json_files() -> list[Path]:
    files = sorted((REPO / "sample_data").glob("*/*.json")) + sorted(REAL.glob("*/*.json"))
    return [p for p in files if p.read_bytes().lstrip()[:1] == b"["]


@pytest.mark.parametrize("path", _json_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_streamed_records_equal_json_load_on_real_files(path):
    want = json.loads(path.read_text(encoding="utf-8"))
    for trace in (False, True):
        rs = js.open_records(path, trace=trace)
        got = list(rs)
        assert rs.problems == [] and len(got) == len(want)
        if not trace:
            assert _same(got, want)


def _expected_columns(rec: dict) -> dict:
    """A proxy record's columns computed from json.load's dicts by hand (not by the reader)."""
    ents = rec["logprobs"]
    return {"output_ids": rec["completion_token_ids"], "prompt_ids": rec["prompt_token_ids"],
            "logprobs": rec["per_token_logps"],
            "top": [[(int(t["token"][len("token_id:"):]), t["logprob"]) for t in e["top_logprobs"]] for e in ents],
            "bytes": [bytes(e["bytes"]) for e in ents]}


def _columns(t) -> dict:
    return {"output_ids": list(t.output_ids), "prompt_ids": list(t.prompt_ids), "logprobs": list(t.logprobs),
            "top": [[(x.id, x.logprob) for x in alts] for alts in t.top_logprobs],
            "bytes": list(t.output_bytes)}


def _bench_capture(tmp_path: Path) -> Path:
    import bench_load

    folder = tmp_path / "bench"
    bench_load.write_capture(folder, calls=3, n_prompt=50, n_out=40, top_k=5, seed=3)
    return folder


@pytest.mark.parametrize("which", ["qwen3-tiny", "smollm2", "bench"])
def test_trace_columns_equal_json_load_values(tmp_path, which):
    folder = _bench_capture(tmp_path) if which == "bench" else REPO / "sample_data" / which
    records = json.loads((folder / "trace.json").read_text())
    trace_only = tmp_path / "trace.json"
    trace_only.write_bytes((folder / "trace.json").read_bytes())
    ro = read_capture(trace_only, Settings())
    assert len(ro.turns) == len(records)
    for rec, t in zip(records, sorted(ro.turns, key=lambda t: t.origin.record)):
        assert _columns(t) == _expected_columns(rec)
    ro_folder = load_source(folder, Settings())  # with turns.json merged: the same turns as the generic path
    assert ro_folder.problems == [] or all(p.severity != "error" for p in ro_folder.problems)


_ENTRY = {"token": "token_id:5", "logprob": -0.5, "bytes": [104, 105],
          "top_logprobs": [{"token": "token_id:5", "logprob": -0.5, "bytes": [1]},
                           {"token": "token_id:7", "logprob": -2, "bytes": [2]}]}


def _rec(**over):
    rec = {"turn": 1, "kind": "main", "request": {"messages": [{"role": "user", "content": "hi"}]},
           "response": {"choices": [{"message": {"role": "assistant", "content": "x"}}]},
           "prompt_token_ids": [1, 2, 3], "completion_token_ids": [5, 5], "completion_tokens": ["token_id:5"] * 2,
           "logprobs": [dict(_ENTRY), dict(_ENTRY)], "per_token_logps": [-0.5, -0.5], "usage": {"n": 1}}
    rec.update(over)
    return rec


def _variants() -> list[tuple[str, str]]:
    e = _ENTRY
    return [
        ("clean", json.dumps([_rec(), _rec(turn=2)])),
        ("int and positive logprobs", json.dumps([_rec(per_token_logps=None,
                                                       logprobs=[{**e, "logprob": 3}, {**e, "logprob": -1}])])),
        ("bool logprob", json.dumps([_rec(per_token_logps=None, logprobs=[{**e, "logprob": True}, e])])),
        ("entry without bytes", json.dumps([_rec(logprobs=[{k: v for k, v in e.items() if k != "bytes"}, e])])),
        ("byte over 255", json.dumps([_rec(logprobs=[{**e, "bytes": [300]}, e])])),
        ("plain-text top tokens", json.dumps([_rec(logprobs=[{**e, "top_logprobs": [
            {"token": "he", "logprob": -1.0, "token_id": 9}, {"token": "token_id:7", "logprob": -2.0}]}, e])])),
        ("content wrapper", json.dumps([_rec(logprobs={"content": [e, e], "refusal": None})])),
        ("no token strings", json.dumps([_rec(completion_tokens=None, per_token_logps=None)])),
        ("bad token string", json.dumps([_rec(completion_tokens=["token_id:5", "token_id:٣"])])),
        ("NaN and Infinity", json.dumps([_rec(), _rec(per_token_logps=[float("nan"), float("inf")]), _rec()])),
        ("lone surrogate", json.dumps([_rec(request={"messages": [{"role": "user", "content": "\ud800"}]})])),
        ("1e400", json.dumps([_rec()])[:-2] + ', "zz": 1e400}]'),
        ("huge int, skipped key", "[" + json.dumps(_rec()) + "," + json.dumps(_rec())[:-1]
         + ', "zz": ' + "7" * 4400 + "}]"),
        ("huge int in a top entry's bytes", json.dumps([_rec()]).replace('"bytes": [1]', '"bytes": [' + "9" * 4301 + "]", 1)),
        ("id out of range", json.dumps([_rec(completion_token_ids=[5, 2 ** 40])])),
        ("ids as floats", json.dumps([_rec(prompt_token_ids=[1.0, 2])])),
        ("duplicate key", json.dumps([_rec()])[:-2] + ', "completion_token_ids": [5, 6]}]'),
        ("empty top-k", json.dumps([_rec(logprobs=[{**e, "top_logprobs": []}, {**e, "top_logprobs": []}])])),
        ("truncated", json.dumps([_rec(), _rec()])[:-40]),
        ("not an object", json.dumps([_rec(), 5, "x", [1]])),
        ("non-ASCII and invalid UTF-8", json.dumps([_rec(request={"messages": [
            {"role": "user", "content": "héllo ✓"}]})], ensure_ascii=False).replace("✓", "\udcff", 1)),
    ]


def _read(path: Path):
    ro = read_capture(path, Settings())
    return [(_columns(t) if t.top_logprobs is not None and t.output_bytes is not None else
             {"ids": list(t.output_ids), "lps": list(t.logprobs), "top": t.top_logprobs, "bytes": t.output_bytes},
             t.call, t.kind, t.request, t.response, t.origin) for t in ro.turns], [str(p) for p in ro.problems]


@pytest.mark.parametrize("chunk", [7, 1 << 20])
@pytest.mark.parametrize("name, text", _variants(), ids=[v[0] for v in _variants()])
def test_typed_path_equals_the_generic_path(tmp_path, monkeypatch, chunk, name, text):
    """The typed decode only chooses the fast path: Turns and problems equal those of the
    generic decode (every record through plain dicts) on the records where it could differ."""
    p = tmp_path / "trace.json"
    p.write_bytes(text.encode("utf-8", "surrogatepass").replace(b"\xed\xb3\xbf", b"\xff"))
    monkeypatch.setattr(js, "CHUNK_CHARS", chunk)
    typed = _read(p)

    def refuse(_buf):
        raise ValidationError("generic")

    monkeypatch.setattr(js, "decode_trace_record", refuse)
    assert typed == _read(p)


def test_trace_records_are_not_parsed_by_the_stdlib(tmp_path, monkeypatch):
    """A clean trace is decoded by msgspec: the stdlib's raw_decode (the reader before) is never called."""
    class NoStdlib:
        def raw_decode(self, *a, **k):
            raise AssertionError("json.raw_decode called")

    monkeypatch.setattr(js, "_decoder", NoStdlib())
    folder = _bench_capture(tmp_path)
    ro = read_capture(folder / "trace.json", Settings())
    assert len(ro.turns) == 3 and ro.problems == []


def test_msgspec_reports_where_a_value_ends():
    """The stream finds each record's end from msgspec's 'trailing characters (byte N)' (speed only:
    a wrong offset would fail the decode of that slice and fall back); pin it so an upgrade that
    changes the message is seen."""
    for text, end in [(b'{"a": [1, 2]}, {"b": 1}', 13), (b'{"a": 1}  \n ]', 12), (b"12,", 2), (b'"x"', 3)]:
        k = js._value_end(memoryview(text))
        assert k == end, text
        assert json.loads(text[:k]) is not None
    assert js._value_end(memoryview(b'{"a": [1, 2')) == js._MORE


def test_random_documents_stream_equal_json_loads(tmp_path, monkeypatch):
    """Random nested values (numbers at the edges of int and float ranges, escapes, unicode) in
    small chunks: the streamed records equal json.loads of the same text."""
    rng = random.Random(7)

    def value(depth=0):
        k = rng.randrange(9 if depth < 3 else 6)
        return [lambda: rng.randrange(-10 ** 20, 10 ** 20), lambda: rng.uniform(-1e308, 1e308),
                lambda: rng.random() * 10 ** rng.randrange(-320, -300), lambda: None, lambda: rng.random() < 0.5,
                lambda: "".join(rng.choice('ab"\\\n\té✓🎉\x01/') for _ in range(rng.randrange(6))),
                lambda: [value(depth + 1) for _ in range(rng.randrange(4))],
                lambda: {f"k{i}": value(depth + 1) for i in range(rng.randrange(4))},
                lambda: {"logprobs": [dict(_ENTRY)], "completion_token_ids": [rng.randrange(9)]}][k]()

    records = [value() for _ in range(60)]
    text = json.dumps(records, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, 1]))
    p = tmp_path / "t.json"
    p.write_text(text, encoding="utf-8")
    monkeypatch.setattr(js, "CHUNK_CHARS", 11)
    for trace in (False, True):
        got = list(js.open_records(p, trace=trace))
        if not trace:
            assert _same(got, json.loads(text))
        else:
            assert len(got) == len(records)


@pytest.mark.parametrize("tokens", [
    ["token_id:1", "token_id:22"], ["token_id:01"], ["token_id: 1"], ["token_id:-1"], ["token_id:-0"], ["token_id:1e3"],
    ["token_id:1.0"], ["token_id:"], ["token_id:1,2"], ["token_id:+1"], ["token_id:1_0"], ["token_id:٣"],
    ["token_id:true"], ["token_id:1", "x"], ["token_id:[1]"], ["token_id:1]", "token_id:[2"], ["token_id:1\n"],
    ["token_id:" + "9" * 5000], [5], ["token_id:1", None]])
def test_token_id_strings_parsed_by_the_proxy_rule(tokens):
    """The whole-list parse of "token_id:N" strings accepts exactly what the item rule does
    (prefix, then ASCII digits only), written out here by hand."""
    from viewer.sources.columns import token_id_ints

    tails = [t[len("token_id:"):] for t in tokens if isinstance(t, str) and t.startswith("token_id:")]
    ok = len(tails) == len(tokens) and all(t and all("0" <= c <= "9" for c in t) for t in tails)
    if ok and any(len(t) > 4300 for t in tails):
        assert token_id_ints(tokens) is None or token_id_ints(tokens) == [int(t) for t in tails]
        return
    assert token_id_ints(tokens) == ([int(t) for t in tails] if ok else None)


@pytest.mark.parametrize("sep", [", ", ",", ",\n  ", " ,"])
def test_records_whose_inner_objects_open_like_them_stream_equal_json_loads(tmp_path, monkeypatch, sep):
    """The stream guesses a record's end at the next object opening with the record's first key; an
    inner object opening the same way (or a string holding the key) must not cut a record short."""
    recs = [{"turn": i, "metadata": [{"turn": 9}, {"turn": 10}], "s": '", {"turn": 3}',
             "logprobs": [dict(_ENTRY)], "completion_token_ids": [5]} for i in range(4)]
    text = "[" + sep.join(json.dumps(r, separators=(sep, ": ")) for r in recs) + "]"
    p = tmp_path / "t.json"
    p.write_text(text)
    for chunk in (9, 1 << 20):
        monkeypatch.setattr(js, "CHUNK_CHARS", chunk)
        rs = js.open_records(p)
        assert _same(list(rs), json.loads(text)) and rs.problems == []
        assert [t.call for t in read_capture(p, Settings()).turns] == [0, 1, 2, 3]
