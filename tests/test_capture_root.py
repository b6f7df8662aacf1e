"""Issue 41, point 12: a capture made by an app with a data root of its own lands inside that data root, so the
app lists it and opens it by typed path and link with the rest of the data; CAPTURE_OUT_ROOT, when set, wins;
with no data root set, captures keep their default folder. Failed on the code before the fix (the captures
went to out/captures, outside VIEWER_DATA_ROOT: a typed path to one was refused)."""
from __future__ import annotations

from pathlib import Path

from viewer.capture.spec import new_capture_dir
from viewer.config import DATA_DIR, Settings
from viewer.sources.upload import resolve_user_path
from viewer.ui.opening import link_spec


def test_a_capture_lands_in_the_data_root_and_opens_from_it(tmp_path):
    s = Settings.from_env({"VIEWER_DATA_ROOT": str(tmp_path)})
    assert Path(s.capture_out_root) == tmp_path / "captures"
    made = new_capture_dir(s.capture_out_root)  # what the Capture tab does on Start
    (made / "trace.json").write_text("[]")
    rel = made.relative_to(tmp_path)
    assert resolve_user_path(str(rel), s) == made.resolve()  # a typed path inside the data root: accepted
    assert link_spec(made, s) == str(rel)  # and it has a link like any other folder of the data


def test_capture_out_root_wins_and_the_default_stays_without_a_data_root(tmp_path):
    s = Settings.from_env({"VIEWER_DATA_ROOT": str(tmp_path / "data"), "CAPTURE_OUT_ROOT": str(tmp_path / "c")})
    assert s.capture_out_root == str(tmp_path / "c")
    assert Settings.from_env({}).capture_out_root == str(DATA_DIR / "captures")
