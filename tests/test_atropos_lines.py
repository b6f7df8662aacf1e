"""Atropos lines read from their bytes (viewer/sources/atropos_lines.py) against plain ``json``.

The fast path counts a line's sequences without decoding it and parses its ``tokens`` / ``masks`` text
straight into packed arrays. Every expectation here comes from ``json.loads`` of the same bytes: a line
json refuses is never counted by the fast path (the row layer then says why, as one row); a line whose
lists hold anything but plain ints in range (floats, ``1e3``, bools, null, strings, negative or huge ids,
a 4,301-digit integer) is left to the decoding path; whatever the fast path returns equals json's values.
The whole reader is checked the same way: a file's rows, and each rollout as the decoding path reads
json's value of its line.
"""
from __future__ import annotations

import dataclasses
import json
import math
import random
from array import array
from pathlib import Path

import pytest

from viewer.sources import atropos_lines, open_dataset
from viewer.sources.atropos import expand, read_row
from viewer.sources.formats import RowRef
from viewer.sources.rowdata import RowReadError

DIR = Path(__file__).resolve().parent / "data" / "realworld" / "atropos"
REAL = [DIR / "objreward.jsonl", DIR / "rubiks_process_results_20.jsonl"]

# entries that are no plain id / mask in range, as JSON text, and text that is not JSON at all
HOSTILE = ["1.0", "1.5", "-1", "-100", "2147483648", "2147483647", "9223372036854775808", "-2147483648",
           "-2147483649", "1" + "0" * 30, "true", "false", "null", '"5"', "[]", "[1]", "{}", "1e3", "1E3", "-0",
           "1.0e0", "0", "-0.0", "1" * 4301, "-99999999999999999999999", "  7", "\t8"]
BROKEN = ["01", "+1", "1,", "- 1", "1 2", "-", "0x10", "NaN", "Infinity", "1.", ".5", ""]


def _lists(rng: random.Random, g: int) -> tuple[list[list[int]], list[list[int]]]:
    """G token lists (sometimes with a shared prompt) and masks: -100 then the tokens, or edited."""
    toks = [[rng.randrange(0, 150000) for _ in range(rng.randrange(0, 12))] for _ in range(g)]
    if rng.random() < 0.5:
        pre = [rng.randrange(0, 150000) for _ in range(rng.randrange(1, 6))]
        toks = [pre + t for t in toks]
    masks = []
    for t in toks:
        k = rng.randrange(0, len(t) + 1)
        m = [-100] * k + t[k:]
        r = rng.random()
        if r < 0.1 and len(m) > k + 1:
            m[rng.randrange(k, len(m))] = -100  # context between trained runs
        elif r < 0.2 and len(m) > k:
            m[rng.randrange(k, len(m))] = rng.randrange(-5, 150000)  # a label that is not the token
        elif r < 0.25:
            m = m[:-1]
        elif r < 0.3:  # -100 once too many or too few before the tokens' text
            m = [-100] * (k + 1) + t[k:] if rng.random() < 0.5 else [-100] * k + t[k + 1:]
        masks.append(m)
    return toks, masks


def _line(rng: random.Random) -> bytes:
    """One line as a writer might spell it: separators, key order, duplicate keys, edits that break it."""
    g = rng.randrange(1, 5)
    toks, masks = _lists(rng, g)
    tok_txt, msk_txt = [[str(x) for x in t] for t in toks], [[str(x) for x in m] for m in masks]
    if rng.random() < 0.3:
        where, i = rng.choice([tok_txt, msk_txt]), rng.randrange(g)
        v = rng.choice(HOSTILE + (BROKEN if rng.random() < 0.3 else []))
        if where[i]:
            where[i][rng.randrange(len(where[i]))] = v
        else:
            where[i].append(v)
    sep, outer = rng.choice([", ", ",", " , ", ",\t", ",  "]), rng.choice([", ", ","])
    spell = lambda lists: "[" + outer.join("[" + sep.join(x) + "]" for x in lists) + "]"  # noqa: E731
    scores = [rng.random() for _ in range(g)]
    if rng.random() < 0.05:
        scores[0] = math.nan
    msgs = [[{"role": "user", "content": rng.choice(["hi", "héllo ’", "tokens", '"masks": [[1]]'])}] for _ in range(g)]
    parts = [("tokens", spell(tok_txt)), ("masks", spell(msk_txt)), ("scores", json.dumps(scores)),
             ("messages", json.dumps(msgs, ensure_ascii=False))]
    if rng.random() < 0.3:
        rng.shuffle(parts)
    if rng.random() < 0.1:  # json keeps the last of a key
        parts.append(("tokens", rng.choice(["null", "[[1, 2]]", spell(tok_txt)])))
    if rng.random() < 0.1:
        parts.append(("masks", rng.choice(["null", "[[-100, 2]]", spell(msk_txt)])))
    if rng.random() < 0.1:
        parts.insert(0, ("seed", "7"))
    raw = ("{" + ", ".join(f'"{k}": {v}' for k, v in parts) + "}").encode()
    r = rng.random()
    if r < 0.03:
        raw = raw[:rng.randrange(1, len(raw))]  # a line cut short
    elif r < 0.05:
        raw = raw.replace("é".encode(), b"\xff")  # not UTF-8
    elif r < 0.06:
        raw = b"\xef\xbb\xbf" + raw  # a byte-order mark
    return raw


def _json(raw: bytes):
    try:
        return json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        return None


def _same(a, b) -> bool:
    """Equal values of the same types (NaN equal to NaN)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _plain(x):
    """A conversation as plain values: packed columns as lists, NaN as a string (NaN is no NaN's equal)."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: _plain(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, array):
        return x.tolist()
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return "NaN" if isinstance(x, float) and math.isnan(x) else x


def _ints(lists, low: int) -> bool:
    return isinstance(lists, list) and all(isinstance(s, list) and all(type(x) is int and low <= x < 2 ** 31 for x in s)
                                           for s in lists)


def _check(raw: bytes) -> str:
    """The fast path's answer for one line, checked against json's value; says which path it took."""
    ref = _json(raw)
    got = atropos_lines.count(raw)
    if not isinstance(ref, dict):
        assert got is None, raw[:200]  # json refuses it: the row layer reads it (one row, json's message)
        return "refused"
    if got is None:
        return "decoded"
    assert isinstance(ref["tokens"], list) and got[0] == len(ref["tokens"]), raw[:200]
    fast = atropos_lines.group(raw, got[1]) if got[1] is not None else None
    clean = (_ints(ref["tokens"], 0) and _ints(ref.get("masks"), -2 ** 31) and len(ref["masks"]) == len(ref["tokens"])
             and not any(isinstance(s, float) and math.isnan(s) for s in ref.get("scores") or []))
    if fast is None:
        assert not clean, f"a clean line left to the decoding path: {raw[:200]!r}"
        return "decoded"
    value, firsts = fast
    assert clean, raw[:200]
    assert [t.tolist() for t in value["tokens"]] == ref["tokens"], raw[:200]
    assert [m.tolist() for m in value["masks"]] == ref["masks"], raw[:200]
    assert _same({k: v for k, v in value.items() if k not in ("tokens", "masks")},
                 {k: v for k, v in ref.items() if k not in ("tokens", "masks")}), raw[:200]
    assert list(value) == list(ref)  # key order, as json gives it
    for k, t, m in zip(firsts, ref["tokens"], ref["masks"]):
        assert k is None or m == [-100] * k + t[k:], raw[:200]
    return "fast"


def test_random_and_hostile_lines_agree_with_json():
    rng = random.Random(35)
    paths = [_check(_line(rng)) for _ in range(4000)]
    assert min(paths.count(p) for p in ("fast", "decoded", "refused")) > 200  # every path was taken


@pytest.mark.parametrize("entry", HOSTILE + BROKEN)
@pytest.mark.parametrize("column", ["tokens", "masks"])
def test_each_hostile_entry_is_left_to_json_rules(entry, column):
    g = json.loads(REAL[0].read_text(encoding="utf-8").splitlines()[0])
    ids = g["tokens"][0][:50]
    lists = {"tokens": [str(x) for x in ids], "masks": ["-100"] * 20 + [str(x) for x in ids[20:]]}
    lists[column][30] = entry
    raw = (f'{{"tokens": [[{", ".join(lists["tokens"])}], [1, 2]], "masks": [[{", ".join(lists["masks"])}], '
           f'[-100, 2]], "scores": [0.5, 1.0]}}').encode()
    took = _check(raw)
    ref = _json(raw)
    if ref is None:
        assert took == "refused"
    elif not _ints(ref["tokens"], 0) or not _ints(ref["masks"], -2 ** 31):
        assert took == "decoded"
    else:  # "-0", "0", spaces, a label of -1 or -100: plain ints, read fast
        assert took == "fast"


def test_real_lines_take_the_fast_path():
    for path in REAL:
        for raw in path.read_bytes().splitlines():
            assert _check(raw) == "fast", path.name
            assert atropos_lines._placed(raw) is not None, path.name  # counted without decoding the masks


def test_lines_edited_inside_their_lists_are_counted_as_json_reads_them():
    """The quick count (masks compared with the tokens' text, not decoded) on lines it takes, each edited
    at a random place in its lists or anywhere: json's answer, or the row layer's decode."""
    rng = random.Random(11)
    lines = [raw for path in REAL for raw in path.read_bytes().splitlines()]
    while len(lines) < 60:
        raw = _line(rng)
        if atropos_lines._placed(raw) is not None:
            lines.append(raw)
    paths = []
    for _ in range(3000):
        raw = bytearray(rng.choice(lines))
        a, b, c, d = atropos_lines._placed(bytes(raw))[1]
        for _ in range(rng.randrange(1, 3)):
            lo, hi = rng.choice([(a, b), (c, d), (0, len(raw))])
            i = rng.randrange(lo, min(hi + 1, len(raw)))
            ch = b',[] -0123456789"x{}:\\'[rng.randrange(20):][:1]
            raw[i:i + rng.randrange(0, 2)] = ch if rng.random() < 0.7 else b""
        paths.append(_check(bytes(raw)))
    assert min(paths.count(p) for p in ("fast", "decoded", "refused")) > 100


def _rollouts_by_json(raw: bytes, label: str, row0: int) -> list:
    """What the decoding path reads from json's value of a line: its rollouts' conversations, or None
    (one row holding the line's error)."""
    value = _json(raw)
    if not isinstance(value, dict):
        return [None]
    try:
        subs = expand(value)
    except RowReadError:
        return [None]
    return [read_row(s, RowRef(label, row0 + i)) for i, s in enumerate(subs)] or [None]


def test_reader_rows_equal_the_decoding_path_on_json_values(tmp_path):
    rng = random.Random(7)
    lines = REAL[0].read_bytes().splitlines()[:1] + [_line(rng) for _ in range(300)]
    lines += REAL[1].read_bytes().splitlines()
    lines = [ln for ln in lines if b"\n" not in ln and b"\r" not in ln]
    path = tmp_path / "groups.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    src = open_dataset(path)
    assert src.format.name == "atropos"
    want, row = [], 0
    for raw in lines:
        got = _rollouts_by_json(raw, src.label, row)
        want += got
        row += len(got)
    assert len(src.dataset) == len(want)
    fast = 0
    for i, conv in enumerate(want):
        value = src.dataset.read_row(i)
        if conv is None:
            assert isinstance(value, RowReadError), i
            continue
        fast += isinstance(value["tokens"], array)
        assert _plain(src.format.read(value, RowRef(src.label, i))) == _plain(conv), i
    assert fast > len(want) // 3  # (the fast path was taken, not only the decoding one)
    scanned = [v for _, v in src.dataset.scan(None)]
    assert len(scanned) == len(want) and all(isinstance(v, RowReadError) == (c is None)
                                             for v, c in zip(scanned, want))
    assert src.dataset.bytes_read >= 2 * path.stat().st_size  # counted, then read: both counted
