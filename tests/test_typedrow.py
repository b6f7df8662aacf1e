"""Typed row decodes (viewer/sources/typedrow.py, ``RowFormat.decode``; issue 35): Inspect logs and
SWE-agent trajectories decoded with only the fields their readers use, and NeMo Gym's token columns
checked in C passes, give the readers exactly what plain ``json`` gives them, on the producers' real
files and on hostile edits of them (invalid UTF-8, an over-long integer, NaN, a lone surrogate, ``1e400``
in a skipped field; fields of another shape), with the same errors.

The oracle is the stdlib: each JSONL line parsed by ``json.loads`` and handed to the same reader
functions the app uses (``expand``, ``read_row``), which tests/test_realworld_*.py check against the raw
files; the typed path must give equal conversations (messages, task, summary, problems, ids...).
"""
from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import msgspec
import pytest

from viewer.sources import open_dataset
from viewer.sources.columns import check_ids, check_logprobs
from viewer.sources.formats import RowRef
from viewer.sources.inspect_log import FORMAT as INSPECT, _count
from viewer.sources.mini_swe_agent import FORMAT as MINI
from viewer.sources.openhands import FORMAT as OPENHANDS
from viewer.sources.rowdata import RowReadError
from viewer.sources.swe_agent import FORMAT as SWE
from viewer.sources.typedrow import utf8_valid

DATA = Path(__file__).resolve().parent / "data" / "realworld"
INSPECT_LOGS = sorted((DATA / "inspect").glob("*.json"))
SWE_FILES = sorted((DATA / "swe_agent").glob("*.traj"))
OPENHANDS_ROWS = sorted((DATA / "openhands").glob("*.output.jsonl"))
OPENHANDS_EVENTS = sorted((DATA / "openhands").glob("basic*.json"))  # trajectory event lists
MINI_FILES = sorted((DATA / "mini_swe_agent").glob("*.traj.json"))
BIG = b"1" * 5000  # an integer json.loads refuses (sys.get_int_max_str_digits is 4300)


def _line(obj: dict) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode()  # (non-ASCII text kept: the UTF-8 check is exercised)


def _read(fmt, row, r: int):
    """The reader's conversation of a rollout, or its located error's message."""
    if isinstance(row, RowReadError):
        return ("error", row.message)
    try:
        return fmt.read(row, RowRef("x", r))
    except RowReadError as e:
        return ("error", e.message)


def _oracle(fmt, lines: list[bytes]) -> list:
    """What each rollout of these JSONL lines is, by plain json: a conversation, or the json error's text."""
    out = []
    for i, line in enumerate(lines):
        try:
            row = json.loads(line.decode("utf-8-sig" if i == 0 else "utf-8"))  # (the row layer's encodings)
            subs = fmt.expand(row) if fmt.expand else [row]
        except ValueError as e:  # JSONDecodeError, UnicodeDecodeError, an integer of too many digits
            out.append(("error", str(e)))
            continue
        except RecursionError:
            out.append(("error", "nested deeper than the parser accepts"))
            continue
        except RowReadError as e:  # expand: a log without samples
            out.append(("error", e.message))
            continue
        for sub in subs:
            out.append(_read(fmt, sub, len(out)))
    return out


def _through_the_row_layer(tmp_path: Path, fmt, lines: list[bytes]) -> list:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    src = open_dataset(path, format=fmt.name)
    rows = src.dataset.base if fmt.expand else src.dataset
    assert rows.decode is fmt.decode  # the format's typed decode is the one the row layer uses
    out = []
    for r in range(len(src.dataset)):
        out.append(_read(fmt, src.dataset.read_row(r), r))
    return out


def _with(obj: Any, at: list, value: Any) -> Any:
    """A deep copy of ``obj`` with ``value`` at path ``at``."""
    out = json.loads(json.dumps(obj))
    target = out
    for k in at[:-1]:
        target = target[k]
    target[at[-1]] = value
    return out


def _same(got: list, want: list) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if isinstance(w, tuple):  # the row layer's message holds json's own
            assert isinstance(g, tuple) and w[1] in g[1], (g, w)
        else:
            assert g == w


# --------------------------------------------------------------------------- the real files

@pytest.mark.parametrize("fmt, files", [(INSPECT, INSPECT_LOGS), (SWE, SWE_FILES)], ids=["inspect", "swe-agent"])
def test_real_files_read_as_plain_json_reads_them(tmp_path, fmt, files):
    lines = [_line(json.loads(p.read_bytes())) for p in files]
    assert all(fmt.decode(ln) is not None for ln in lines)  # every real file takes the typed path
    _same(_through_the_row_layer(tmp_path, fmt, lines), _oracle(fmt, lines))


def test_the_typed_decode_skips_what_is_not_read():
    log = json.loads((DATA / "inspect" / "2025-05-12T20-27-36-04-00_browser.json").read_bytes())
    got = INSPECT.decode(_line(log))
    assert set(got) == {"version", "status", "eval", "plan", "samples"}
    assert all("events" not in s and s["messages"] == w["messages"] for s, w in zip(got["samples"], log["samples"]))
    assert _count(_line(log)) == (len(log["samples"]), None)


def _openhands_lines() -> list[bytes]:
    """Every real OpenHands evaluation row as written, and each event list as the row it is read as."""
    lines = [ln for p in OPENHANDS_ROWS for ln in p.read_bytes().splitlines() if ln.strip()]
    return lines + [_line({"history": json.loads(p.read_bytes())}) for p in OPENHANDS_EVENTS]


def test_openhands_real_rows_read_as_plain_json_reads_them(tmp_path):
    lines = _openhands_lines()
    assert len(lines) >= 10 and all(OPENHANDS.decode(ln) is not None for ln in lines)
    _same(_through_the_row_layer(tmp_path, OPENHANDS, lines), _oracle(OPENHANDS, lines))
    # the Datasets tab's columns too (message lengths, turns, model, result)
    assert [OPENHANDS.summarize(OPENHANDS.decode(ln)) for ln in lines] == [OPENHANDS.summarize(json.loads(ln))
                                                                           for ln in lines]


def test_openhands_typed_decode_skips_what_is_not_read():
    row = json.loads(OPENHANDS_ROWS[0].read_bytes().splitlines()[0])
    got = OPENHANDS.decode(_line(row))
    assert "instance" in row and "instance" not in got  # the benchmark's task record, never read
    edits = [e for e in json.loads((DATA / "openhands" / "basic.json").read_bytes()) if e.get("action") == "edit"]
    got = OPENHANDS.decode(_line({"history": edits}))["history"]
    assert "translated_ipython_code" in edits[0]["args"] and set(got[0]["args"]) == {"thought", "content"}


def test_openhands_fields_of_another_shape(tmp_path):
    row = json.loads(OPENHANDS_ROWS[0].read_bytes().splitlines()[0])
    events = json.loads((DATA / "openhands" / "basic.json").read_bytes())
    meta = next(i for i, e in enumerate(events) if isinstance(e.get("tool_call_metadata"), dict))
    shapes = []
    for at, value in [([meta, "args"], "not a dict"), ([meta, "tool_call_metadata"], None),
                      ([meta, "tool_call_metadata", "model_response"], "resp"),
                      ([meta, "tool_call_metadata", "model_response", "choices"], {"0": {}}),
                      ([meta, "tool_call_metadata", "model_response", "choices", 0], "x"),
                      ([meta, "tool_call_metadata", "model_response", "choices", 0, "message"], None),
                      ([meta, "tool_call_metadata", "model_response", "choices", 0, "message", "tool_calls"], "[]"),
                      ([0, "args", "content"], ["part"]), ([1], "not an event"), ([2], [events[0], events[1]])]:
        shapes.append({"history": _with(events, at, value)})
    pairs = [[events[i], events[i + 1]] for i in range(0, len(events) - 1, 2)]  # 2024 OpenDevin rows
    lines = [_line(x) for x in [*shapes, {"history": pairs}, {**row, "history": json.dumps(row["history"])},
                                {**row, "metadata": "m", "test_result": [1], "metrics": None, "instance_id": 7}]]
    _same(_through_the_row_layer(tmp_path, OPENHANDS, lines), _oracle(OPENHANDS, lines))


def test_mini_swe_agent_real_files_read_as_plain_json_reads_them(tmp_path):
    lines = [_line(json.loads(p.read_bytes())) for p in MINI_FILES]
    assert len(lines) >= 3 and all(MINI.decode(ln) is not None for ln in lines)
    _same(_through_the_row_layer(tmp_path, MINI, lines), _oracle(MINI, lines))
    assert [MINI.summarize(MINI.decode(ln)) for ln in lines] == [MINI.summarize(json.loads(ln)) for ln in lines]
    for line in lines:  # mini-swe-agent's bookkeeping skipped
        raw, got = json.loads(line), MINI.decode(line)
        assert [m for m in raw["messages"] if "extra" in m] and not [m for m in got["messages"] if "extra" in m]
        assert "config" in raw["info"] and set(got["info"]["config"]) <= {"model"}


def test_mini_swe_agent_fields_of_another_shape(tmp_path):
    traj = json.loads(MINI_FILES[-1].read_bytes())
    reply = next(i for i, m in enumerate(traj["messages"]) if m.get("role") == "assistant")
    shapes = []
    for at, value in [(["messages", 0], "not a message"), (["messages", reply, "provider_specific_fields"], "x"),
                      (["messages", reply, "provider_specific_fields"], {"reasoning_content": "why"}),
                      (["messages", reply, "reasoning_content"], "because"), (["messages", reply, "role"], "exit"),
                      (["messages", reply, "content"], [{"type": "text", "text": "a"}]), (["info"], "done"),
                      (["info", "config"], None), (["info", "config", "model"], ["m"]), (["instance_id"], 7),
                      (["messages"], json.dumps(traj["messages"]))]:
        shapes.append(_with(traj, at, value))
    lines = [_line(t) for t in shapes]
    _same(_through_the_row_layer(tmp_path, MINI, lines), _oracle(MINI, lines))
    assert [MINI.summarize(MINI.decode(ln) or json.loads(ln)) for ln in lines] == [MINI.summarize(json.loads(ln))
                                                                                  for ln in lines]


# --------------------------------------------------------------------------- hostile edits

def _edit(obj: dict, at: list, value: bytes) -> bytes:
    """``obj``'s JSONL line with ``value`` (raw JSON text) put at path ``at`` (the last key new)."""
    target = obj
    for k in at[:-1]:
        target = target[k]
    target[at[-1]] = "@@HERE@@"
    line = _line(obj)
    del target[at[-1]]
    return line.replace(b'"@@HERE@@"', value)


# what json.loads refuses, or takes where msgspec does not (msgspec's skip lets the first two through)
REFUSED = [b'"bad \xff byte"', BIG, b"NaN", b"-Infinity", b'"\\ud800 lone"', b"[" * 3000 + b"]" * 3000]
HOSTILE = [*REFUSED, b"1e400", b'"fine"']


@pytest.mark.parametrize("value", HOSTILE, ids=lambda v: v[:12].decode("latin-1"))
def test_inspect_hostile_value_in_a_skipped_field(tmp_path, value):
    log = json.loads((DATA / "inspect" / "2025-05-12T20-28-13-04-00_popularity.json").read_bytes())
    lines = [_edit(json.loads(json.dumps(log)), ["samples", 0, "events", 0, "x"], value),
             _edit(json.loads(json.dumps(log)), ["results", "x"], value), _line(log)]
    if value in REFUSED:  # left to the row layer: json.loads's values, or its error
        assert INSPECT.decode(lines[0]) is None and _count(lines[0]) is None
    _same(_through_the_row_layer(tmp_path, INSPECT, lines), _oracle(INSPECT, lines))


@pytest.mark.parametrize("value", HOSTILE, ids=lambda v: v[:12].decode("latin-1"))
def test_openhands_hostile_value_in_a_skipped_field(tmp_path, value):
    row = json.loads(OPENHANDS_ROWS[0].read_bytes().splitlines()[0])
    events = json.loads((DATA / "openhands" / "basic.json").read_bytes())
    lines = [_edit(json.loads(json.dumps(row)), ["instance", "x"], value),
             _edit({"history": json.loads(json.dumps(events))}, ["history", 2, "extras", "x"], value), _line(row)]
    if value in REFUSED:  # left to the row layer: json.loads's values, or its error
        assert OPENHANDS.decode(lines[0]) is None and OPENHANDS.decode(lines[1]) is None
    _same(_through_the_row_layer(tmp_path, OPENHANDS, lines), _oracle(OPENHANDS, lines))


@pytest.mark.parametrize("value", HOSTILE, ids=lambda v: v[:12].decode("latin-1"))
def test_mini_swe_agent_hostile_value_in_a_skipped_field(tmp_path, value):
    traj = json.loads(MINI_FILES[-1].read_bytes())
    extra = next(i for i, m in enumerate(traj["messages"]) if "extra" in m)
    lines = [_edit(json.loads(json.dumps(traj)), ["messages", extra, "extra", "x"], value),
             _edit(json.loads(json.dumps(traj)), ["info", "config", "agent", "x"], value), _line(traj)]
    if value in REFUSED:  # left to the row layer: json.loads's values, or its error
        assert MINI.decode(lines[0]) is None and MINI.decode(lines[1]) is None
    _same(_through_the_row_layer(tmp_path, MINI, lines), _oracle(MINI, lines))


@pytest.mark.parametrize("value", HOSTILE, ids=lambda v: v[:12].decode("latin-1"))
def test_swe_agent_hostile_value_in_a_skipped_field(tmp_path, value):
    traj = json.loads((DATA / "swe_agent" / "6e44b9__sweagenttestrepo-1c2844.traj").read_bytes())
    lines = [_edit(json.loads(json.dumps(traj)), ["trajectory", 0, "thought"], value),
             _edit(json.loads(json.dumps(traj)), ["replay_config", "env"], value), _line(traj)]
    if value in REFUSED:
        assert SWE.decode(lines[0]) is None
    _same(_through_the_row_layer(tmp_path, SWE, lines), _oracle(SWE, lines))


def _shapes(traj: dict) -> list[dict]:
    """The trajectory with fields of other shapes than the typed decode declares."""
    out = []
    for path, value in [(["history", 1], "not a message"), (["history", 0, "content"], [{"type": "text", "text": "a"}]),
                        (["trajectory"], {"a": 1}), (["trajectory", 0], 7), (["info"], "done"),
                        (["replay_config"], json.dumps(traj["replay_config"])), (["replay_config"], "{broken"),
                        (["replay_config", "agent"], None), (["replay_config", "agent", "model"], ["gpt"]),
                        (["history", 0, "role"], "narrator"), (["history", 0, "is_demo"], True)]:
        out.append(_with(traj, path, value))
    return out


def test_swe_agent_fields_of_another_shape(tmp_path):
    traj = json.loads((DATA / "swe_agent" / "6e44b9__sweagenttestrepo-1c2844.traj").read_bytes())
    lines = [_line(t) for t in _shapes(traj)]
    _same(_through_the_row_layer(tmp_path, SWE, lines), _oracle(SWE, lines))


def test_inspect_fields_of_another_shape(tmp_path):
    log = json.loads((DATA / "inspect" / "2025-05-12T20-28-13-04-00_popularity.json").read_bytes())
    edits = [("samples", [1, *log["samples"][:2]]), ("samples", []), ("samples", None), ("eval", "x"),
             ("samples", [{**log["samples"][0], "messages": "hi", "scores": [1]}])]
    lines = [b"\xef\xbb\xbf" + _line(log), *(_line({**log, k: v}) for k, v in edits)]  # (a BOM: first line only)
    _same(_through_the_row_layer(tmp_path, INSPECT, lines), _oracle(INSPECT, lines))


# --------------------------------------------------------------------------- the UTF-8 check

def test_utf8_check_agrees_with_decoding():
    rng = random.Random(35)
    good = [b"a", b"abcdefg", b"0123456789abcdef", b"\xc3\xa9", b"\xe2\x80\x99", b"\xf0\x9f\x98\x80", b"x" * 50]
    bad = [b"\xc3", b"\xa9", b"\xff", b"\xed\xa0\x80", b"\xc0\xaf", b"\xe2\x80", b"\xf4\x90\x80\x80", b"\xe0\x80\x80"]
    seen = {True: 0, False: 0}
    for _ in range(20000):
        parts = [rng.choice(good) for _ in range(rng.randint(0, 60))]
        if parts and rng.random() < 0.5:
            parts.insert(rng.randrange(len(parts) + 1), rng.choice(bad))
        raw = b"".join(parts)
        try:
            raw.decode("utf-8")
            want = True
        except UnicodeDecodeError:
            want = False
        seen[want] += 1
        assert utf8_valid(raw) is want, raw
    assert min(seen.values()) > 5000
    for p in DATA.rglob("*"):  # every real file, text or zip
        if p.is_file():
            raw = p.read_bytes()
            try:
                raw.decode("utf-8")
                assert utf8_valid(raw), p
            except UnicodeDecodeError:
                assert not utf8_valid(raw), p


# --------------------------------------------------------------------------- NeMo Gym's token columns

def _array_packed(check):
    """``check`` as columns ran it before its clean case was packed by ``struct``: ``array``, item by item."""
    from viewer.packed import Packed, pack_floats
    from viewer.sources import columns

    def by_array(value):
        if not columns._clean(value, list[int]):
            return None
        try:
            packed = Packed("i", value)
        except OverflowError:
            return None
        return packed if packed.tobytes()[columns._SIGN_BYTE::4].isascii() else None

    def old(value):
        fast = columns._clean_ids, columns._clean_floats
        columns._clean_ids, columns._clean_floats = by_array, pack_floats
        try:
            return check(value)
        finally:
            columns._clean_ids, columns._clean_floats = fast
    return old


def test_nemo_gym_columns_checked_as_columns_checks_them():
    """The clean case packed by ``struct`` in one call gives what ``array``'s packing gave, values and
    messages, on NeMo Gym's real columns and odd ones."""
    rows = [json.loads(ln) for ln in (DATA / "nemo_gym" / "competitive_coding_challenges.example_rollouts.jsonl")
            .read_bytes().splitlines()]
    real = [it[k] for r in rows for it in r["response"]["output"]
            for k in ("prompt_token_ids", "generation_token_ids", "generation_log_probs") if k in it]
    assert len(real) == 15
    odd = [[1, 2, True], [1, -2], [0, 2 ** 31 - 1], [2 ** 31], [1.0, 2], [None], "abc", [], None, [10 ** 40],
           [-0.5, 0, -0], [-0.5, None], [-0.5, float("nan")], [0.5], [-1e-4, 1e-3], [-(10 ** 400)], [False],
           [-float("inf")], [-(10 ** 30)], ["-0.5"], [-0.0]]
    for value in real + odd:
        for fast in (check_ids, check_logprobs):
            try:
                want = _array_packed(fast)(value)
            except OverflowError as e:  # (columns' own: a logprob past the double range)
                with pytest.raises(type(e)):
                    fast(value)
                continue
            got = fast(value)
            assert got.error == want.error
            assert type(got.value) is type(want.value)
            if hasattr(want.value, "tobytes"):
                assert got.value.typecode == want.value.typecode and got.value.tobytes() == want.value.tobytes()
            else:
                assert got.value == want.value or (got.value != got.value and want.value != want.value)


def test_msgspec_typed_skip_is_what_the_checks_guard():
    """Why typedrow checks UTF-8 and long integers itself: msgspec's skip lets both through."""
    class Only(msgspec.Struct):
        a: int

    for skipped in (b'"\xff"', BIG):
        raw = b'{"b":' + skipped + b',"a":1}'
        assert msgspec.json.Decoder(Only).decode(raw).a == 1
        with pytest.raises(ValueError):
            json.loads(raw)


# --------------------------------------------------------------------------- the integer-length check

def test_long_digit_run_agrees_with_a_regex_and_json():
    """``long_digit_run`` samples the text (every 268th byte): a run of more digits than json takes is found
    wherever it sits and whatever surrounds it (lists of ids, runs just under the limit, at either end)."""
    import re
    import sys

    from viewer.sources.recordtypes import long_digit_run

    limit = sys.get_int_max_str_digits()
    longest = re.compile(rb"[0-9]{%d,}" % (limit + 1))
    rng = random.Random(35)
    seen = {True: 0, False: 0}
    for _ in range(3000):
        n, parts = rng.choice([100, limit, limit + 1, 2 * limit, 30000]), []
        while sum(map(len, parts)) < n:
            r = rng.random()
            if r < 0.3:
                parts.append(b"7" * rng.choice([1, limit - 1, limit, limit + 1, limit + 2, 2 * limit, rng.randrange(1, 2 * limit)]))
            elif r < 0.6:  # a list of ids: digits but for a comma every few bytes
                parts.append(", ".join(str(rng.randrange(200000)) for _ in range(rng.randrange(1, 400))).encode())
            else:
                parts.append(bytes(rng.choice(b'ab ,-."') for _ in range(rng.randrange(1, 50))))
        raw = b"".join(parts)
        want = bool(longest.search(raw))
        seen[want] += 1
        assert long_digit_run(raw) is want, (len(raw), [len(m) for m in re.findall(rb"[0-9]+", raw)][:20])
        assert long_digit_run(memoryview(raw)) is want
    assert min(seen.values()) > 500
    for digits in (limit, limit + 1):  # and json's own answer on the edge
        doc = b'{"a": [1, 2], "n": ' + b"9" * digits + b"}"
        try:
            json.loads(doc)
            refused = False
        except ValueError:
            refused = True
        assert long_digit_run(doc) is refused
