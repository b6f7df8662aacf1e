"""Attacks on what a visitor brings in (issue 19, points 4, 5, 7, 9), through the entry points a
visitor uses, in public mode, with planted secrets: an ``HF_TOKEN`` in the environment and a
``tokenizer.json`` planted outside the data root that must never be opened (a ``sys.addaudithook``
records every ``open``).

Each test failed on the code before the fix (checked against main e26e821)."""
from __future__ import annotations

import io
import json
import os
import sys
import threading
import zipfile
from pathlib import Path

import pytest

from viewer.config import Settings
from viewer.rollout import Problem
from viewer.sources.upload import Intake, UploadRefused, intake_upload

PLANTED_TOKEN = "hf_PLANTEDownerTOKEN0123456789"

# ---- an audit hook that records every file the process opens (installed once, filtered by a flag)
_OPENED: list[str] = []
_RECORDING = threading.Event()


def _audit(event: str, args) -> None:
    if event == "open" and _RECORDING.is_set() and args and isinstance(args[0], (str, bytes, os.PathLike)):
        _OPENED.append(os.fsdecode(args[0]))


sys.addaudithook(_audit)


@pytest.fixture
def opened():
    _OPENED.clear()
    _RECORDING.set()
    try:
        yield _OPENED
    finally:
        _RECORDING.clear()


@pytest.fixture
def public(monkeypatch, tmp_path):
    """Public mode with the owner's token planted in the environment."""
    monkeypatch.setenv("VIEWER_PUBLIC", "1")
    monkeypatch.setenv("HF_TOKEN", PLANTED_TOKEN)
    monkeypatch.setenv("VIEWER_HUB_CACHE", str(tmp_path / "hubcache"))
    return Settings(public=True, data_root=str(tmp_path / "root"))


# ================================================================ 9. odd zips
def _zip_entries(path: Path, entries: list[tuple[str, bytes]]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries:
            zf.writestr(name, data)
    return path


def _left_files(dest: Path) -> list[str]:
    return sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()) if dest.exists() else []


@pytest.mark.parametrize("case", ["file-then-folder", "folder-then-file", "long-name", "deep"])
def test_odd_zip_entries_become_problems_not_crashes(tmp_path, public, case):
    trace = json.dumps([{"completion_token_ids": [1]}]).encode()
    entries = {
        "file-then-folder": [("run/trace.json", trace), ("a", b"x"), ("a/b", b"y")],
        "folder-then-file": [("run/trace.json", trace), ("a/b", b"y"), ("a", b"x")],
        "long-name": [("run/trace.json", trace), ("n" * 400 + ".json", b"x"), ("d" * 300 + "/x.json", b"x")],
        "deep": [("run/trace.json", trace), ("/".join(["d"] * 1500) + "/x.json", b"x")],
    }[case]
    z = _zip_entries(tmp_path / "odd.zip", entries)
    dest = tmp_path / "dest"
    out = intake_upload(z, dest, public)  # never FileExistsError / OSError / RecursionError
    assert isinstance(out, Intake)
    assert out.problems and all(isinstance(p, Problem) for p in out.problems)
    assert all(p.file == "odd.zip" for p in out.problems)
    # the good entry is there; of the clashing pair exactly what was accepted, nothing half-written
    left = _left_files(dest)
    assert "run/trace.json" in left
    accepted = {p.relative_to(dest.resolve()).as_posix() for p in out.files}
    assert set(left) == accepted
    refused = {p.where for p in out.problems}
    assert not (accepted & refused)
