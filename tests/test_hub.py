"""The hf:// layer against a local directory standing in for the Hub at the fsspec boundary.

`hub.use_filesystem(fs)` swaps HfFileSystem for a DirFileSystem over a folder laid out
like the Hub (``datasets/OWNER/NAME/...``); everything else is the code path that runs
against the real service (listing, README configs, split selection, file fetches,
parquet row groups / JSONL lines through fsspec file objects).
"""
import json
import shutil

import pytest
from fsspec.implementations.dirfs import DirFileSystem
from fsspec.implementations.local import LocalFileSystem

from _row_fixtures import harbor_rows, opencode_rows, write_jsonl, write_parquet
from viewer.config import SAMPLE_DIR
from viewer.sources import SourceError, SourceNotFound, load_source, open_dataset
from viewer.sources import hub


@pytest.fixture
def fake_hub(tmp_path, realdata):
    root = tmp_path / "hub"
    repo = root / "datasets" / "laion" / "tb-traces"
    rows = harbor_rows()
    write_parquet(rows[:2], repo / "data" / "train-00000-of-00002.parquet")
    write_parquet(rows[2:], repo / "data" / "train-00001-of-00002.parquet")
    write_parquet(rows[:1], repo / "data" / "test-00000-of-00001.parquet")
    (repo / "README.md").write_text("# no front matter\n")
    oc = root / "datasets" / "13point5" / "opencode-rollouts-test"
    write_jsonl(opencode_rows(), oc / "train.jsonl")
    (oc / "README.md").write_text("---\nconfigs:\n- config_name: default\n  data_files: train.jsonl\n---\n# card\n")
    cap = root / "datasets" / "sergiopaniego" / "opencode-rollout-trace"
    shutil.copytree(SAMPLE_DIR / "qwen3-tiny", cap)
    (cap / "capture_trace.py").write_text("print('not fetched')\n")
    fs = DirFileSystem(path=str(root), fs=LocalFileSystem())
    with hub.use_filesystem(fs):
        yield root


def test_parse_spec():
    s = hub.parse_hf("hf://datasets/o/n@v1/data/x.parquet")
    assert (s.repo, s.revision, s.path, s.base) == ("o/n", "v1", "data/x.parquet", "datasets/o/n@v1/data/x.parquet")
    with pytest.raises(hub.HubNotFound):
        hub.parse_hf("hf://models/o/n")


def test_row_dataset_split_and_rows(fake_hub, tmp_path, monkeypatch):
    monkeypatch.setenv("VIEWER_HUB_CACHE", str(tmp_path / "cache"))
    src = open_dataset("hf://datasets/laion/tb-traces")
    assert src.format.name == "harbor" and [f.name for f in src.dataset.files] == [
        "data/train-00000-of-00002.parquet", "data/train-00001-of-00002.parquet"]
    assert "split 'train'" in src.note
    ro = src.rollout(3)  # second file, read through fsspec file objects
    assert ro.source == "hf://datasets/laion/tb-traces row 3" and len(ro.turns) == 4
    assert len(open_dataset("hf://datasets/laion/tb-traces", split="test").dataset) == 1
    with pytest.raises(SourceNotFound, match="no split 'validation'"):
        open_dataset("hf://datasets/laion/tb-traces", split="validation")
    one = load_source("hf://datasets/laion/tb-traces/data/train-00001-of-00002.parquet", row=1)
    assert one.origin.row == 1 and len(one.turns) == 4


def test_jsonl_dataset_with_readme_configs(fake_hub):
    src = open_dataset("hf://datasets/13point5/opencode-rollouts-test")
    assert src.format.name == "opencode" and "config 'default'" in src.note
    assert src.visible_rows() == [1, 2]
    with pytest.raises(SourceNotFound, match="no config 'other'"):
        open_dataset("hf://datasets/13point5/opencode-rollouts-test", config="other")


def test_capture_layout_fetches_only_capture_files(fake_hub, tmp_path, monkeypatch):
    monkeypatch.setenv("VIEWER_HUB_CACHE", str(tmp_path / "cache"))
    ro = load_source("hf://datasets/sergiopaniego/opencode-rollout-trace")
    local = load_source(SAMPLE_DIR / "qwen3-tiny")
    assert ro.format == "capture" and ro.stats() == local.stats()
    fetched = sorted(p.name for p in (tmp_path / "cache").rglob("*") if p.is_file())
    assert "capture_trace.py" not in fetched and "trace.json" in fetched
    assert set(fetched) <= set(hub.CAPTURE_FILES)


def test_missing_repo_and_path(fake_hub):
    with pytest.raises(SourceNotFound, match="not found"):
        load_source("hf://datasets/nobody/nothing")
    with pytest.raises(SourceNotFound):
        load_source("hf://datasets/laion/tb-traces/data/nope.parquet")


def test_errors_from_the_hub_client_are_explained():
    from huggingface_hub.errors import GatedRepoError, OfflineModeIsEnabled

    spec = hub.parse_hf("hf://datasets/o/gated")

    def gated():
        raise GatedRepoError("403 gated", response=_Resp())

    with pytest.raises(hub.HubError, match="gated: accept its conditions"):
        hub.hub_call(spec, gated)
    with pytest.raises(hub.HubError, match="offline mode is on"):
        hub.hub_call(spec, lambda: (_ for _ in ()).throw(OfflineModeIsEnabled("offline")))


class _Resp:
    status_code = 403
    headers = {}
    url = "https://huggingface.co/api/datasets/o/gated"
    request = None

    def json(self):
        return {}


def test_offline_without_injected_filesystem_says_so(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(SourceError, match=r"offline mode is on \(HF_HUB_OFFLINE=1\)"):
        load_source("hf://datasets/13point5/opencode-rollouts-test")


def test_cli_summary_hf_row(fake_hub, capsys):
    from viewer.cli import main

    assert main(["summary", "hf://datasets/laion/tb-traces", "--row", "2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["format"] == "harbor" and doc["turns"] == 3 and doc["tokenizer"] == "qwen3"
    assert main(["summary", "hf://datasets/laion/tb-traces", "--row", "99"]) == 2
    assert "row 99 is past the end (4 rows)" in capsys.readouterr().err


def test_token_aware_factory_and_cache_folders_per_reader(fake_hub, tmp_path, monkeypatch):
    """hub.use_factory sees the token each read is built with; Hub downloads land in one folder
    per reader (anonymous, the app's own, or a hash of a visitor's token), never the token itself."""
    from fsspec.implementations.dirfs import DirFileSystem
    from fsspec.implementations.local import LocalFileSystem

    from viewer.config import Settings

    monkeypatch.setenv("VIEWER_HUB_CACHE", str(tmp_path / "cache"))
    seen = []

    def factory(token=None):
        seen.append(token)
        return DirFileSystem(path=str(fake_hub), fs=LocalFileSystem(), skip_instance_cache=True)

    spec = "hf://datasets/sergiopaniego/opencode-rollout-trace"
    with hub.use_factory(factory):
        monkeypatch.setattr(hub, "_FS", [])  # the fixture's fixed filesystem steps aside for the factory
        a = open_dataset(spec, Settings(public=True), hub_token="hf_visitor_a")
        anon = open_dataset(spec, Settings(public=True))
    assert seen == ["hf_visitor_a", False]
    assert a.capture != anon.capture and anon.capture.parent.name == "anon"
    assert "hf_visitor_a" not in str(a.capture) and a.capture.parent.name == hub.reader_tag("hf_visitor_a")
