"""A Hub dataset card's YAML cannot expand or nest without bound (issue 26 §3).

The Hub is a local folder behind ``hub.use_filesystem`` (the fsspec boundary; everything after
it is the code path that runs against huggingface.co). The cards are built here: a
"billion laughs" of aliases (477 bytes made a 312 MB string before), a nesting bomb, and an
honest card whose configs still choose the files.
"""
from __future__ import annotations

import pytest
from fsspec.implementations.dirfs import DirFileSystem
from fsspec.implementations.local import LocalFileSystem

from _row_fixtures import opencode_rows, write_jsonl
from budget_bombs import bounded, mem_margin_mb, message_of, public, rss_mb
from viewer.sources import SourceError, open_dataset
from viewer.sources import hub
from viewer.ui.opening import open_spec
from viewer.ui.store import RolloutStore


def _laughs(levels: int) -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    return "---\n" + "\n".join(lines) + f"\nconfigs:\n- config_name: *a{levels - 1}\n  data_files: train.jsonl\n---\n"


@pytest.fixture
def hub_root(tmp_path, monkeypatch):
    root = tmp_path / "hub"
    monkeypatch.setenv("VIEWER_HUB_CACHE", str(tmp_path / "cache"))
    with hub.use_filesystem(DirFileSystem(path=str(root), fs=LocalFileSystem())):
        yield root


def _repo(root, name: str, card: str):
    repo = root / "datasets" / "o" / name
    write_jsonl(opencode_rows(), repo / "train.jsonl")
    (repo / "README.md").write_text(card)
    return f"hf://datasets/o/{name}"


def test_billion_laughs_card_is_refused(hub_root, tmp_path, monkeypatch):
    """8 levels of 9 aliases (9**8 = 43M 'lol's once walked): refused at the first anchor, at once,
    with the card named. Before: the configs' str() walked the expansion (9 levels: 312 MB)."""
    settings = public(monkeypatch, tmp_path)
    card = _laughs(8)
    assert len(card) < 700
    spec = _repo(hub_root, "laughs", card)
    before = rss_mb()
    _, err, elapsed = bounded(lambda: open_spec(RolloutStore(settings), settings, spec, row=0), 20)
    msg = message_of(err)
    assert isinstance(err, SourceError), repr(err)
    assert "README.md" in msg and "anchors and aliases are not accepted" in msg, msg
    assert elapsed < 5
    assert rss_mb() - before < mem_margin_mb()


def test_nesting_bomb_card_stops_at_the_nesting_budget(hub_root, tmp_path, monkeypatch):
    """10,000 nested flow lists: the loader stops at the 100-level public budget."""
    settings = public(monkeypatch, tmp_path)
    spec = _repo(hub_root, "deep", "---\nconfigs: " + "[" * 10_000 + "]" * 10_000 + "\n---\n")
    _, err, elapsed = bounded(lambda: open_dataset(spec, settings), 20)
    msg = message_of(err)
    assert "README.md" in msg and "over the 100 levels budget" in msg, msg
    assert elapsed < 5
    monkeypatch.delenv("VIEWER_PUBLIC")  # a local app: the parser's own depth ends it, named as the budget
    from viewer.config import Settings

    _, err, _ = bounded(lambda: open_dataset(spec, Settings.from_env()), 20)
    assert "README.md" in message_of(err) and "levels budget" in message_of(err), message_of(err)


def test_long_names_and_odd_types_in_configs_are_dropped(hub_root, tmp_path, monkeypatch):
    """A config name of 100k characters is not a config; a data_files of a mapping is ignored; the
    honest config still picks its file."""
    public(monkeypatch, tmp_path)
    card = ("---\nconfigs:\n- config_name: " + "n" * 100_000 + "\n  data_files: nothing.jsonl\n"
            "- config_name: main\n  default: true\n  data_files:\n  - split: train\n    path: train.jsonl\n---\n")
    spec = _repo(hub_root, "names", card)
    src = open_dataset(spec)
    assert [f.name for f in src.dataset.files] == ["train.jsonl"]
    from viewer.budgets import limits
    from viewer.sources.readme_meta import readme_configs

    got = readme_configs(card, limits(public=True, environ={}))
    assert got == [{"config_name": "main", "default": True, "data_files": [{"split": "train", "path": ["train.jsonl"]}]}]
