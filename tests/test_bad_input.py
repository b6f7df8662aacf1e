"""Bad input, more of it: each gets a clear message that says what and where, and loses nothing
else (expected messages are the wording the user sees, fixed here by hand)."""
from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest

from viewer.config import SAMPLE_DIR, Settings
from viewer.sources import SourceError, load_source, open_dataset
from viewer.sources.upload import UploadRefused, intake_upload

SAMPLE = SAMPLE_DIR / "qwen3-tiny"


def _capture_with(tmp_path: Path, edit) -> Path:
    d = tmp_path / "cap"
    shutil.copytree(SAMPLE, d)
    (d / "trace.json").write_bytes(edit((d / "trace.json").read_bytes()))
    return d


def test_invalid_utf8_is_located_and_the_rest_is_read(tmp_path):
    good = load_source(SAMPLE)
    raw = (SAMPLE / "trace.json").read_bytes()
    at = raw.index(b"You are opencode")
    d = _capture_with(tmp_path, lambda b: b[:at] + b"\xff\xfe" + b[at:])
    ro = load_source(d)
    msgs = [str(p) for p in ro.problems]
    assert any(f"byte {at}" in m and "not valid UTF-8" in m for m in msgs), msgs
    assert [t.output_ids for t in ro.turns] == [t.output_ids for t in good.turns]  # nothing else lost


def test_nan_and_infinity_logprobs_are_flagged_not_plotted(tmp_path):
    def edit(b: bytes) -> bytes:
        recs = json.loads(b)
        recs[1]["per_token_logps"][:2] = [float("nan"), float("inf")]
        return json.dumps(recs).encode()  # Python writes NaN / Infinity, which strict JSON lacks

    d = _capture_with(tmp_path, edit)
    (d / "turns.json").unlink()  # the trace's own logprobs, not the turns file's
    assert b"NaN, Infinity" in (d / "trace.json").read_bytes()
    ro = load_source(d)
    t = ro.turns[1]
    assert t.logprobs[:2] == [None, None] and t.logprobs[2] is not None
    assert any("2 logprob(s) are not finite log-probabilities (first: entry 0 = nan)" in str(p) for p in ro.problems)
    assert ro.stats()["mean_logprob"] is not None


def test_corrupt_parquet_is_a_clear_error(tmp_path):
    p = tmp_path / "train-00000-of-00001.parquet"
    p.write_bytes(b"PAR1" + b"\x00garbage" * 100 + b"PAR1")
    with pytest.raises(SourceError, match="not a readable parquet file"):
        src = open_dataset(p)
        src.rollout(0)
    from viewer.cli import main

    assert main(["summary", str(p)]) == 2  # bad input (docs/CLI.md): one line on stderr, no traceback


def test_truncated_zip_upload_is_refused_with_why(tmp_path):
    z = tmp_path / "cap.zip"
    with zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("run1/trace.json", (SAMPLE / "trace.json").read_text())
    data = z.read_bytes()
    z.write_bytes(data[: len(data) // 2])
    with pytest.raises(UploadRefused, match="truncated or corrupt"):
        intake_upload(z, tmp_path / "dest", Settings())
    assert not (tmp_path / "dest" / "run1").exists()
