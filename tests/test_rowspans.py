"""The row layer's text files read by byte span (issue 35): a JSON array's elements indexed without
parsing the file whole (viewer/sources/rowarray.py), JSONL line offsets and the kept-open span reader
(viewer/sources/rowspans.py), through RowDataset (viewer/sources/rowtext.py).

Expected values come from the stdlib: the rows of a file are ``json.loads`` of its text (the elements
of an array, each line of a JSONL file), and the message for a broken file is the one the stdlib's
exception gives, in the row layer's words (``{name} line L, column C: invalid JSON: {e}``).
"""
from __future__ import annotations

import io
import json
import math
import random
from pathlib import Path

import msgspec
import pytest

from viewer.sources.rowarray import index_array
from viewer.sources.rowdata import RowReadError, data_kind, local_dataset
from viewer.sources.rowspans import SpanReader, scan_lines

REAL = Path(__file__).resolve().parent / "data" / "realworld"
TAU = sorted((REAL / "tau_bench").glob("*.json"))
VERIFIERS = sorted((REAL / "verifiers").glob("*/results.jsonl"))


def same(a, b) -> bool:
    """Equal values, NaN equal to NaN (the stdlib reads NaN)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def rows_of(path: Path) -> list:
    ds = local_dataset([str(path)], str(path.parent), path.name)
    try:
        return [ds.read_row(i) for i in range(len(ds))]
    finally:
        ds.close()


def the_error(path: Path) -> str:
    """The row layer's message for a JSON file the stdlib refuses (what it said before this index)."""
    text = path.read_bytes()
    try:
        json.loads(text.decode("utf-8-sig"))
    except RecursionError:
        return f"{path.name}: invalid JSON: nested deeper than the parser accepts"
    except json.JSONDecodeError as e:
        return f"{path.name} line {e.lineno}, column {e.colno}: invalid JSON: {e}"
    except ValueError as e:
        return f"{path.name} bytes: invalid JSON: {e}"
    raise AssertionError("the stdlib accepts it")


# ------------------------------------------------------------------ real files
@pytest.mark.parametrize("path", TAU, ids=lambda p: p.name[:30])
def test_tau_bench_arrays_are_indexed_and_read_as_json_reads_them(path):
    ds = local_dataset([str(path)], str(path.parent), path.name)
    assert len(ds) == len(json.loads(path.read_bytes()))
    assert ds.files[0].spans is not None and ds.files[0].rows is None  # by element: never parsed whole
    assert [ds.read_row(i) for i in range(len(ds))] == json.loads(path.read_bytes())
    # in any order (the span reader reads ahead only in order), and again
    order = list(range(len(ds)))
    random.Random(1).shuffle(order)
    assert [ds.read_row(i) for i in order] == [json.loads(path.read_bytes())[i] for i in order]
    assert ds.bytes_read >= path.stat().st_size
    ds.close()


@pytest.mark.parametrize("chunk", [64, 300, 4096, 1 << 20])
@pytest.mark.parametrize("path", TAU, ids=lambda p: p.name[:30])
def test_spans_are_the_elements_whatever_the_chunk(path, chunk):
    """Chunks smaller than an element (one at a time), a multi-byte character cut by a chunk's end."""
    data = path.read_bytes()
    starts, ends = index_array(io.BytesIO(data), chunk=chunk)
    assert [json.loads(data[a:b]) for a, b in zip(starts, ends)] == json.loads(data)
    assert [data[a:b] for a, b in zip(starts, ends)] == [bytes(r) for r in msgspec.json.decode(
        data, type=list[msgspec.Raw])]


@pytest.mark.parametrize("path", VERIFIERS, ids=lambda p: p.parent.name)
def test_jsonl_rows_are_its_lines(path):
    want = [json.loads(line) for line in path.read_bytes().split(b"\n") if line.strip()]
    assert rows_of(path) == want


def test_line_offsets_are_where_lines_start():
    data = b'{"a": 1}\n\n{"b": "x\\ny"}\r\n' + b'{"c": 3}\n' * 5000 + b'{"last": true}'
    offsets = [0]
    assert scan_lines(io.BytesIO(data), offsets, None, 0, lambda: AssertionError()) == len(data)
    want = [0] + [i + 1 for i, c in enumerate(data) if c == 0x0A]
    assert offsets == want


def test_span_reader_reads_spans_in_order_and_not():
    data = bytes(random.Random(2).randrange(256) for _ in range(300_000))
    spans = sorted({(a, min(len(data), a + random.Random(a).randrange(1, 5000)))
                    for a in random.Random(3).sample(range(len(data)), 400)})
    rd = SpanReader("x", io.BytesIO(data))
    assert all(rd.read(a, b) == data[a:b] for a, b in spans)  # in order: read ahead
    assert all(rd.read(a, b) == data[a:b] for a, b in reversed(spans))  # backwards: one read each
    rd.close()


def test_span_reader_long_spans_in_order_between_short_ones():
    # spans of 64 KiB or more are read by themselves (Atropos lines, ~160 KB), short ones from the read-ahead block
    rng = random.Random(4)
    data = bytes(rng.randrange(256) for _ in range(2_000_000))
    spans, a = [], 0
    while a < len(data):
        b = min(len(data), a + rng.choice([rng.randrange(1, 3000), rng.randrange(60_000, 300_000)]))
        spans.append((a, b))
        a = b + rng.randrange(0, 3)  # a separator between some spans
    assert any(b - a >= 64 << 10 for a, b in spans) and any(b - a < 4096 for a, b in spans)
    rd = SpanReader("x", io.BytesIO(data))
    assert all(rd.read(a, b) == data[a:b] for a, b in spans)
    assert all(rd.read(a, b) == data[a:b] for a, b in reversed(spans))
    rd.close()


# ------------------------------------------------------------------ arrays the index must leave alone
def write(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


GOOD = {
    "empty": b"[]",
    "spaced": b' \n[ {"a": 1} ,\n\t{"a": [1, 2.5, "\\u00e9"]} ]\n ',
    "scalars-and-lists": b'[{"a": 1}, [1, 2], "text", 3, null]',
    "nan-and-huge": b'[{"a": NaN}, {"a": 1e400}, {"a": -Infinity}, {"a": 123456789012345678901234567890}]',
    "lone-surrogate": b'[{"a": "\\ud800"}, {"a": "b"}]',
    "bom": b'\xef\xbb\xbf[{"a": 1}, {"a": 2}]',
    "unicode": '[{"t": "’ — “quoted” … 😀"}, {"t": "é"}]'.encode(),
    "one-conversation": b'[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]',
    "object": b'{"rows": [{"a": 1}, {"a": 2}]}',
    "one-object": b'{"a": 1}',
}
BAD = {
    "truncated": b'[{"a": 1}, {"a": 2',
    "not-closed": b'[{"a": 1}, {"a": 2}',
    "trailing-comma": b'[{"a": 1}, {"a": 2},]',
    "missing-comma": b'[{"a": 1} {"a": 2}]',
    "after-the-array": b'[{"a": 1}] [2]',
    "broken-element": b'[{"a": 1}, {"a": tru}, {"a": 3}]',
    "bad-escape": b'[{"a": "\\x"}]',
    "invalid-utf8": b'[{"a": "ok"}, {"a": "\xff\xfe"}]',
    "cut-character": b'[{"a": "\xe2\x80"}]',
    "surrogate-bytes": b'[{"a": "\xed\xa0\x80"}]',
    "too-many-digits": b'[{"a": ' + b"9" * 5000 + b"}]",
    "digits-in-a-string": b'[{"a": "' + b"9" * 5000 + b'"}, {"a": ' + b"9" * 5000 + b"}]",
    "too-deep": b"[" + b"[" * 100_000 + b"]" * 100_000 + b"]",
    "empty-file": b"",
    "whitespace": b"  \n ",
}


@pytest.mark.parametrize("name", GOOD)
def test_what_the_stdlib_reads_is_read_the_same(tmp_path, name):
    p = write(tmp_path, f"{name}.json", GOOD[name])
    value = json.loads(GOOD[name].decode("utf-8-sig"))
    from viewer.sources.jsonio import rows_of_json

    assert same(rows_of(p), rows_of_json(value))


@pytest.mark.parametrize("name", BAD)
def test_a_broken_array_gives_the_message_it_gave(tmp_path, name):
    p = write(tmp_path, f"{name}.json", BAD[name])
    ds = local_dataset([str(p)], str(tmp_path), p.name)
    with pytest.raises(RowReadError) as e:
        len(ds)
    assert str(e.value) == the_error(p)


def test_a_long_array_broken_at_its_end_is_refused_as_a_whole(tmp_path):
    """Indexed over many chunks before the break is met: the file is still refused, with json's message."""
    rows = [{"i": i, "text": "’" * (i % 50), "nested": {"i": [i] * 3}} for i in range(20_000)]
    data = json.dumps(rows, ensure_ascii=False).encode()
    for cut in (b', {"i": 19999' , b"]"):
        p = write(tmp_path, "cut.json", data[:data.rindex(cut)])
        with pytest.raises(RowReadError) as e:
            len(local_dataset([str(p)], str(tmp_path), p.name))
        assert str(e.value) == the_error(p)
    p = write(tmp_path, "whole.json", data)
    assert rows_of(p) == rows


# ------------------------------------------------------------------ the index against the stdlib, at random
def _value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(8 if depth < 3 else 5)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.choice([0, -7, 2 ** 40, 3.25, -1e-9, 10 ** 25])
    if kind in (2, 3, 4):
        return "".join(rng.choice(['a', ' ', '"', '\\', '\n', 'é', '’', '😀', '{"k":', ',', ']']) for _ in range(rng.randrange(12)))
    if kind == 5:
        return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice(["k", "task_id", "a"]) + str(i): _value(rng, depth + 1) for i in range(rng.randrange(4))}


def _text(rng: random.Random) -> bytes:
    elems = [{"task_id": i, "v": _value(rng)} if rng.random() < 0.8 else _value(rng) for i in range(rng.randrange(40))]
    ws = lambda: rng.choice(["", " ", "\n  ", "\t"])  # noqa: E731
    body = ",".join(ws() + json.dumps(e, ensure_ascii=rng.random() < 0.5) + ws() for e in elems)
    return (ws() + "[" + body + "]" + ws()).encode()


def test_random_arrays_and_their_corruptions():
    """Where the index answers, the file is one the stdlib reads, and its elements are its spans; every
    valid array is answered."""
    rng = random.Random(35)
    answered = refused = 0
    for trial in range(1500):
        data = _text(rng)
        if trial % 2:  # corrupt it: a byte changed, removed or doubled
            k = rng.randrange(len(data))
            data = rng.choice([data[:k] + bytes([rng.randrange(256)]) + data[k + 1:], data[:k] + data[k + 1:],
                               data[:k] + data[k:k + 1] * 2 + data[k + 1:]])
        spans = index_array(io.BytesIO(data), chunk=rng.choice([16, 64, 256, 4096]))
        try:
            want = json.loads(data.decode("utf-8"))
        except (ValueError, RecursionError):
            want = None
        if spans is None:
            refused += 1
            assert trial % 2 or not isinstance(want, list), data  # a valid array is always indexed
            continue
        answered += 1
        assert isinstance(want, list), data
        assert same([json.loads(data[a:b]) for a, b in zip(*spans)], want), data
    assert answered > 700 and refused > 300


# ------------------------------------------------------------------ a folder of one-object files (SWE-agent .traj)
class _Counted(io.BytesIO):
    def __init__(self, data: bytes):
        super().__init__(data)
        self.taken = 0

    def read(self, n=-1):
        got = super().read(n)
        self.taken += len(got)
        return got

    def readinto(self, b):
        n = super().readinto(b)
        self.taken += n
        return n


def test_an_object_file_is_not_indexed_as_an_array():
    """One look at its first bytes: no 2-chunk buffer is made (4 MiB zeroed a file cost 0.23 ms of a
    50 KB trajectory's read) and no chunk is read for it."""
    data = json.dumps({"history": [{"role": "user", "content": "x" * 50_000}]}).encode()
    fh = _Counted(data)
    assert index_array(fh) is None
    assert fh.taken <= 4096
    for lead in (b"", b"\xef\xbb\xbf", b" " * 5000):  # as before: a BOM is parsed whole, long blanks looked past
        fh = _Counted(lead + b'[{"a": 1}, {"a": 2}]')
        spans = index_array(fh)
        assert (spans is None) == (lead == b"\xef\xbb\xbf")


def test_rows_of_a_folder_are_found_by_the_file_index(tmp_path, monkeypatch):
    """Reading a row of a folder of files found its file with ``files.index``, which compares DataFiles field
    by field: n^2 over a folder (11.5 s for 3,932 SWE-agent trajectories, 0.6 s without). No comparison now."""
    from viewer.sources.rowtext import DataFile

    src = REAL / "swe_agent" / "swe-agent__test-repo-i1.traj"
    for i in range(30):
        (tmp_path / f"t{i:02d}.traj").write_bytes(src.read_bytes())
    ds = local_dataset(sorted(str(p) for p in tmp_path.glob("*.traj")), str(tmp_path), "trajs")

    def compared(self, other):
        raise AssertionError("DataFiles compared")

    monkeypatch.setattr(DataFile, "__eq__", compared)
    want = json.loads(src.read_bytes())
    try:
        assert len(ds) == 30
        assert all(same(ds.read_row(i), want) for i in range(30))
        assert [r for r, _ in ds.read_rows([29, 3, 17])] == [29, 3, 17]
    finally:
        ds.close()


def _folder(tmp_path, files: dict[str, bytes]):
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    return local_dataset(sorted(str(tmp_path / n) for n in files), str(tmp_path), "folder")


def _reads_as_json(tmp_path, files: dict[str, bytes]):
    """A folder of ``files`` read row by row equals rows_of_json of json's value of each file, in order; a file
    json refuses is one row holding the row layer's message for it. Returns the (closed) dataset."""
    from viewer.sources.jsonio import rows_of_json

    ds = _folder(tmp_path, files)
    want = []
    for name in sorted(files):
        try:
            want += [(name, r) for r in rows_of_json(json.loads(files[name].decode("utf-8")))]
        except ValueError:
            want.append((name, None))
    try:
        assert len(ds) == len(want)
        for i, (name, row) in enumerate(want):
            got = ds.read_row(i)
            if row is None:
                assert isinstance(got, RowReadError) and str(got) == the_error(tmp_path / name), got
            else:
                assert same(got, row), (name, i)
    finally:
        ds.close()
    return ds


def test_one_broken_file_of_a_folder_is_one_row_saying_why(tmp_path):
    """A trajectory cut short (a run killed while it was written) made the whole folder unreadable: counting
    raised at it. It is one row holding json's message for that file now, and every other file reads as json
    reads it; a wrapper object's rows and an array's elements count as before."""
    traj = (REAL / "swe_agent" / "swe-agent__test-repo-i1.traj").read_bytes()
    wrapper = json.dumps({"rows": [{"a": 1}, {"a": "é"}], "note": "x"}, ensure_ascii=False).encode()
    files = {"a.traj": traj, "b.traj": traj[:20000], "c.json": wrapper, "d.json": b'[{"a": 1}, {"a": 2}]',
             "e.traj": traj.replace(b'"history"', b'"\\u0068istory"', 1), "f.json": b'{"data": [1, 2]}'}
    _reads_as_json(tmp_path, files)


def test_a_folder_is_counted_without_holding_its_files(tmp_path):
    """Counting a folder of trajectories parsed each whole and kept them all (1.35x the folder in memory for
    3,932 of them); it reads none of them now (SWE-agent writes one trajectory a .traj), holds none, and a row
    is parsed when it is read."""
    import gc
    import tracemalloc

    traj = (REAL / "swe_agent" / "swe-agent__test-repo-i1.traj").read_bytes()
    n = 40
    ds = _folder(tmp_path, {f"t{i:02d}.traj": traj for i in range(n)})
    gc.collect()
    tracemalloc.start()
    try:
        one = json.loads(traj)  # what one parsed trajectory holds (the oracle: the stdlib's own objects)
        each = tracemalloc.get_traced_memory()[0]
        del one
        gc.collect()
        base = tracemalloc.get_traced_memory()[0]
        assert len(ds) == n
        assert ds.bytes_read == 0  # a trajectory file is one row: counted unread (shown at once)
        counted = tracemalloc.get_traced_memory()[0] - base
        rows = [ds.read_row(i) for i in range(n)]
        assert all(same(r, json.loads(traj)) for r in rows)
        del rows
        gc.collect()
        after = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
        ds.close()
    assert counted < 3 * each, (counted, each)  # n files held were n * each
    assert after < 3 * each, (after, each)


def test_a_file_of_a_folder_changed_after_counting_says_so(tmp_path):
    traj = (REAL / "swe_agent" / "swe-agent__test-repo-i1.traj").read_bytes()
    ds = _folder(tmp_path, {"a.traj": traj, "b.traj": traj, "c.json": b'{"rows": [{"a": 1}, {"a": 2}]}'})
    try:
        assert len(ds) == 4
        (tmp_path / "b.traj").write_bytes(traj + b" " * 10)  # grown since it was listed
        (tmp_path / "c.json").write_bytes(b'{"rows": [{"a": 1}]}')  # a row fewer than counted
        got = [ds.read_row(i) for i in range(4)]
    finally:
        ds.close()
    assert same(got[0], json.loads(traj))
    assert isinstance(got[1], RowReadError) and "has grown since it was listed" in str(got[1])
    assert all(isinstance(g, RowReadError) and "1 rows now, 2 when counted" in str(g) for g in got[2:])


def test_a_folder_led_by_an_array_of_rows_counts_every_file_as_json_reads_it(tmp_path):
    """OpenHands writes a trajectory as a JSON list of events (one rollout); a folder of them was parsed whole
    file by file and held (3.8x the folder in memory). Where the folder's first JSON file is an array of rows,
    each file is counted by msgspec's skip, not held: an array of rows is its elements, an empty one none, a list
    of events one row, as rows_of_json says of json's value."""

    events = (REAL / "openhands" / "basic.json").read_bytes()
    files = {"a_rows.json": b'[{"a": 1}, {"a": 2}, [{"role": "user", "content": "x"}]]', "b_empty.json": b"[]",
             "bad.json": events[:3000], "e1.json": events, "e2.json": events}
    ds = _reads_as_json(tmp_path, files)
    assert all(f.rows is None or isinstance(f.rows[0], RowReadError) for f in ds.files)  # none held
    assert not any(f.unread for f in ds.files)


def test_a_folder_of_event_lists_is_counted_from_its_first_file(tmp_path):
    """A folder of 7,579 OpenHands event lists was read twice, each file parsed to count it, then again to read
    it (1.04x json's CPU, issue 35). Its first JSON file being one conversation, the others are counted one row
    each without being opened; each reads as json reads it, a broken one is one row in json's words, and a file
    that is not one rollout is one row saying so (its rows are not read as the folder's format)."""
    events = (REAL / "openhands" / "basic.json").read_bytes()
    want = json.loads(events)
    rows_file = b'[{"a": 1}, {"a": 2}, [{"role": "user", "content": "x"}]]'
    files = {"e1.json": events, "e2.json": events, "e3.json": events, "e4.json": events[:3000],
             "z_empty.json": b"[]", "z_rows.json": rows_file}
    ds = _folder(tmp_path, files)
    try:
        assert len(ds) == len(files)
        assert ds.bytes_read == len(events)  # only the first file was read to count them
        assert [f.unread for f in ds.files] == [False] + [True] * (len(files) - 1)
        for i in range(3):
            assert same(ds.read_row(i), {"history": want})
        got = [ds.read_row(i) for i in range(3, 6)]
    finally:
        ds.close()
    assert all(isinstance(g, RowReadError) for g in got), got
    assert str(got[0]) == the_error(tmp_path / "e4.json")
    assert "holds no rows" in str(got[1]) and "z_empty.json" in str(got[1])
    assert "holds 3 rows" in str(got[2]) and "one rollout each" in str(got[2]) and "z_rows.json" in str(got[2])


def test_a_file_of_a_folder_over_the_size_limit_is_one_row_saying_so(tmp_path):
    traj = (REAL / "swe_agent" / "swe-agent__test-repo-i1.traj").read_bytes()
    big = json.dumps({"history": [], "pad": "x" * 200_000}).encode()
    for name, data in {"a.traj": traj, "b.json": big, "c.traj": traj + b" " * 200_000}.items():
        (tmp_path / name).write_bytes(data)
    ds = local_dataset(sorted(str(p) for p in tmp_path.iterdir()), str(tmp_path), "folder", max_file_mb=0.125)
    try:
        assert len(ds) == 3  # (it raised at the big file: the whole folder refused)
        got = [ds.read_row(i) for i in range(3)]
    finally:
        ds.close()
    assert same(got[0], json.loads(traj))
    assert all(isinstance(g, RowReadError) and "over the 0.125 MB limit" in str(g) for g in got[1:]), got[1:]


def test_a_remote_folder_is_fetched_once_a_file(tmp_path):
    """On the Hub (here a DirFileSystem stand-in, the fsspec path the Hub takes) a file read again when its row is
    would be fetched twice: there a folder's files are parsed when counted and kept, as before; a trajectory
    (one rollout a file) is fetched once, when its row is read."""
    events = (REAL / "openhands" / "basic.json").read_bytes()
    traj = (REAL / "swe_agent" / "swe-agent__test-repo-i1.traj").read_bytes()
    files = {"a.json": b'{"rows": [{"a": 1}, {"a": 2}]}', "b.json": events, "c.traj": traj, "d.traj": traj}
    ds = _remote(tmp_path, files)
    try:
        assert len(ds) == 2 + 1 + 1 + 1
        rows = [ds.read_row(i) for i in range(len(ds))]
        assert ds.bytes_read == sum(len(d) for d in files.values())
    finally:
        ds.close()
    assert same(rows[3], json.loads(traj)) and same(rows[0], {"a": 1}) and same(rows[2], {"history": json.loads(events)})


def _remote(tmp_path, files: dict[str, bytes]):
    """A RowDataset of ``files`` through a DirFileSystem: the fsspec path the Hub takes, not a local one."""
    from fsspec.implementations.dirfs import DirFileSystem
    from fsspec.implementations.local import LocalFileSystem

    from viewer.sources.rowdata import RowDataset
    from viewer.sources.rowtext import DataFile

    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    fs = DirFileSystem(path=str(tmp_path), fs=LocalFileSystem())
    return RowDataset(fs, [DataFile(n, n, "json", size=len(d)) for n, d in files.items()], "remote")


def test_a_remote_folder_of_event_lists_is_counted_from_one_fetch(tmp_path):
    """A Hub folder of 7,579 OpenHands trajectories was fetched whole, file by file, before its first screen.
    Its first file being one conversation, the others are counted unread and each fetched when its row is read;
    the first is kept (fetched once)."""
    events = (REAL / "openhands" / "basic.json").read_bytes()
    files = {f"t{i}.json": events for i in range(4)} | {"z.json": b'[{"a": 1}, {"a": 2}]'}
    ds = _remote(tmp_path, files)
    try:
        assert len(ds) == 5 and ds.bytes_read == len(events)
        rows = [ds.read_row(i) for i in range(5)]
        assert ds.bytes_read == sum(len(d) for d in files.values())
    finally:
        ds.close()
    assert all(same(r, {"history": json.loads(events)}) for r in rows[:4])
    assert isinstance(rows[4], RowReadError) and "holds 2 rows" in str(rows[4])


NAMES = ["a.json", "a.JSON", "x/.json", "json", "a/json", "d.v1/f", "a.traj.json", "a.traj", "a.tar.gz", "a.", ".",
         "a.jsonl", "b.NDJSON", "c.eval", "d.parquet", "e.Parquet", "f.jsonl.gz", "g.json ", "dir.json/x", "r/.hidden",
         "r/s/t..json", "café.Json", "", "x/.traj.json", "A.TRAJ.JSON", "r/b.v2.traj.json", "..traj.json"]


def test_the_folder_listing_names_kinds_and_suffixes_as_pathlib_and_endswith_do():
    """The listing of a folder of thousands takes a file's kind and extension without pathlib (two Paths a file
    cost 30 ms over 7,579): the same answers as ``Path(name).suffix`` (but ``.traj.json``, mini-swe-agent's, a
    group of its own beside a run's preds.json) and the extension table's ``endswith``."""
    from viewer.sources.filekinds import DATA_EXTS
    from viewer.sources.runfolder import _suffix

    for name in NAMES:
        two = "".join(Path(name).suffixes[-2:]).lower()
        want = two if two == ".traj.json" and Path(name).name.lower() != two else Path(name).suffix.lower()
        assert _suffix(name) == want, name
        want = next((kind for ext, kind in DATA_EXTS.items() if name.lower().endswith(ext)), None)
        assert data_kind(name) == want, name
