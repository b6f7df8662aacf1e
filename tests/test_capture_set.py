"""A folder of capture folders is a dataset (issue 38, point 1): one row per rollout, sortable, a click opens it.

The folder is 40 copies of the two bundled real captures, varied the way a night of runs varies: each copy
keeps 2, 3 or all of its model calls (trace.json and turns.json cut alike) and gets its own reward in
summary.json. Expected rows come from the raw files through plain ``json``: turns = turns.json entries,
tokens = their prompt + output ids, reward and model from summary.json, the task from task.json.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from _night import N, make_night, raw_row


@pytest.fixture(scope="module")
def night(tmp_path_factory):
    return make_night(tmp_path_factory.mktemp("captures"))


@pytest.fixture(scope="module")
def opened(night):
    from viewer.capture_set import open_capture_set
    from viewer.config import Settings

    return open_capture_set(night, Settings(data_root=str(night.parent)))


def test_a_folder_of_captures_is_refused_as_rows_but_opens_as_a_capture_set(night):
    from viewer.capture_set import is_capture_set
    from viewer.sources import SourceError, open_dataset

    with pytest.raises(SourceError, match="unknown format"):  # what the Datasets tab said before (issue 38)
        open_dataset(night)
    assert is_capture_set(night) and not is_capture_set(night / "q00") and not is_capture_set(night / "q00" / "x")


def test_one_row_per_rollout_with_the_raw_files_figures(night, opened):
    assert not opened.errors and len(opened.rows) == N
    want = {f.name: raw_row(f) for f in sorted(night.iterdir())}
    got = {r["rollout"]: r for r in opened.rows}
    assert set(got) == set(want)
    for name, w in want.items():
        g = got[name]
        assert {k: g[k] for k in w} == w, name
        assert g["agent"] == "opencode"  # summary.json's versions list the agent our capture ran
        assert 0 <= g["drifted turns"] <= g["turns"] and g["trainer"] == "trl-contract/per-token-mask"
        assert g["|Δ|"] is None  # nothing rescored yet
    assert len({r["turns"] for r in opened.rows}) == 3 and len({r["reward"] for r in opened.rows}) > 10


def test_drift_per_rollout_is_the_scans_turns_summed(night, opened):
    from viewer.capture_set import per_rollout
    from viewer.config import Settings
    from viewer.drift.corpus import scan_source

    res = scan_source(night, Settings(data_root=str(night.parent)))
    by_turn: dict[str, list] = {}
    for rec in res["turns"]:
        by_turn.setdefault(Path(rec["rollout"]).name, []).append(rec)
    for row in opened.rows:
        recs = by_turn[row["rollout"]]
        assert row["drifted turns"] == sum(1 for r in recs if r["drifted"])
        assert row["losing gradient"] == sum((r.get("row") or {}).get("tokens_losing_gradient", 0) for r in recs)
        for rec in recs:
            for sec in ("retokenize", "template", "prefix"):
                if rec[sec].get("cause"):
                    assert rec[sec]["cause"] in row["causes"]
    rolled = per_rollout(res)
    assert len(rolled) == N and {r["trainer"] for r in rolled} == {"trl-contract/per-token-mask"}
    assert sum(r["turns"] for r in rolled) == len(res["turns"])


def test_sorted_filtered_and_paged(night, opened):
    from viewer.capture_set import capture_set_page
    from viewer.row_browser import Filters

    raw = [raw_row(f) for f in sorted(night.iterdir())]
    rows, total, pages = capture_set_page(opened, 0, 20, sort="reward")
    assert (total, pages) == (N, 2) and rows[0]["reward"] == min(r["reward"] for r in raw)
    rows, _, _ = capture_set_page(opened, 0, 5, sort="drifted turns", descending=True)
    assert rows[0]["drifted turns"] == max(r["drifted turns"] for r in opened.rows)
    rows, _, _ = capture_set_page(opened, 0, 5, sort="tokens", descending=True)
    assert rows[0]["tokens"] == max(r["tokens"] for r in raw)
    rows, total, _ = capture_set_page(opened, 0, 50, filters=Filters(model="smol", reward_max=0.5))
    assert total == sum(1 for r in raw if "smol" in r["model"].lower() and r["reward"] <= 0.5) == len(rows)
    rows, _, _ = capture_set_page(opened, 9, 20)  # past the end: the last page
    assert rows[0]["row"] == 20


def test_the_datasets_tab_lists_sorts_and_opens_a_row(night):
    # DatasetHandlers without the browser: the page events answer the rows; a row opens its capture by path
    from types import SimpleNamespace

    from viewer.config import Settings
    from viewer.ui.datasets_tab import DatasetHandlers
    from viewer.ui.store import RolloutStore

    settings = Settings(data_root=str(night.parent))
    store = RolloutStore(settings)
    shown = []
    browse = SimpleNamespace(outputs=[], show_fn=lambda op, i, note: shown.append(op) or [])
    h = DatasetHandlers(settings, store, browse)
    blank = ["", "", "", "", ""]
    held, status, table, page = h.on_open("night", "auto", "", "", *blank, "reward", False,
                                          progress=lambda *a, **k: None)
    assert "folder of captures" in status and "unknown format" not in status and page == 1
    raw = sorted((raw_row(f) for f in night.iterdir()), key=lambda r: r["reward"])
    assert list(table["reward"]) == [r["reward"] for r in raw[:20]]
    assert list(table["rollout"])[0] == raw[0]["rollout"]
    _, _, worst, _ = h.on_filter(held, *blank, "drifted turns", True, progress=None)
    assert worst["drifted turns"].iloc[0] == max(r["drifted turns"] for r in held.src.rows)
    row = int(table["row"].iloc[0])
    out = h.open_row(held, row, None, progress=lambda *a, **k: None)
    assert "Opened row" in out[-1] and shown and Path(shown[0].path).name == raw[0]["rollout"]
    assert shown[0].rollout.reward == raw[0]["reward"]


def test_the_drift_scan_has_a_per_rollout_view_naming_the_trainer(night):
    from viewer.capture_set import ROLLUP_COLUMNS
    from viewer.config import Settings
    from viewer.drift.results import SCAN_COLUMNS
    from viewer.ui import drift_handlers as dh
    from viewer.ui.store import RolloutStore

    settings = Settings(data_root=str(night.parent))
    sp = dh.ScanPanel(settings, RolloutStore(settings))
    sid, _html, df, _c, _r = sp.run_scan(None, "folder of captures", "night", "", 0, None, dh.ALL, "local",
                                         dh.PER_ROLLOUT)
    assert list(df.columns) == ROLLUP_COLUMNS and len(df) == N
    want = {f.name: raw_row(f)["turns"] for f in night.iterdir()}
    assert {Path(r).name: t for r, t in zip(df["rollout"], df["turns"])} == want
    assert set(df["trainer"]) == {"trl-contract/per-token-mask"}  # what choose_spec picks for our captures
    ranks = list(zip(df["losing gradient"], df["drifted turns"]))
    assert ranks == sorted(ranks, reverse=True)  # worst first
    turns, _ = sp.results(sid, dh.ALL, dh.PER_TURN)
    assert list(turns.columns) == SCAN_COLUMNS and len(turns) == sum(want.values())
    drifted, _ = sp.results(sid, dh.DRIFTED, dh.PER_ROLLOUT)
    assert len(drifted) == sum(1 for x in df["drifted turns"] if x)
    cause = next(c for c in df["causes"] if c).split(" ×")[0]
    named, _ = sp.results(sid, cause, dh.PER_ROLLOUT)
    assert 0 < len(named) <= N and all(cause in c for c in named["causes"])


def test_the_night_groups_by_prompt_with_each_members_drift(night, opened):
    # every copy of one bundled capture starts from the same prompt ids: two GRPO groups of 20
    import statistics

    from viewer.groups import dataset_groups

    groups, errors = dataset_groups(opened)
    assert not errors and sorted((g.how, g.size) for g in groups) == [("prompt ids", 20), ("prompt ids", 20)]
    for g in groups:
        rows = [opened.rows[m.ref] for m in g.members]
        assert len({r["model"] for r in rows}) == 1
        assert [m.drift for m in g.members] == [r["drifted turns"] for r in rows]
        rewards = [raw_row(night / r["rollout"])["reward"] for r in rows]
        mean, sd = statistics.fmean(rewards), statistics.stdev(rewards)
        assert [m.advantage for m in g.members] == pytest.approx([(x - mean) / (sd + 1e-4) for x in rewards])
