"""Who may start *Rescore dataset* (viewer/ui/dataset_rescore.py), and what the index does with a rescore file it
cannot read (viewer/search/rescored.py). No model runs here: tests/test_dataset_rescore.py runs one."""
from __future__ import annotations

import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from viewer.config import SAMPLE_DIR, Settings


def test_a_public_app_runs_only_the_built_in_models_as_the_rescore_panel_does():
    from viewer.capture.models import MODELS
    from viewer.rescore.dataset import AUTO_MODEL
    from viewer.ui.dataset_rescore import EACH_MODEL, DatasetRescore

    public, local = DatasetRescore(Settings(public=True)), DatasetRescore(Settings())
    for name in MODELS:
        assert public.model_name(name) == name
    for typed in (EACH_MODEL, "/etc", "someone/private-model", ""):  # each rollout's own: its data names the model
        with pytest.raises(ValueError, match="In public mode only"):
            public.model_name(typed)
    assert local.model_name(EACH_MODEL) == AUTO_MODEL and local.model_name("/models/mine") == "/models/mine"
    out = public.rescore(None, MODELS[0])
    assert (out.message, out.kind, out.rows, out.filled) == ("Open a dataset first.", "error", [], False)


def test_a_hub_dataset_is_sent_to_the_command_line():
    from types import SimpleNamespace

    from viewer.ui.dataset_rescore import DatasetRescore

    held = SimpleNamespace(src=SimpleNamespace(label="hf://datasets/o/n"))
    out = DatasetRescore(Settings()).rescore(held, "tiny-qwen3")
    assert out.kind == "error" and "python -m viewer rescore hf://datasets/o/n" in out.message


def test_the_rescore_is_kept_beside_the_index_never_inside_it(tmp_path):
    from viewer.search.index import index_path
    from viewer.search.rescored import beside

    (tmp_path / "runs").mkdir()
    (tmp_path / "rows.jsonl").write_text("{}\n")
    s = Settings()
    assert beside(index_path(tmp_path / "runs", s)) == tmp_path / "runs" / ".rollout-inspector" / "rescored" / \
        "rescore.parquet"
    assert beside(index_path(tmp_path / "rows.jsonl", s)) == tmp_path / ".rollout-inspector" / "rescored" / \
        "rows.jsonl.parquet"
    hub = beside(index_path("hf://datasets/o/n", s))  # the user cache, beside the index's digest folder
    assert hub.parent.name == "rescored" and hub.name == index_path("hf://datasets/o/n", s).name + ".parquet"


def test_a_file_that_is_not_a_rescore_is_refused_by_name_and_the_index_still_builds(tmp_path):
    from viewer.search import build_index, search
    from viewer.search.rescored import RescoreFileError, beside, read, save

    night = tmp_path / "night"
    shutil.copytree(SAMPLE_DIR / "qwen3-tiny", night / "q1")
    s = Settings()
    info = build_index(night, s)
    bad = beside(info.path)
    bad.parent.mkdir(parents=True)
    pq.write_table(pa.table({"rollout": ["x"], "score": [1.0]}), bad)
    with pytest.raises(RescoreFileError, match=r"not a dataset rescore's per-token table \(no turn, row, position, "
                                               r"id, delta column\)"):
        read(bad)
    with pytest.raises(RescoreFileError, match="no turn"):
        save(bad, pa.table({"rollout": ["x"]}))
    again = build_index(night, s)
    assert [e["source"] for e in again.errors] == [str(bad)] and "per-token table" in again.errors[0]["error"]
    assert again.rollouts == 1 and search(night, "delta>0", s, build=False).hits == []
    bad.write_bytes(b"PAR1 not parquet")
    assert "not a readable parquet file" in build_index(night, s).errors[0]["error"]
