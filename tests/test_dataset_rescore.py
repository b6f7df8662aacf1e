"""*Rescore dataset* on the Datasets tab (viewer/ui/dataset_rescore.py) and its figures in the search index
(viewer/search/rescored.py): a real rescore of a folder of three capture copies with the bundled tiny model.

The folder: three copies of the qwen3-tiny capture, the sampler logprob of every third output token shifted by
hand in the raw ``turns.json`` (0, +0.3, -1.5), so the rollouts' |Δ| differ and one has tokens past |Δ| 0.5 and
ratio 2. Expected figures are worked out here from the saved parquet's raw ``sampler`` / ``trainer`` columns with
pyarrow (never from the ranking code), and that parquet's sampler values are checked against the raw files.
"""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from viewer.config import SAMPLE_DIR, Settings

pytestmark = pytest.mark.slow  # torch forward passes over three rollouts
SHIFTS = {"q1": 0.0, "q2": 0.3, "q3": -1.5}
BLANK = ["", "", "", "", "", "row", False]  # agent, model, task, reward >=, reward <=, sort, descending


def _night(root: Path) -> Path:
    from test_rescore_cli import _need

    _need("tiny-qwen3")
    night = root / "night"
    for name, shift in SHIFTS.items():
        d = night / name
        shutil.copytree(SAMPLE_DIR / "qwen3-tiny", d)
        turns = json.loads((d / "turns.json").read_text())
        for e in turns:
            e["per_token_logps"] = [v + (shift if k % 3 == 0 else 0.0) for k, v in enumerate(e["per_token_logps"])]
        (d / "turns.json").write_text(json.dumps(turns))
    return night


def _settings(root: Path) -> Settings:
    return Settings(data_root=str(root), rescore_dtype="float32", rescore_device="cpu")


def _opened(settings: Settings):
    from viewer.ui.datasets_tab import DatasetHandlers

    h = DatasetHandlers(settings, store=None, browse=None)
    held, status, table, _ = h.on_open("night", "auto", "", "", *BLANK)
    assert "folder of captures" in status and len(table) == len(SHIFTS), status
    return h, held


def _progress(seen: list, then=None):
    def prog(value, desc=None, unit=None):  # what gr.Progress is called with
        seen.append(value)
        if then is not None:
            then()
    return prog


@pytest.fixture(scope="module")
def rescored(tmp_path_factory):
    from viewer.search import build_index, search
    from viewer.ui.dataset_rescore import DatasetRescore

    root = tmp_path_factory.mktemp("dsr")
    night = _night(root)
    s = _settings(root)
    h, held = _opened(s)
    build_index(night, s)  # an index from before the rescore: its rows are copied, then filled
    before = search(night, "delta>0.5", s, build=False)
    seen: list = []
    out = DatasetRescore(s).on_run(None, held, "tiny-qwen3", progress=_progress(seen))
    return {"root": root, "night": night, "s": s, "h": h, "held": held, "out": out, "seen": seen, "before": before}


def _expected(path: Path) -> dict[str, dict]:
    """Per rollout from the parquet's raw columns: mean |trainer − sampler|, largest exp(trainer − sampler), and
    per turn the token of largest |trainer − sampler| (its position, id and value)."""
    t = pq.read_table(path, columns=["rollout", "turn", "position", "id", "sampler", "trainer"])
    out: dict[str, dict] = {}
    for name in set(t.column("rollout").to_pylist()):
        mine = t.filter(pc.equal(t.column("rollout"), name))
        d = pc.subtract(mine.column("trainer"), mine.column("sampler"))
        ad = pc.abs(d)
        worst = {}
        for turn, pos, tid, a in zip(mine.column("turn").to_pylist(), mine.column("position").to_pylist(),
                                     mine.column("id").to_pylist(), ad.to_pylist()):
            if turn not in worst or a > worst[turn][2]:
                worst[turn] = (pos, tid, a)
        out[Path(name).name] = {"mean": pc.mean(ad).as_py(), "max": pc.max(ad).as_py(),
                                "ratio": math.exp(pc.max(d).as_py()), "worst": worst}
    return out


def test_the_rescore_ranks_the_rollouts_and_fills_the_table(rescored):
    from viewer.search.index import index_path
    from viewer.search.rescored import beside

    status, ranked, sort, desc = rescored["out"]
    assert "Rescored 3 rollout(s) with tiny-qwen3" in status and "saved for search" in status, status
    assert sort == {"__type__": "update", "value": "|Δ|"} and desc is True
    assert rescored["seen"][-1] == (3, 3)  # the progress bar reached every rollout
    path = beside(index_path(rescored["night"], rescored["s"]))
    assert path == rescored["night"] / ".rollout-inspector" / "rescored" / "rescore.parquet" and path.is_file()
    # the parquet's sampler values are the raw files' (shifted) logprobs of the trained tokens
    t = pq.read_table(path, columns=["rollout", "sampler"]).to_pydict()
    for name in SHIFTS:
        raw = json.loads((rescored["night"] / name / "turns.json").read_text())
        want = [v for e in raw for v, m in zip(e["per_token_logps"], e["mask"]) if m]
        assert [v for r, v in zip(t["rollout"], t["sampler"]) if Path(r).name == name] == want, name
    exp = _expected(path)
    assert exp["q3"]["mean"] > exp["q2"]["mean"] > exp["q1"]["mean"]  # the shifts made them differ
    assert list(ranked["rollout"]) == sorted(exp, key=lambda n: -exp[n]["mean"])
    for row in ranked.to_dict("records"):
        assert row["mean |Δ|"] == pytest.approx(exp[row["rollout"]]["mean"], abs=2e-6)
        assert row["max |Δ|"] == pytest.approx(exp[row["rollout"]]["max"], abs=2e-6)
        assert row["max ratio"] == pytest.approx(exp[row["rollout"]]["ratio"], rel=1e-5)
    # the Datasets table (the page event the button's chain runs): |Δ| and max ratio, sorted by |Δ|
    _, _, table, _ = rescored["h"].on_filter(rescored["held"], "", "", "", "", "", "|Δ|", True)
    assert list(table["rollout"]) == sorted(exp, key=lambda n: -exp[n]["mean"])
    for row in table.to_dict("records"):
        assert row["|Δ|"] == pytest.approx(exp[row["rollout"]]["mean"], abs=2e-6)
        assert row["max ratio"] == pytest.approx(exp[row["rollout"]]["ratio"], rel=1e-5)
    _, _, by_ratio, _ = rescored["h"].on_filter(rescored["held"], "", "", "", "", "", "max ratio", True)
    assert list(by_ratio["rollout"])[0] == max(exp, key=lambda n: exp[n]["ratio"])


def test_the_search_finds_the_rescored_rollout_at_its_token(rescored):
    from viewer.search import build_index, search

    night, s = rescored["night"], rescored["s"]
    exp = _expected(night / ".rollout-inspector" / "rescored" / "rescore.parquet")
    assert rescored["before"].hits == []  # before the rescore the index had no trainer logprobs
    for rebuild in (False, True):  # rows copied from the earlier index, then every rollout read again
        info = build_index(night, s, rebuild=rebuild)
        assert info.errors == [] and (info.reused, info.rebuilt) == ((0, 3) if rebuild else (3, 0))
        for query, want in (("delta>0.5", {n for n, e in exp.items() if e["max"] > 0.5}),
                            ("ratio>2", {n for n, e in exp.items() if e["ratio"] > 2}),
                            ("delta>0.1", {n for n, e in exp.items() if e["max"] > 0.1})):
            res = search(night, query, s, build=False)
            assert {h.label for h in res.hits} == want and want, (query, res.hits)
        hits = search(night, "delta>0.5", s, build=False).hits
        for h in hits:
            pos, tid, a = exp[h.label]["worst"][h.turn]
            raw = json.loads((night / h.label / "turns.json").read_text())[h.turn - 1]
            assert raw["output_ids"][h.pos] == tid and h.tok == len(raw["prompt_ids"]) + h.pos == pos
            assert h.score == pytest.approx(a, abs=1e-9)
        assert hits[0].score == max(h.score for h in hits)  # worst first


def test_cancel_stops_the_rescore_and_keeps_nothing(tmp_path):
    from viewer.search.index import index_path
    from viewer.search.rescored import beside
    from viewer.ui.dataset_rescore import DatasetRescore
    from viewer.ui.session import start_run

    night = _night(tmp_path)
    s = _settings(tmp_path)
    h, held = _opened(s)
    r = DatasetRescore(s)
    run, off = start_run()  # (the button's first step: the run Cancel stops, and the button off)
    assert off.get("interactive") is False
    seen: list = []
    # the Cancel button's handler, pressed once the first rollout is done
    said = []
    status, ranked, sort, desc = r.on_run(run, held, "tiny-qwen3",
                                          progress=_progress(seen, lambda: said.append(r.on_cancel(run))))
    assert "Cancelling" in said[0] and seen[0] == (1, 3)
    assert "Partial: cancelled after 1 of 3 rollout(s)" in status and "nothing was kept" in status, status
    assert len(ranked) == 1 and sort == desc == {"__type__": "update"}  # the sort is left as it was
    assert not beside(index_path(night, s)).exists()
    _, _, table, _ = h.on_filter(held, *BLANK)
    assert table["|Δ|"].isna().all() and table["max ratio"].isna().all()
    assert "No dataset rescore running" in r.on_cancel(run)  # it has ended
