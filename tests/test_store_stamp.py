"""The change stamp of an opened source (viewer/ui/store.py) and the sample labels (viewer/ui/opening.py):
made with less file-system work per visitor's open (docs/SPEED.md room), with the same answers."""
from __future__ import annotations

import json
import os
from pathlib import Path

from viewer.ui import opening, store


def _folder(tmp_path: Path) -> Path:
    d = tmp_path / "cap"
    d.mkdir()
    (d / "a.json").write_bytes(b"abc")  # 3 bytes
    (d / "b.jsonl").write_bytes(b"hello")  # 5 bytes
    (d / "sub").mkdir()
    (d / "sub" / "big.bin").write_bytes(b"x" * 100)  # inside a subfolder: not counted, as before
    return d


def test_folder_stamp_and_size_from_one_listing(tmp_path, monkeypatch):
    d = _folder(tmp_path)
    calls = []
    real = os.stat
    monkeypatch.setattr(os, "stat", lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    stamp, size = store._stamp(d)
    assert size == 8  # 3 + 5, worked by hand
    st = real(d)
    names = "".join(f"{n}{real(d / n).st_mtime_ns}" for n in ("a.json", "b.jsonl", "sub"))
    assert stamp == f"{st.st_mtime_ns}:{st.st_size}{names}"
    assert len(calls) <= 1, calls  # the folder's own stat; its entries' come with the listing


def test_file_stamp_and_missing_source(tmp_path):
    f = tmp_path / "t.json"
    f.write_bytes(b"12345678")
    st = os.stat(f)
    assert store._stamp(f) == (f"{st.st_mtime_ns}:8", 8)
    assert store._stamp(tmp_path / "gone") == ("", 0)


def test_open_key_follows_the_folder(tmp_path):
    """The same folder opens under the same key until a file in it changes or is added."""
    d = _folder(tmp_path)
    first = store._stamp(d)
    assert store._stamp(d) == first
    os.utime(d / "a.json", ns=(1, 1))
    assert store._stamp(d) != first
    again = store._stamp(d)
    (d / "c.txt").write_bytes(b"1")
    assert store._stamp(d)[0] != again[0] and store._stamp(d)[1] == 9


def test_sample_label_read_once_per_version(tmp_path, monkeypatch):
    f = tmp_path / "labels.json"
    f.write_text(json.dumps({"s1": "first"}))
    os.utime(f, ns=(10**18, 10**18))
    reads = []
    real = Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: reads.append(self) or real(self, *a, **k))
    assert opening.sample_label("s1", tmp_path) == "first"
    assert opening.sample_label("s1", tmp_path) == "first"
    assert opening.sample_label("nope", tmp_path) == ""
    assert len(reads) == 1
    f.write_text(json.dumps({"s1": "edited"}))  # a new version of the file is read again
    os.utime(f, ns=(2 * 10**18, 2 * 10**18))
    assert opening.sample_label("s1", tmp_path) == "edited"
    f.unlink()
    assert opening.sample_label("s1", tmp_path) == ""
