"""The search index's life (viewer/search/index.py): built by the drift scan with progress and cancel, rebuilt
only for the rollouts whose files changed, kept whole when a build is cancelled, placed beside the data."""
from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest

from viewer.config import Settings
from viewer.search import SearchError, build_index, load_index, search

REPO = Path(__file__).resolve().parent.parent
CAPTURES = (REPO / "sample_data" / "qwen3-tiny", REPO / "sample_data" / "smollm2", REPO / "tests" / "data" / "capture_ours")


def _folder(root: Path, n: int) -> Path:
    folder = root / "runs"
    for i in range(n):
        src = CAPTURES[i % 3]
        shutil.copytree(src, folder / f"{src.name}-{i:02d}")
    return folder


def _set_reward(cap: Path, reward: float) -> None:
    p = cap / "summary.json"
    s = json.loads(p.read_text())
    s["reward"] = reward
    p.write_text(json.dumps(s))


def test_only_changed_rollouts_are_scanned_again(tmp_path):
    folder = _folder(tmp_path, 6)
    first = build_index(folder, Settings(), workers=1)
    assert (first.rollouts, first.rebuilt, first.reused) == (6, 6, 0)
    assert first.path == folder / ".rollout-inspector" / "index" and load_index(folder, Settings()) is not None
    again = build_index(folder, Settings(), workers=1)
    assert (again.rollouts, again.turns, again.rebuilt, again.reused) == (6, first.turns, 0, 6)
    _set_reward(folder / "smollm2-01", -7.0)
    changed = build_index(folder, Settings(), workers=1)
    assert (changed.rollouts, changed.rebuilt, changed.reused) == (6, 1, 5)
    hits = search(folder, "reward<-1", Settings(), build=False).hits
    assert [Path(h.source).name for h in hits] == ["smollm2-01"] and hits[0].reward == -7.0
    shutil.rmtree(folder / "qwen3-tiny-00")
    shutil.copytree(CAPTURES[2], folder / "capture_ours-new")
    moved = build_index(folder, Settings(), workers=1)
    assert (moved.rollouts, moved.rebuilt, moved.reused) == (6, 1, 5)
    names = {Path(h.source).name for h in search(folder, "", Settings(), build=False, limit=100).hits}
    assert "qwen3-tiny-00" not in names and "capture_ours-new" in names and len(names) == 6
    assert len(list(moved.path.glob("*.parquet"))) == 2  # the previous build's files are gone
    full = build_index(folder, Settings(), workers=1, rebuild=True)
    assert (full.rebuilt, full.reused) == (6, 0)


def test_progress_then_cancel_keeps_the_previous_index(tmp_path):
    folder = _folder(tmp_path, 40)  # the scan reports after each chunk of 32
    seen: list[tuple[int, int | None]] = []
    built = build_index(folder, Settings(), workers=1, progress=lambda d, t: seen.append((d, t)))
    assert seen[-1] == (40, 40) and [d for d, _ in seen] == sorted(d for d, _ in seen)
    for cap in folder.iterdir():
        if cap.is_dir() and not cap.name.startswith("."):
            _set_reward(cap, 0.125)
    cancel = threading.Event()
    res = build_index(folder, Settings(), workers=1, cancel=cancel, progress=lambda d, t: cancel.set())
    assert res.cancelled and res.rollouts == 0
    kept = load_index(folder, Settings())
    assert kept is not None and kept.files == built.files and kept.rollouts == 40
    assert search(folder, "reward=0.125", Settings(), build=False).total == 0  # the old rewards, whole


def test_a_data_file_is_indexed_beside_it_by_row(tmp_path):
    data = tmp_path / "export.jsonl"
    shutil.copy(REPO / "tests" / "data" / "realworld" / "prime_rl" / "w559b447" / "token_exports" / "step_0" /
                "rank_0.jsonl", data)
    n = sum(1 for line in data.read_text().splitlines() if line.strip())
    info = build_index(data, Settings(), workers=1)
    assert info.path == tmp_path / ".rollout-inspector" / "index" / "export.jsonl" and info.rollouts == n
    hits = search(data, "", Settings(), build=False).hits
    assert sorted(h.row for h in hits) == list(range(n)) and {h.source for h in hits} == {str(data)}


def test_a_missing_source_or_index_is_said(tmp_path):
    with pytest.raises(SearchError, match="no such file or folder"):
        build_index(tmp_path / "nope", Settings())
    (tmp_path / "empty").mkdir()
    with pytest.raises(SearchError, match="no capture folders"):
        build_index(tmp_path / "empty", Settings())
    folder = _folder(tmp_path, 1)
    with pytest.raises(SearchError, match="no search index yet"):
        search(folder, "tool:bash", Settings(), build=False)


def test_a_folder_no_format_reads_is_said_and_no_index_is_left_in_it(tmp_path):
    """Indexing a folder of JSON files that no format reads wrote an empty index into it (and the search said
    0 hits); now it is an error that names the file, and the folder is as it was. A folder that already held
    the index folder (a rescore kept beside it) keeps it."""
    folder = tmp_path / "unrelated"
    folder.mkdir()
    (folder / "x.json").write_text(json.dumps({"a": 1}))
    with pytest.raises(SearchError, match="unknown format; fields found: a"):
        build_index(folder, Settings(), workers=1)
    assert [p.name for p in folder.iterdir()] == ["x.json"]
    kept = folder / ".rollout-inspector" / "rescored"
    kept.mkdir(parents=True)
    with pytest.raises(SearchError, match="unknown format"):
        build_index(folder, Settings(), workers=1)
    assert sorted(p.name for p in (folder / ".rollout-inspector").iterdir()) == ["rescored"]
