"""Typed paths confined to data_root; uploads and zips size-limited and path-safe."""
from __future__ import annotations

import io
import json
import os
import stat
import zipfile
from pathlib import Path

import pytest

from viewer.config import Settings
from viewer.sources import load_source
from viewer.sources.upload import UploadRefused, intake_upload, resolve_user_path


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "root"
    (r / "cap").mkdir(parents=True)
    (r / "cap" / "trace.json").write_text("[]")
    (tmp_path / "secret.txt").write_text("no")
    return r


def test_resolve_user_path_inside_root(root):
    s = Settings(data_root=str(root))
    assert resolve_user_path("cap", s) == (root / "cap").resolve()
    assert resolve_user_path(f"  {root / 'cap' / 'trace.json'}  ", s) == (root / "cap" / "trace.json").resolve()


@pytest.mark.parametrize("text", ["../secret.txt", "cap/../../secret.txt", "/etc/passwd", "~"])
def test_resolve_user_path_outside_root_refused(root, text):
    with pytest.raises(ValueError, match="outside the allowed data folder"):
        resolve_user_path(text, Settings(data_root=str(root)))


def test_resolve_user_path_symlink_escape_empty_and_missing(root, tmp_path):
    os.symlink(tmp_path / "secret.txt", root / "link.txt")
    s = Settings(data_root=str(root))
    with pytest.raises(ValueError, match="outside the allowed data folder"):
        resolve_user_path("link.txt", s)
    with pytest.raises(ValueError, match="no path given"):
        resolve_user_path("   ", s)
    with pytest.raises(ValueError, match="no such file or folder"):
        resolve_user_path("cap/missing.json", s)


def _zip(path, entries, symlink=None):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
        if symlink:
            info = zipfile.ZipInfo(symlink[0])
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, symlink[1])
    return path


def test_zip_capture_extracts_and_loads(tmp_path):
    rec = {"turn": 1, "completion_token_ids": [1, 2], "per_token_logps": [-0.5, -0.25]}
    z = _zip(tmp_path / "up.zip", {"run1/trace.json": json.dumps([rec]),
                                   "run1/summary.json": json.dumps({"reward": 1})})
    out = intake_upload(z, tmp_path / "dest")
    assert out.root == (tmp_path / "dest" / "run1").resolve() and out.problems == []
    ro = load_source(out.root)
    assert ro.turns[0].output_ids == [1, 2] and ro.reward == 1.0


def test_zip_with_traversal_absolute_and_symlink_entries(tmp_path):
    z = _zip(tmp_path / "evil.zip", {"ok/trace.json": "[]", "../evil.txt": "x", "/abs.txt": "x",
                                     "a/../../evil2.txt": "x"}, symlink=("ok/link", "/etc/passwd"))
    dest = tmp_path / "dest"
    out = intake_upload(z, dest)
    refused = {p.where: p.message for p in out.problems}
    assert set(refused) == {"../evil.txt", "/abs.txt", "a/../../evil2.txt", "ok/link"}
    assert "symbolic link" in refused["ok/link"] and "'..'" in refused["../evil.txt"]
    assert "absolute" in refused["/abs.txt"]
    assert all(p.file == "evil.zip" for p in out.problems)
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert written == ["dest/ok/trace.json", "evil.zip"]
    assert not (dest / "ok" / "link").exists()


def test_zip_bomb_refused(tmp_path):
    # 3 MB of zeros compresses to a few KB; the limit is 1 MB uncompressed.
    z = _zip(tmp_path / "bomb.zip", {"trace.json": b"0" * (3 * 1024 * 1024)})
    assert z.stat().st_size < 100_000
    with pytest.raises(UploadRefused, match="zip bomb"):
        intake_upload(z, tmp_path / "dest", Settings(max_file_mb=1))
    assert not any((tmp_path / "dest").rglob("*"))


def test_upload_over_max_upload_mb_and_plain_file(tmp_path):
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (1024 * 1024 + 1))
    with pytest.raises(UploadRefused, match="over the 1 MB limit"):
        intake_upload(big, tmp_path / "dest", Settings(max_upload_mb=1))
    small = tmp_path / "trace.json"
    small.write_text(json.dumps([{"completion_token_ids": [3]}]))
    out = intake_upload(small, tmp_path / "dest")
    assert out.root == tmp_path / "dest" / "trace.json"
    assert load_source(out.root).turns[0].output_ids == [3]


def test_not_a_zip_with_zip_suffix_is_treated_as_a_file(tmp_path):
    p = tmp_path / "x.zip"
    p.write_bytes(io.BytesIO(b"PK not really").getvalue())
    out = intake_upload(p, tmp_path / "dest")
    assert out.root.name == "x.zip" and out.root.read_bytes() == b"PK not really"


def test_uploads_and_public_captures_are_not_reachable_by_typed_path(tmp_path, monkeypatch):
    """A visitor cannot open another visitor's upload (its temporary folder) by guessing a path,
    nor, on a public app, a capture folder outside its owner's job link."""
    root = tmp_path / "root"
    up = root / "ri-upload-abc123"
    up.mkdir(parents=True)
    (up / "trace.json").write_text("[]")
    cap = root / "captures" / "capture-1"
    cap.mkdir(parents=True)
    s = Settings(data_root=str(root), capture_out_root=str(root / "captures"))
    with pytest.raises(ValueError, match="only visible to the session that uploaded it"):
        resolve_user_path("ri-upload-abc123/trace.json", s)
    assert resolve_user_path("captures/capture-1", s) == cap.resolve()  # a developer's own app: fine
    monkeypatch.setenv("SPACE_ID", "me/app")
    with pytest.raises(ValueError, match="open through their owner's job link"):
        resolve_user_path("captures/capture-1", s)


def test_intake_files_counts_files_and_refuses_name_clashes(tmp_path, monkeypatch):
    from viewer.sources.upload import intake_files

    monkeypatch.setenv("VIEWER_BUDGET_UPLOAD_FILES", "2")
    fs = []
    for i, name in enumerate(("trace.json", "summary.json", "task.json")):
        (tmp_path / f"u{i}").mkdir()
        fs.append(tmp_path / f"u{i}" / name)
        fs[-1].write_text("[]" if i == 0 else "{}")
    with pytest.raises(UploadRefused, match="3 files in one upload, over the 2"):
        intake_files(fs, tmp_path / "d1")
    root, notes = intake_files(fs[:2], tmp_path / "d2")
    assert root == tmp_path / "d2" and notes == []
    (tmp_path / "again").mkdir()
    (tmp_path / "again" / "trace.json").write_text("[1]")
    root, notes = intake_files([fs[0], tmp_path / "again" / "trace.json"], tmp_path / "d3")
    assert root == tmp_path / "d3" / "trace.json" and "two uploaded files have this name" in notes[0]
    assert (tmp_path / "d3" / "trace.json").read_text() == "[]"  # the first one stays


def _walked(walk) -> list:
    return sorted((here, sorted(dirs), sorted(names)) for here, dirs, names in walk)


@pytest.mark.parametrize("public", [False, True])
def test_a_visible_walk_drops_what_prune_drops_without_resolving_each_folder(tmp_path, public):
    """visible_walk (one folder per SWE-agent instance: resolving each cost ~140 us) keeps and drops the same
    folders as os.walk with each subfolder's resolved path asked of hidden_from_visitors, on a tree with uploads at any depth, the capture root inside the data root,
    links to folders (into an upload, to the capture root) and the walk's top reached through a link or
    lying inside an upload or the capture root (its owner's walk: nothing dropped)."""
    import os

    from viewer.sources.upload import UPLOAD_PREFIX, hidden_from_visitors, visible_walk

    root = tmp_path / "data"
    caps = root / "runs" / "captures"
    for d in ("a/b", f"a/{UPLOAD_PREFIX}x/c", f"{UPLOAD_PREFIX}y", "runs/captures/job1/deep", "runs/kept",
              f"a/b/{UPLOAD_PREFIX}z", "a/not-ri-upload-", "captures"):
        (root / d).mkdir(parents=True)
        (root / d / "f.json").write_text("{}")
    (root / "a" / "to-upload").symlink_to(root / "a" / f"{UPLOAD_PREFIX}x")
    (root / "a" / "to-captures").symlink_to(caps)
    (tmp_path / "link-to-data").symlink_to(root)
    settings = Settings(public=public, data_root=str(root), capture_out_root=str(caps))

    def pruned(top):  # the rule itself, each folder's path resolved (what the walks did before)
        for here, dirs, names in os.walk(top):
            if not hidden_from_visitors(top, settings):
                dirs[:] = [d for d in dirs if not hidden_from_visitors(Path(here) / d, settings)]
            yield here, dirs, names

    tops = [root, tmp_path / "link-to-data", root / "a", root / "a" / f"{UPLOAD_PREFIX}x", caps, root / "runs",
            str(root) + "/", root / "a" / ".." / "runs"]
    for top in tops:
        assert _walked(visible_walk(top, settings)) == _walked(pruned(top)), top

    def edited(walk):  # a caller's edits of dirs, as os.walk honours them (one dropped, one added, order)
        for here, dirs, names in walk:
            dirs[:] = sorted([d for d in dirs if d != "b"] + (["to-upload", "captures"] if here == str(root / "a")
                                                               else []), reverse=True)
            yield here, dirs, names
    assert _walked(edited(visible_walk(root, settings))) == _walked(edited(pruned(root))) != _walked(pruned(root))
    seen = {h for h, _, _ in visible_walk(root, settings)}
    assert not any(part.startswith(UPLOAD_PREFIX) for h in seen for part in h.split(os.sep))  # (what is dropped)
    assert (str(caps) in seen) != public and str(root / "a" / "not-ri-upload-") in seen
